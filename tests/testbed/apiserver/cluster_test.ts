import assert from "node:assert/strict";
import { Cluster } from "./cluster.ts";
import type { JsonObject } from "./json_value.ts";
import { ApiError } from "./status_errors.ts";
import { s3paCrd } from "../../../src/api/mountpoint_s3_pod_attachment.ts";

const W = { manager: "test" };

function withCluster(fn: (c: Cluster) => Promise<void> | void, options = {}): () => Promise<void> {
  return async () => {
    const c = new Cluster(options);
    try {
      await fn(c);
    } finally {
      c.stop();
    }
  };
}

const settle = () => new Promise((r) => setTimeout(r, 30));
const md = (o: JsonObject) => o.metadata as Record<string, unknown>;
const type = (c: Cluster, group: string, plural: string) =>
  c.registry.all().find((t) => t.group === group && t.plural === plural)!;

function pod(name: string, nodeName?: string): JsonObject {
  return {
    metadata: { name },
    spec: { ...(nodeName ? { nodeName } : {}), containers: [{ name: "c", image: "busybox" }] },
  };
}

Deno.test(
  "Cluster starts with the well-known namespaces",
  withCluster((c) => {
    const ns = type(c, "", "namespaces");
    assert.equal(
      c.get(ns, "", "default").status && (c.get(ns, "", "default").status as JsonObject).phase,
      "Active",
    );
    assert.equal(c.get(ns, "", "kube-system").kind, "Namespace");
  }),
);

Deno.test(
  "Cluster.create() checks the namespace and fills server fields",
  withCluster((c) => {
    const cm = type(c, "", "configmaps");
    assert.throws(
      () => c.create(cm, "nope", { metadata: { name: "a" } }, W),
      /namespaces "nope" not found/,
    );
    const o = c.create(cm, "default", { metadata: { generateName: "x-" }, data: { a: "1" } }, W);
    assert.match(String(md(o).name), /^x-[a-z0-9]{5}$/);
    assert.equal(md(o).generation, undefined);
    assert.deepEqual((md(o).managedFields as JsonObject[])[0]!.manager, "test");
    assert.throws(
      () => c.create(cm, "default", { metadata: { name: "Bad_Name" } }, W),
      (e) => e instanceof ApiError && e.code === 422 && /RFC 1123 subdomain/.test(e.message),
    );
    const dry = c.create(cm, "default", { metadata: { name: "dry" } }, { ...W, dryRun: true });
    assert.equal(md(dry).resourceVersion, undefined);
    assert.throws(() => c.get(cm, "default", "dry"), /not found/);
  }),
);

Deno.test(
  "Cluster keeps status on the main endpoint and spec on /status",
  withCluster((c) => {
    const pods = type(c, "", "pods");
    const p = c.create(pods, "default", pod("p", "n1"), W);
    const main = c.update(pods, "default", "p", { ...p, status: { phase: "Running" } }, W).object;
    assert.equal((main.status as JsonObject).phase, "Pending", "status ignored on main endpoint");
    const st = c.update(
      pods,
      "default",
      "p",
      { ...main, status: { phase: "Running" }, spec: {} },
      W,
      "status",
    );
    assert.equal((st.object.status as JsonObject).phase, "Running");
    assert.equal(
      ((st.object.spec as JsonObject).containers as unknown[]).length,
      1,
      "spec ignored on /status",
    );
  }),
);

Deno.test(
  "Cluster bumps generation on spec changes only (Deployments)",
  withCluster((c) => {
    const deploy = type(c, "apps", "deployments");
    const d = c.create(deploy, "default", { metadata: { name: "d" }, spec: { replicas: 1 } }, W);
    assert.equal(md(d).generation, 1);
    const labelled = c.update(deploy, "default", "d", {
      ...d,
      metadata: { ...md(d), labels: { a: "b" } },
    }, W);
    assert.equal(md(labelled.object).generation, 1);
    const scaled = c.update(
      deploy,
      "default",
      "d",
      { ...labelled.object, spec: { replicas: 2 } },
      W,
    );
    assert.equal(md(scaled.object).generation, 2);
    const same = c.update(deploy, "default", "d", scaled.object, W);
    assert.equal(
      md(same.object).resourceVersion,
      md(scaled.object).resourceVersion,
      "no-op keeps the RV",
    );
  }),
);

Deno.test(
  "Cluster pod deletion: graceful for bound pods, immediate at grace 0 or unbound",
  withCluster((c) => {
    const pods = type(c, "", "pods");
    c.create(pods, "default", pod("unbound"), W);
    assert.equal(c.delete(pods, "default", "unbound").gone, true);
    c.create(pods, "default", pod("bound", "n1"), W);
    const r = c.delete(pods, "default", "bound");
    assert.equal(r.gone, false);
    assert.equal(md(r.object).deletionGracePeriodSeconds, 30);
    assert.ok(md(c.get(pods, "default", "bound")).deletionTimestamp);
    assert.equal(c.delete(pods, "default", "bound", { gracePeriodSeconds: 0 }).gone, true);
    assert.throws(() => c.get(pods, "default", "bound"), /not found/);
    // The status path: a terminating pod whose status says it finished is removed.
    c.create(pods, "default", pod("finished", "n1"), W);
    c.delete(pods, "default", "finished");
    const cur = c.get(pods, "default", "finished");
    c.update(pods, "default", "finished", { ...cur, status: { phase: "Succeeded" } }, W, "status");
    assert.throws(() => c.get(pods, "default", "finished"), /not found/);
  }),
);

