/**
 * Cases of the Kubernetes API contract: each runs unchanged against the emulator and against a
 * real kube-apiserver (see `contract_test.ts`). Every case works in its own namespace or on
 * uniquely named cluster objects, so cases are independent.
 *
 * Behaviour the emulator does not reproduce is listed in `docs/apiserver.md`, and the few cases
 * that need an emulator-only hook say so with `emulatorOnly`.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { KubeHttp } from "./kube_http.ts";
import { s3paCrd } from "../../src/api/mountpoint_s3_pod_attachment.ts";

/** Per-case context. */
export interface CaseContext {
  /** A namespace that exists for this case. */
  readonly ns: string;
  /** Unique suffix for cluster-scoped names. */
  readonly id: string;
}

/** One contract case. */
export interface ContractCase {
  /** Test name. */
  readonly name: string;
  /** Body. */
  readonly run: (k: KubeHttp, ctx: CaseContext) => Promise<void>;
}

const CM = (ns: string, name = "") =>
  `/api/v1/namespaces/${ns}/configmaps${name ? `/${name}` : ""}`;
const PODS = (ns: string, name = "") => `/api/v1/namespaces/${ns}/pods${name ? `/${name}` : ""}`;
const TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

function cm(name: string, labels: Record<string, string> = {}, data: Record<string, string> = {}) {
  return { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels }, data };
}

function pod(name: string, nodeName?: string) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      ...(nodeName ? { nodeName } : {}),
      automountServiceAccountToken: false,
      containers: [{ name: "main", image: "busybox:1.36" }],
    },
  };
}

async function poll<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (true) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Create a pod, retrying while the namespace's default ServiceAccount does not exist yet. */
// deno-lint-ignore no-explicit-any
async function createPod(k: KubeHttp, ns: string, body: unknown): Promise<any> {
  return await poll("pod create", async () => {
    const r = await k.request("POST", PODS(ns), { body });
    if (r.status === 201) return r.body;
    if (r.status === 403 && /service account/.test(r.text)) return undefined;
    assert.fail(`create pod: ${r.status} ${r.text}`);
  });
}

function statusOf(
  r: { status: number; body: Record<string, unknown> },
  code: number,
  reason: string,
) {
  assert.equal(r.status, code, JSON.stringify(r.body));
  assert.equal(r.body.kind, "Status");
  assert.equal(r.body.status, "Failure");
  assert.equal(r.body.reason, reason);
  assert.equal(r.body.code, code);
}

