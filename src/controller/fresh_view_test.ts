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
