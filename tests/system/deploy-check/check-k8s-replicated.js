#!/usr/bin/env node
// check-k8s-replicated.js - do the manifests of deploy/kubernetes/replicated
// fit together? validate-k8s.js checks each object against its schema; this
// checks what no schema knows, across objects:
//
//   node check-k8s-replicated.js DIR BASE_DIR OUT_DIR
//
//   - the ConfigMap's cluster file: `replicas` equals every shard
//     StatefulSet's replicas, and servers[i][r] is the DNS name of pod r of
//     the StatefulSet that runs `--shard i`
//     (tcp://<name>-<r>.<serviceName>:<its zmtp port>); each pod takes its
//     replica from its host name (`--replica hostname`);
//   - the shards' headless Service selects their pods; each StatefulSet's
//     selector matches its own pod template;
//   - a shard's replicas land on different nodes: a required pod
//     anti-affinity on kubernetes.io/hostname that matches the pods of its
//     own StatefulSet and of no other shard's;
//   - a PodDisruptionBudget per shard, selecting exactly its pods, with
//     maxUnavailable 1; the readiness probe GET /readyz on the port of
//     metrics_listen and of the prometheus.io/port annotation;
//   - ZooKeeper: ZK_ENSEMBLE names <name>-<i>.<serviceName> for each of the
//     StatefulSet's replicas, in order; that Service is headless and
//     publishes not-ready pods; coordination.zookeeper names a Service that
//     selects the ZooKeeper pods on a port that reaches ZK_CLIENT_PORT; the
//     pods start in parallel and avoid each other's nodes; the budget keeps
//     a majority up;
//   - secret.yaml, service.yaml and job.yaml are the same objects as the
//     default's in BASE_DIR (comments may differ).
//
// Writes OUT_DIR/cluster.conf (the ConfigMap's cluster file, for zeps to
// parse) and prints "SHARDS REPLICAS COMPLETIONS" as its last line. Exit
// status 0 if all hold; 1 with one line per problem otherwise.
"use strict";

const fs = require("fs");
const path = require("path");
const util = require("util");
const yaml = require("js-yaml");

function load(dir) {
  const docs = [];
  for (const f of fs.readdirSync(dir).filter((x) => /\.ya?ml$/.test(x)).sort()) {
    if (f.startsWith("kustomization.")) continue;
    for (const d of yaml.loadAll(fs.readFileSync(path.join(dir, f), "utf8")))
      if (d) docs.push({ file: f, doc: d });
  }
  return docs;
}

// Does a matchLabels selector select these labels?
const selects = (sel, labels) =>
  !!sel && Object.entries(sel).every(([k, v]) => labels && labels[k] === v);

function arg(cmd, flag) {
  const i = cmd.indexOf(flag);
  return i >= 0 ? cmd[i + 1] : undefined;
}

