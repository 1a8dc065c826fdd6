/**
 * The controller's part for csi-sanity's node publishes. In a cluster, the s3-csi-controller sees
 * the scheduled workload Pod, creates (or reuses) a Mountpoint Pod on the node and records the
 * assignment in a MountpointS3PodAttachment before kubelet calls NodePublishVolume; when the
 * workload goes it marks the Mountpoint Pod `needs-unmount`, and deletes it and the S3PA once it
 * has exited. csi-sanity knows nothing of this, so the conformance proxy calls {@link prepare}
 * before each NodePublishVolume that names a volume of ours and {@link release} after each
 * successful NodeUnpublishVolume. Mountpoint Pods are played like in the node tier: an API object
 * plus the real mounter binary running as uid 1000 on the pod's comm dir.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { API_VERSION } from "../../src/api/group_version.ts";
import {
  type MountpointS3PodAttachment,
  S3PAS,
} from "../../src/api/mountpoint_s3_pod_attachment.ts";
import type { NodePublishVolumeRequest } from "../../src/csi/gen/csi_types.ts";
import type { KubeObject } from "../../src/kube/client.ts";
import { PODS } from "../../src/kube/resources.ts";
import { ANNOTATION_NEEDS_UNMOUNT } from "../../src/mppod/labels.ts";
import { parseTargetPath, sourceMountDir } from "../../src/mppod/paths.ts";
import { findMount, readMountInfo } from "../../src/sys/mountinfo.ts";
import { KeyedMutex } from "../../src/util/keyed_mutex.ts";
import { type Harness, type MpPod, NODE } from "../testbed/harness/node_harness.ts";
import { removeOwnTree } from "./_remove_tree.ts";

/** One assignment: a Mountpoint Pod serving one (PV, volume) on this node. */
interface Assignment {
  readonly s3pa: string;
  readonly pod: MpPod;
  readonly workloads: Set<string>;
  /** Set once the teardown started: the pod takes no new workloads. */
  retiring: boolean;
}

/** Counts for the report. */
export interface AttachmentStats {
  /** Mountpoint Pods started. */
  started: number;
  /** Mountpoint Pods whose mounter exited 0 after `needs-unmount` and that were deleted. */
  retired: number;
  /** Successful publishes whose target was checked to be a bind of the pod's FUSE mount. */
  verifiedMounts: number;
}

/** Plays the controller for csi-sanity's publishes. */
export class Attachments {
  readonly #h: Harness;
  readonly #byKey = new Map<string, Assignment>();
  readonly #locks = new KeyedMutex();
  readonly #teardowns = new Set<Promise<void>>();
  readonly #problems: string[] = [];
  readonly stats: AttachmentStats = { started: 0, retired: 0, verifiedMounts: 0 };
  #seq = 0;

  /** Work on the harness's API emulator, kubelet root and mounter. */
  constructor(h: Harness) {
    this.#h = h;
  }

