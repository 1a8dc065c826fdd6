import assert from "node:assert/strict";
import {
  buildPodStatus,
  type ContainerRecord,
  finalizeRecords,
  newContainerRecord,
  podPhase,
  qosClass,
} from "./pod_status.ts";

function rec(state: ContainerRecord["state"], last: ContainerRecord["lastState"] = {}) {
  return { ...newContainerRecord("c", "i"), state, lastState: last };
}

Deno.test("getPhase: waiting → Pending, running → Running, exits by restart policy", () => {
  assert.equal(podPhase("Always", [newContainerRecord("c", "i")]), "Pending");
  assert.equal(podPhase("Never", [rec({ running: {} })]), "Running");
  const ok = rec({ terminated: { exitCode: 0 } });
  const bad = rec({ terminated: { exitCode: 1 } });
  assert.equal(podPhase("Always", [ok]), "Running");
  assert.equal(podPhase("OnFailure", [ok]), "Succeeded");
  assert.equal(podPhase("OnFailure", [bad]), "Running");
  assert.equal(podPhase("Never", [bad]), "Failed");
  assert.equal(
    podPhase("OnFailure", [rec({ waiting: { reason: "CrashLoopBackOff" } }, bad.state)]),
    "Running",
  );
});

Deno.test("status conditions and TerminatePod's ContainerStatusUnknown", () => {
  const records = [rec({ running: { startedAt: "t" } })];
  const s = buildPodStatus({ spec: { containers: [] }, records, startTime: "t0", now: "t1" });
  assert.equal(s.phase, "Running");
  assert.equal(s.conditions?.find((c) => c.type === "Ready")?.status, "True");
  finalizeRecords(records, "t2");
  assert.equal(records[0]!.state.terminated?.exitCode, 137);
  assert.equal(records[0]!.state.terminated?.reason, "ContainerStatusUnknown");
  const f = buildPodStatus({
    spec: { containers: [], restartPolicy: "Always" },
    records,
    startTime: "t0",
    now: "t3",
    phase: "Failed",
  });
  assert.equal(f.conditions?.find((c) => c.type === "Ready")?.reason, "PodCompleted");
});

Deno.test("init containers: Pending until done, Failed under Never, statuses reported", () => {
  const failedInit = rec({ terminated: { exitCode: 2 } });
  const waiting = [newContainerRecord("c", "i", "PodInitializing")];
  const base = { records: waiting, startTime: "t0", now: "t1", initialized: false };
  const never = buildPodStatus({
    ...base,
    spec: { containers: [], restartPolicy: "Never" },
    initRecords: [failedInit],
  });
  assert.equal(never.phase, "Failed");
  assert.equal(never.initContainerStatuses?.[0]?.state.terminated?.exitCode, 2);
  assert.equal(never.conditions?.find((c) => c.type === "Initialized")?.status, "False");
  const retry = buildPodStatus({
    ...base,
    spec: { containers: [], restartPolicy: "OnFailure" },
    initRecords: [failedInit],
  });
  assert.equal(retry.phase, "Pending");
});

Deno.test("qosClass: BestEffort, Burstable, Guaranteed as kube-apiserver computes it", () => {
  const spec = (resources?: Record<string, Record<string, string>>) =>
    ({ containers: [{ name: "c", ...(resources ? { resources } : {}) }] }) as never;
  assert.equal(qosClass(spec()), "BestEffort");
  assert.equal(qosClass(spec({ requests: { memory: "64Mi" } })), "Burstable");
  assert.equal(qosClass(spec({ limits: { cpu: "1", memory: "1Gi" } })), "Guaranteed");
  assert.equal(
    qosClass(spec({ requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "1", memory: "2Gi" } })),
    "Burstable",
  );
});
