/**
 * The driver's containers of both Deployments started as their manifests say (same args and env,
 * downward-API values filled in as kubelet would), and their liveness and readiness probes,
 * resolved from the manifest's named ports and paths, answer 200 like kubelet expects:
 * - the controller (reconciler), against the API emulator with its admin kubeconfig (RBAC is
 *   checked in rbac_test.ts);
 * - the CSI Controller service of the provisioner Deployment, with no Kubernetes configuration at
 *   all (its pod gives it no token), and its socket appears where csi-provisioner is told to look.
 * Only the socket directory is moved (the container's `/csi` is an emptyDir) and the port is a
 * free one.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Container, Manifest, Probe } from "../../src/deploy/k8s_objects.ts";
import { containersOf, renderManifests } from "../../src/deploy/render.ts";
import { PROVISIONER_SOCKET_DIR } from "../../src/deploy/render_provisioner.ts";
import { resolveValues } from "../../src/deploy/values_validate.ts";
import { exists, freePort, spawnBinary, tempDir, waitFor } from "../_helpers.ts";
import { deployCluster } from "./_deploy_cluster.ts";
import { ensureCrd } from "../testbed/harness/controller_cluster.ts";

function probeUrl(c: Container, p: Probe): string {
  assert.ok(p.httpGet, `${c.name}: not an HTTP probe`);
  const port = typeof p.httpGet.port === "number"
    ? p.httpGet.port
    : c.ports?.find((x) => x.name === p.httpGet!.port)?.containerPort;
  assert.ok(port, `${c.name}: probe port ${p.httpGet.port} is not a container port`);
  return `http://127.0.0.1:${port}${p.httpGet.path}`;
}

/** Env of `ctr` as kubelet would set it (downward API filled in, socket dir moved to `dir`). */
function envOf(ctr: Container, namespace: string, dir: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of ctr.env ?? []) {
    if (e.value !== undefined) {
      env[e.name] = e.value.replace(`${PROVISIONER_SOCKET_DIR}/`, `${dir}/`);
    } else if (e.valueFrom && "fieldRef" in e.valueFrom) {
      env[e.name] = e.valueFrom.fieldRef.fieldPath === "metadata.namespace"
        ? namespace
        : "s3-csi-controller-test";
    }
  }
  return env;
}

async function probesAnswer(ctr: Container, log: () => string): Promise<void> {
  for (const probe of [ctr.livenessProbe!, ctr.readinessProbe!]) {
    const url = probeUrl(ctr, probe);
    await waitFor(`200 from ${url}`, async () => {
      const r = await fetch(url).catch(() => undefined);
      await r?.body?.cancel();
      return r?.status === 200;
    }, { timeoutMs: 30_000, intervalMs: 200 }).catch((err) => {
      throw new Error(`${err.message}; log:\n${log().slice(-3000)}`);
    });
  }
}

function deploymentNamed(objects: Manifest[], name: string): Manifest {
  return objects.find((o) => o.kind === "Deployment" && o.metadata.name === name)!;
}

Deno.test("probes: the controller, started as its manifest says, answers its probes", async () => {
  await using dir = await tempDir();
  await using c = await deployCluster("emulator");
  // As `deno task deploy` does first: the controller is ready only once its caches, including
  // the attachments, have synced.
  await ensureCrd(c.client);
  const values = resolveValues({ controller: { metricsPort: freePort() } });
  const dep = deploymentNamed(renderManifests(values), "s3-csi-controller");
  const ctr = containersOf(dep).find((x) => x.name === "s3-csi-controller")!;
  const env = { ...envOf(ctr, values.namespace, dir.path), KUBECONFIG: c.kubeconfig };
  const proc = spawnBinary("controller", ctr.args ?? [], env);
  try {
    await probesAnswer(ctr, () => proc.stderr());
  } finally {
    const code = await proc.stop("SIGTERM", 15_000);
    assert.equal(code, 0, proc.stderr().slice(-2000));
  }
});

Deno.test("probes: the provisioner's CSI Controller service runs without any Kubernetes access, answers its probes and serves csi-provisioner's socket", async () => {
  await using dir = await tempDir();
  const values = resolveValues({ controller: { metricsPort: freePort() } });
  const dep = deploymentNamed(renderManifests(values), "s3-csi-provisioner");
  const ctr = containersOf(dep).find((x) => x.name === "s3-csi-provisioning")!;
  // No KUBECONFIG, no in-cluster variables: it must not need them.
  const proc = spawnBinary("controller", ctr.args ?? [], envOf(ctr, values.namespace, dir.path));
  try {
    await probesAnswer(ctr, () => proc.stderr());
    const provisioner = containersOf(dep).find((x) => x.name === "csi-provisioner")!;
    const address = provisioner.args!.find((a) => a.startsWith("--csi-address="))!.split("=")[1]!;
    const socket = address.replace(`${PROVISIONER_SOCKET_DIR}/`, `${dir.path}/`);
    await waitFor(`the CSI socket ${socket}`, () => exists(socket), { timeoutMs: 10_000 });
    assert.match(proc.stderr(), /no reconciler, no Kubernetes API/);
  } finally {
    const code = await proc.stop("SIGTERM", 15_000);
    assert.equal(code, 0, proc.stderr().slice(-2000));
  }
});
