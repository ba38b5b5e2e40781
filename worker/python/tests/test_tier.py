"""A sparse table's cold tier from Python (docs/sparse.md, "Cold tier"):
declare_sparse(tier=True) keeps the rows its capacity evicts on the shards'
disk and gives them back exactly; zepsctl stats and /metrics show the tier."""
import json
import os
import socket
import subprocess
import urllib.request

import numpy as np

from conftest import bin_path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tables_named(doc, name):
    """Every dict in a zepsctl stats --json document whose name is `name`."""
    if isinstance(doc, dict):
        if doc.get("name") == name:
            yield doc
        for v in doc.values():
            yield from tables_named(v, name)
    elif isinstance(doc, list):
        for v in doc:
            yield from tables_named(v, name)


def test_tier_exact_and_visible(make_cluster, tmp_path):
    cold_dir = tmp_path / "cold"
    cold_dir.mkdir()
    port = free_port()
    cl = make_cluster(servers=1, extra=f'  tier_dir = "{cold_dir}";\n'
                                        f'  metrics_listen = "127.0.0.1:{port}";\n')
    spec = dict(optimizer="adagrad", lr=0.1, init="uniform", init_scale=0.1, seed=5)
    ids = np.arange(1, 1001, dtype=np.uint64) * np.uint64(7919)
    with cl.client(0) as c:
        cold = c.declare_sparse("cold", 4, tier=True, capacity_rows=100, **spec)
        ram = c.declare_sparse("ram", 4, **spec)
        rng = np.random.default_rng(3)
        for step in range(20):
            pick = rng.choice(ids, 200, replace=False)
            a, b = cold.pull(pick), ram.pull(pick)
            np.testing.assert_array_equal(a, b)
            g = (0.5 * a + 0.01).astype(np.float32)
            cold.push(pick, g)
            ram.push(pick, g)
        np.testing.assert_array_equal(cold.pull(ids), ram.pull(ids))
        rows, cursor = 0, 0
        while True:
            page = c.scan(cold, 0, cursor, 300)
            rows += len(page.ids)
            cursor = page.next
            if cursor == 0:
                break
        assert rows == 1000  # the hot rows and then the cold ones
    out = subprocess.run([bin_path("zepsctl"), "stats", "--config", cl.conf, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (t,) = list(tables_named(json.loads(out.stdout), "cold"))
    assert t["tier_demotions"] > 900 and t["tier_promotions"] > 100
    assert t["cold_rows"] >= 900 and 0 < t["tier_hit_rate"] < 1 and t["cold_bytes"] > 0
    assert not list(tables_named(json.loads(out.stdout), "ram"))[0].get("tier_demotions")
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'zeps_table_cold_rows{table="cold"}' in text
    assert 'zeps_table_tier_promotions_total{table="cold"}' in text
    assert os.path.isdir(cold_dir / "tier-cold-shard-0")
