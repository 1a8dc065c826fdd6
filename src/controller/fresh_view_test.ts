import assert from "node:assert/strict";
import { FreshView, newerOrEqual } from "./fresh_view.ts";
import type { KubeObject } from "../kube/client.ts";

function cacheOf(objs: Map<string, KubeObject>) {
  return { get: (k: string) => objs.get(k), list: () => [...objs.values()] };
}
const obj = (name: string, rv: string): KubeObject => ({ metadata: { name, resourceVersion: rv } });

Deno.test("FreshView prefers a recent write until the cache catches up", () => {
  const objs = new Map<string, KubeObject>();
  const view = new FreshView(cacheOf(objs));
  view.wrote(obj("a", "5"));
  assert.equal(view.get("a")?.metadata?.resourceVersion, "5", "created but not cached yet");
  objs.set("a", obj("a", "4"));
  assert.equal(view.get("a")?.metadata?.resourceVersion, "5", "cache is older");
  objs.set("a", obj("a", "6"));
  assert.equal(view.get("a")?.metadata?.resourceVersion, "6", "cache caught up");
  assert.equal(view.pending, 0);
});

Deno.test("FreshView remembers deletions and expires entries", () => {
  let now = 0;
  const objs = new Map<string, KubeObject>([["a", obj("a", "1")]]);
  const view = new FreshView(cacheOf(objs), 100, () => now);
  view.deleted("a");
  assert.equal(view.get("a"), undefined);
  now = 101;
  assert.equal(view.get("a")?.metadata?.name, "a", "expired: the cache wins again");
});

Deno.test("newerOrEqual() compares numeric resourceVersions numerically", () => {
  assert.ok(newerOrEqual("10", "9"));
  assert.ok(!newerOrEqual("9", "10"));
  assert.ok(newerOrEqual("abc", "abc"));
  assert.ok(!newerOrEqual(undefined, "1"));
});

Deno.test("FreshView keeps a write while the informer lags, however long, and trusts the cache once the informer has seen past it", () => {
  let now = 0;
  const objs = new Map<string, KubeObject>();
  const informer = { resourceVersion: "3" };
  const cache = {
    get: (k: string) => objs.get(k),
    list: () => [...objs.values()],
    get resourceVersion() {
      return informer.resourceVersion;
    },
  };
  const view = new FreshView(cache, 100, () => now);
  view.wrote(obj("mp", "5"));
  now = 10_000; // far past the TTL: an informer lagging behind a burst of writes
  assert.equal(view.get("mp")?.metadata?.resourceVersion, "5", "not forgotten while lagging");
  informer.resourceVersion = "4";
  assert.equal(view.get("mp")?.metadata?.resourceVersion, "5", "still behind the write");
  informer.resourceVersion = "9"; // the informer saw every event up to 9, and mp is not cached
  assert.equal(view.get("mp"), undefined, "deleted after our write");
  assert.equal(view.pending, 0);
});

Deno.test("FreshView expires by time only what it cannot compare", () => {
  let now = 0;
  const objs = new Map<string, KubeObject>([["a", obj("a", "old")]]);
  const view = new FreshView(cacheOf(objs), 100, () => now);
  view.wrote(obj("a", "new-opaque"));
  assert.equal(view.get("a")?.metadata?.resourceVersion, "new-opaque");
  now = 101;
  assert.equal(view.get("a")?.metadata?.resourceVersion, "old");
});
