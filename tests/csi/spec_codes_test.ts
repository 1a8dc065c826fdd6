/**
 * Every CSI method of the node plugin's and the controller's servers, called over a real unix
 * socket with an empty request and with a malformed one, answers the CSI spec's gRPC code — never
 * UNKNOWN or INTERNAL for a bad request, whether the handler throws synchronously or not. One test
 * per method. The services run in-process on fakes (no S3, no mounts).
 */
import assert from "node:assert/strict";
import { connectCsi, type CsiClient } from "../../src/csi/client.ts";
import { Code, invalidArgument } from "../../src/csi/errors.ts";
import { IdentityService } from "../../src/csi/identity_service.ts";
import { CsiServer } from "../../src/csi/server.ts";
import { world } from "../../src/node/_test_fixtures.ts";
import { ControllerService } from "../../src/provisioning/controller_service.ts";
import { FakeS3 } from "../../src/s3/fake_bucket_store.ts";
import { rawGrpcCall } from "../testbed/harness/raw_grpc.ts";

const ROOT = "/var/lib/kubelet";
const TARGET = `${ROOT}/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount`;
const CAP = { mount: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const } };

type Service = "identity" | "node" | "controller";
interface Case {
  readonly service: Service;
  readonly rpc: string;
  readonly method: string;
  /** [request, expected code, message pattern] */
  readonly calls: readonly [Record<string, unknown>, Code, RegExp?][];
}

const CASES: Case[] = [
  {
    service: "identity",
    rpc: "Identity/GetPluginInfo",
    method: "getPluginInfo",
    calls: [[{}, Code.OK]],
  },
  {
    service: "identity",
    rpc: "Identity/GetPluginCapabilities",
    method: "getPluginCapabilities",
    calls: [[{}, Code.OK]],
  },
  { service: "identity", rpc: "Identity/Probe", method: "probe", calls: [[{}, Code.OK]] },
  { service: "node", rpc: "Node/NodeGetInfo", method: "nodeGetInfo", calls: [[{}, Code.OK]] },
  {
    service: "node",
    rpc: "Node/NodeGetCapabilities",
    method: "nodeGetCapabilities",
    calls: [[{}, Code.OK]],
  },
  {
    service: "node",
    rpc: "Node/NodeStageVolume",
    method: "nodeStageVolume",
    calls: [[{}, Code.UNIMPLEMENTED]],
  },
  {
    service: "node",
    rpc: "Node/NodeUnstageVolume",
    method: "nodeUnstageVolume",
    calls: [[{}, Code.UNIMPLEMENTED]],
  },
  {
    service: "node",
    rpc: "Node/NodeExpandVolume",
    method: "nodeExpandVolume",
    calls: [[{}, Code.UNIMPLEMENTED]],
  },
  {
    service: "node",
    rpc: "Node/NodePublishVolume",
    method: "nodePublishVolume",
    calls: [
      [{}, Code.INVALID_ARGUMENT, /Volume ID not provided/],
      [{ volumeId: "v" }, Code.INVALID_ARGUMENT, /Target path not provided/],
      [
        { volumeId: "v", targetPath: "relative/mount", volumeCapability: CAP },
        Code.INVALID_ARGUMENT,
        /absolute path/,
      ],
      [
        { volumeId: "v", targetPath: TARGET },
        Code.INVALID_ARGUMENT,
        /Volume capability not provided/,
      ],
      [
        { volumeId: "v", targetPath: TARGET, volumeCapability: CAP },
        Code.INVALID_ARGUMENT,
        /Bucket name not provided/,
      ],
      [
        {
          volumeId: "v",
          targetPath: TARGET,
          volumeCapability: { ...CAP, mount: { mountFlags: ["cache=/a\nb"] } },
          volumeContext: { bucketName: "bucket-1" },
        },
        Code.INVALID_ARGUMENT,
        /control characters/,
      ],
    ],
  },
  {
    service: "node",
    rpc: "Node/NodeUnpublishVolume",
    method: "nodeUnpublishVolume",
    calls: [
      [{}, Code.INVALID_ARGUMENT, /Volume ID not provided/],
      [{ volumeId: "v" }, Code.INVALID_ARGUMENT, /Target path not provided/],
      [{ volumeId: "v", targetPath: `${ROOT}/pods/../etc` }, Code.INVALID_ARGUMENT],
      [{ volumeId: "v", targetPath: TARGET }, Code.OK],
    ],
  },
  {
    service: "node",
    rpc: "Node/NodeGetVolumeStats",
    method: "nodeGetVolumeStats",
    calls: [
      [{}, Code.INVALID_ARGUMENT, /Volume ID not provided/],
      [{ volumeId: "v" }, Code.INVALID_ARGUMENT, /Volume path not provided/],
      [
        { volumeId: "v", volumePath: "/etc" },
        Code.NOT_FOUND,
        /not a kubelet CSI target path.*no volume of this driver is published there/,
      ],
      [{ volumeId: "v", volumePath: TARGET }, Code.NOT_FOUND, /is not mounted/],
    ],
  },
  {
    service: "controller",
    rpc: "Controller/CreateVolume",
    method: "createVolume",
    calls: [
      [{}, Code.INVALID_ARGUMENT, /Volume name not provided/],
      [{ name: "pvc-1" }, Code.INVALID_ARGUMENT],
    ],
  },
  {
    service: "controller",
    rpc: "Controller/DeleteVolume",
    method: "deleteVolume",
    calls: [[{}, Code.INVALID_ARGUMENT]],
  },
  {
    service: "controller",
    rpc: "Controller/ValidateVolumeCapabilities",
    method: "validateVolumeCapabilities",
    calls: [[{}, Code.INVALID_ARGUMENT], [{ volumeId: "not-ours" }, Code.INVALID_ARGUMENT]],
  },
  {
    service: "controller",
    rpc: "Controller/ControllerGetCapabilities",
    method: "controllerGetCapabilities",
    calls: [[{}, Code.OK]],
  },
  ...[
    ["ControllerPublishVolume", "controllerPublishVolume"],
    ["ControllerUnpublishVolume", "controllerUnpublishVolume"],
    ["ListVolumes", "listVolumes"],
    ["GetCapacity", "getCapacity"],
    ["CreateSnapshot", "createSnapshot"],
    ["DeleteSnapshot", "deleteSnapshot"],
    ["ListSnapshots", "listSnapshots"],
    ["ControllerExpandVolume", "controllerExpandVolume"],
    ["ControllerGetVolume", "controllerGetVolume"],
    ["ControllerModifyVolume", "controllerModifyVolume"],
  ].map(([rpc, method]): Case => ({
    service: "controller",
    rpc: `Controller/${rpc}`,
    method: method!,
    calls: [[{}, Code.UNIMPLEMENTED]],
  })),
];

