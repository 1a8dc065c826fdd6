/**
 * The controller test fixture: volumes, workloads and controller processes on a {@link TestCluster}.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { MountpointS3PodAttachment } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { PODS, PVCS, PVS } from "../../src/kube/resources.ts";
import { S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import type { Pod } from "../../src/kube/types.ts";
import { ROOT, type Running, spawnBinary } from "../_helpers.ts";
import type { TestCluster } from "../testbed/harness/controller_cluster.ts";
import { preboundClaim, preboundPv } from "../testbed/control_plane/prebound_volume.ts";

/** What the controller tests work with. */
export interface Fixture {
  readonly c: TestCluster;
  readonly pvPrefix: string;
  /** Start a controller process (`env` adds to KUBECONFIG of the cluster). */
  controller(extra?: string[], env?: Record<string, string>): Running;
  volume(name: string, opts?: { bound?: boolean; mountOptions?: string[] }): Promise<void>;
  workload(name: string, pv: string, opts?: { node?: string; fsGroup?: number }): Promise<Pod>;
  attachments(): Promise<MountpointS3PodAttachment[]>;
  mpPods(): Promise<Pod[]>;
  setPhase(pod: Pod, phase: string): Promise<void>;
}

/** The fixture of cluster `c`. */
export function fixture(c: TestCluster): Fixture {
  const pvPrefix = `pv-${c.namespace}`;
  return {
    c,
    pvPrefix,
    controller: (extra = [], env = {}) =>
      spawnBinary("controller", [
        "--mountpoint-namespace",
        c.mpNamespace,
        "--leader-election-namespace",
        c.mpNamespace,
        "--leader-election-lease-duration=3s",
        "--leader-election-renew-deadline=2s",
        "--leader-election-retry-period=500ms",
        "--metrics-address",
        "127.0.0.1:0",
        "--log-level",
        "debug",
        ...extra,
      ], { KUBECONFIG: c.kubeconfig, ...env }),
    async volume(name, opts = {}) {
      const pv = `${pvPrefix}-${name}`;
      const claim = `claim-${name}`;
      // An unbound claim has no PV at all (a pre-bound PV would be bound by kube-controller-manager).
      if (opts.bound !== false) {
        await c.client.create(
          PVS,
          preboundPv(pv, { name: claim, namespace: c.namespace }, {
            volumeHandle: `${pv}-handle`,
            mountOptions: opts.mountOptions ?? ["allow-delete"],
          }),
        );
      }
      await c.client.create(
        PVCS,
        preboundClaim(claim, c.namespace, opts.bound === false ? undefined : pv),
      );
      if (opts.bound !== false) {
        await c.client.patch(PVCS, claim, c.namespace, { status: { phase: "Bound" } }, {
          subresource: "status",
        });
      }
    },
    async workload(name, pv, opts = {}) {
      return await c.client.create<Pod>(PODS, {
        metadata: { name, namespace: c.namespace },
        spec: {
          nodeName: opts.node ?? "node-1",
          containers: [{ name: "app", image: "busybox" }],
          volumes: [{ name: "data", persistentVolumeClaim: { claimName: `claim-${pv}` } }],
          ...(opts.fsGroup !== undefined ? { securityContext: { fsGroup: opts.fsGroup } } : {}),
        },
      });
    },
    async attachments() {
      const all = await c.client.list<MountpointS3PodAttachment>(S3PAS);
      return all.items.filter((a) => a.spec.persistentVolumeName.startsWith(pvPrefix));
    },
    async mpPods() {
      return (await c.client.list<Pod>(PODS, { namespace: c.mpNamespace })).items;
    },
    async setPhase(pod, phase) {
      await c.client.patch(
        PODS,
        pod.metadata.name!,
        pod.metadata.namespace,
        { status: { phase } },
        { subresource: "status" },
      );
    },
  };
}

let logSeq = 0;

/** Stop a controller (SIGTERM), keep its log under dist/test-logs, and expect exit code 0. */
export async function stopController(p: Running): Promise<void> {
  const code = await p.stop("SIGTERM", 15_000);
  // Keep every controller log for post-mortems (CI uploads dist/).
  await Deno.mkdir(`${ROOT}dist/test-logs`, { recursive: true });
  await Deno.writeTextFile(
    `${ROOT}dist/test-logs/controller-${Date.now()}-${++logSeq}.log`,
    p.stderr(),
  );
  assert.equal(code, 0, `controller exit code; log tail:\n${p.stderr().slice(-3000)}`);
}
