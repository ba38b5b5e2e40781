# tests/support/lib.sh - what the shell tests share, sourced by each: pass/fail
# counters and their report, a check wrapper, and reading a number from the
# flat JSON zeps writes (summary.json, worker-N.json), a free TCP port, and
# the port a metrics endpoint logged.
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
free_port() { # a TCP port nothing listens on, from a random start
    local p=$((20000 + RANDOM % 20000))
    while ss -Htln "sport = :$p" | grep -q .; do p=$((p + 1)); done
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
