import assert from "node:assert/strict";
import { ObjectStore } from "./object_store.ts";
import { HistoryExpiredError, type StoreEvent } from "./watch_hub.ts";

Deno.test("ObjectStore uses one increasing resourceVersion across types", () => {
  const s = new ObjectStore();
  const a = s.create("/configmaps", { metadata: { name: "a", namespace: "d" } });
  const b = s.create("/pods", { metadata: { name: "b", namespace: "d" } });
  assert.ok(
    Number((b.metadata as { resourceVersion: string }).resourceVersion) >
      Number((a.metadata as { resourceVersion: string }).resourceVersion),
  );
  assert.equal(s.list("/configmaps", "d").length, 1);
  assert.equal(s.list("/configmaps", "other").length, 0);
  assert.equal(s.get("/pods", "d", "b")?.metadata !== undefined, true);
});

Deno.test("ObjectStore publishes events with the deletion resourceVersion and replays history", () => {
  const s = new ObjectStore();
  const seen: StoreEvent[] = [];
  const sub = s.hub.subscribe("/cm", (e) => seen.push(e), () => {});
  const start = s.resourceVersion;
  s.create("/cm", { metadata: { name: "a", namespace: "d" } });
  s.update("/cm", { metadata: { name: "a", namespace: "d" }, data: { x: "1" } });
  const gone = s.remove("/cm", "d", "a");
  sub.close();
  assert.deepEqual(seen.map((e) => e.type), ["ADDED", "MODIFIED", "DELETED"]);
  assert.equal(
    (gone!.metadata as { resourceVersion: string }).resourceVersion,
    String(s.resourceVersion),
  );
  assert.equal(s.hub.replay("/cm", start).length, 3);
  assert.equal(s.hub.replay("/cm", start + 2).length, 1);
  s.hub.compact(s.resourceVersion);
  assert.throws(() => s.hub.replay("/cm", start), HistoryExpiredError);
  assert.deepEqual(s.hub.replay("/cm", s.resourceVersion), []);
});

Deno.test("WatchHub drops the oldest events beyond its capacity", () => {
  const s = new ObjectStore({ historySize: 2 });
  const start = s.resourceVersion;
  for (const n of ["a", "b", "c"]) s.create("/cm", { metadata: { name: n, namespace: "d" } });
  assert.throws(() => s.hub.replay("/cm", start), /too old resource version/);
  assert.equal(s.hub.replay("/cm", start + 1).length, 2);
});

Deno.test("WatchHub.closeAll() ends every subscription", () => {
  const s = new ObjectStore();
  let closed = 0;
  s.hub.subscribe("/cm", () => {}, () => closed++);
  s.hub.subscribe("/pods", () => {}, () => closed++);
  s.hub.closeAll();
  assert.equal(closed, 2);
  assert.equal(s.hub.size, 0);
});
