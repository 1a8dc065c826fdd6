/**
 * Shared helpers of the emulator tests: bounded polling and running real `kubectl`.
 *
 * @module
 */
import { kubectlSkipReason, testOrSkip } from "../_helpers.ts";
export { kubectl, type KubectlResult } from "../_helpers.ts";

export { waitFor } from "../../src/util/wait_for.ts";

/** A minimal pod manifest bound to `nodeName`. */
export function podManifest(
  name: string,
  nodeName: string,
  labels: Record<string, string> = {},
): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels },
    spec: { nodeName, containers: [{ name: "main", image: "busybox:1.36" }] },
  });
}

/** A test that runs the suite's kubectl: skipped, with the reason, when none was built. */
export function kubectlTest(name: string, fn: () => Promise<void>): void {
  testOrSkip(kubectlSkipReason(), { name, fn });
}
