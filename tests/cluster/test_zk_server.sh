#!/usr/bin/env bash
# test_zk_server.sh - the tests' ZooKeeper (tests/support/zk-server.sh,
# lib.sh zk_start/zk_stop): it starts on a free loopback port from an
# empty folder, answers as a standalone server, keeps its data folder when
# killed and started again on the same folder and port, and leaves
# nothing running or listening. Prints how long each start took (JVM
# start until it serves). Prints "N passed, N failed"; exits non-zero on a failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-zk-XXXXXX)
trap 'zk_stop KILL; rm -rf "$work"' EXIT

t0=$(date +%s%N)
check "ZooKeeper serves" zk_start "$work/zk"
echo "started in $((($(date +%s%N) - t0) / 1000000)) ms"
check "on 127.0.0.1 only" grep -q "clientPortAddress=127.0.0.1" "$work/zk/zoo.cfg"
check "a standalone server" grep -q "Mode: standalone" <<<"$(zk_4lw srvr)"
check "answering ruok" test "$(zk_4lw ruok)" = imok
zk_stop KILL
check "killed: nothing listens on its port" test -z "$(ss -Htln "sport = :$ZK_PORT")"
t0=$(date +%s%N)
check "started again on the same folder and port" zk_start "$work/zk"
echo "started again in $((($(date +%s%N) - t0) / 1000000)) ms"
check "its data folder kept (test_coord: the sessions it held resume)" \
    test -n "$(ls "$work/zk/data/version-2" 2>/dev/null)"
pid=$ZK_PID
zk_stop TERM
check "stopped: the process is gone" bash -c "! kill -0 $pid 2>/dev/null"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