/** The contract. */
export const CASES: readonly ContractCase[] = [
  {
    name: "discovery lists core and apps, legacy and aggregated",
    run: async (k) => {
      const version = await k.request("GET", "/version");
      assert.match(version.body.gitVersion, /^v1\.32\./);
      const api = await k.request("GET", "/api");
      assert.deepEqual(api.body.versions, ["v1"]);
      const apis = await k.request("GET", "/apis");
      assert.ok(apis.body.groups.some((g: { name: string }) => g.name === "apps"));
      const v1 = await k.request("GET", "/api/v1");
      const names = v1.body.resources.map((r: { name: string }) => r.name);
      assert.ok(
        names.indexOf("pods") < names.indexOf("pods/status"),
        "main resource before subresource",
      );
      const agg = await k.request("GET", "/apis", {
        accept:
          "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
      });
      assert.match(String(agg.headers["content-type"]), /as=APIGroupDiscoveryList/);
      assert.equal(agg.body.kind, "APIGroupDiscoveryList");
      const oa = await k.request("GET", "/openapi/v3");
      assert.ok(oa.body.paths["api/v1"].serverRelativeURL.startsWith("/openapi/v3/api/v1"));
    },
  },
  {
    name: "create sets server fields; duplicates are 409 AlreadyExists",
    run: async (k, { ns }) => {
      const r = await k.request("POST", CM(ns), { body: cm("a", {}, { x: "1" }) });
      assert.equal(r.status, 201);
      const m = r.body.metadata;
      assert.match(m.uid, /^[0-9a-f-]{36}$/);
      assert.match(m.resourceVersion, /^\d+$/);
      assert.match(m.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.equal(m.generation, undefined, "configmaps have no generation");
      const dup = await k.request("POST", CM(ns), { body: cm("a") });
      statusOf(dup, 409, "AlreadyExists");
      assert.equal(dup.body.message, 'configmaps "a" already exists');
      assert.deepEqual(dup.body.details, { name: "a", kind: "configmaps" });
      const gen = await k.request("POST", CM(ns), { body: { metadata: { generateName: "gen-" } } });
      assert.equal(gen.status, 201);
      assert.match(gen.body.metadata.name, /^gen-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    },
  },
  {
    name: "get of a missing object is a 404 Status",
    run: async (k, { ns }) => {
      const r = await k.request("GET", CM(ns, "nope"));
      statusOf(r, 404, "NotFound");
      assert.equal(r.body.message, 'configmaps "nope" not found');
      const missingNs = await k.request("POST", CM(`missing-${crypto.randomUUID().slice(0, 8)}`), {
        body: cm("x"),
      });
      statusOf(missingNs, 404, "NotFound");
      assert.match(missingNs.body.message, /^namespaces "missing-.*" not found$/);
    },
  },
  {
    name: "update with a stale resourceVersion is 409 Conflict; no-op patches keep the RV",
    run: async (k, { ns }) => {
      const created = (await k.request("POST", CM(ns), { body: cm("u", {}, { a: "1" }) })).body;
      const patched = await k.request("PATCH", CM(ns, "u"), {
        body: { data: { a: "2" } },
        contentType: "application/merge-patch+json",
      });
      assert.equal(patched.status, 200);
      const same = await k.request("PATCH", CM(ns, "u"), {
        body: { data: { a: "2" } },
        contentType: "application/merge-patch+json",
      });
      assert.equal(same.body.metadata.resourceVersion, patched.body.metadata.resourceVersion);
      const stale = await k.request("PUT", CM(ns, "u"), { body: { ...created, data: { a: "3" } } });
      statusOf(stale, 409, "Conflict");
      assert.equal(
        stale.body.message,
        'Operation cannot be fulfilled on configmaps "u": the object has been modified; please apply your changes to the latest version and try again',
      );
      const { resourceVersion: _, ...meta } = created.metadata;
      const unconditional = await k.request("PUT", CM(ns, "u"), {
        body: { ...created, metadata: meta, data: { a: "4" } },
      });
      assert.equal(unconditional.status, 200);
    },
  },
  {
    name: "list pages with limit and continue at one resourceVersion",
    run: async (k, { ns }) => {
      for (const n of ["p1", "p2", "p3"]) await k.request("POST", CM(ns), { body: cm(n) });
      const first = await k.request("GET", `${CM(ns)}?limit=1`);
      assert.equal(first.body.items.length, 1);
      assert.equal(first.body.metadata.remainingItemCount, 2);
      assert.equal(first.body.items[0].kind, undefined, "built-in list items carry no kind");
      const second = await k.request(
        "GET",
        `${CM(ns)}?limit=1&continue=${encodeURIComponent(first.body.metadata.continue)}`,
      );
      assert.equal(second.body.metadata.resourceVersion, first.body.metadata.resourceVersion);
      assert.equal(second.body.items[0].metadata.name, "p2");
      const third = await k.request(
        "GET",
        `${CM(ns)}?limit=1&continue=${encodeURIComponent(second.body.metadata.continue)}`,
      );
      assert.equal(third.body.items[0].metadata.name, "p3");
      assert.equal(third.body.metadata.continue, undefined);
      const both = await k.request(
        "GET",
        `${CM(ns)}?limit=1&resourceVersion=1&continue=${first.body.metadata.continue}`,
      );
      statusOf(both, 400, "BadRequest");
      const noMatch = await k.request("GET", `${CM(ns)}?resourceVersionMatch=Exact`);
      statusOf(noMatch, 422, "Invalid");
    },
  },
  {
    name: "label selectors support =, !=, in, notin, exists and !exists",
    run: async (k, { ns }) => {
      await k.request("POST", CM(ns), { body: cm("prod", { env: "prod", tier: "1" }) });
      await k.request("POST", CM(ns), { body: cm("dev", { env: "dev" }) });
      await k.request("POST", CM(ns), { body: cm("none") });
      const names = async (sel: string) =>
        (await k.request("GET", `${CM(ns)}?labelSelector=${encodeURIComponent(sel)}`)).body.items
          .map((i: { metadata: { name: string } }) => i.metadata.name).filter((n: string) =>
            n !== "kube-root-ca.crt"
          )
          .sort();
      assert.deepEqual(await names("env=prod"), ["prod"]);
      assert.deepEqual(await names("env!=prod"), ["dev", "none"]);
      assert.deepEqual(await names("env in (prod,dev)"), ["dev", "prod"]);
      assert.deepEqual(await names("env notin (prod)"), ["dev", "none"]);
      assert.deepEqual(await names("tier"), ["prod"]);
      assert.deepEqual(await names("!env"), ["none"]);
      const bad = await k.request(
        "GET",
        `${CM(ns)}?labelSelector=${encodeURIComponent("env in (prod")}`,
      );
      statusOf(bad, 400, "BadRequest");
    },
  },
  {
    name: "pod field selectors: spec.nodeName and status.phase; unknown labels are 400",
    run: async (k, { ns }) => {
      await createPod(k, ns, pod("on-a", "node-a"));
      await createPod(k, ns, pod("on-b", "node-b"));
      const sel = async (fs: string) =>
        (await k.request("GET", `${PODS(ns)}?fieldSelector=${encodeURIComponent(fs)}`)).body.items
          .map((i: { metadata: { name: string } }) => i.metadata.name).sort();
      assert.deepEqual(await sel("spec.nodeName=node-a"), ["on-a"]);
      assert.deepEqual(await sel("spec.nodeName!=node-a,status.phase=Pending"), ["on-b"]);
      const bad = await k.request("GET", `${PODS(ns)}?fieldSelector=spec.containers.image%3Dx`);
      statusOf(bad, 400, "BadRequest");
      assert.match(bad.body.message, /field label not supported: spec.containers.image/);
      const cmBad = await k.request("GET", `${CM(ns)}?fieldSelector=data.a%3D1`);
      statusOf(cmBad, 400, "BadRequest");
      for (const n of ["on-a", "on-b"]) {
        await k.request("DELETE", `${PODS(ns, n)}?gracePeriodSeconds=0`);
      }
    },
  },
  {
    name: "watch from a resourceVersion streams ADDED, MODIFIED and DELETED",
    run: async (k, { ns }) => {
      const rv = (await k.request("GET", CM(ns))).body.metadata.resourceVersion;
      await k.request("POST", CM(ns), { body: cm("w", {}, { x: "1" }) });
      await k.request("PATCH", CM(ns, "w"), {
        body: { data: { x: "2" } },
        contentType: "application/merge-patch+json",
      });
      await k.request("DELETE", CM(ns, "w"));
      const { status, events } = await k.watch(
        `${CM(ns)}?watch=true&resourceVersion=${rv}`,
        (evs) => evs.some((e) => e.type === "DELETED"),
      );
      assert.equal(status, 200);
      const mine = events.filter((e) => e.object.metadata.name === "w");
      assert.deepEqual(mine.map((e) => e.type), ["ADDED", "MODIFIED", "DELETED"]);
      assert.equal(mine[0].object.kind, "ConfigMap");
      const rvs = mine.map((e) => Number(e.object.metadata.resourceVersion));
      assert.ok(rvs[2]! > rvs[1]!, "DELETED carries the deletion resourceVersion");
    },
  },
  {
    name: "watch with a selector turns leaving objects into DELETED; bookmarks on request",
    run: async (k, { ns }) => {
      const rv = (await k.request("GET", CM(ns))).body.metadata.resourceVersion;
      await k.request("POST", CM(ns), { body: cm("sel", { env: "prod" }) });
      await k.request("PATCH", CM(ns, "sel"), {
        body: { metadata: { labels: { env: "dev" } } },
        contentType: "application/merge-patch+json",
      });
      const { events } = await k.watch(
        `${CM(ns)}?watch=true&resourceVersion=${rv}&labelSelector=env%3Dprod`,
        (evs) => evs.some((e) => e.type === "DELETED"),
      );
      assert.deepEqual(events.map((e) => e.type), ["ADDED", "DELETED"]);
      assert.equal(events[1].object.metadata.labels.env, "prod", "previous state");
      const bm = await k.watch(
        `${CM(ns)}?watch=true&resourceVersion=0&allowWatchBookmarks=true&labelSelector=none%3Dnone`,
        (evs) => evs.some((e) => e.type === "BOOKMARK"),
        { timeoutMs: 5000 },
      );
      const bookmark = bm.events.find((e) => e.type === "BOOKMARK");
      assert.ok(bookmark, "initial-events-end bookmark");
      assert.equal(bookmark.object.metadata.annotations["k8s.io/initial-events-end"], "true");
    },
  },
  {
    name: "patch types: JSON patch, merge patch, strategic merge, and their errors",
    run: async (k, { ns }) => {
      await createPod(k, ns, {
        ...pod("pp"),
        spec: {
          automountServiceAccountToken: false,
          containers: [{ name: "main", image: "busybox:1.36" }, {
            name: "side",
            image: "busybox:1.36",
          }],
        },
      });
      const smp = await k.request("PATCH", PODS(ns, "pp"), {
        body: { spec: { containers: [{ name: "side", image: "busybox:1.37" }] } },
        contentType: "application/strategic-merge-patch+json",
      });
      assert.equal(smp.status, 200, smp.text);
      assert.deepEqual(smp.body.spec.containers.map((c: { image: string }) => c.image), [
        "busybox:1.36",
        "busybox:1.37",
      ]);
      const merge = await k.request("PATCH", PODS(ns, "pp"), {
        body: { spec: { containers: [{ name: "side", image: "busybox:1.37" }] } },
        contentType: "application/merge-patch+json",
      });
      statusOf(merge, 422, "Invalid");
      const jp = await k.request("PATCH", PODS(ns, "pp"), {
        body: [
          { op: "replace", path: "/spec/containers/1/image", value: "busybox:1.35" },
          { op: "add", path: "/metadata/labels", value: { x: "y" } },
        ],
        contentType: "application/json-patch+json",
      });
      assert.equal(jp.status, 200, jp.text);
      assert.equal(jp.body.spec.containers[1].image, "busybox:1.35");
      const test = await k.request("PATCH", PODS(ns, "pp"), {
        body: [{ op: "test", path: "/metadata/labels/x", value: "z" }],
        contentType: "application/json-patch+json",
      });
      statusOf(test, 422, "Invalid");
      const notArray = await k.request("PATCH", PODS(ns, "pp"), {
        body: { metadata: {} },
        contentType: "application/json-patch+json",
      });
      statusOf(notArray, 400, "BadRequest");
      const media = await k.request("PATCH", PODS(ns, "pp"), {
        body: {},
        contentType: "application/json",
      });
      statusOf(media, 415, "UnsupportedMediaType");
      await k.request("DELETE", `${PODS(ns, "pp")}?gracePeriodSeconds=0`);
    },
  },
  {
    name: "server-side apply: create, idempotent re-apply, conflict, force",
    run: async (k, { ns }) => {
      const apply = (manager: string, data: Record<string, string>, force = false) =>
        k.request(
          "PATCH",
          `${CM(ns, "ssa")}?fieldManager=${manager}${force ? "&force=true" : ""}`,
          {
            body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "ssa" }, data },
            contentType: "application/apply-patch+yaml",
          },
        );
      const created = await apply("deployer", { k1: "v1" });
      assert.equal(created.status, 201, created.text);
      const again = await apply("deployer", { k1: "v1" });
      assert.equal(again.status, 200);
      assert.equal(again.body.metadata.resourceVersion, created.body.metadata.resourceVersion);
      const conflict = await apply("other", { k1: "changed" });
      statusOf(conflict, 409, "Conflict");
      assert.equal(
        conflict.body.message,
        'Apply failed with 1 conflict: conflict with "deployer": .data.k1',
      );
      assert.equal(conflict.body.details.causes[0].reason, "FieldManagerConflict");
      const shared = await apply("other", { k1: "v1", k2: "x" });
      assert.equal(shared.status, 200);
      const forced = await apply("other", { k1: "forced", k2: "x" }, true);
      assert.equal(forced.body.data.k1, "forced");
      const dropped = await apply("deployer", { k3: "v3" });
      assert.deepEqual(dropped.body.data, { k1: "forced", k2: "x", k3: "v3" });
      const noManager = await k.request("PATCH", CM(ns, "ssa"), {
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "ssa" } },
        contentType: "application/apply-patch+yaml",
      });
      statusOf(noManager, 422, "Invalid");
    },
  },
  {
    name: "finalizers hold a deleted object until they are removed",
    run: async (k, { ns }) => {
      const body = { ...cm("fin"), metadata: { name: "fin", finalizers: ["example.com/hold"] } };
      await k.request("POST", CM(ns), { body });
      const del = await k.request("DELETE", CM(ns, "fin"));
      assert.equal(del.status, 200);
      assert.ok(del.body.metadata.deletionTimestamp);
      assert.equal(del.body.metadata.deletionGracePeriodSeconds, 0);
      const add = await k.request("PATCH", CM(ns, "fin"), {
        body: { metadata: { finalizers: ["example.com/hold", "x/y"] } },
        contentType: "application/merge-patch+json",
      });
      statusOf(add, 422, "Invalid");
      const release = await k.request("PATCH", CM(ns, "fin"), {
        body: { metadata: { finalizers: null } },
        contentType: "application/merge-patch+json",
      });
      assert.equal(release.status, 200);
      await poll(
        "object gone",
        async () => (await k.request("GET", CM(ns, "fin"))).status === 404 || undefined,
      );
    },
  },
  {
    name: "pod deletion: unbound pods go at once, bound pods stay Terminating until grace 0",
    run: async (k, { ns }) => {
      await createPod(k, ns, pod("unbound"));
      const del = await k.request("DELETE", PODS(ns, "unbound"));
      assert.equal(del.status, 200);
      assert.equal(del.body.kind, "Pod", "pods return the object");
      assert.equal((await k.request("GET", PODS(ns, "unbound"))).status, 404);
      await createPod(k, ns, pod("bound", "node-a"));
      const graceful = await k.request("DELETE", PODS(ns, "bound"));
      assert.equal(graceful.body.metadata.deletionGracePeriodSeconds, 30);
      assert.equal((await k.request("GET", PODS(ns, "bound"))).status, 200);
      const force = await k.request("DELETE", `${PODS(ns, "bound")}?gracePeriodSeconds=0`);
      assert.equal(force.status, 200);
      assert.equal((await k.request("GET", PODS(ns, "bound"))).status, 404);
    },
  },
  {
    name: "ownerReference garbage collection deletes dependents in the background",
    run: async (k, { ns }) => {
      const owner = (await k.request("POST", CM(ns), { body: cm("owner") })).body;
      const ref = { apiVersion: "v1", kind: "ConfigMap", name: "owner", uid: owner.metadata.uid };
      await k.request("POST", CM(ns), {
        body: { ...cm("dependent"), metadata: { name: "dependent", ownerReferences: [ref] } },
      });
      const del = await k.request("DELETE", CM(ns, "owner"), {
        body: { propagationPolicy: "Background" },
      });
      assert.equal(del.body.status, "Success");
      assert.deepEqual(del.body.details, {
        name: "owner",
        kind: "configmaps",
        uid: owner.metadata.uid,
      });
      await poll(
        "dependent collected",
        async () => (await k.request("GET", CM(ns, "dependent"))).status === 404 || undefined,
        30_000,
      );
    },
  },
  {
    name: "Table output for kubectl get",
    run: async (k, { ns }) => {
      await k.request("POST", CM(ns), { body: cm("t", {}, { a: "1", b: "2" }) });
      const r = await k.request("GET", CM(ns), { accept: TABLE_ACCEPT });
      assert.equal(r.body.kind, "Table");
      assert.deepEqual(r.body.columnDefinitions.map((c: { name: string }) => c.name), [
        "Name",
        "Data",
        "Age",
      ]);
      const row = r.body.rows.find((x: { cells: unknown[] }) => x.cells[0] === "t");
      assert.equal(row.cells[1], 2);
      assert.equal(row.object.kind, "PartialObjectMetadata");
    },
  },
  {
    name: "Lease MicroTime needs six fractional digits; PUT creates leases",
    run: async (k, { ns }) => {
      const lease = (renewTime: string) => ({
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: "l" },
        spec: { holderIdentity: "me", leaseDurationSeconds: 15, renewTime },
      });
      const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
      const bad = await k.request("POST", path, { body: lease("2026-11-25T22:22:59.646Z") });
      statusOf(bad, 400, "BadRequest");
      assert.match(bad.body.message, /cannot parse "\.646Z" as "\.000000"/);
      const put = await k.request("PUT", `${path}/l`, {
        body: lease("2026-11-25T22:22:59.646000Z"),
      });
      assert.equal(put.status, 201, put.text);
    },
  },
  {
    name: "the s3pa CRD serves validated custom resources with selectable fields",
    run: async (k, { id }) => {
      const crd = s3paCrd();
      const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
      const name = (crd.metadata as { name: string }).name;
      const existing = await k.request("GET", `${crdPath}/${name}`);
      if (existing.status === 404) {
        const r = await k.request("POST", crdPath, { body: crd });
        assert.equal(r.status, 201, r.text);
      }
      const base = "/apis/s3.csi.scality.com/v2/mountpoints3podattachments";
      await poll(
        "CR endpoint",
        async () => (await k.request("GET", base)).status === 200 || undefined,
      );
      const spec = {
        nodeName: "node-a",
        persistentVolumeName: "pv",
        volumeID: "vol",
        mountOptions: "",
        workloadFSGroup: "",
        authenticationSource: "driver",
        mountpointS3PodAttachments: {},
      };
      const body = (n: string, s: Record<string, unknown>) => ({
        apiVersion: "s3.csi.scality.com/v2",
        kind: "MountpointS3PodAttachment",
        metadata: { name: n },
        spec: s,
      });
      const ok = await k.request("POST", base, { body: body(`ok-${id}`, spec) });
      assert.equal(ok.status, 201, ok.text);
      assert.equal(ok.body.metadata.generation, 1);
      const bad = await k.request("POST", base, {
        body: body(`bad-${id}`, { ...spec, nodeName: 5, authenticationSource: "x" }),
      });
      statusOf(bad, 422, "Invalid");
      const fields = bad.body.details.causes.map((c: { field: string }) => c.field).sort();
      assert.deepEqual(fields, ["spec.authenticationSource", "spec.nodeName"]);
      const sel = await k.request("GET", `${base}?fieldSelector=spec.nodeName%3Dnode-a`);
      assert.ok(
        sel.body.items.some((i: { metadata: { name: string } }) => i.metadata.name === `ok-${id}`),
      );
      assert.equal(sel.body.items[0].kind, "MountpointS3PodAttachment", "CR list items carry kind");
      const unsupported = await k.request("GET", `${base}?fieldSelector=spec.secretName%3Dx`);
      statusOf(unsupported, 400, "BadRequest");
      const smp = await k.request("PATCH", `${base}/ok-${id}`, {
        body: { spec: { nodeName: "node-b" } },
        contentType: "application/strategic-merge-patch+json",
      });
      statusOf(smp, 415, "UnsupportedMediaType");
      const merge = await k.request("PATCH", `${base}/ok-${id}`, {
        body: { spec: { nodeName: "node-b" } },
        contentType: "application/merge-patch+json",
      });
      assert.equal(merge.body.metadata.generation, 2);
      const table = await k.request("GET", base, { accept: TABLE_ACCEPT });
      assert.deepEqual(table.body.columnDefinitions.map((c: { name: string }) => c.name), [
        "Name",
        "Node",
        "PV Name",
        "Mount Options",
        "Age",
      ]);
      const del = await k.request("DELETE", `${base}/ok-${id}`);
      assert.equal(del.body.details.group, "s3.csi.scality.com");
    },
  },
];
