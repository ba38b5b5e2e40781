# tests/support/lib.sh - what the shell tests share, sourced by each: pass/fail
# counters and their report, a check wrapper, and reading a number from the
# flat JSON zeps writes (summary.json, worker-N.json), a free TCP port, the
# port a metrics endpoint logged, a log poll with a deadline, and test hosts
# as network namespaces.
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { # description, command...
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
json_num() { # file key: the first value of "key"
    grep -o "\"$2\": *[-0-9.e+]*" "$1" 2>/dev/null | head -1 | cut -d: -f2 | tr -d ' '
}
# free_port: a TCP port nothing uses, picked at random below the kernel's
# ephemeral range (ip_local_port_range; zt_free_port in harness.c does the
# same): no outgoing connection of another process can be holding it when
# a server binds it, which `ss -tln` would not show.
free_port() {
    local lo=32768
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
    local span=$((lo > 21000 ? lo - 20000 : 1000))
    local p=$((20000 + (RANDOM * 32768 + RANDOM) % span))
    while ss -Htan "sport = :$p" | grep -q .; do p=$((20000 + (p - 20000 + 1) % span)); done
    echo $p
}
listen_port() { # log file: the port a process logged its metrics endpoint on (waits up to 10 s)
    local p=
    for _ in $(seq 100); do
        p=$(grep -o 'metrics listening on .* (port [0-9]*)' "$1" 2>/dev/null | grep -o '[0-9]*)$' |
            tr -d ')')
        [ -n "$p" ] && break
        sleep 0.1
    done
    echo "$p"
}
wait_for() { # file pattern seconds: 0 once the file has the pattern, 1 at the deadline
    local end=$((SECONDS + $3))
    while [ $SECONDS -lt $end ]; do
        grep -q -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
# netns_setup: one network namespace "$P-HOST" per host of $HOSTS, its
# eth0 at ${ADDR[HOST]}/24, joined by a bridge in "$P-br" (the host's end of
# its link there is named HOST); needs root. Returns 1 when one cannot be
# made (the caller deletes what was made).
netns_setup() {
    ip netns add "$P-br" || return 1
    ip -n "$P-br" link add br0 type bridge || return 1
    ip -n "$P-br" link set br0 up
    for h in $HOSTS; do
        ip netns add "$P-$h" || return 1
        ip link add eth0 netns "$P-$h" type veth peer name "$h" netns "$P-br" || return 1
        ip -n "$P-$h" addr add "${ADDR[$h]}/24" dev eth0
        ip -n "$P-$h" link set lo up
        ip -n "$P-$h" link set eth0 up
        ip -n "$P-br" link set "$h" master br0
        ip -n "$P-br" link set "$h" up
    done
}
# zk_start DIR: a one-node ZooKeeper (zk-server.sh beside this file, the
# command line the C tests use too) on a free loopback port, data and log
# (zk.log) in DIR; sets ZK_PID, ZK_PORT and ZK_HOSTS (127.0.0.1:PORT) and
# returns once it serves: `srvr` names its mode (`ruok` answers imok
# before that); 1 if it died or 30 s passed (then the end of zk.log is
# printed). A server that dies at start on a port picked here (ZK_PORT
# unset) is tried twice more on other ports.
# zk_stop [SIG]: stop it (TERM by default; KILL for a crash) and wait.
# zk_4lw WORD: its answer to a four-letter word (ruok, srvr, stat).
zk_4lw() {
    (exec 3<>"/dev/tcp/127.0.0.1/$ZK_PORT" && printf %s "$1" >&3 && timeout 2 cat <&3) 2>/dev/null
}
zk_start() {
    mkdir -p "$1"
    local pinned=${ZK_PORT:+1} tries
    for tries in 1 2 3; do
        ZK_PORT=${ZK_PORT:-$(free_port)}
        ZK_HOSTS=127.0.0.1:$ZK_PORT
        zk_launch "$1" && return 0
        # it died at start: a port picked here gets one more try elsewhere
        # (another test may have bound it between the pick and ZooKeeper's
        # bind: "Address already in use" in zk.log)
        [ -z "$pinned" ] && [ -z "$ZK_PID" ] || break
        ZK_PORT=
    done
    echo "zk_start: ZooKeeper did not start on port $ZK_PORT; the end of $1/zk.log:" >&2
    tail -n 15 "$1/zk.log" >&2
    return 1
}
zk_launch() { # DIR: one start on $ZK_PORT; ZK_PID empty if it died
    bash "$(dirname "${BASH_SOURCE[0]}")/zk-server.sh" "$1" "$ZK_PORT" >>"$1/zk.log" 2>&1 &
    ZK_PID=$!
    local end=$((SECONDS + 30))
    while [ $SECONDS -lt $end ]; do
        zk_4lw srvr | grep -q '^Mode: ' && return 0
        if ! kill -0 "$ZK_PID" 2>/dev/null; then
            wait "$ZK_PID" 2>/dev/null
            ZK_PID=
            return 1
        fi
        sleep 0.05
    done
    return 1
}
zk_stop() {
    [ -n "${ZK_PID:-}" ] || return 0
    kill -"${1:-TERM}" "$ZK_PID" 2>/dev/null
    wait "$ZK_PID" 2>/dev/null
    ZK_PID=
}