async function withServers(fn: (csi: CsiClient, socket: string) => Promise<void>): Promise<void> {
  await using w = await world();
  const dir = await Deno.makeTempDir({ prefix: "s3csi-codes-" });
  const socket = `${dir}/csi.sock`;
  const s3 = new FakeS3().addAccount("K", "S");
  const server = new CsiServer({
    socketPath: socket,
    services: {
      identity: new IdentityService({ controllerService: true }),
      node: w.service(),
      controller: new ControllerService({
        stores: s3.factory(),
        defaultRegion: "us-east-1",
        driverCredentials: { accessKeyId: "K", secretAccessKey: "S" },
        endpoint: "http://s3.test",
      }),
    },
  });
  await server.start();
  const csi = connectCsi(socket, { timeoutMs: 10_000 });
  try {
    await fn(csi, socket);
  } finally {
    csi.close();
    await server.stop(1000);
    await Deno.remove(dir, { recursive: true });
  }
}

for (const c of CASES) {
  Deno.test({
    name: `spec codes: ${c.rpc} answers ${
      [...new Set(c.calls.map(([, code]) => Code[code]))].join("/")
    } for empty and malformed requests, INVALID_ARGUMENT for bytes that are not its request`,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      await withServers(async (csi, socket) => {
        const call =
          (csi[c.service] as unknown as Record<string, (r: unknown) => Promise<unknown>>)[
            c.method
          ]!;
        for (const [req, want, pattern] of c.calls) {
          const got = await call(req).then(
            () => ({ code: Code.OK, details: "" }),
            (e: { code?: number; details?: string }) => ({
              code: e.code,
              details: e.details ?? "",
            }),
          );
          assert.equal(Code[got.code!], Code[want], `${JSON.stringify(req)}: ${got.details}`);
          if (pattern) assert.match(got.details, pattern);
        }
        // Bytes that are not a protobuf message of the request type.
        const raw = await rawGrpcCall(
          socket,
          `/csi.v1.${c.rpc}`,
          Uint8Array.from([0xff, 0xff, 0xff, 0xff]),
        );
        assert.equal(
          raw.get("grpc-status"),
          String(Code.INVALID_ARGUMENT),
          raw.get("grpc-message") ?? "",
        );
      });
    },
  });
}

Deno.test({
  name:
    "spec codes: a handler that throws synchronously is answered with its code, like a rejection",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "s3csi-codes-" });
    const server = new CsiServer({
      socketPath: `${dir}/csi.sock`,
      services: {
        node: {
          nodeGetInfo(): Promise<never> {
            throw invalidArgument("thrown synchronously");
          },
          nodeGetCapabilities(): Promise<never> {
            throw new TypeError("a bug");
          },
        },
      },
    });
    await server.start();
    const csi = connectCsi(`${dir}/csi.sock`, { timeoutMs: 10_000 });
    try {
      await assert.rejects(
        csi.node.nodeGetInfo({}),
        (e: { code?: number; details?: string }) =>
          e.code === Code.INVALID_ARGUMENT && e.details === "thrown synchronously",
      );
      await assert.rejects(
        csi.node.nodeGetCapabilities({}),
        (e: { code?: number }) => e.code === Code.INTERNAL,
      );
    } finally {
      csi.close();
      await server.stop(1000);
      await Deno.remove(dir, { recursive: true });
    }
  },
});
