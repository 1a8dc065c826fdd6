/**
 * The `s3-csi-controller` binary with `--csi-endpoint`: it advertises CONTROLLER_SERVICE, serves
 * CreateVolume/DeleteVolume against RGW with its driver credentials, logs no secret, and on SIGTERM
 * exits 0 and removes its socket. Kubernetes API: the emulator.
 */
import assert from "node:assert/strict";
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import { connectCsi } from "../../src/csi/client.ts";
import { spawnBinary, tempDir, testOrSkip, waitFor } from "../_helpers.ts";
import { RawS3, rgw, SKIP_REASON, unique } from "./_rgw.ts";

const S3 = rgw();
const S3_SKIP = S3 ? undefined : SKIP_REASON;

testOrSkip(S3_SKIP, {
  name: "s3-csi-controller --csi-endpoint serves the Controller service",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using dir = await tempDir("s3csi-prov-proc-");
    const api = await startApiServer({ podTerminationMs: 0 });
    const socket = `${dir.path}/csi.sock`;
    const proc = spawnBinary("controller", [
      `--csi-endpoint=unix://${socket}`,
      "--leader-elect=false",
      "--metrics-address=",
    ], {
      KUBECONFIG: api.kubeconfigPath,
      AWS_ENDPOINT_URL: S3!.endpoint,
      AWS_REGION: S3!.region,
      AWS_ACCESS_KEY_ID: S3!.main.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3!.main.secretAccessKey,
      LOG_LEVEL: "debug",
    });
    const raw = new RawS3(S3!);
    const name = `pvc-proc-${unique()}`;
    const csi = connectCsi(socket, { timeoutMs: 30_000 });
    try {
      await waitFor("the controller socket", async () => {
        try {
          return (await Deno.stat(socket)).isSocket;
        } catch {
          return false;
        }
      }, { timeoutMs: 60_000, intervalMs: 100 });
      const plugin = await csi.identity.getPluginCapabilities({});
      assert.deepEqual(plugin.capabilities?.map((c) => c.service?.type), ["CONTROLLER_SERVICE"]);
      const v = await csi.controller.createVolume({
        name,
        volumeCapabilities: [{
          mount: {},
          accessType: "mount",
          accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
        }],
        parameters: { deletePolicy: "delete-all" },
        secrets: {
          "access_key_id": S3!.main.accessKeyId,
          "secret_access_key": S3!.main.secretAccessKey,
        },
      });
      assert.ok(await raw.exists(name));
      await csi.controller.deleteVolume({
        volumeId: v.volume!.volumeId!,
        secrets: {
          "access_key_id": S3!.main.accessKeyId,
          "secret_access_key": S3!.main.secretAccessKey,
        },
      });
      assert.ok(!(await raw.exists(name)));
    } finally {
      csi.close();
      const code = await proc.stop("SIGTERM", 20_000);
      await raw.remove(name);
      await raw.close();
      await api.stop();
      await Deno.remove(api.kubeconfigPath).catch(() => {});
      const logs = proc.stdout() + proc.stderr();
      assert.equal(code, 0, logs.slice(-2000));
      assert.ok(!logs.includes(S3!.main.secretAccessKey), "no secret in the logs");
      assert.match(logs, /Controller service: S3 endpoint/);
      assert.match(logs, /CreateVolume OK|CreateVolume.*OK/);
      await assert.rejects(Deno.stat(socket), "socket removed");
    }
  },
});
