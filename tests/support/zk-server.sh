#!/usr/bin/env bash
# zk-server.sh DIR PORT - run a one-node ZooKeeper (Debian's `zookeeper`
# package: bash deploy/install-deps.sh zk) in the foreground, on
# 127.0.0.1:PORT, with its data, config and nothing else in DIR; no system
# service, no admin HTTP server. The one place that knows how to start
# it: the C tests (zkserver.c) and the shell tests (lib.sh zk_start) exec
# this. Started again on the same DIR and PORT it keeps its data, and the
# sessions it had (ZooKeeper restores them with a fresh timeout).
#
# tickTime 200 ms: sessions of 400 ms to 4 s may be asked for (2 and 20
# ticks), so the tests can see an expiry in about a second.
set -euo pipefail
dir=${1:?usage: zk-server.sh DIR PORT}
port=${2:?usage: zk-server.sh DIR PORT}
jar=/usr/share/java/zookeeper.jar
if [ ! -f $jar ]; then
    echo "zk-server.sh: $jar missing: bash deploy/install-deps.sh zk" >&2
    exit 2
fi
mkdir -p "$dir/data"
cat >"$dir/zoo.cfg" <<CFG
tickTime=200
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
maxClientCnxns=0
CFG
# the jar's manifest names the other jars it needs; slf4j-simple writes
# its log lines to stderr (the caller's log file). A small heap, the
# serial collector and the C1 compiler only: the JVM starts sooner on a
# small machine and this server carries a few sessions.
exec java -Xmx96m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -cp "$jar:/usr/share/java/slf4j-simple.jar" \
    org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg"
