/**
 * A minimal PV controller (kube-controller-manager's `persistentvolume` controller) for static
 * volumes, after `pkg/controller/volume/persistentvolume/pv_controller.go` of `k8s.io/kubernetes`:
 *
 * - a PV without `claimRef` becomes `Available`;
 * - a PVC naming a PV, or matching the smallest Available PV (capacity, access modes, class, volume
 *   mode, label selector), is bound in the real order: PV `claimRef` (+ `bound-by-controller`), PV
 *   status `Bound`, PVC `volumeName` (+ `bind-completed`, `bound-by-controller`), PVC status
 *   `Bound` with `accessModes` and `capacity`;
 * - a PV whose claim is gone becomes `Released` and follows its reclaim policy: `Retain` keeps it;
 *   `Delete` of a CSI PV is the external provisioner's job (KCM never deletes CSI PVs);
 * - a bound PVC whose PV is gone becomes `Lost`.
 *
 * It syncs every object on each PV/PVC event (debounced) and every `resyncMs`.
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import { Informer } from "../../../src/kube/informer.ts";
import { PVCS, PVS } from "../../../src/kube/resources.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import type { ApiEventRecorder } from "../../../src/kube/event_recorder.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../kubelet/k8s_types.ts";
import { nonNegativeQuantity } from "../../../src/kube/quantity.ts";

/** Annotation set on both sides when the controller chose the binding. */
export const ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller";
/** Annotation set on the PVC once binding is complete. */
export const ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed";

/** Bytes of a storage quantity such as `10Gi`, `1G`, `1200`; NaN when absent or unparsable. */
function storageBytes(q: string | undefined): number {
  return (q === undefined ? undefined : nonNegativeQuantity(q)) ?? NaN;
}

/** True when `pv` satisfies `pvc` (all of `findBestMatchForClaim`'s checks but availability). */
export function pvMatchesClaim(pv: PersistentVolume, pvc: PersistentVolumeClaim): boolean {
  const want = storageBytes(pvc.spec.resources?.requests?.storage ?? "0");
  const have = storageBytes(pv.spec.capacity?.storage);
  if (!(have >= want)) return false;
  const modes = pv.spec.accessModes ?? [];
  if (!(pvc.spec.accessModes ?? []).every((m) => modes.includes(m))) return false;
  if ((pvc.spec.storageClassName ?? "") !== (pv.spec.storageClassName ?? "")) return false;
  if ((pvc.spec.volumeMode ?? "Filesystem") !== (pv.spec.volumeMode ?? "Filesystem")) return false;
  const labels = pv.metadata.labels ?? {};
  if (!Object.entries(pvc.spec.selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v)) {
    return false;
  }
  return !pv.metadata.deletionTimestamp;
}

/** The smallest PV that can bind `pvc`: Available, or pre-bound to this claim. */
export function findBestMatch(
  pvs: readonly PersistentVolume[],
  pvc: PersistentVolumeClaim,
): PersistentVolume | undefined {
  const candidates = pvs.filter((pv) => {
    const ref = pv.spec.claimRef;
    const preBound = ref?.name === pvc.metadata.name && ref?.namespace === pvc.metadata.namespace &&
      (!ref.uid || ref.uid === pvc.metadata.uid);
    if (ref && !preBound) return false;
    if (!preBound && pv.status?.phase !== "Available") return false;
    return pvMatchesClaim(pv, pvc);
  });
  candidates.sort((a, b) =>
    storageBytes(a.spec.capacity?.storage) - storageBytes(b.spec.capacity?.storage)
  );
  return candidates[0];
}

/** Options of {@link VolumeBinder}. */
export interface VolumeBinderOptions {
  readonly client: KubeClient;
  /** Events on PVCs (FailedBinding, VolumeMismatch, ClaimLost). */
  readonly events?: ApiEventRecorder;
  /** @default 15000 (`PVClaimBinderSyncPeriod`) */
  readonly resyncMs?: number;
}

/** The controller. */
export class VolumeBinder {
  readonly #o: VolumeBinderOptions;
  readonly #log = logger("sandbox", "volume-binder");
  readonly #stop = new AbortController();
  readonly #pvs: Informer<PersistentVolume>;
  readonly #pvcs: Informer<PersistentVolumeClaim>;
  #tasks: Promise<unknown>[] = [];
  #running: Promise<void> = Promise.resolve();
  #pending = false;
  #timer: ReturnType<typeof setInterval> | undefined;