function main(argv) {
  if (argv.length !== 3) {
    console.error("usage: node check-k8s-replicated.js DIR BASE_DIR OUT_DIR");
    return 2;
  }
  const [dir, base, out] = argv;
  const problems = [];
  const bad = (m) => problems.push(m);
  const all = load(dir);
  const of = (kind) => all.filter((x) => x.doc.kind === kind).map((x) => x.doc);

  // The cluster file.
  const cm = of("ConfigMap").find((c) => c.data && c.data["cluster.conf"]);
  if (!cm) {
    console.log(`${dir}: no ConfigMap with a cluster.conf`);
    return 1;
  }
  const conf = cm.data["cluster.conf"];
  fs.writeFileSync(path.join(out, "cluster.conf"), conf);
  const code = conf.replace(/#.*$/gm, "");
  const R = Number((/\breplicas\s*=\s*(\d+)\s*;/.exec(code) || [])[1]);
  if (!(R >= 2)) bad("cluster.conf: no replicas = N with N >= 2");
  const serversText = (/\bservers\s*=\s*\(([\s\S]*?)\)\s*;/.exec(code) || [])[1] || "";
  const servers = [...serversText.matchAll(/\[([^\]]*)\]/g)].map((m) =>
    [...m[1].matchAll(/"([^"]*)"/g)].map((x) => x[1]));
  if (!servers.length) bad("cluster.conf: no servers = ( [...], ... );");
  const zk = (/\bzookeeper\s*=\s*"([^"]*)"/.exec(code) || [])[1];
  if (!zk) bad("cluster.conf: no coordination.zookeeper");
  const listen = (/\bmetrics_listen\s*=\s*"[^"]*:(\d+)"/.exec(code) || [])[1];

  // The shards.
  const services = of("Service");
  const shards = of("StatefulSet").filter(
    (s) => s.spec.template.metadata.labels["app.kubernetes.io/component"] === "server");
  const byShard = new Map();
  for (const s of shards) {
    const name = s.metadata.name;
    const pod = s.spec.template;
    const c = pod.spec.containers[0];
    const cmd = c.command || [];
    const k = Number(arg(cmd, "--shard"));
    if (!Number.isInteger(k)) bad(`StatefulSet ${name}: no --shard N in its command`);
    else if (byShard.has(k)) bad(`StatefulSet ${name}: shard ${k} is run by ${byShard.get(k).metadata.name} too`);
    else byShard.set(k, s);
    if (arg(cmd, "--replica") !== "hostname")
      bad(`StatefulSet ${name}: pods must take their replica from the host name (--replica hostname)`);
    if (s.spec.replicas !== R) bad(`StatefulSet ${name}: replicas ${s.spec.replicas}, cluster.replicas ${R}`);
    if (!selects(s.spec.selector.matchLabels, pod.metadata.labels))
      bad(`StatefulSet ${name}: its selector does not match its pod template`);
    const svc = services.find((v) => v.metadata.name === s.spec.serviceName);
    if (!svc || svc.spec.clusterIP !== "None" || !selects(svc.spec.selector, pod.metadata.labels))
      bad(`StatefulSet ${name}: serviceName ${s.spec.serviceName} is not a headless Service selecting its pods`);
    const zmtp = (c.ports || []).find((p) => p.name === "zmtp");
    if (Number.isInteger(k) && zmtp) {
      const want = [...Array(R).keys()].map(
        (r) => `tcp://${name}-${r}.${s.spec.serviceName}:${zmtp.containerPort}`);
      if (!util.isDeepStrictEqual(servers[k], want))
        bad(`shard ${k}: servers[${k}] is ${JSON.stringify(servers[k])}, its pods are ${JSON.stringify(want)}`);
    }
    const rp = c.readinessProbe && c.readinessProbe.httpGet;
    const mport = (c.ports || []).find((p) => rp && p.name === rp.port);
    if (!rp || rp.path !== "/readyz" || !mport || String(mport.containerPort) !== listen ||
        pod.metadata.annotations["prometheus.io/port"] !== listen)
      bad(`StatefulSet ${name}: readiness is not GET /readyz on metrics_listen's port ${listen} (and the scrape annotation)`);
    const terms = (((pod.spec.affinity || {}).podAntiAffinity || {})
      .requiredDuringSchedulingIgnoredDuringExecution) || [];
    const ok = terms.some((t) => t.topologyKey === "kubernetes.io/hostname" && t.labelSelector &&
      selects(t.labelSelector.matchLabels, pod.metadata.labels) &&
      shards.every((o) => o === s || !selects(t.labelSelector.matchLabels, o.spec.template.metadata.labels)));
    if (!ok) bad(`StatefulSet ${name}: no required anti-affinity on kubernetes.io/hostname among its own pods only`);
    const pdbs = of("PodDisruptionBudget").filter((b) =>
      selects(b.spec.selector.matchLabels, pod.metadata.labels));
    if (pdbs.length !== 1 || pdbs[0].spec.maxUnavailable !== 1 ||
        shards.some((o) => o !== s && selects(pdbs[0].spec.selector.matchLabels, o.spec.template.metadata.labels)))
      bad(`StatefulSet ${name}: not exactly one PodDisruptionBudget of its own pods with maxUnavailable 1`);
  }
  if (byShard.size !== servers.length)
    bad(`cluster.conf lists ${servers.length} shards, ${byShard.size} StatefulSets run one each`);
  for (let k = 0; k < servers.length; k++)
    if (!byShard.has(k)) bad(`no StatefulSet runs shard ${k}`);

  // ZooKeeper.
  const zs = of("StatefulSet").find((s) => s.metadata.name === "zookeeper");
  if (!zs) bad("no StatefulSet zookeeper");
  else {
    const pod = zs.spec.template;
    const c = pod.spec.containers[0];
    const env = Object.fromEntries((c.env || []).map((e) => [e.name, e.value]));
    const want = [...Array(zs.spec.replicas).keys()].map((i) => `zookeeper-${i}.${zs.spec.serviceName}`);
    if (env.ZK_ENSEMBLE !== want.join(","))
      bad(`zookeeper: ZK_ENSEMBLE is ${env.ZK_ENSEMBLE}, its pods are ${want.join(",")}`);
    const hs = services.find((v) => v.metadata.name === zs.spec.serviceName);
    if (!hs || hs.spec.clusterIP !== "None" || !hs.spec.publishNotReadyAddresses ||
        !selects(hs.spec.selector, pod.metadata.labels))
      bad(`zookeeper: serviceName ${zs.spec.serviceName} is not a headless Service publishing its not-ready pods`);
    if (!selects(zs.spec.selector.matchLabels, pod.metadata.labels))
      bad("zookeeper: its selector does not match its pod template");
    if (zs.spec.podManagementPolicy !== "Parallel")
      bad("zookeeper: pods must start in parallel (none is ready before a majority runs)");
    const client = (c.ports || []).find((p) => p.name === "client");
    if (!client || String(client.containerPort) !== (env.ZK_CLIENT_PORT || "2181"))
      bad("zookeeper: the client port is not ZK_CLIENT_PORT");
    const [host, port] = (zk || "").split(",")[0].split(":");
    const cs = services.find((v) => v.metadata.name === host);
    const sp = cs && (cs.spec.ports || []).find((p) => String(p.port) === port);
    if (!cs || !selects(cs.spec.selector, pod.metadata.labels) || !sp || cs.spec.clusterIP === "None" ||
        !(sp.targetPort === "client" || String(sp.targetPort) === String(client && client.containerPort)))
      bad(`coordination.zookeeper = "${zk}" is not a Service of the ZooKeeper pods on their client port`);
    const terms = (((pod.spec.affinity || {}).podAntiAffinity || {})
      .requiredDuringSchedulingIgnoredDuringExecution) || [];
    if (!terms.some((t) => t.topologyKey === "kubernetes.io/hostname" && t.labelSelector &&
        selects(t.labelSelector.matchLabels, pod.metadata.labels)))
      bad("zookeeper: no required anti-affinity on kubernetes.io/hostname");
    const pdb = of("PodDisruptionBudget").find((b) => selects(b.spec.selector.matchLabels, pod.metadata.labels));
    if (!pdb || !(zs.spec.replicas - pdb.spec.maxUnavailable > zs.spec.replicas / 2))
      bad("zookeeper: no PodDisruptionBudget that keeps a majority up");
  }

  // The objects shared with the default deployment.
  for (const f of ["secret.yaml", "service.yaml", "job.yaml"]) {
    const a = yaml.loadAll(fs.readFileSync(path.join(dir, f), "utf8"));
    const b = yaml.loadAll(fs.readFileSync(path.join(base, f), "utf8"));
    if (!util.isDeepStrictEqual(a, b)) bad(`${f} differs from ${path.join(base, f)}`);
  }

  const job = of("Job")[0];
  for (const p of problems) console.log(`${dir}: ${p}`);
  console.log(`${servers.length} ${R} ${job ? job.spec.completions : "?"}`);
  return problems.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
