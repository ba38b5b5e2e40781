#!/usr/bin/env node
// check-dockerfile.js - a static check of deploy/container/Dockerfile.
//
//   node check-dockerfile.js [OPTION...] DOCKERFILE CONTEXT_DIR [BIN...]
//
// Options, for images other than zeps's own (deploy/container/zookeeper.Dockerfile):
//   --volume PATH    the runtime stage's VOLUME (default /var/lib/zeps)
//   --single-stage   a one-stage build is fine (nothing is compiled in it)
//   --installs PKG   the runtime stage's apt-get install names PKG (repeatable)
//
// No container engine runs where the tests run, so the image is never
// built here. What can be checked without one, is:
//   - the syntax: every instruction is a Dockerfile instruction, line
//     continuations close, exec forms (CMD, ENTRYPOINT, VOLUME [...]) are
//     JSON arrays of strings, and every RUN command passes `sh -n` (the
//     shell RUN uses);
//   - the stages: FROM images are debian:12 or an earlier stage, stage names
//     are unique, COPY --from names an earlier stage;
//   - the context: every COPY source exists under CONTEXT_DIR and is not
//     excluded by its .dockerignore;
//   - the runtime stage: a USER that is not root, a VOLUME /var/lib/zeps,
//     and (given the built binaries BIN...) an apt-get install that covers
//     the Debian package of every shared library the binaries need
//     (DT_NEEDED via readelf, the package via dpkg -S on this machine),
//     and every package given with --installs.
// Exit status 0 if all hold, 1 with one line per problem otherwise.
"use strict";

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");

const INSTRUCTIONS = new Set([
  "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
  "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
]);

// Logical instructions: [{line, op, args}], continuations joined.
function parse(text, problems) {
  const out = [];
  let cur = null;
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/\s+$/, "");
    if (!cur && (/^\s*#/.test(line) || /^\s*$/.test(line))) return;
    if (cur && /^\s*#/.test(line)) return; // comments inside a continuation
    const cont = line.endsWith("\\");
    const body = cont ? line.slice(0, -1) : line;
    if (!cur) {
      const m = /^\s*(\S+)\s*(.*)$/.exec(body);
      cur = { line: i + 1, op: m[1], args: m[2] };
    } else {
      cur.args += " " + body.trim();
    }
    if (!cont) {
      out.push(cur);
      cur = null;
    }
  });
  if (cur) problems.push(`line ${cur.line}: continuation never ends`);
  return out;
}

function dockerignore(context) {
  const f = path.join(context, ".dockerignore");
  if (!fs.existsSync(f)) return [];
  return fs.readFileSync(f, "utf8").split("\n").map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
}

