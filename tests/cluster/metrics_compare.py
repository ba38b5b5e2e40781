#!/usr/bin/python3
"""Compare a shard's metrics with what `zepsctl stats --json` said of it.

    metrics_compare.py STATS_JSON SHARD --text METRICS_FILE
    metrics_compare.py STATS_JSON SHARD --prom URL INSTANCE

The first reads one scrape of GET /metrics; the second asks a Prometheus
server's HTTP API (instant queries, label instance=INSTANCE) for the same
series. The stats must have been taken with the cluster idle, just BEFORE
the scrape (or Prometheus's last scrape): then requests, errors, bytes in,
per table pushes, pulls, version, push/pull bytes and every cumulative tau,
clock-gap and pull-wait bucket (and a sparse table's per-row tau by row
frequency) must be equal; bytes out exceeds the stats'
by the STATS reply itself (checked to be positive and small).

Prints one line per check, "N passed, N failed"; exits 1 on a failure.
"""
import json
import re
import sys
import urllib.parse
import urllib.request

LIN_LE = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32, 48, 62]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_text(path):
    """{(name, frozenset(labels)): value} of an exposition file."""
    out = {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise SystemExit(f"{path}: unreadable sample line: {line!r}")
        labels = frozenset(LABEL.findall(m.group(3) or ''))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


class Prom:
    """Instant queries against a Prometheus server for one instance."""

    def __init__(self, url, instance):
        self.url, self.instance = url.rstrip('/'), instance

    def get(self, name, labels):
        sel = ','.join([f'instance="{self.instance}"'] +
                       [f'{k}="{v}"' for k, v in sorted(labels)])
        q = urllib.parse.urlencode({'query': f'{name}{{{sel}}}'})
        with urllib.request.urlopen(f'{self.url}/api/v1/query?{q}', timeout=10) as r:
            res = json.load(r)['data']['result']
        return float(res[0]['value'][1]) if res else None


class Text:
    def __init__(self, path):
        self.samples = parse_text(path)

    def get(self, name, labels):
        return self.samples.get((name, frozenset(labels)))


def cumulative(counts, upto):
    return sum(counts[: upto + 1])


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    shard = int(sys.argv[2])
    stats = [s for s in json.load(open(sys.argv[1])) if s['shard'] == shard][0]
    src = Text(sys.argv[4]) if sys.argv[3] == '--text' else Prom(sys.argv[4], sys.argv[5])
    passed = failed = 0

    def eq(what, name, labels, want):
        nonlocal passed, failed
        got = src.get(name, labels)
        if got is not None and got == float(want):
            passed += 1
        else:
            failed += 1
            print(f"FAIL - shard {shard} {what}: {name}{dict(labels)} = {got}, stats say {want}")

    eq('requests', 'zeps_requests_total', (), stats['requests'])
    eq('errors', 'zeps_errors_total', (), stats['errors'])
    eq('bytes in', 'zeps_network_bytes_total', (('direction', 'in'),), stats['bytes_in'])
    for key, name in (('log_suppressed', 'zeps_log_suppressed_total'),
                      ('max_tables', 'zeps_limit_tables'),
                      ('max_rows', 'zeps_limit_rows'),
                      ('max_bytes', 'zeps_limit_memory_bytes'),
                      ('rows_held', 'zeps_held_rows'),
                      ('bytes_held', 'zeps_held_memory_bytes'),
                      ('full_refused', 'zeps_limit_refused_total')):
        eq(key, name, (), stats[key])
    out = src.get('zeps_network_bytes_total', (('direction', 'out'),))
    extra = (out or 0) - stats['bytes_out']
    if out is not None and 0 < extra < 1 << 20:
        passed += 1
    else:
        failed += 1
        print(f"FAIL - shard {shard} bytes out {out} vs stats {stats['bytes_out']}")
    for t in stats['tables']:
        tl = (('table', t['name']),)
        for key, name in (('pushes', 'zeps_table_pushes_total'),
                          ('pulls', 'zeps_table_pulls_total'),
                          ('version', 'zeps_table_version')):
            eq(f"table {t['name']} {key}", name, tl, t[key])
        for key, name, enc in (('push_bytes_wire', 'zeps_table_push_bytes_total', 'wire'),
                               ('push_bytes_raw', 'zeps_table_push_bytes_total', 'f32'),
                               ('pull_bytes_wire', 'zeps_table_pull_bytes_total', 'wire'),
                               ('pull_bytes_raw', 'zeps_table_pull_bytes_total', 'f32')):
            eq(f"table {t['name']} {key}", name, tl + (('encoding', enc),), t[key])
        for key, name in (('tau', 'zeps_push_staleness_versions'),
                          ('clock_gap', 'zeps_push_clock_gap_clocks')):
            h = t[key]
            eq(f"table {t['name']} {key} count", name + '_count', tl, h['n'])
            eq(f"table {t['name']} {key} sum", name + '_sum', tl, h['sum'])
            for le in LIN_LE:
                eq(f"table {t['name']} {key} le {le}", name + '_bucket',
                   tl + (('le', str(le)),), cumulative(h['counts'], le))
        for b, h in enumerate(t.get('tau_by_freq', [])):
            if h['n'] == 0:
                continue
            lo = 1 << b
            touches = '1' if b == 0 else f'{lo}+' if b == 15 else f'{lo}-{2 * lo - 1}'
            fl = tl + (('touches', touches),)
            name = 'zeps_row_staleness_versions'
            eq(f"table {t['name']} tau touches {touches} count", name + '_count', fl, h['n'])
            eq(f"table {t['name']} tau touches {touches} sum", name + '_sum', fl, h['sum'])
            for le in LIN_LE:
                eq(f"table {t['name']} tau touches {touches} le {le}", name + '_bucket',
                   fl + (('le', str(le)),), cumulative(h['counts'], le))
        h = t['pull_wait_us']
        eq(f"table {t['name']} pull wait count", 'zeps_pull_wait_seconds_count', tl, h['n'])
        for i in range(27):
            le = f"{(1 << i) * 1e-6:.9g}"
            eq(f"table {t['name']} pull wait le {le}", 'zeps_pull_wait_seconds_bucket',
               tl + (('le', le),), cumulative(h['counts'], i))
    for w in stats['workers']:
        rl = (('rank', str(w['rank'])),)
        for key in ('pushes', 'pulls', 'duplicates', 'seq_jumps'):
            eq(f"worker {w['rank']} {key}", f'zeps_worker_{key}_total', rl, w[key])
    print(f"shard {shard}: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
