/**
 * A workload that writes through its volume without pause, for the day-2 scenarios (drain, taints,
 * headroom): file `<dir>/<POD_NAME>/<n>.txt` holds `<POD_NAME> <n>`, written, closed (mount-s3
 * uploads on close) and read back, n = 0, 1, 2, …; after each it prints `CLOSED <n>`. A write or
 * read that fails prints `FAILED <n>` and ends the container with exit 1. On SIGTERM it finishes
 * the file in hand, prints `STOPPED <n>` and exits 0 — so every file it closed before it was
 * stopped or evicted must be in S3, complete, whatever stopped it. {@link checkWrites} checks that.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { ScenarioCluster } from "./cluster.ts";

/** `sh -c` script of the writer; `POD_NAME` must be set. */
export function writerScript(dir = "/data"): string {
  return [
    "set -u",
    "stop=0",
    "trap 'stop=1' TERM",
    `mkdir -p ${dir}/$POD_NAME`,
    "echo READY",
    "n=0",
    "while [ $stop = 0 ]; do",
    `  f=${dir}/$POD_NAME/$n.txt`,
    `  if echo "$POD_NAME $n" > $f && [ "$(cat $f)" = "$POD_NAME $n" ]; then echo "CLOSED $n";`,
    `  else echo "FAILED $n"; exit 1; fi`,
    "  n=$((n+1))",
    "  sleep 0.2",
    "done",
    'echo "STOPPED $n"',
  ].join("\n");
}

/** The highest `CLOSED <n>` a writer printed so far, or -1. */
export function lastClosed(log: string): number {
  let last = -1;
  for (const m of log.matchAll(/^CLOSED (\d+)$/gm)) last = Math.max(last, Number(m[1]));
  return last;
}

/**
 * The writer's files in S3: `0 … n-1`, no gap, each with its content, at least `atLeast` of them;
 * resolves with n. The last one may be the file in hand when the writer was killed (never
 * confirmed by `CLOSED`): it may be missing or empty, never a file before it.
 */
export async function checkWrites(
  e: ScenarioCluster,
  bucket: string,
  pod: string,
  atLeast = 1,
): Promise<number> {
  const keys = await e.keys(bucket, `${pod}/`);
  const numbers = keys.map((k) => Number(/\/(\d+)\.txt$/.exec(k)?.[1] ?? NaN)).sort((a, b) =>
    a - b
  );
  assert.ok(
    numbers.length >= atLeast,
    `${pod}: ${numbers.length} file(s) in S3, want ≥ ${atLeast}`,
  );
  numbers.forEach((n, i) => assert.equal(n, i, `${pod}: file ${i}.txt missing from S3`));
  const bodies = await Promise.all(
    numbers.slice(0, -1).map((n) => e.get(bucket, `${pod}/${n}.txt`)),
  );
  bodies.forEach((body, n) => assert.equal(body, `${pod} ${n}\n`, `${pod}/${n}.txt in S3`));
  return numbers.length;
}
