/**
 * Contract cases for reads: discovery, create/get/update basics, list paging, selectors, watch
 * and Table output. They run unchanged against the emulator and a real kube-apiserver.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  CM,
  cm,
  type ContractCase,
  createPod,
  pod,
  PODS,
  statusOf,
  TABLE_ACCEPT,
} from "./_case_util.ts";

/** Read-side cases. */
export const READ_CASES: readonly ContractCase[] = [
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
];