function ignored(rel, patterns) {
  const first = rel.split("/")[0];
  return patterns.some((p) => {
    const re = new RegExp("^" + p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*") + "$");
    return re.test(rel) || re.test(first);
  });
}

// The Debian packages that provide the shared libraries `bins` need.
function neededPackages(bins, problems) {
  const pkgs = new Map(); // package -> library
  const cache = spawnSync("ldconfig", ["-p"], { encoding: "utf8" }).stdout || "";
  for (const bin of bins) {
    const r = spawnSync("readelf", ["-d", bin], { encoding: "utf8" });
    if (r.status !== 0) {
      problems.push(`cannot read ${bin}: ${r.stderr || r.error}`);
      continue;
    }
    for (const m of r.stdout.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)) {
      const lib = m[1];
      const hit = cache.split("\n").find((l) => l.trim().startsWith(lib + " ") && l.includes("x86-64"))
        || cache.split("\n").find((l) => l.trim().startsWith(lib + " "));
      if (!hit) {
        problems.push(`${path.basename(bin)} needs ${lib}, which ldconfig does not know`);
        continue;
      }
      const link = hit.split("=>")[1].trim();
      const file = fs.realpathSync(link);
      // With merged /usr, dpkg may know the file under /lib rather than /usr/lib.
      const names = [file, link].flatMap((f) => [f, f.replace(/^\/usr\/lib\//, "/lib/")]);
      let pkg = null;
      for (const n of names) {
        const d = spawnSync("dpkg", ["-S", n], { encoding: "utf8" });
        if (d.status === 0) {
          pkg = d.stdout.split(":")[0].trim();
          break;
        }
      }
      if (!pkg) problems.push(`${lib} (${file}) belongs to no Debian package`);
      else pkgs.set(pkg, lib);
    }
  }
  return pkgs;
}

function main(argv) {
  const opts = { volume: "/var/lib/zeps", singleStage: false, installs: [] };
  while (argv.length && argv[0].startsWith("--")) {
    const o = argv.shift();
    if (o === "--single-stage") opts.singleStage = true;
    else if (o === "--volume" && argv.length) opts.volume = argv.shift();
    else if (o === "--installs" && argv.length) opts.installs.push(argv.shift());
    else {
      console.error(`check-dockerfile.js: unknown option ${o}`);
      return 2;
    }
  }
  if (argv.length < 2) {
    console.error("usage: node check-dockerfile.js [--volume PATH] [--single-stage] " +
      "[--installs PKG]... DOCKERFILE CONTEXT_DIR [BIN...]");
    return 2;
  }
  const [file, context, ...bins] = argv;
  const problems = [];
  const ins = parse(fs.readFileSync(file, "utf8"), problems);
  const patterns = dockerignore(context);
  const stages = []; // {name, from, ins: []}
  for (const i of ins) {
    const op = i.op.toUpperCase();
    const where = `line ${i.line}`;
    if (!INSTRUCTIONS.has(op)) {
      problems.push(`${where}: unknown instruction '${i.op}'`);
      continue;
    }
    if (op !== i.op) problems.push(`${where}: write instructions in upper case ('${i.op}')`);
    if (op === "FROM") {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(i.args.trim());
      if (!m) {
        problems.push(`${where}: FROM wants IMAGE [AS NAME]`);
        continue;
      }
      const earlier = stages.some((s) => s.name === m[1]);
      if (m[1] !== "debian:12" && !earlier)
        problems.push(`${where}: FROM ${m[1]}: the base must be debian:12 or an earlier stage`);
      if (m[2] && stages.some((s) => s.name === m[2]))
        problems.push(`${where}: stage name '${m[2]}' used twice`);
      stages.push({ name: m[2] || String(stages.length), ins: [] });
      continue;
    }
    if (!stages.length) {
      problems.push(`${where}: ${op} before the first FROM`);
      continue;
    }
    stages[stages.length - 1].ins.push({ ...i, op });
    if (["CMD", "ENTRYPOINT", "VOLUME"].includes(op) && i.args.trim().startsWith("[")) {
      let v;
      try {
        v = JSON.parse(i.args);
      } catch (e) {
        problems.push(`${where}: ${op} exec form is not valid JSON: ${i.args}`);
      }
      if (v && !(Array.isArray(v) && v.every((s) => typeof s === "string")))
        problems.push(`${where}: ${op} exec form must be an array of strings`);
    }
    if (op === "RUN") {
      const r = spawnSync("sh", ["-n", "-c", i.args], { encoding: "utf8" });
      if (r.status !== 0) problems.push(`${where}: RUN is not valid sh: ${r.stderr.trim()}`);
    }
    if (op === "COPY" || op === "ADD") {
      const words = i.args.trim().split(/\s+/);
      const flags = words.filter((w) => w.startsWith("--"));
      const rest = words.filter((w) => !w.startsWith("--"));
      const from = flags.find((f) => f.startsWith("--from="));
      if (rest.length < 2) problems.push(`${where}: ${op} wants SRC... DEST`);
      if (from) {
        const name = from.slice(7);
        if (!stages.slice(0, -1).some((s) => s.name === name))
          problems.push(`${where}: ${op} --from=${name} names no earlier stage`);
      } else {
        for (const src of rest.slice(0, -1)) {
          const rel = src.replace(/^\.\/?/, "").replace(/\/$/, "");
          if (rel === "") continue;
          if (!fs.existsSync(path.join(context, rel)))
            problems.push(`${where}: ${op} ${src}: not in the build context`);
          else if (ignored(rel, patterns))
            problems.push(`${where}: ${op} ${src}: excluded by .dockerignore`);
        }
      }
    }
  }
  if (!stages.length) problems.push("no FROM");
  const last = stages[stages.length - 1];
  if (last) {
    if (stages.length < 2 && !opts.singleStage) problems.push("not a multi-stage build");
    const users = last.ins.filter((i) => i.op === "USER");
    const user = users.length ? users[users.length - 1].args.trim().split(":")[0] : null;
    if (!user) problems.push("the runtime stage sets no USER (it would run as root)");
    else if (user === "root" || user === "0")
      problems.push(`the runtime stage runs as ${user}`);
    const vols = last.ins.filter((i) => i.op === "VOLUME").map((i) => i.args);
    if (!vols.some((v) => v.includes(opts.volume)))
      problems.push(`the runtime stage has no VOLUME ${opts.volume}`);
    if (last.ins.some((i) => i.op === "RUN" && /install-deps\.sh|build-essential|-dev\b/.test(i.args)))
      problems.push("the runtime stage installs build dependencies");
    const installed = new Set();
    for (const i of last.ins.filter((x) => x.op === "RUN")) {
      const m = /apt-get install\s+(.*?)(?:&&|;|$)/.exec(i.args);
      if (m) m[1].split(/\s+/).filter((w) => w && !w.startsWith("-")).forEach((w) => installed.add(w));
    }
    for (const pkg of opts.installs)
      if (!installed.has(pkg)) problems.push(`the runtime stage does not install ${pkg}`);
    if (bins.length) {
      for (const [pkg, lib] of neededPackages(bins, problems)) {
        if (pkg === "libc6" || pkg === "libgcc-s1") continue; // in every debian:12 image
        // Sanitizer runtimes: the test binaries may be an ASan build; the
        // image is built without sanitizers.
        if (/^lib(asan|ubsan|lsan|tsan)\d+$/.test(pkg)) continue;
        if (!installed.has(pkg))
          problems.push(`the runtime stage does not install ${pkg} (for ${lib})`);
      }
    }
  }
  for (const p of problems) console.log(`${file}: ${p}`);
  console.log(`${ins.length} instructions, ${stages.length} stages, ${problems.length} problems`);
  return problems.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
