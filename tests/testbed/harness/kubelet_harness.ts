/**
 * Shared set-up of the kubelet emulator tests: an API emulator, a REST client on it, a recording
 * CSI node server on a unix socket, and helpers to build the objects.
 *
 * @module
 */
import { KubeConfig } from "@kubernetes/client-node";
import { type ApiServer, startApiServer } from "../apiserver/api_server.ts";
import { CsiServer } from "../../../src/csi/server.ts";
import type {
  NodeGetCapabilitiesResponse,
  NodeGetVolumeStatsRequest,
  NodePublishVolumeRequest,
  NodeServiceCapability_RPC_Type,
  NodeUnpublishVolumeRequest,
} from "../../../src/csi/gen/csi_types.ts";
import { CsiError } from "../../../src/csi/errors.ts";
import { RestKubeClient } from "../../../src/kube/rest_client.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { Kubelet, type KubeletOptions } from "../kubelet/kubelet.ts";
import { prepareMounterImage } from "../kubelet/mounter_image.ts";
import { VolumeBinder } from "../control_plane/volume_binder.ts";
import { DRIVER_NAME } from "../../../src/util/version.ts";
import { CSI_DRIVERS } from "../../../src/kube/resources.ts";

/** Calls received by the test node server, in order. */
export type Call =
  | { method: "NodeGetCapabilities" }
  | { method: "NodeGetInfo" }
  | { method: "NodePublishVolume"; request: NodePublishVolumeRequest }
  | { method: "NodeUnpublishVolume"; request: NodeUnpublishVolumeRequest }
  | { method: "NodeGetVolumeStats"; request: NodeGetVolumeStatsRequest };

/** A CSI node server that records every call; publish creates the target dir (0777). */
export class RecordingNode {
  readonly calls: Call[] = [];
  capabilities: NodeServiceCapability_RPC_Type[] = ["VOLUME_MOUNT_GROUP"];
  /** Thrown by the next publishes while set. */
  publishError: CsiError | undefined;
  readonly server: CsiServer;

  constructor(readonly socketPath: string) {
    this.server = new CsiServer({
      socketPath,
      services: {
        node: {
          nodeGetInfo: () => {
            this.calls.push({ method: "NodeGetInfo" });
            return Promise.resolve({ nodeId: "node-id-1" });
          },
          nodeGetCapabilities: (): Promise<NodeGetCapabilitiesResponse> => {
            this.calls.push({ method: "NodeGetCapabilities" });
            return Promise.resolve({
              capabilities: this.capabilities.map((type) => ({ rpc: { type } })),
            });
          },
          nodePublishVolume: async (request) => {
            this.calls.push({ method: "NodePublishVolume", request });
            if (this.publishError) throw this.publishError;
            await Deno.mkdir(request.targetPath!, { mode: 0o777 });
            await Deno.chmod(request.targetPath!, 0o777);
            return {};
          },
          nodeGetVolumeStats: (request) => {
            this.calls.push({ method: "NodeGetVolumeStats", request });
            return Promise.resolve({ usage: [{ available: 1, total: 2, used: 1, unit: "BYTES" }] });
          },
          nodeUnpublishVolume: async (request) => {
            this.calls.push({ method: "NodeUnpublishVolume", request });
            await Deno.remove(request.targetPath!, { recursive: true }).catch(() => {});
            return {};
          },
        },
      },
    });
  }

  /** Calls of one method. */
  of<M extends Call["method"]>(method: M): Extract<Call, { method: M }>[] {
    return this.calls.filter((c) => c.method === method) as Extract<Call, { method: M }>[];
  }
}

/** Everything a test needs; dispose to stop it all. */
export interface Harness extends AsyncDisposable {
  readonly api: ApiServer;
  readonly client: KubeClient;
  readonly csi: RecordingNode;
  readonly kubelet: Kubelet;
  readonly binder: VolumeBinder;
  readonly root: string;
  readonly dir: string;
}

/** Start API emulator, recording CSI server, CSIDriver object and a kubelet for `node-1`. */
export async function startHarness(
  options: Partial<KubeletOptions> & {
    csiDriver?: boolean;
    requiresRepublish?: boolean;
    /** Run Mountpoint Pods from a bundle of the mounter instead of from source. */
    bundleMounter?: boolean;
  } = {},
): Promise<Harness> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-kubelet-" });
  await Deno.chmod(dir, 0o755);
  const api = await startApiServer({ port: 0, kubeconfigPath: `${dir}/kubeconfig` });
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  const client = new RestKubeClient(kc);
  const csi = new RecordingNode(`${dir}/csi/csi.sock`);
  await csi.server.start();
  if (options.csiDriver !== false) {
    await client.create(CSI_DRIVERS, {
      metadata: { name: DRIVER_NAME },
      spec: {
        attachRequired: false,
        podInfoOnMount: true,
        requiresRepublish: options.requiresRepublish ?? false,
      },
    });
  }
  const root = `${dir}/kubelet`;
  const { csiDriver: _c, requiresRepublish: _r, bundleMounter, ...kubeletOptions } = options;
  if (bundleMounter) {
    await Deno.mkdir(`${dir}/kubelet`, { recursive: true });
    kubeletOptions.mountpointImage = await prepareMounterImage(`${dir}/kubelet`, { bundle: true });
  }
  const kubelet = new Kubelet({
    client,
    nodeName: "node-1",
    kubeletRoot: root,
    driverSocket: csi.socketPath,
    restartBackoff: { initialMs: 200, maxMs: 400 },
    volumeBackoff: { initialMs: 100, maxMs: 400 },
    ...kubeletOptions,
  });
  await kubelet.start();
  const binder = new VolumeBinder({ client, resyncMs: 1000 });
  await binder.start();
  return {
    api,
    client,
    csi,
    kubelet,
    binder,
    root,
    dir,
    async [Symbol.asyncDispose]() {
      await binder.stop();
      await kubelet.stop(20_000);
      await csi.server.stop(1000);
      await api.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** A static CSI PV of our driver. */
export function csiPv(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    metadata: { name },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteMany"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "",
      mountOptions: ["allow-delete", "region us-east-1"],
      csi: {
        driver: DRIVER_NAME,
        volumeHandle: `${name}-handle`,
        volumeAttributes: { bucketName: "bucket-a" },
      },
      ...extra,
    },
  };
}

/** A PVC that names its PV. */
export function pvc(name: string, pvName: string): Record<string, unknown> {
  return {
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteMany"],
      storageClassName: "",
      resources: { requests: { storage: "1Gi" } },
      volumeName: pvName,
    },
  };
}
