/**
 * The node plugin as a real process: it serves CSI Identity and Node on its unix socket for a real
 * gRPC client, keeps secrets out of its log, and stops cleanly on SIGTERM.
 */
import assert from "node:assert/strict";
import { connectCsi } from "../../src/csi/client.ts";
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { ensureCrd } from "../testbed/harness/controller_cluster.ts";
import { exists, spawnBinary, tempDir, waitFor } from "../_helpers.ts";

/** The node plugin watches its node's Mountpoint Pods and S3PAs before serving: give it an API server. */
async function apiServer(): Promise<{ kubeconfig: string } & AsyncDisposable> {
  const api = await startApiServer();
  const client = new RestKubeClient(kubeConfigFromFile(api.kubeconfigPath));
  await ensureCrd(client);
  await client.close();
  return { kubeconfig: api.kubeconfigPath, [Symbol.asyncDispose]: () => api.stop() };
}

Deno.test("node plugin serves Identity and Node over its unix socket and never logs secrets", async () => {
  await using dir = await tempDir();
  const socket = `${dir.path}/plugin/csi.sock`;
  await using api = await apiServer();
  const kubeconfig = api.kubeconfig;
  const proc = spawnBinary("node", [
    "--endpoint",
    `unix://${socket}`,
    "--kubelet-path",
    `${dir.path}/kubelet`,
    "--log-level",
    "debug",
  ], {
    CSI_NODE_NAME: "worker-7",
    KUBECONFIG: kubeconfig,
  });
  const client = connectCsi(socket, { timeoutMs: 5000 });
  try {
    // Once the plugin says it serves (the socket exists a moment before its chmod).
    await waitFor("the plugin to serve its socket", () => /Serving CSI/.test(proc.stderr()), {
      timeoutMs: 20_000,
    });
    const mode = (await Deno.stat(socket)).mode! & 0o777;
    assert.equal(mode, 0o700, "socket must be private to root");

    const info = await client.identity.getPluginInfo({});
    assert.equal(info.name, "s3.csi.scality.com");
    assert.match(info.vendorVersion ?? "", /^\d+\.\d+\.\d+/);
    assert.deepEqual(await client.identity.getPluginCapabilities({}), { capabilities: [] });
    assert.deepEqual(await client.identity.probe({}), { ready: { value: true } });
    assert.equal((await client.node.nodeGetInfo({})).nodeId, "worker-7");

    const secretValue = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY";
    await assert.rejects(
      client.node.nodePublishVolume({
        volumeId: "vol-secret-test",
        targetPath: `${dir.path}/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount`,
        secrets: { access_key_id: "AKIDEXAMPLE", secret_access_key: secretValue },
        volumeContext: { bucketName: "b", secret_access_key: secretValue },
      }),
      (err: { code?: number; details?: string }) =>
        err.code === 3 && /Volume capability not provided/.test(err.details ?? ""),
    );
    await assert.rejects(
      client.controller.createVolume({ name: "x" }),
      (err: { code?: number }) => err.code === 12,
    );
  } finally {
    client.close();
    const code = await proc.stop("SIGTERM");
    assert.equal(code, 0, `exit code; stderr:\n${proc.stderr()}`);
  }
  const log = proc.stderr();
  assert.match(log, /"method":"\/csi.v1.Node\/NodePublishVolume"/, "the call is logged");
  assert.match(log, /vol-secret-test/, "the request is logged at debug level");
  assert.match(log, /"code":"INVALID_ARGUMENT"/);
  assert.match(log, /"durationMs":/);
  assert.ok(!log.includes("wJalrXUtnFEMI"), "a secret reached the log");
  assert.ok(!log.includes("AKIDEXAMPLE"), "an access key reached the log");
  assert.equal(await exists(socket), false, "socket removed on shutdown");
});

Deno.test("node plugin refuses a socket that another process is serving", async () => {
  await using dir = await tempDir();
  const socket = `${dir.path}/csi.sock`;
  await using api = await apiServer();
  const env = {
    CSI_NODE_NAME: "n",
    KUBECONFIG: api.kubeconfig,
    KUBELET_PATH: `${dir.path}/kubelet`,
  };
  const first = spawnBinary("node", ["--endpoint", `unix://${socket}`], env);
  try {
    await waitFor("the first plugin socket", () => exists(socket), { timeoutMs: 20_000 });
    const second = spawnBinary("node", ["--endpoint", `unix://${socket}`], env);
    const code = await second.stop("SIGCONT", 20_000).catch(() => -1);
    assert.equal(code, 2, second.stderr());
    assert.match(
      second.stderr(),
      /s3-csi-node: error: Socket ".*csi.sock" is in use by another process/,
    );
  } finally {
    assert.equal(await first.stop(), 0);
  }
});

Deno.test("node plugin replaces a stale socket left by a crash", async () => {
  await using dir = await tempDir();
  const socket = `${dir.path}/csi.sock`;
  await using api = await apiServer();
  const env = {
    CSI_NODE_NAME: "n",
    KUBECONFIG: api.kubeconfig,
    KUBELET_PATH: `${dir.path}/kubelet`,
  };
  const crashed = spawnBinary("node", ["--endpoint", `unix://${socket}`], env);
  await waitFor("the socket", () => exists(socket), { timeoutMs: 20_000 });
  await crashed.stop("SIGKILL");
  assert.equal(await exists(socket), true, "SIGKILL leaves the socket behind");
  const next = spawnBinary("node", ["--endpoint", `unix://${socket}`], env);
  const client = connectCsi(socket, { timeoutMs: 5000 });
  try {
    const info = await waitFor(
      "GetPluginInfo on the new process",
      () => client.identity.getPluginInfo({}).catch(() => undefined),
      {
        timeoutMs: 20_000,
        intervalMs: 100,
      },
    );
    assert.equal(info.name, "s3.csi.scality.com");
  } finally {
    client.close();
    assert.equal(await next.stop(), 0);
  }
});