  /** Create the binder. */
  constructor(options: VolumeBinderOptions) {
    this.#o = options;
    this.#pvs = new Informer<PersistentVolume>(options.client, PVS);
    this.#pvcs = new Informer<PersistentVolumeClaim>(options.client, PVCS);
  }

  /** Start; resolves once both caches are synced. */
  async start(timeoutMs = 30_000): Promise<void> {
    const kick = () => this.#kick();
    this.#pvs.on({ add: kick, update: kick, delete: kick });
    this.#pvcs.on({ add: kick, update: kick, delete: kick });
    this.#tasks.push(this.#pvs.run(this.#stop.signal), this.#pvcs.run(this.#stop.signal));
    await this.#pvs.waitForSync(timeoutMs, this.#stop.signal);
    await this.#pvcs.waitForSync(timeoutMs, this.#stop.signal);
    this.#timer = setInterval(kick, this.#o.resyncMs ?? 15_000);
    this.#kick();
  }

  /** Stop. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#stop.abort();
    await Promise.allSettled([...this.#tasks, this.#running]);
  }

  /** Resolves after a full sync that started after this call. */
  async settle(): Promise<void> {
    this.#kick();
    await this.#running;
  }

  #kick(): void {
    if (this.#pending || this.#stop.signal.aborted) return;
    this.#pending = true;
    this.#running = this.#running.then(async () => {
      this.#pending = false;
      if (this.#stop.signal.aborted) return;
      try {
        await this.syncAll();
      } catch (err) {
        this.#log.warn("Volume binder sync failed: {error}", { error: errorMessage(err) });
      }
    });
  }

  /** One pass over every PV and PVC (reads fresh objects from the API). */
  async syncAll(): Promise<void> {
    const c = this.#o.client;
    const pvcs = (await c.list<PersistentVolumeClaim>(PVCS)).items;
    for (const pvc of pvcs) await this.#syncClaim(pvc);
    const pvs = (await c.list<PersistentVolume>(PVS)).items;
    const claims = new Map(
      (await c.list<PersistentVolumeClaim>(PVCS)).items.map((
        p,
      ) => [`${p.metadata.namespace}/${p.metadata.name}`, p]),
    );
    for (const pv of pvs) await this.#syncVolume(pv, claims);
  }

  async #setPvPhase(pv: PersistentVolume, phase: string): Promise<void> {
    if (pv.status?.phase === phase) return;
    await this.#o.client.patch(PVS, pv.metadata.name, undefined, { status: { phase } }, {
      subresource: "status",
    });
    this.#log.info("PV {pv} is {phase}", { pv: pv.metadata.name, phase });
  }

  async #syncVolume(
    pv: PersistentVolume,
    claims: Map<string, PersistentVolumeClaim>,
  ): Promise<void> {
    if (pv.metadata.deletionTimestamp) return;
    const ref = pv.spec.claimRef;
    if (!ref || !ref.uid) {
      await this.#setPvPhase(pv, "Available");
      return;
    }
    const claim = claims.get(`${ref.namespace}/${ref.name}`);
    if (claim && claim.metadata.uid === ref.uid) {
      if (claim.spec.volumeName === pv.metadata.name) await this.#setPvPhase(pv, "Bound");
      return;
    }
    if (pv.status?.phase === "Released" || pv.status?.phase === "Failed") return;
    await this.#setPvPhase(pv, "Released");
    const policy = pv.spec.persistentVolumeReclaimPolicy ?? "Retain";
    if (policy === "Delete" && pv.spec.csi) {
      this.#log.info(
        "PV {pv} released with reclaim policy Delete: left to the external provisioner of {driver}",
        { pv: pv.metadata.name, driver: pv.spec.csi.driver },
      );
    }
  }

  async #syncClaim(pvc: PersistentVolumeClaim): Promise<void> {
    if (pvc.metadata.deletionTimestamp) return;
    const c = this.#o.client;
    const ns = pvc.metadata.namespace;
    const name = pvc.metadata.name;
    if (pvc.metadata.annotations?.[ANN_BIND_COMPLETED] && pvc.spec.volumeName) {
      const pv = await c.get<PersistentVolume>(PVS, pvc.spec.volumeName);
      if (!pv || pv.spec.claimRef?.uid !== pvc.metadata.uid) {
        if (pvc.status?.phase !== "Lost") {
          await c.patch(PVCS, name, ns, { status: { phase: "Lost" } }, { subresource: "status" });
          await this.#o.events?.record(
            { ...pvc, kind: "PersistentVolumeClaim" },
            "Warning",
            pv ? "ClaimMisbound" : "ClaimLost",
            pv
              ? "Two claims are bound to the same volume, this one is bound incorrectly"
              : "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
          );
        }
        return;
      }
      await this.#claimBoundStatus(pvc, pv);
      return;
    }
    if (!pvc.status?.phase) {
      await c.patch(PVCS, name, ns, { status: { phase: "Pending" } }, { subresource: "status" });
    }
    const pvcObj = { ...pvc, kind: "PersistentVolumeClaim" };
    let pv: PersistentVolume | undefined;
    let chosen = false;
    if (pvc.spec.volumeName) {
      pv = await c.get<PersistentVolume>(PVS, pvc.spec.volumeName);
      if (!pv) return; // the PV may appear later
      const ref = pv.spec.claimRef;
      if (
        ref &&
        (ref.name !== name || ref.namespace !== ns || (ref.uid && ref.uid !== pvc.metadata.uid))
      ) {
        await this.#o.events?.record(
          pvcObj,
          "Warning",
          "FailedBinding",
          `volume "${pv.metadata.name}" already bound to a different claim.`,
        );
        return;
      }
      if (!pvMatchesClaim(pv, pvc)) {
        await this.#o.events?.record(
          pvcObj,
          "Warning",
          "VolumeMismatch",
          'Cannot bind to requested volume "' + pv.metadata.name +
            '": requested PV is too small or its access modes, storage class or volume mode differ',
        );
        return;
      }
    } else {
      pv = findBestMatch((await c.list<PersistentVolume>(PVS)).items, pvc);
      chosen = true;
      if (!pv) {
        if (!pvc.spec.storageClassName) {
          await this.#o.events?.record(
            pvcObj,
            "Normal",
            "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set",
          );
        }
        return;
      }
    }
    await this.#bind(pv, pvc, chosen);
  }

  /** `bind()`: PV claimRef, PV status, PVC volumeName, PVC status — in that order. */
  async #bind(pv: PersistentVolume, pvc: PersistentVolumeClaim, chosen: boolean): Promise<void> {
    const c = this.#o.client;
    const ref = pv.spec.claimRef;
    const preBound = !!ref && ref.name === pvc.metadata.name &&
      ref.namespace === pvc.metadata.namespace;
    const pvPatch: Record<string, unknown> = {
      spec: {
        claimRef: {
          kind: "PersistentVolumeClaim",
          apiVersion: "v1",
          namespace: pvc.metadata.namespace,
          name: pvc.metadata.name,
          uid: pvc.metadata.uid,
          resourceVersion: pvc.metadata.resourceVersion,
        },
      },
    };
    if (!preBound) pvPatch.metadata = { annotations: { [ANN_BOUND_BY_CONTROLLER]: "yes" } };
    const boundPv = await c.patch<PersistentVolume>(PVS, pv.metadata.name, undefined, pvPatch);
    await this.#setPvPhase(boundPv, "Bound");
    const annotations: Record<string, string> = { [ANN_BIND_COMPLETED]: "yes" };
    if (chosen) annotations[ANN_BOUND_BY_CONTROLLER] = "yes";
    const boundPvc = await c.patch<PersistentVolumeClaim>(
      PVCS,
      pvc.metadata.name,
      pvc.metadata.namespace,
      {
        metadata: { annotations },
        spec: { volumeName: pv.metadata.name },
      },
    );
    await this.#claimBoundStatus(boundPvc, boundPv);
    this.#log.info("Bound PVC {pvc} to PV {pv}", {
      pvc: `${pvc.metadata.namespace}/${pvc.metadata.name}`,
      pv: pv.metadata.name,
    });
  }

  async #claimBoundStatus(pvc: PersistentVolumeClaim, pv: PersistentVolume): Promise<void> {
    if (pvc.status?.phase === "Bound") return;
    await this.#o.client.patch(PVCS, pvc.metadata.name, pvc.metadata.namespace, {
      status: {
        phase: "Bound",
        accessModes: pv.spec.accessModes ?? [],
        capacity: pv.spec.capacity ?? {},
      },
    }, { subresource: "status" });
  }
}
