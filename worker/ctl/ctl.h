/*
 * ctl.h - the subcommands of zepsctl, the operator tool. Each takes the
 * arguments after its own name (argv[0] is the subcommand name) and returns
 * the process exit status.
 */
#ifndef ZP_CTL_H
#define ZP_CTL_H

/* zepsctl status: ask every shard for STATS and print a table. */
int zp_ctl_status(int argc, char **argv);

/* zepsctl stats: status plus the staleness histograms (tau, clock gap, pull
 * wait) of every table and worker. */
int zp_ctl_status_stats(int argc, char **argv);

/* zepsctl bench: zeps vs raw ZeroMQ throughput and latency on loopback. */
int zp_ctl_bench(int argc, char **argv);

/* zepsctl study: staleness sweeps on the quadratic model, or over any model
 * with --model / --preset (ctl_sweep.c; docs/consistency.md). */
int zp_ctl_study(int argc, char **argv);

/* zepsctl scale: a strong-scaling study, S(N), E(N) and an alpha-beta fit
 * (docs/performance.md). */
int zp_ctl_scale(int argc, char **argv);

/* zepsctl snapshot inspect: what a snapshot file or directory holds. */
int zp_ctl_snapshot(int argc, char **argv);

/* zepsctl gen-criteo: write a Criteo-format data set from a hidden model. */
int zp_ctl_gen_criteo(int argc, char **argv);
/* zepsctl evict RANK: release a worker rank held by a live incarnation. */
int zp_ctl_evict(int argc, char **argv);
/* zepsctl shards move: move a slot set between running shards
 * (ctl_shards.c, docs/elastic.md). */
int zp_ctl_shards(int argc, char **argv);

/* zepsctl shards rebalance: slot sets moved until rows per shard are even
 * (ctl_rebalance.c, docs/elastic.md "Rebalancing"). */
int zp_ctl_rebalance(int argc, char **argv);

/* zepsctl shards add ENDPOINT / shards remove K / shards retire K: a shard
 * joins the running cluster, gives away all its slots, or leaves it for
 * good (ctl_elastic.c, docs/elastic.md). */
int zp_ctl_elastic_add(int argc, char **argv);
int zp_ctl_elastic_remove(int argc, char **argv);
int zp_ctl_elastic_retire(int argc, char **argv);

/* zepsctl shards resolve: an operator ends a move whose source is in
 * doubt, by COMMIT or ABORT (ctl_resolve.c, docs/elastic.md "What each
 * failure does"). */
int zp_ctl_resolve(int argc, char **argv);

/* zepsctl keygen: write a CurveZMQ key pair (NAME.key, NAME.pub). */
int zp_ctl_keygen(int argc, char **argv);

/* zepsctl local: run a whole cluster on this machine and summarise it. */
int zp_ctl_local(int argc, char **argv);

/* Directory of the running executable (to find zeps-server / zeps-worker
 * beside zepsctl); writes into buf and returns buf, or "" if unknown. */
char *zp_zepsctl_bindir(char *buf, unsigned long len);

#endif
