import assert from "node:assert/strict";
import { recordUpdate, serverSideApply } from "./apply.ts";
import { ApiError } from "./status_errors.ts";
import type { JsonObject } from "./json_value.ts";
import { fieldSetOf, fromFieldsV1, toFieldsV1 } from "./field_set.ts";

const listKeys = (names: readonly string[]) => {
  const last = names[names.length - 1];
  return last === "containers" ? ["name"] : last === "finalizers" ? [] : undefined;
};
const opts = (manager: string, force = false) => ({
  manager,
  force,
  apiVersion: "v1",
  now: "2026-01-01T00:00:00Z",
  listKeys,
});
const cm = (data: Record<string, string>): JsonObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "c", namespace: "d" },
  data,
});

Deno.test("serverSideApply() twice with the same config is a no-op", () => {
  const first = serverSideApply(undefined, cm({ k1: "v1" }), opts("kubectl"));
  const second = serverSideApply(first, cm({ k1: "v1" }), {
    ...opts("kubectl"),
    now: "2027-01-01T00:00:00Z",
  });
  assert.deepEqual(second, first);
  assert.deepEqual((first.metadata as JsonObject).managedFields, [{
    manager: "kubectl",
    operation: "Apply",
    apiVersion: "v1",
    time: "2026-01-01T00:00:00Z",
    fieldsType: "FieldsV1",
    fieldsV1: { "f:data": { "f:k1": {} } },
  }]);
});

Deno.test("serverSideApply() conflicts on another manager's field unless forced", () => {
  const a = serverSideApply(undefined, cm({ k1: "v1", k2: "x" }), opts("kubectl"));
  assert.throws(
    () => serverSideApply(a, cm({ k1: "other" }), opts("deployer")),
    (e) =>
      e instanceof ApiError && e.code === 409 &&
      e.message === 'Apply failed with 1 conflict: conflict with "kubectl": .data.k1',
  );
  const shared = serverSideApply(a, cm({ k1: "v1" }), opts("deployer"));
  assert.equal(
    (shared.metadata as JsonObject & { managedFields: unknown[] }).managedFields.length,
    2,
  );
  const forced = serverSideApply(a, cm({ k1: "other" }), opts("deployer", true));
  assert.deepEqual(forced.data, { k1: "other", k2: "x" });
});

Deno.test("serverSideApply() removes fields the manager stopped applying", () => {
  let obj = serverSideApply(undefined, cm({ k1: "a" }), opts("deployer"));
  obj = serverSideApply(obj, cm({ k1: "a", k2: "b" }), opts("other"));
  obj = serverSideApply(obj, cm({ k3: "c" }), opts("deployer"));
  assert.deepEqual(obj.data, { k1: "a", k2: "b", k3: "c" }, "k1 is still owned by other");
  obj = serverSideApply(obj, cm({ k4: "d" }), opts("deployer"));
  assert.deepEqual(obj.data, { k1: "a", k2: "b", k4: "d" });
});

Deno.test("serverSideApply() merges list-maps by key and drops removed items", () => {
  const pod = (containers: JsonObject[]): JsonObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p" },
    spec: { containers },
  });
  let obj = serverSideApply(
    undefined,
    pod([{ name: "a", image: "1" }, { name: "b", image: "1" }]),
    opts("m"),
  );
  obj = serverSideApply(obj, pod([{ name: "a", image: "2" }]), opts("m"));
  assert.deepEqual((obj.spec as JsonObject).containers, [{ name: "a", image: "2" }]);
});

Deno.test("recordUpdate() moves changed fields to the updater", () => {
  const applied = serverSideApply(undefined, cm({ a: "1", b: "2" }), opts("kubectl"));
  const next = structuredClone(applied);
  (next.data as JsonObject).a = "changed";
  recordUpdate(applied, next, { ...opts("curl") });
  const entries = (next.metadata as JsonObject).managedFields as JsonObject[];
  assert.deepEqual(entries.map((e) => [e.manager, e.operation, e.fieldsV1]), [
    ["kubectl", "Apply", { "f:data": { "f:b": {} } }],
    ["curl", "Update", { "f:data": { "f:a": {} } }],
  ]);
  assert.throws(
    () => serverSideApply(next, cm({ a: "x", b: "2" }), opts("kubectl")),
    /conflicts with "curl" using v1:\n- \.data\.a/,
  );
});

Deno.test("toFieldsV1() and fromFieldsV1() round-trip list-map items", () => {
  const set = fieldSetOf({
    spec: { containers: [{ name: "a", image: "x" }] },
    metadata: { finalizers: ["f"] },
  }, listKeys);
  const wire = toFieldsV1(set);
  assert.deepEqual(wire, {
    "f:metadata": { "f:finalizers": { 'v:"f"': {} } },
    "f:spec": { "f:containers": { 'k:{"name":"a"}': { ".": {}, "f:name": {}, "f:image": {} } } },
  });
  assert.deepEqual([...fromFieldsV1(wire)].sort(), [...set].sort());
});
