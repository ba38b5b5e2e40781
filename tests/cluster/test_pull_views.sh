#!/usr/bin/env bash
# test_pull_views.sh - zeps-worker's dense pulls as views (training.pull_views)
# with real processes: bsp, 2 workers, mlp on 1 and on 2 servers and
# quadratic on 1, each run with views and with copying pulls. Checks that
#   - the results are the same to the last printed digit: rank 0's curve
#     (a point every 4 steps), final loss and accuracy or distance,
#   - on 1 server the views are read in place: pulled_copied = 0 and
#     pulled_in_place = every pulled byte; copying pulls the reverse,
#   - on 2 servers each table arrives in two parts and is copied into the
#     worker's buffer (pulled_in_place = 0), as docs/configuration.md says.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-views-XXXXXX)
trap 'rm -rf "$work"' EXIT

run() { # name model servers pull_views
    local servers="" k
    for k in $(seq "$3"); do servers="$servers${servers:+, }\"ipc://$work/$1-$k.sock\""; done
    cat >"$work/$1.conf" <<EOC
cluster = { servers = [$servers]; workers = 2; consistency = "bsp"; };
training = {
  model = "$2"; epochs = 2; batch_size = 32; hidden = 64; max_train_examples = 1024;
  iterations = 60; dim = 200; condition = 50.0;
  optimizer = "momentum"; lr = 0.05; momentum = 0.9; seed = 3;
  eval_every_steps = 4; pull_views = $4;
};
EOC
    "$BIN/zepsctl" local --config "$work/$1.conf" -q --dir "$work/$1" --timeout 300 \
        >"$work/$1.out" 2>&1 || bad "run $1 failed: $(tail -3 "$work/$1.out")"
}

# What must not change between views and copies, as printed.
same_results() { # a b
    /usr/bin/python3 - "$work/$1/worker-0.json" "$work/$2/worker-0.json" <<'EOP'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ["curve", "final_loss", "final_accuracy", "final_distance", "final_rel_distance"]
diff = [k for k in keys if a.get(k) != b.get(k)]
if diff or not a.get("curve"):
    print("differ:", diff, "curve points:", len(a.get("curve") or []))
    sys.exit(1)
EOP
}

bytes_of() { # run rank key
    json_num "$work/$1/worker-$2.json" "$3"
}

# in_place and copied bytes of both ranks: in_place or copied must be 0
# (which one: $2), the other positive.
check_bytes() { # run zero_key
    local r other=pulled_in_place
    [ "$2" = pulled_in_place ] && other=pulled_copied
    for r in 0 1; do
        local z n
        z=$(bytes_of "$1" $r "$2")
        n=$(bytes_of "$1" $r $other)
        [ "$z" = 0 ] && [ "${n:-0}" -gt 0 ] 2>/dev/null || {
            echo "$1 rank $r: $2 = $z, $other = $n"
            return 1
        }
    done
}

run mlp1v mlp 1 true
run mlp1c mlp 1 false
run mlp2v mlp 2 true
run mlp2c mlp 2 false
run quad1v quadratic 1 true
run quad1c quadratic 1 false

check "mlp, 1 server: views and copies give the same curve and final result" same_results mlp1v mlp1c
check "mlp, 2 servers: views and copies give the same curve and final result" same_results mlp2v mlp2c
check "quadratic, 1 server: views and copies give the same curve and final result" \
    same_results quad1v quad1c
check "mlp, 1 server, views: every pulled byte read in place, none copied" check_bytes mlp1v pulled_copied
check "quadratic, 1 server, views: read in place, none copied" check_bytes quad1v pulled_copied
check "mlp, copying pulls: every byte copied" check_bytes mlp1c pulled_in_place
check "mlp, 2 servers, views: tables in two parts are copied" check_bytes mlp2v pulled_in_place
# the same bytes either way: a step pulls every table once
a=$(bytes_of mlp1v 0 pulled_in_place)
b=$(bytes_of mlp1c 0 pulled_copied)
check "mlp, 1 server: as many bytes read in place as copied without views ($a, $b)" \
    test "${a:-x}" = "${b:-y}"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
