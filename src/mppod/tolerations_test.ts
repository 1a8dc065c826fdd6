import assert from "node:assert/strict";
import {
  coversTolerations,
  executeTolerations,
  mountpointTolerations,
  SCHEDULING_TOLERATIONS,
} from "./tolerations.ts";

const NOT_READY = {
  key: "node.kubernetes.io/not-ready",
  operator: "Exists",
  effect: "NoExecute",
  tolerationSeconds: 300,
};

Deno.test("executeTolerations(): NoExecute and any-effect tolerations, normalized, without seconds", () => {
  assert.deepEqual(
    executeTolerations([
      NOT_READY,
      { key: "dedicated", operator: "Equal", value: "db", effect: "NoSchedule" },
      { key: "soft", operator: "Exists", effect: "PreferNoSchedule" },
      { key: "maintenance", value: "yes", effect: "NoExecute", tolerationSeconds: 60 },
      { key: "any-effect", operator: "Exists" },
      { key: "maintenance", operator: "Equal", value: "yes", effect: "NoExecute" },
      "not an object",
    ]),
    [
      { key: "any-effect", operator: "Exists" },
      { key: "maintenance", operator: "Equal", value: "yes", effect: "NoExecute" },
      { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
    ],
  );
  assert.deepEqual(executeTolerations(undefined), []);
});

Deno.test("mountpointTolerations(): every scheduling taint, plus the union of the workloads' NoExecute ones", () => {
  assert.deepEqual(mountpointTolerations([]), SCHEDULING_TOLERATIONS);
  assert.deepEqual(
    mountpointTolerations([[NOT_READY], [{ key: "x", operator: "Exists", effect: "NoExecute" }]]),
    [
      ...SCHEDULING_TOLERATIONS,
      { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
      { key: "x", operator: "Exists", effect: "NoExecute" },
    ],
  );
  // A workload that tolerates everything gets a Mountpoint Pod that does too.
  assert.deepEqual(mountpointTolerations([[{ operator: "Exists" }]]), [
    ...SCHEDULING_TOLERATIONS,
    { operator: "Exists" },
  ]);
});

Deno.test("coversTolerations(): each NoExecute toleration of the workload is matched", () => {
  const mp = mountpointTolerations([[NOT_READY]]);
  assert.ok(coversTolerations(mp, [NOT_READY]), "same toleration, other seconds");
  assert.ok(coversTolerations(mp, []), "nothing to cover");
  assert.ok(
    coversTolerations(mp, [{ key: "dedicated", operator: "Exists", effect: "NoSchedule" }]),
    "scheduling tolerations are covered by every Mountpoint Pod",
  );
  assert.ok(
    !coversTolerations(mp, [{ key: "maintenance", operator: "Exists", effect: "NoExecute" }]),
  );
  // Exists covers Equal of the same key; Equal covers only the same value.
  const exists = [{ key: "k", operator: "Exists", effect: "NoExecute" }];
  const equal = [{ key: "k", operator: "Equal", value: "v", effect: "NoExecute" }];
  assert.ok(coversTolerations(exists, equal));
  assert.ok(!coversTolerations(equal, exists));
  assert.ok(!coversTolerations(equal, [{ key: "k", value: "w", effect: "NoExecute" }]));
  // An any-effect toleration covers a NoExecute one, not the other way round.
  const anyEffect = [{ key: "k", operator: "Exists" }];
  assert.ok(coversTolerations(anyEffect, exists));
  assert.ok(!coversTolerations(exists, anyEffect));
  // The pre-issue-22 Mountpoint Pods tolerate everything: they cover any workload.
  assert.ok(coversTolerations([{ operator: "Exists" }], [...exists, ...anyEffect, NOT_READY]));
  assert.ok(coversTolerations([{ operator: "Exists", effect: "NoExecute" }], exists));
});
