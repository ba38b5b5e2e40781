# tests/support/lib.sh - what the shell tests share, sourced by each: pass/fail
# counters and their report, a check wrapper, and reading a number from the
# flat JSON zeps writes (summary.json, worker-N.json), and a free TCP port.
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
