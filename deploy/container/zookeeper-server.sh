#!/bin/bash
# zookeeper-server - one server of a ZooKeeper ensemble, from Debian 12's
# packages (libzookeeper-java 3.8.0 and a headless JRE), configured from
# the environment: the entry point of deploy/container/zookeeper.Dockerfile,
# which the ZooKeeper StatefulSet of deploy/kubernetes/replicated/ runs.
#
#   zookeeper-server run        write zoo.cfg and myid, then become the server
#                               (foreground, log lines on stderr)
#   zookeeper-server ready      exit 0 if this server serves clients (in a
#                               quorum, or standalone), printing its mode
#   zookeeper-server cli ARG... a ZooKeeper shell command against this
#                               server, e.g. `cli ls /zeps`
#
# Environment:
#   ZK_ENSEMBLE     the servers, comma-separated, in myid order: HOST, or
#                   HOST:QUORUM_PORT:ELECTION_PORT (default 2888:3888).
#                   One entry runs a standalone server. Required for run.
#   ZK_MYID         this server's id, 1..n (default: 1 + the ordinal the
#                   host name ends in: StatefulSet pod zookeeper-2 is 3)
#   ZK_CLIENT_PORT  the clients' port (2181)
#   ZK_DATA_DIR     zoo.cfg, myid and the data (/var/lib/zookeeper)
#   ZK_TICK_MS      ZooKeeper's tick (2000): sessions may last 2..20 ticks
#   ZK_HEAP         the JVM's maximum heap (256m)
#
# tests/system/test_deploy.sh runs three of these on loopback as the
# StatefulSet runs them (only the addresses differ) and checks that they
# elect one leader and that `ready` and `cli` answer.
set -euo pipefail

port=${ZK_CLIENT_PORT:-2181}
data=${ZK_DATA_DIR:-/var/lib/zookeeper}
# The jar's manifest names the jars it needs; slf4j-simple sends the log
# to stderr (the container's log) instead of log4j's files.
classpath=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar

die() {
    echo "zookeeper-server: $*" >&2
    exit 2
}

# The reply to a four-letter word (only ruok and srvr are enabled).
fourletter() {
    (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf %s "$1" >&3 && timeout 5 cat <&3) 2>/dev/null
}

run() {
    local ensemble=${ZK_ENSEMBLE:?ZK_ENSEMBLE must list the servers (host,host,... in myid order)}
    local myid=${ZK_MYID:-}
    local -a peers
    IFS=, read -r -a peers <<<"$ensemble"
    local n=${#peers[@]}
    if [ -z "$myid" ]; then
        local host=${HOSTNAME:-$(hostname)}
        host=${host%%.*}
        [[ $host =~ -([0-9]+)$ ]] ||
            die "host name '$host' does not end in an ordinal (NAME-N, as a StatefulSet names its pods): set ZK_MYID"
        myid=$((10#${BASH_REMATCH[1]} + 1))
    fi
    if ! [[ $myid =~ ^[0-9]+$ ]] || [ "$myid" -lt 1 ] || [ "$myid" -gt "$n" ]; then
        die "myid '$myid' is not one of the $n servers of ZK_ENSEMBLE"
    fi
    mkdir -p "$data/data"
    echo "$myid" >"$data/data/myid"
    {
        echo "# written by zookeeper-server at each start (server $myid of $n)"
        echo "tickTime=${ZK_TICK_MS:-2000}"
        echo "initLimit=10"
        echo "syncLimit=5"
        echo "dataDir=$data/data"
        echo "clientPort=$port"
        # Bind the quorum and election ports on every address: a pod's own
        # DNS name may not resolve to it before it is ready.
        echo "quorumListenOnAllIPs=true"
        echo "admin.enableServer=false"
        echo "4lw.commands.whitelist=ruok,srvr"
        echo "autopurge.snapRetainCount=3"
        echo "autopurge.purgeInterval=1"
        local i peer
        for ((i = 0; i < n; i++)); do
            peer=${peers[i]}
            [[ $peer == *:* ]] || peer=$peer:2888:3888
            echo "server.$((i + 1))=$peer"
        done
    } >"$data/zoo.cfg"
    echo "zookeeper-server: server $myid of $n, clients on port $port, data in $data" >&2
    exec java "-Xmx${ZK_HEAP:-256m}" -XX:-UsePerfData \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
        -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$data/zoo.cfg"
}

case ${1:-} in
run) run ;;
ready)
    # srvr names the mode once the server serves; before a quorum it says
    # "not currently serving requests".
    mode=$(fourletter srvr | grep '^Mode: ') || exit 1
    echo "$mode"
    ;;
cli)
    shift
    exec java -Xmx64m -XX:-UsePerfData -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
        -Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.util.ServiceUtils=off \
        -cp "$classpath" org.apache.zookeeper.ZooKeeperMain -server "127.0.0.1:$port" "$@"
    ;;
*)
    echo "usage: zookeeper-server run | ready | cli COMMAND..." >&2
    exit 2
    ;;
esac
