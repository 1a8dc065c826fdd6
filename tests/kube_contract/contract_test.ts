/**
 * Runs the Kubernetes API contract (`cases_read.ts`, `cases_write.ts`) against the emulator (always) and against a
 * real cluster when `KUBE_REAL_KUBECONFIG` (or `KUBECONFIG`) names a kubeconfig (else that variant is
 * reported as skipped, with the reason), e.g. the one
 * `tests/testbed/services/kube_real/start.sh` writes at `/var/tmp/s3csi-kube-real/kubeconfig`.
 *
 *   deno test -A tests/kube_contract/
 *   KUBE_REAL_KUBECONFIG=/var/tmp/s3csi-kube-real/kubeconfig deno test -A tests/kube_contract/
 */
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import { READ_CASES } from "./cases_read.ts";
import { WRITE_CASES } from "./cases_write.ts";
import { KubeHttp, type KubeTarget, loadTarget } from "../testbed/harness/kube_http.ts";
import { testOrSkip } from "../_helpers.ts";

interface Target {
  readonly name: string;
  /** Why this target cannot be tested here (the test is then reported as skipped). */
  readonly skip?: string | undefined;
  readonly open: () => Promise<{ target: KubeTarget; close: () => Promise<void> }>;
}

const targets: Target[] = [{
  name: "emulator",
  open: async () => {
    const api = await startApiServer({ port: 0 });
    return { target: await loadTarget("emulator", api.kubeconfigPath), close: () => api.stop() };
  },
}];
const realPath = Deno.env.get("KUBE_REAL_KUBECONFIG") ?? Deno.env.get("KUBECONFIG");
targets.push({
  name: "real",
  skip: realPath
    ? undefined
    : "neither KUBE_REAL_KUBECONFIG nor KUBECONFIG is set: no real cluster (scripts/test.sh starts the kube_real tier)",
  open: async () => ({
    target: await loadTarget("real", realPath!),
    close: () => Promise.resolve(),
  }),
});

for (const t of targets) {
  testOrSkip(t.skip, {
    name: `kube contract: ${t.name}`,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async (ctx) => {
      const { target, close } = await t.open();
      const k = new KubeHttp(target);
      const version = await k.request("GET", "/version").catch((err: unknown) => err);
      if (
        !(version && typeof version === "object" && "status" in version && version.status === 200)
      ) {
        k.close();
        await close();
        throw new Error(
          `${t.name} API server at ${target.server} is unreachable: ${String(version)}`,
        );
      }
      const run = crypto.randomUUID().slice(0, 6);
      const namespaces: string[] = [];
      try {
        for (const [i, c] of [...READ_CASES, ...WRITE_CASES].entries()) {
          await ctx.step(c.name, async () => {
            const ns = `contract-${run}-${i}`;
            const r = await k.request("POST", "/api/v1/namespaces", {
              body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
            });
            if (r.status !== 201) {
              throw new Error(`cannot create namespace ${ns}: ${r.status} ${r.text}`);
            }
            namespaces.push(ns);
            await c.run(k, { ns, id: `${run}-${i}` });
          });
        }
      } finally {
        for (const ns of namespaces) {
          await k.request("DELETE", `/api/v1/namespaces/${ns}`).catch(() => undefined);
        }
        k.close();
        await close();
      }
    },
  });
}
