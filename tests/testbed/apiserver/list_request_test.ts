import assert from "node:assert/strict";
import { Cluster } from "./cluster.ts";
import type { JsonObject } from "./json_value.ts";
import { listObjects, parseSelection } from "./list_request.ts";
import { ApiError } from "./status_errors.ts";

function setup(): { c: Cluster; list: (query: string) => JsonObject } {
  const c = new Cluster();
  const cm = c.registry.find("", "v1", "configmaps")!;
  for (const n of ["a", "b", "c"]) {
    c.create(cm, "default", { metadata: { name: n, labels: { n } } }, { manager: "t" });
  }
  const list = (query: string) => {
    const q = new URLSearchParams(query);
    return listObjects(c, cm, parseSelection(cm, "default", q), q);
  };
  return { c, list };
}

const code = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return e.code;
    throw e;
  }
  return 200;
};

Deno.test("listObjects() pages with continue tokens at one resourceVersion", () => {
  const { c, list } = setup();
  try {
    const p1 = list("limit=2");
    const m1 = p1.metadata as JsonObject;
    assert.equal((p1.items as unknown[]).length, 2);
    assert.equal(m1.remainingItemCount, 1);
    const p2 = list(`limit=2&continue=${m1.continue}`);
    assert.equal((p2.metadata as JsonObject).resourceVersion, m1.resourceVersion);
    assert.equal((p2.metadata as JsonObject).continue, undefined);
    assert.equal(((p2.items as JsonObject[])[0]!.metadata as JsonObject).name, "c");
    assert.equal(
      (list("limit=1&resourceVersion=0").items as unknown[]).length,
      3,
      "RV=0 ignores limit",
    );
    assert.equal(code(() => list("continue=garbage")), 400);
  } finally {
    c.stop();
  }
});

Deno.test("listObjects() answers resourceVersion errors like the real server", () => {
  const { c, list } = setup();
  try {
    const rv = c.store.resourceVersion;
    assert.equal(code(() => list("resourceVersionMatch=Exact")), 422);
    assert.equal(code(() => list("resourceVersion=0&resourceVersionMatch=Exact")), 422);
    assert.equal(code(() => list("resourceVersion=1&resourceVersionMatch=Foo")), 422);
    assert.equal(code(() => list("resourceVersion=abc")), 500);
    assert.equal(code(() => list(`resourceVersion=${rv + 100}`)), 504);
    assert.equal(code(() => list(`resourceVersion=${rv}&resourceVersionMatch=Exact`)), 200);
    assert.equal(code(() => list(`resourceVersion=${rv - 1}&resourceVersionMatch=Exact`)), 410);
    assert.equal(code(() => list("sendInitialEvents=true")), 422);
    assert.deepEqual(
      (list("labelSelector=n%20in%20(a,c)").items as JsonObject[]).map((i) =>
        (i.metadata as JsonObject).name
      ),
      ["a", "c"],
    );
  } finally {
    c.stop();
  }
});
