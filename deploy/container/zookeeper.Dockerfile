# ZooKeeper for replicated zeps shards (docs/replication.md): Debian 12's
# ZooKeeper 3.8.0, the version the tests run, on debian:12 like the zeps
# image, with zookeeper-server.sh as the entry point (its environment sets
# the ensemble; deploy/kubernetes/replicated/zookeeper.yaml runs three).
#
#   docker build -f deploy/container/zookeeper.Dockerfile -t zeps-zookeeper:3.8.0 .   (from the source root)
#
# It installs the server's jars (libzookeeper-java) and a headless JRE, not
# the `zookeeper` package, which adds a desktop JRE, a GUI browser and
# files for a system service. tests/system/test_deploy.sh checks this file
# (no container engine runs in the test environment) and runs the entry
# point on this machine's packages.

FROM debian:12
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends default-jre-headless libzookeeper-java \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 zookeeper \
 && useradd --system --uid 10001 --gid zookeeper --home-dir /var/lib/zookeeper \
        --shell /usr/sbin/nologin zookeeper \
 && install -d -o zookeeper -g zookeeper -m 0750 /var/lib/zookeeper
COPY deploy/container/zookeeper-server.sh /usr/local/bin/zookeeper-server
RUN chmod 0755 /usr/local/bin/zookeeper-server
USER 10001:10001
WORKDIR /var/lib/zookeeper
VOLUME ["/var/lib/zookeeper"]
EXPOSE 2181 2888 3888
CMD ["zookeeper-server", "run"]