  /**
   * Make sure the workload of `targetPath` (a kubelet target) is assigned to a running Mountpoint
   * Pod for `req.volumeId`. Requests kubelet would never send for a PV of ours (no volume id, no
   * capability, no `bucketName` in the volume context, a target that is not kubelet's) are left
   * alone: the node plugin must reject them on its own.
   */
  async prepare(req: NodePublishVolumeRequest, targetPath: string): Promise<void> {
    const target = parseTargetPath(this.#h.root, targetPath);
    const volumeId = req.volumeId ?? "";
    if (!target || !volumeId || !req.volumeCapability || !req.volumeContext?.bucketName) return;
    const key = createHash("sha256").update(`${target.volumeName}\0${volumeId}`).digest("hex")
      .slice(0, 12);
    await this.#locks.run(key, async () => {
      let a = this.#byKey.get(key);
      if (a?.retiring) a = undefined;
      if (!a) {
        const pod = await this.#h.mountpointPod(`mp-sanity-${key}-${++this.#seq}`);
        this.stats.started++;
        a = { s3pa: `s3pa-sanity-${key}`, pod, workloads: new Set(), retiring: false };
        this.#byKey.set(key, a);
      }
      if (a.workloads.has(target.podUID)) return;
      a.workloads.add(target.podUID);
      await this.#writeS3pa(a, target.volumeName, volumeId, req);
    });
  }

  /**
   * After a successful NodePublishVolume: the target must be a bind mount of the FUSE mount the
   * node plugin made for the assigned Mountpoint Pod (the publish really mounted the bucket).
   */
  async verifyPublished(targetPath: string): Promise<void> {
    const target = parseTargetPath(this.#h.root, targetPath);
    const a = target && [...this.#byKey.values()].find((x) => x.workloads.has(target.podUID));
    if (!a) {
      this.#problems.push(`NodePublishVolume succeeded for ${targetPath} without an assignment`);
      return;
    }
    const mounts = await readMountInfo();
    const bind = findMount(mounts, targetPath);
    const source = findMount(mounts, sourceMountDir(this.#h.root, a.pod.name));
    if (
      !bind || !source || !bind.fsType.startsWith("fuse") || bind.majorMinor !== source.majorMinor
    ) {
      this.#problems.push(
        `NodePublishVolume succeeded but ${targetPath} is not a bind of ${a.pod.name}'s FUSE mount ` +
          `(target: ${bind ? `${bind.fsType} ${bind.majorMinor}` : "not mounted"}, source: ${
            source ? `${source.fsType} ${source.majorMinor}` : "not mounted"
          })`,
      );
      return;
    }
    this.stats.verifiedMounts++;
  }

  /** After a successful NodeUnpublishVolume: drop the workload; retire a pod left without any. */
  release(targetPath: string): void {
    const target = parseTargetPath(this.#h.root, targetPath);
    if (!target) return;
    for (const [key, a] of this.#byKey) {
      if (!a.workloads.has(target.podUID)) continue;
      const work = this.#locks.run(key, async () => {
        a.workloads.delete(target.podUID);
        if (a.workloads.size > 0 || a.retiring) return;
        a.retiring = true;
        this.#byKey.delete(key);
        await this.#retire(a);
      }).catch((err) => {
        this.#problems.push(`retiring ${a.pod.name}: ${err instanceof Error ? err.message : err}`);
      });
      this.#teardowns.add(work);
      work.finally(() => this.#teardowns.delete(work));
    }
  }

  /** Wait for every teardown; retire pods still assigned; return the problems seen. */
  async drain(): Promise<string[]> {
    while (this.#teardowns.size > 0) await Promise.all([...this.#teardowns]);
    for (const [key, a] of [...this.#byKey]) {
      this.#problems.push(
        `Mountpoint Pod ${a.pod.name} still had workloads ${[...a.workloads].join(", ")} ` +
          `at the end (csi-sanity published without unpublishing)`,
      );
      this.#byKey.delete(key);
      a.retiring = true;
      await this.#retire(a).catch((err) => this.#problems.push(`retiring ${a.pod.name}: ${err}`));
    }
    return [...this.#problems];
  }

  async #writeS3pa(
    a: Assignment,
    pv: string,
    volumeId: string,
    req: NodePublishVolumeRequest,
  ): Promise<void> {
    const kube = this.#h.kube;
    const spec = {
      nodeName: NODE,
      persistentVolumeName: pv,
      volumeID: volumeId,
      mountOptions: (req.volumeCapability?.mount?.mountFlags ?? []).join(","),
      workloadFSGroup: req.volumeCapability?.mount?.volumeMountGroup ?? "",
      authenticationSource: req.volumeContext?.authenticationSource === "secret"
        ? "secret" as const
        : "driver" as const,
      mountpointS3PodAttachments: {
        [a.pod.name]: [...a.workloads].map((w) => ({
          workloadPodUID: w,
          attachmentTime: new Date().toISOString(),
        })),
      },
    };
    const existing = await kube.get<MountpointS3PodAttachment & KubeObject>(S3PAS, a.s3pa);
    if (existing) {
      await kube.update(S3PAS, { ...existing, spec });
    } else {
      await kube.create(S3PAS, {
        apiVersion: API_VERSION,
        kind: "MountpointS3PodAttachment",
        metadata: { name: a.s3pa },
        spec,
      } as KubeObject);
    }
  }

  /**
   * The controller's and kubelet's clean exit of a Mountpoint Pod: annotate `needs-unmount`; the
   * node plugin's unmounter writes `mount.exit` and unmounts the source, so the mounter must exit
   * 0 on its own; then phase Succeeded, delete the pod and the S3PA, and remove the emptyDir.
   */
  async #retire(a: Assignment): Promise<void> {
    const { kube, root } = this.#h;
    await kube.patch(PODS, a.pod.name, "mount-s3", {
      metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: "true" } },
    }, { type: "merge" });
    const code = await Promise.race([
      a.pod.mounter.child.status.then((s) => s.code),
      new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 60_000)),
    ]);
    if (code !== 0) {
      throw new Error(
        `mounter of ${a.pod.name} did not exit 0 within 60 s of needs-unmount (got ${code}); ` +
          `log: ${a.pod.mounter.stderr().slice(-1500)}`,
      );
    }
    const fresh = await kube.get<KubeObject>(PODS, a.pod.name, "mount-s3");
    if (fresh) {
      await kube.update(PODS, { ...fresh, status: { phase: "Succeeded" } }, {
        subresource: "status",
      });
      await kube.delete(PODS, a.pod.name, "mount-s3", { gracePeriodSeconds: 0 });
    }
    await kube.delete(S3PAS, a.s3pa);
    // Kubelet removes the pod dir (the emptyDir) once the pod is gone; never across a mount.
    await removeOwnTree(`${root}/pods/${a.pod.uid}`, {
      parent: `${root}/pods`,
      namePrefix: a.pod.uid,
    });
    this.stats.retired++;
  }
}
