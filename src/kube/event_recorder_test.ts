import assert from "node:assert/strict";
import type { KubeObject } from "./client.ts";
import { ApiError } from "./errors.ts";
import { ApiEventRecorder, DEDUPE_WINDOW_MS } from "./event_recorder.ts";
import { FakeKubeClient } from "./fake_client.ts";
import { EVENTS } from "./resources.ts";

interface Event extends KubeObject {
  reason: string;
  message: string;
  type: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  involvedObject: Record<string, unknown>;
  source: Record<string, unknown>;
  reportingComponent: string;
  reportingInstance: string;
}

const POD = (uid: string, name = "web-0"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "shop", uid, resourceVersion: "7" },
});

function setup() {
  const client = new FakeKubeClient();
  let t = Date.parse("2030-01-01T00:00:00Z");
  const recorder = new ApiEventRecorder(client, "s3-csi-controller", "ctrl-1", undefined, () => t);
  const events = () => client.objects<Event>(EVENTS);
  return { client, recorder, events, advance: (ms: number) => (t += ms) };
}

Deno.test("events: the first occurrence creates a core/v1 Event kubectl describe shows", async () => {
  const { recorder, events } = setup();
  await recorder.record(
    POD("u1"),
    "Warning",
    "PersistentVolumeClaimUnbound",
    "claim x is not bound",
  );
  const [e] = events();
  assert.equal(events().length, 1);
  assert.equal(e!.metadata?.namespace, "shop");
  assert.match(e!.metadata?.name ?? "", /^web-0\.[0-9a-f]+$/);
  assert.deepEqual(e!.involvedObject, {
    apiVersion: "v1",
    kind: "Pod",
    name: "web-0",
    namespace: "shop",
    uid: "u1",
    resourceVersion: "7",
  });
  assert.deepEqual(
    [e!.type, e!.reason, e!.message, e!.count],
    ["Warning", "PersistentVolumeClaimUnbound", "claim x is not bound", 1],
  );
  assert.deepEqual(e!.source, { component: "s3-csi-controller" });
  assert.equal(e!.reportingComponent, "s3-csi-controller");
  assert.equal(e!.reportingInstance, "ctrl-1");
  assert.equal(e!.firstTimestamp, "2030-01-01T00:00:00Z");
});

Deno.test("events: repeats within the window bump count and lastTimestamp of the same Event", async () => {
  const { client, recorder, events, advance } = setup();
  for (let i = 0; i < 4; i++) {
    await recorder.record(POD("u1"), "Warning", "R", "same");
    advance(60_000);
  }
  assert.equal(events().length, 1, "one Event for four occurrences");
  const e = events()[0]!;
  assert.equal(e.count, 4);
  assert.equal(e.firstTimestamp, "2030-01-01T00:00:00Z");
  assert.equal(e.lastTimestamp, "2030-01-01T00:03:00Z");
  // One create, then three patches (the fake counts a patch as an update).
  assert.deepEqual(client.writes, { create: 1, update: 3 });
});

Deno.test("events: another message, reason, type or object is another Event", async () => {
  const { recorder, events } = setup();
  await recorder.record(POD("u1"), "Warning", "R", "m1");
  await recorder.record(POD("u1"), "Warning", "R", "m2");
  await recorder.record(POD("u1"), "Warning", "R2", "m1");
  await recorder.record(POD("u1"), "Normal", "R", "m1");
  await recorder.record(POD("u2", "web-1"), "Warning", "R", "m1");
  assert.equal(events().length, 5);
  assert.ok(events().every((e) => e.count === 1));
});

Deno.test("events: after the window a repeat starts a new Event", async () => {
  const { recorder, events, advance } = setup();
  await recorder.record(POD("u1"), "Warning", "R", "m");
  advance(DEDUPE_WINDOW_MS);
  await recorder.record(POD("u1"), "Warning", "R", "m");
  assert.equal(events().length, 2);
});

Deno.test("events: an Event deleted on the server (expired) is created again, not lost", async () => {
  const { client, recorder, events } = setup();
  await recorder.record(POD("u1"), "Warning", "R", "m");
  await client.delete(EVENTS, events()[0]!.metadata!.name!, "shop");
  await recorder.record(POD("u1"), "Warning", "R", "m");
  assert.equal(events().length, 1);
  assert.equal(events()[0]!.count, 1);
});

Deno.test("events: a failed create is logged, not thrown, and the next occurrence tries again", async () => {
  const { client, recorder, events } = setup();
  client.failNext = (verb, r) =>
    verb === "create" && r === EVENTS ? new ApiError(500, "InternalError", "etcd busy") : undefined;
  await recorder.record(POD("u1"), "Warning", "R", "m");
  client.failNext = undefined;
  assert.equal(events().length, 0);
  await recorder.record(POD("u1"), "Warning", "R", "m");
  assert.equal(events().length, 1);
  assert.equal(events()[0]!.count, 1);
});

Deno.test("events: forget(uid) drops the deduplication of a deleted object", async () => {
  const { recorder, events } = setup();
  await recorder.record(POD("u1"), "Warning", "R", "m");
  recorder.forget("u1");
  await recorder.record(POD("u1"), "Warning", "R", "m");
  assert.equal(events().length, 2);
});

Deno.test("events: no URL user or password in an Event's message", async () => {
  const { recorder, events } = setup();
  await recorder.record(
    POD("u1"),
    "Warning",
    "ProvisioningFailed",
    "S3 unreachable through http://proxyuser:proxypass@proxy.corp:3128",
  );
  assert.equal(events()[0]!.message, "S3 unreachable through http://[REDACTED]@proxy.corp:3128");
});
