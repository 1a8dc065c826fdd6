import assert from "node:assert/strict";
import type { Pod } from "./k8s_types.ts";
import { localStorageViolation } from "./local_storage_eviction.ts";

const MI = 2 ** 20;

function pod(volumes: unknown[], limits: (string | undefined)[]): Pod {
  return {
    metadata: { name: "p", namespace: "n", uid: "u" },
    spec: {
      containers: limits.map((l, i) => ({
        name: `c${i}`,
        ...(l ? { resources: { limits: { "ephemeral-storage": l } } } : {}),
      })),
      volumes,
    },
  } as unknown as Pod;
}

const usage = (volumes: Record<string, number>, containers: Record<string, number> = {}) => ({
  volumes: new Map(Object.entries(volumes)),
  containers: new Map(Object.entries(containers)),
});

Deno.test("local-storage eviction: an emptyDir over its sizeLimit, as kubelet words it", () => {
  const p = pod([{ name: "work", emptyDir: { sizeLimit: "16Mi" } }, { name: "x", emptyDir: {} }], [
    undefined,
  ]);
  assert.equal(localStorageViolation(p, usage({ work: 16 * MI, x: 900 * MI })), undefined);
  assert.equal(
    localStorageViolation(p, usage({ work: 16 * MI + 1 })),
    'Usage of EmptyDir volume "work" exceeds the limit "16Mi". ',
  );
});

Deno.test("local-storage eviction: the pod over its containers' limits (logs and disk emptyDirs, not tmpfs)", () => {
  const p = pod([
    { name: "work", emptyDir: { sizeLimit: "256Mi" } },
    { name: "tmpfs", emptyDir: { medium: "Memory" } },
  ], ["100Mi", "284Mi", undefined]);
  assert.equal(
    localStorageViolation(p, usage({ work: 200 * MI, tmpfs: 10_000 * MI }, { c0: 100 * MI })),
    undefined,
    "300 MiB of 384 MiB; tmpfs is memory",
  );
  assert.equal(
    localStorageViolation(p, usage({ work: 200 * MI }, { c0: 90 * MI, c2: 95 * MI })),
    "Pod ephemeral local storage usage exceeds the total limit of containers 384Mi. ",
  );
  assert.equal(
    localStorageViolation(pod([], ["1Mi", "1Gi"]), usage({}, { c0: 2 * MI })),
    'Container c0 exceeded its local ephemeral storage limit "1Mi". ',
  );
  assert.equal(
    localStorageViolation(pod([{ name: "d", emptyDir: {} }], [undefined]), usage({ d: 1e12 })),
    undefined,
    "no limits: never",
  );
});