Deno.test(
  "Cluster removes gracefully deleted pods itself when podTerminationMs is set",
  withCluster(async (c) => {
    const pods = type(c, "", "pods");
    c.create(pods, "default", pod("auto", "n1"), W);
    c.delete(pods, "default", "auto");
    await settle();
    assert.throws(() => c.get(pods, "default", "auto"), /not found/);
  }, { podTerminationMs: 5 }),
);

Deno.test(
  "Cluster delete preconditions and finalizers",
  withCluster((c) => {
    const cm = type(c, "", "configmaps");
    const o = c.create(cm, "default", { metadata: { name: "f", finalizers: ["x/y"] } }, W);
    assert.throws(
      () => c.delete(cm, "default", "f", { preconditions: { resourceVersion: "1" } }),
      /the ResourceVersion in the precondition \(1\) does not match/,
    );
    const marked = c.delete(cm, "default", "f");
    assert.equal(marked.gone, false);
    const cur = c.get(cm, "default", "f");
    assert.throws(
      () =>
        c.update(cm, "default", "f", {
          ...cur,
          metadata: { ...md(cur), finalizers: ["x/y", "a/b"] },
        }, W),
      /no new finalizers can be added/,
    );
    c.update(cm, "default", "f", { ...cur, metadata: { ...md(cur), finalizers: [] } }, W);
    assert.throws(() => c.get(cm, "default", "f"), /not found/);
    assert.ok(md(o).uid);
  }),
);

Deno.test(
  "Cluster garbage-collects dependents, honours Orphan, drains namespaces",
  withCluster(async (c) => {
    const cm = type(c, "", "configmaps");
    const ns = type(c, "", "namespaces");
    const owner = c.create(cm, "default", { metadata: { name: "owner" } }, W);
    const ref = { apiVersion: "v1", kind: "ConfigMap", name: "owner", uid: md(owner).uid };
    c.create(cm, "default", { metadata: { name: "dep", ownerReferences: [ref] } }, W);
    c.delete(cm, "default", "owner");
    await settle();
    assert.throws(() => c.get(cm, "default", "dep"), /not found/);

    const owner2 = c.create(cm, "default", { metadata: { name: "owner2" } }, W);
    const ref2 = { ...ref, name: "owner2", uid: md(owner2).uid };
    c.create(cm, "default", { metadata: { name: "kept", ownerReferences: [ref2] } }, W);
    c.delete(cm, "default", "owner2", { propagationPolicy: "Orphan" });
    await settle();
    assert.throws(() => c.get(cm, "default", "owner2"), /not found/);
    assert.equal(md(c.get(cm, "default", "kept")).ownerReferences, undefined);

    c.create(ns, "", { metadata: { name: "tmp" } }, W);
    c.create(cm, "tmp", { metadata: { name: "inside" } }, W);
    const del = c.delete(ns, "", "tmp");
    assert.equal((del.object.status as JsonObject).phase, "Terminating");
    assert.throws(
      () => c.create(cm, "tmp", { metadata: { name: "late" } }, W),
      (e) => e instanceof ApiError && e.code === 403,
    );
    await settle();
    await settle();
    assert.throws(() => c.get(ns, "", "tmp"), /not found/);
  }),
);

Deno.test(
  "Cluster serves custom resources once their CRD exists and drops them with it",
  withCluster(async (c) => {
    const crds = type(c, "apiextensions.k8s.io", "customresourcedefinitions");
    const crd = c.create(crds, "", s3paCrd(), W);
    const conds = ((crd.status as JsonObject).conditions as JsonObject[]).map((x) => x.type);
    assert.deepEqual(conds, ["NamesAccepted", "Established"]);
    const s3pa = c.registry.find("s3.csi.scality.com", "v2", "mountpoints3podattachments")!;
    assert.equal(s3pa.namespaced, false);
    assert.deepEqual(s3pa.selectableFields.slice(0, 1), ["spec.nodeName"]);
    assert.throws(
      () => c.create(s3pa, "", { metadata: { name: "x" }, spec: {} }, W),
      (e) => e instanceof ApiError && e.code === 422,
    );
    assert.throws(
      () => c.create(crds, "", { ...s3paCrd(), metadata: { name: "wrong.example.com" } }, W),
      /must be spec.names.plural\+"."\+spec.group/,
    );
    c.delete(crds, "", String(md(crd).name));
    await settle();
    assert.equal(
      c.registry.find("s3.csi.scality.com", "v2", "mountpoints3podattachments"),
      undefined,
    );
  }),
);

Deno.test(
  "Cluster shares events between core/v1 and events.k8s.io/v1",
  withCluster((c) => {
    const core = c.registry.find("", "v1", "events")!;
    const v1 = c.registry.find("events.k8s.io", "v1", "events")!;
    c.create(v1, "default", {
      metadata: { name: "e1" },
      eventTime: "2026-11-25T22:23:00.000000Z",
      reportingController: "s3.csi.scality.com/controller",
      reportingInstance: "ctrl-1",
      action: "Attach",
      reason: "Attached",
      regarding: { kind: "Pod", name: "p", namespace: "default" },
      note: "attached volume",
      type: "Normal",
    }, W);
    const asCore = c.get(core, "default", "e1");
    assert.equal(asCore.message, "attached volume");
    assert.deepEqual((asCore.involvedObject as JsonObject).name, "p");
    assert.equal(c.get(v1, "default", "e1").note, "attached volume");
    assert.throws(
      () => c.create(v1, "default", { metadata: { name: "e2" }, type: "Info" }, W),
      /reportingController: Required value/,
    );
  }),
);
