/**
 * Shared helpers of the emulator tests: bounded polling and running real `kubectl`.
 *
 * @module
 */

export { waitFor } from "../../src/util/wait_for.ts";

/** Result of {@link kubectl}. */
export interface KubectlResult {
  /** Exit code. */
  readonly code: number;
  /** Standard output. */
  readonly stdout: string;
  /** Standard error. */
  readonly stderr: string;
}

/** Run `kubectl` with `KUBECONFIG=kubeconfig`, bounded by `timeoutMs`. */
export async function kubectl(
  kubeconfig: string,
  args: readonly string[],
  options: { stdin?: string; timeoutMs?: number } = {},
): Promise<KubectlResult> {
  const cmd = new Deno.Command("kubectl", {
    args: [...args],
    env: { KUBECONFIG: kubeconfig, HOME: Deno.env.get("HOME") ?? "/tmp" },
    stdin: options.stdin !== undefined ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(options.timeoutMs ?? 20_000),
  });
  const child = cmd.spawn();
  if (options.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

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
