#!/usr/bin/env node
// validate.js - offline schema validation of Kubernetes manifests.
//
//   node validate-k8s.js FILE.yaml...
//
// Each YAML document is checked against the OpenAPI schema of its apiVersion
// and kind, as compiled into validators by the npm package kubernetes-models
// (wrong types, missing required fields, bad enum values, unknown kinds).
//
// Those validators accept fields the schema does not know (a typo such as
// "replica:" or "readinesProbe:" passes). So the document is also handed to
// the validator through Proxies that record every property the validator
// reads: a compiled validator reads each property its schema declares (and
// every key of a map it validates), so a key of the document it never read
// is one the schema does not know, and is reported with its path. A schema
// that declares an object with no properties at all (free-form) is the one
// place this would misfire; none of the kinds below has one in the parts
// zeps uses, and such an object would be reported, not silently passed.
//
// A kustomization.yaml is checked for its own fields and for listing exactly
// the other manifests of its directory.
//
// Exit status: 0 if every document passes, 1 otherwise (each problem is
// printed as FILE: doc N (Kind name): path: message), 2 on bad usage.
"use strict";

const fs = require("fs");
const path = require("path");
const yaml = require("js-yaml");

const MODELS_DIR = path.dirname(require.resolve("kubernetes-models"));

// apiVersion group -> the schema name's group part in kubernetes-models.
const GROUPS = {
  "": "Core",
  apps: "Apps",
  batch: "Batch",
  policy: "Policy",
  "networking.k8s.io": "Networking",
  "rbac.authorization.k8s.io": "Rbac",
  autoscaling: "Autoscaling",
};

function schemaFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string")
    return { error: "apiVersion and kind must be strings" };
  const parts = apiVersion.split("/");
  const group = parts.length === 2 ? parts[0] : "";
  const version = parts[parts.length - 1];
  const g = GROUPS[group];
  if (g === undefined) return { error: `unknown API group '${group}'` };
  const v = version.charAt(0).toUpperCase() + version.slice(1);
  const name = `IoK8sApi${g}${v}${kind}`;
  try {
    // The package's "exports" map hides _schemas/: load the file by path.
    return { validate: require(path.join(MODELS_DIR, "_schemas", `${name}.js`)).validate };
  } catch (e) {
    return { error: `unknown kind '${kind}' in apiVersion '${apiVersion}'` };
  }
}

// Wrap `value` so that every property read of it and its children is
// recorded in `seen` (a Map from the original object to a Set of keys).
function watch(value, seen, cache) {
  if (value === null || typeof value !== "object") return value;
  if (cache.has(value)) return cache.get(value);
  const keys = new Set();
  seen.set(value, keys);
  const proxy = new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string") keys.add(key);
      const v = Reflect.get(target, key, receiver);
      return typeof key === "string" ? watch(v, seen, cache) : v;
    },
    has(target, key) {
      if (typeof key === "string") keys.add(key);
      return Reflect.has(target, key);
    },
  });
  cache.set(value, proxy);
  return proxy;
}

// Every key of `value` (recursively) that the validator never read.
function unread(value, seen, where, out) {
  if (value === null || typeof value !== "object") return;
  const keys = seen.get(value);
  if (Array.isArray(value)) {
    value.forEach((v, i) => unread(v, seen, `${where}/${i}`, out));
    return;
  }
  for (const k of Object.keys(value)) {
    if (!keys || !keys.has(k)) out.push(`${where}/${k}: unknown field '${k}'`);
    else unread(value[k], seen, `${where}/${k}`, out);
  }
}

function formatError(e) {
  const p = e.instancePath || "/";
  switch (e.keyword) {
    case "required":
      return `${p}: missing required field '${e.params.missingProperty}'`;
    case "type":
      return `${p}: must be of type ${e.params.type}`;
    case "enum":
      return `${p}: must be one of ${e.params.allowedValues.join(", ")}`;
    default:
      return `${p}: ${e.keyword} ${JSON.stringify(e.params)}`;
  }
}

function checkObject(doc) {
  const s = schemaFor(doc.apiVersion, doc.kind);
  if (s.error) return [`/: ${s.error}`];
  const seen = new Map();
  const ok = s.validate(watch(doc, seen, new Map()));
  const problems = ok ? [] : s.validate.errors.map(formatError);
  // The validator checks the type of apiVersion/kind only; read them here.
  seen.get(doc).add("apiVersion").add("kind");
  unread(doc, seen, "", problems);
  if (!doc.metadata || typeof doc.metadata.name !== "string" || !doc.metadata.name)
    problems.push("/metadata/name: missing");
  return [...new Set(problems)];
}

const KUSTOMIZATION_KEYS = new Set([
  "apiVersion", "kind", "resources", "namespace", "namePrefix", "nameSuffix",
  "commonLabels", "labels", "images", "configMapGenerator", "secretGenerator",
  "patches", "generatorOptions",
]);

function checkKustomization(file, doc) {
  const problems = [];
  for (const k of Object.keys(doc))
    if (!KUSTOMIZATION_KEYS.has(k)) problems.push(`/${k}: unknown field '${k}'`);
  if (doc.kind !== "Kustomization") problems.push("/kind: must be Kustomization");
  const dir = path.dirname(file);
  const listed = new Set(doc.resources || []);
  const present = fs.readdirSync(dir).filter(
    (f) => /\.ya?ml$/.test(f) && f !== path.basename(file));
  for (const f of present)
    if (!listed.has(f)) problems.push(`/resources: does not list ${f}`);
  for (const f of listed)
    if (!present.includes(f)) problems.push(`/resources: ${f} does not exist`);
  return problems;
}

function main(files) {
  if (files.length === 0) {
    console.error("usage: node validate-k8s.js FILE.yaml...");
    return 2;
  }
  let bad = 0, docs = 0;
  for (const file of files) {
    let all;
    try {
      all = yaml.loadAll(fs.readFileSync(file, "utf8"));
    } catch (e) {
      console.log(`${file}: ${e.message.split("\n")[0]}`);
      bad++;
      continue;
    }
    all.forEach((doc, i) => {
      if (doc === null || doc === undefined) return;
      docs++;
      let problems;
      if (typeof doc !== "object" || Array.isArray(doc))
        problems = ["/: a document must be a mapping"];
      else if (path.basename(file).startsWith("kustomization."))
        problems = checkKustomization(file, doc);
      else
        problems = checkObject(doc);
      const name = doc && doc.metadata && doc.metadata.name;
      for (const p of problems) {
        console.log(`${file}: doc ${i + 1} (${doc && doc.kind} ${name}): ${p}`);
        bad++;
      }
    });
  }
  console.log(`${docs} documents, ${bad} problems`);
  return bad ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
