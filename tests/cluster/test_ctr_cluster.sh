#!/usr/bin/env bash
# test_ctr_cluster.sh - the ctr workload with real processes: zepsctl
# gen-criteo writes a small Criteo-format set, then 2 zeps-server and 2
# zeps-worker processes (async) train the LR + FM model on it through
# sparse tables, and rank 0's held-out AUC must beat the dense-only
# baseline by a margin and come near the hidden model's. Also: a malformed
# line in the training file stops the run with the file and line named.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../support/lib.sh"
BIN=${ZEPS_BINDIR:?ZEPS_BINDIR must point at the built binaries}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}"/zeps-ctr-XXXXXX)
launcher=
cleanup() {
    # zepsctl local stops its own children on SIGTERM (and they die with it)
    if [ -n "$launcher" ] && kill -0 "$launcher" 2>/dev/null; then
        kill -TERM "$launcher"
        wait "$launcher" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT
conf() { # name data-dir [consistency workers batch format]
    cat >"$work/$1.conf" <<EOC
cluster = {
  servers = ["ipc://$work/$1-0.sock", "ipc://$work/$1-1.sock"];
  workers = ${4:-2};
  consistency = "${3:-async}";
};
training = {
  model = "ctr"; epochs = 2; batch_size = ${5:-128}; optimizer = "adagrad"; lr = 0.05; seed = 1;
  prefetch = 1; max_inflight = 1;
  ctr = { format = "${6:-criteo}"; train_file = "$2/train.txt"; test_file = "$2/test.txt";
          emb_dim = 8; sparse_lr = 0.05; emb_lr = 0.003; emb_init = 0.01; };
};
EOC
}
run() { # name
    "$BIN/zepsctl" local --config "$work/$1.conf" -q --dir "$work/$1" --timeout "${2:-300}" \
        >"$work/$1.out" 2>&1 &
    launcher=$!
    wait "$launcher"
    local rc=$?
    launcher=
    return $rc
}

# 1. Generate (vocabularies at 1% of Kaggle's, so 40k lines teach them).
"$BIN/zepsctl" gen-criteo --out "$work/data" --train 40000 --test 10000 --scale 0.01 \
    --seed 3 -q >"$work/gen.out" 2>&1
check "gen-criteo exits 0" test $? -eq 0
truth=$(json_num "$work/data/truth.json" truth_test_auc)
dense=$(json_num "$work/data/truth.json" dense_only_test_auc)
check "truth.json has the hidden model's AUC ($truth) and the baseline's ($dense)" \
    test -n "$truth" -a -n "$dense"

# 2. Train with 2 servers x 2 workers, async.
conf good "$work/data"
run good
check "zepsctl local exits 0" test $? -eq 0
res="$work/good/worker-0.json"
auc=$(json_num "$res" final_auc)
loss=$(json_num "$res" final_loss)
echo "     trained AUC ${auc:-none} (logloss ${loss:-none}); hidden model $truth; dense only $dense"
check "rank 0 reports a test AUC" test -n "$auc"
check "the summary carries the same AUC" \
    test "$(json_num "$work/good/summary.json" final_auc)" = "$auc"
check "AUC $auc beats the dense-only baseline $dense by 0.03" \
    awk -v a="${auc:-0}" -v d="$dense" 'BEGIN{exit !(a > d + 0.03)}'
check "AUC $auc within 0.03 of the hidden model's $truth" \
    awk -v a="${auc:-0}" -v t="$truth" 'BEGIN{exit !(a > t - 0.03)}'
check "both workers trained 2 epochs" \
    test "$(json_num "$work/good/worker-1.json" epochs)" = 2
for k in 0 1; do
    check "shard $k declared the sparse tables" \
        grep -q "sparse table 'ctr_rows' declared: dim 9, optimizer adagrad, lr 0.003, init normal; lead columns 1: lr 0.05, init zeros" "$work/good/server-$k.log"
done

# 3. bsp with partitions of different sizes: 1000 lines over 3 workers are
#    334, 333 and 333 lines, which a batch of 111 makes 4 and 3 steps; every
#    worker must still run 4 steps per epoch, or rank 0 waits forever.
mkdir -p "$work/uneven"
head -n 1000 "$work/data/train.txt" >"$work/uneven/train.txt"
head -n 2000 "$work/data/test.txt" >"$work/uneven/test.txt"
conf uneven "$work/uneven" bsp 3 111
run uneven 60
rc=$?
check "bsp with uneven partitions finishes (exit $rc)" test $rc -eq 0
for r in 0 1 2; do
    check "rank $r ran 8 steps" test "$(json_num "$work/uneven/worker-$r.json" iterations)" = 8
done

# 4. The same data as libsvm (labels -1/+1; one index per (field, value),
#    the integer fields as weighted indices): it must learn as well.
mkdir -p "$work/svm"
awk -F'\t' -v out="$work/svm" '
    { f = FILENAME ~ /test/ ? out "/test.txt" : out "/train.txt"
      printf "%s", ($1 == 1 ? "+1" : "-1") > f
      for (j = 2; j <= 14; j++) if ($j != "" && $j > 0) printf " %d:%.6f", 900000 + j, log(1 + $j) > f
      for (j = 15; j <= 40; j++) { k = j SUBSEP $j; if (!(k in id)) id[k] = ++n; printf " %d:1", id[k] > f }
      printf "\n" > f }' "$work/data/train.txt" "$work/data/test.txt"
conf svm "$work/svm" async 2 128 libsvm
run svm
check "libsvm run exits 0" test $? -eq 0
sauc=$(json_num "$work/svm/worker-0.json" final_auc)
echo "     libsvm AUC ${sauc:-none}"
check "libsvm AUC $sauc beats the dense-only baseline $dense by 0.03" \
    awk -v a="${sauc:-0}" -v d="$dense" 'BEGIN{exit !(a > d + 0.03)}'

# 5. A malformed line (line 7 is rank 0's with 2 workers) stops the run
#    with the file and the line named.
mkdir -p "$work/broken"
cp "$work/data/test.txt" "$work/broken/test.txt"
head -n 20 "$work/data/train.txt" | awk 'NR == 7 { $0 = "1\tnot-a-number" } { print }' \
    >"$work/broken/train.txt"
conf broken "$work/broken"
run broken
rc=$?
check "a malformed training file fails the run (exit $rc)" test $rc -ne 0
check "the worker names file and line" \
    grep -q "broken/train.txt:7: 2 tab-separated fields, expected 40" "$work/broken/worker-0.log"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
