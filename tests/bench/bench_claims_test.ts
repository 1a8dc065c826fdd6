import assert from "node:assert/strict";
import type { PersistentVolumeClaim } from "../../src/kube/types.ts";
import { unsettledClaims } from "./bench_claims.ts";

function claim(name: string, phase?: string, bindCompleted?: string): PersistentVolumeClaim {
  return {
    metadata: {
      name,
      ...(bindCompleted
        ? { annotations: { "pv.kubernetes.io/bind-completed": bindCompleted } }
        : {}),
    },
    spec: { volumeName: `pv-${name}` },
    ...(phase ? { status: { phase } } : {}),
  } as PersistentVolumeClaim;
}

Deno.test("bench claims: a claim is settled only when Bound and completed by the PV binder", () => {
  assert.deepEqual(
    unsettledClaims([
      claim("done", "Bound", "yes"),
      claim("patched-only", "Bound"),
      claim("reset", "Pending", "yes"),
      claim("new"),
    ]),
    ["patched-only", "reset", "new"],
  );
  assert.deepEqual(unsettledClaims([claim("a", "Bound", "yes"), claim("b", "Bound", "yes")]), []);
});
