/**
 * The controller container started as its manifest says (same args and env, downward-API values
 * filled in as kubelet would), against the API emulator with its admin kubeconfig (RBAC is checked
 * in rbac_test.ts): its liveness and readiness probes, resolved from the manifest's named ports and
 * paths, answer 200 like kubelet expects, and the csi-provisioner's socket appears where the
 * sidecar is told to look. Only the socket directory is moved (the container's `/csi` is an
 * emptyDir) and the port is a free one.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Container, Probe } from "../../src/deploy/k8s_objects.ts";
import { containersOf, renderManifests } from "../../src/deploy/render.ts";
import { CONTROLLER_SOCKET_DIR } from "../../src/deploy/render_controller.ts";
import { resolveValues } from "../../src/deploy/values_validate.ts";
import { exists, spawnBinary, tempDir, waitFor } from "../_helpers.ts";
import { deployCluster } from "./_deploy_cluster.ts";
import { ensureCrd } from "../controller/_cluster.ts";

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function probeUrl(c: Container, p: Probe): string {
  assert.ok(p.httpGet, `${c.name}: not an HTTP probe`);
  const port = typeof p.httpGet.port === "number"
    ? p.httpGet.port
    : c.ports?.find((x) => x.name === p.httpGet!.port)?.containerPort;
  assert.ok(port, `${c.name}: probe port ${p.httpGet.port} is not a container port`);
  return `http://127.0.0.1:${port}${p.httpGet.path}`;
}

Deno.test("probes: the controller, started as its manifest says, answers its probes", async () => {
  await using dir = await tempDir();
  await using c = await deployCluster("emulator");
  // As `deno task deploy` does first: the controller is ready only once its caches, including
  // the attachments, have synced.
  await ensureCrd(c.client);
  const values = resolveValues({ controller: { metricsPort: freePort() } });
  const dep = renderManifests(values).find((o) => o.kind === "Deployment")!;
  const ctr = containersOf(dep).find((x) => x.name === "s3-csi-controller")!;
  const env: Record<string, string> = { KUBECONFIG: c.kubeconfig };
  for (const e of ctr.env ?? []) {
    if (e.value !== undefined) {
      env[e.name] = e.value.replace(`${CONTROLLER_SOCKET_DIR}/`, `${dir.path}/`);
    } else if (e.valueFrom && "fieldRef" in e.valueFrom) {
      env[e.name] = e.valueFrom.fieldRef.fieldPath === "metadata.namespace"
        ? values.namespace
        : "s3-csi-controller-test";
    }
  }
  const proc = spawnBinary("controller", ctr.args ?? [], env);
  try {
    for (const probe of [ctr.livenessProbe!, ctr.readinessProbe!]) {
      const url = probeUrl(ctr, probe);
      await waitFor(`200 from ${url}`, async () => {
        const r = await fetch(url).catch(() => undefined);
        await r?.body?.cancel();
        return r?.status === 200;
      }, { timeoutMs: 30_000, intervalMs: 200 }).catch((err) => {
        throw new Error(`${err.message}; controller log:\n${proc.stderr().slice(-3000)}`);
      });
    }
    const provisioner = containersOf(dep).find((x) => x.name === "csi-provisioner")!;
    const address = provisioner.args!.find((a) => a.startsWith("--csi-address="))!.split("=")[1]!;
    const socket = address.replace(`${CONTROLLER_SOCKET_DIR}/`, `${dir.path}/`);
    await waitFor(`the CSI socket ${socket}`, () => exists(socket), { timeoutMs: 10_000 });
  } finally {
    const code = await proc.stop("SIGTERM", 15_000);
    assert.equal(code, 0, proc.stderr().slice(-2000));
  }
});
