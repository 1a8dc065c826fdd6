/**
 * {@link Provisioner}: an emulation of `csi-provisioner` for the sandbox and tests
 * (`github.com/kubernetes-csi/external-provisioner`, v5). It talks to the driver's Controller
 * socket like the sidecar (Probe, GetPluginInfo, capabilities), watches PVCs, PVs and
 * StorageClasses, and:
 *
 * - provisions PVCs whose class names our driver (setting `volume.kubernetes.io/storage-provisioner`
 *   itself, which kube-controller-manager does in a real cluster; WaitForFirstConsumer waits for
 *   `volume.kubernetes.io/selected-node`): resolves the provisioner secret (templates included),
 *   calls CreateVolume (`pvc-<uid>`), creates the PV with `spec.csi`, a claimRef, the deletion-secret
 *   annotations and the finalizer;
 * - deletes `Released` PVs with reclaim policy Delete that it owns: DeleteVolume with the deletion
 *   secret, then the PV, then the finalizer; failures become `VolumeFailedDelete` events and retries.
 *
 * Binding PVC↔PV and marking PVs `Released` is kube-controller-manager's job: in the sandbox the
 * `VolumeBinder` (`tests/testbed/control_plane/volume_binder.ts`) does it.
 *
 * @module
 */
import { connectCsi, type CsiClient } from "../../../src/csi/client.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { AlreadyExistsError } from "../../../src/kube/errors.ts";
import type { EventRecorder } from "../../../src/kube/event_recorder.ts";
import { Informer } from "../../../src/kube/informer.ts";
import { PVCS, PVS, STORAGE_CLASSES } from "../../../src/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../../src/kube/types.ts";
import { WorkQueue } from "../../../src/util/work_queue.ts";
import { errorMessage, TimeoutError } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import { DRIVER_NAME } from "../../../src/util/version.ts";
import {
  ANN,
  claimClass,
  createVolumeRequest,
  persistentVolume,
  ProvisionError,
  secretRef,
  type SecretType,
  type StorageClass,
  volumeNameFor,
} from "./provision_request.ts";
import { secretData, VolumeDeleter } from "./volume_deleter.ts";
import { pause } from "../../../src/util/sleep.ts";

/** Options of {@link Provisioner}. */
export interface ProvisionerOptions {
  /** API client. */
  readonly client: KubeClient;
  /** The driver's Controller socket path. */
  readonly socketPath: string;
  /** Events on PVCs and PVs. */
  readonly events?: EventRecorder;
  /** Driver name expected from GetPluginInfo. @default s3.csi.scality.com */
  readonly driverName?: string;
  /** Per-call deadline (`--timeout`). @default 10000 */
  readonly timeoutMs?: number;
  /** Retry backoff (`--retry-interval-start`/`-max`). @default 1000 / 300000 */
  readonly retryStartMs?: number;
  /** Backoff cap. */
  readonly retryMaxMs?: number;
  /** Add PVC/PV names to parameters (`--extra-create-metadata`). @default false */
  readonly extraCreateMetadata?: boolean;
}

/** The csi-provisioner emulation. */
export class Provisioner {
  readonly #o: ProvisionerOptions;
  readonly #log = logger("sandbox", "provisioner");
  readonly #driver: string;
  readonly #identity: string;
  readonly #pvcs: Informer<PersistentVolumeClaim>;
  readonly #pvs: Informer<PersistentVolume>;
  readonly #classes: Informer<StorageClass>;
  readonly #queue: WorkQueue;
  readonly #stop = new AbortController();
  #csi: CsiClient | undefined;
  #deleter!: VolumeDeleter;
  #tasks: Promise<unknown>[] = [];

  /** Create the provisioner; {@link start} connects and starts watching. */
  constructor(options: ProvisionerOptions) {
    this.#o = options;
    this.#driver = options.driverName ?? DRIVER_NAME;
    this.#identity = `${Date.now()}-${Math.floor(Math.random() * 10000)}-${this.#driver}`;
    this.#pvcs = new Informer(options.client, PVCS);
    this.#pvs = new Informer(options.client, PVS);
    this.#classes = new Informer(options.client, STORAGE_CLASSES);
    this.#queue = new WorkQueue({
      workers: 4,
      baseDelayMs: options.retryStartMs ?? 1000,
      maxDelayMs: options.retryMaxMs ?? 300_000,
      process: async (key) => ((await this.#sync(key)) ? {} : { requeue: true }),
    });
  }

  /**
   * Connect (Probe until ready, at most `timeoutMs`×3), check the driver's name and capabilities,
   * start the informers and the queue. @throws {Error} when the driver is not a provisioner
   */
  async start(timeoutMs = 30_000): Promise<void> {
    const csi = connectCsi(this.#o.socketPath, { timeoutMs: this.#o.timeoutMs ?? 10_000 });
    this.#csi = csi;
    this.#deleter = new VolumeDeleter({
      client: this.#o.client,
      csi,
      driverName: this.#driver,
      events: (pv, reason, message) => this.#event(pv, "Warning", reason, message),
    });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const probe = await csi.identity.probe({});
        if (probe.ready?.value !== false) break;
      } catch (err) {
        if (Date.now() > deadline) {
          throw new TimeoutError("the driver's Probe", timeoutMs, { cause: err });
        }
      }
      if (Date.now() > deadline) throw new TimeoutError("the driver to be ready", timeoutMs);
      await pause(1000, this.#stop.signal);
    }
    const info = await csi.identity.getPluginInfo({});
    if (info.name !== this.#driver) {
      throw new Error(`Driver name is "${info.name}", expected "${this.#driver}"`);
    }
    const plugin = await csi.identity.getPluginCapabilities({});
    const controller = await csi.controller.controllerGetCapabilities({});
    if (
      !plugin.capabilities?.some((c) => c.service?.type === "CONTROLLER_SERVICE") ||
      !controller.capabilities?.some((c) => c.rpc?.type === "CREATE_DELETE_VOLUME")
    ) {
      throw new Error(
        "CSI driver does not support dynamic provisioning: plugin CONTROLLER_SERVICE or controller CREATE_DELETE_VOLUME capability is not reported",
      );
    }
    const q = this.#queue;
    this.#pvcs.on({
      add: (c) => q.add(`claim/${c.metadata.namespace}/${c.metadata.name}`),
      update: (_, c) => q.add(`claim/${c.metadata.namespace}/${c.metadata.name}`),
    });
    this.#pvs.on({
      add: (v) => q.add(`volume/${v.metadata.name}`),
      update: (_, v) => q.add(`volume/${v.metadata.name}`),
    });
    this.#classes.on({
      add: () =>
        this.#pvcs.list().forEach((c) => q.add(`claim/${c.metadata.namespace}/${c.metadata.name}`)),
    });
    const signal = this.#stop.signal;
    this.#tasks.push(this.#pvcs.run(signal), this.#pvs.run(signal), this.#classes.run(signal));
    for (const i of [this.#pvcs, this.#pvs, this.#classes]) await i.waitForSync(timeoutMs, signal);
    this.#tasks.push(q.run(signal));
    this.#log.info("Provisioner for {driver} started", { driver: this.#driver });
  }

  /** Stop watching and close the connection. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.allSettled(this.#tasks);
    this.#csi?.close();
  }

  /** One key; true when done, false to retry with backoff. */
  async #sync(key: string): Promise<boolean> {
    const [kind, ...rest] = key.split("/");
    try {
      if (kind === "claim") {
        const pvc = this.#pvcs.get(rest.join("/"));
        return pvc ? await this.#syncClaim(pvc) : true;
      }
      const pv = this.#pvs.get(rest.join("/"));
      return pv ? await this.#deleter.sync(pv) : true;
    } catch (err) {
      this.#log.warn("Provisioner: {key} failed: {error}", { key, error: errorMessage(err) });
      return false;
    }
  }

  async #event(
    obj: PersistentVolumeClaim | PersistentVolume,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
  ) {
    const kind = "claimRef" in (obj.spec ?? {}) || "csi" in (obj.spec ?? {})
      ? "PersistentVolume"
      : "PersistentVolumeClaim";
    await this.#o.events?.record({ ...obj, kind }, type, reason, message);
  }

  async #syncClaim(pvc: PersistentVolumeClaim): Promise<boolean> {
    if (pvc.metadata.deletionTimestamp || pvc.spec.volumeName) return true;
    const sc = this.#classes.get(claimClass(pvc));
    if (!sc || sc.provisioner !== this.#driver) return true;
    const ann = pvc.metadata.annotations ?? {};
    const claimedBy = ann[ANN.storageProvisioner] ?? ann[ANN.betaStorageProvisioner];
    if (claimedBy !== undefined && claimedBy !== this.#driver) return true;
    if (sc.volumeBindingMode === "WaitForFirstConsumer" && !ann[ANN.selectedNode]) return true;
    if (claimedBy === undefined) {
      // kube-controller-manager's setClaimProvisioner; the update event brings us back.
      await this.#o.client.patch(PVCS, pvc.metadata.name!, pvc.metadata.namespace, {
        metadata: {
          annotations: {
            [ANN.storageProvisioner]: this.#driver,
            [ANN.betaStorageProvisioner]: this.#driver,
          },
        },
      });
      return true;
    }
    const pvName = volumeNameFor(pvc);
    if (this.#pvs.get(pvName) || await this.#o.client.get(PVS, pvName)) return true;
    const claim = `${pvc.metadata.namespace}/${pvc.metadata.name}`;
    if (pvc.spec.selector) {
      await this.#event(pvc, "Warning", "ProvisioningFailed", "claim Selector is not supported");
      return true;
    }
    let request;
    const refs: Partial<Record<SecretType, { name: string; namespace: string }>> = {};
    try {
      request = createVolumeRequest(pvc, sc);
      for (
        const t of [
          "provisioner",
          "node-publish",
          "controller-publish",
          "node-stage",
          "controller-expand",
          "node-expand",
        ] as const
      ) {
        const ref = secretRef(sc.parameters ?? {}, t, pvc, pvName);
        if (ref) refs[t] = ref;
      }
      if (this.#o.extraCreateMetadata) {
        request.parameters = {
          ...request.parameters,
          "csi.storage.k8s.io/pvc/name": pvc.metadata.name!,
          "csi.storage.k8s.io/pvc/namespace": pvc.metadata.namespace!,
          "csi.storage.k8s.io/pv/name": pvName,
        };
      }
    } catch (err) {
      await this.#event(
        pvc,
        "Warning",
        "ProvisioningFailed",
        `failed to provision volume with StorageClass "${sc.metadata.name}": ${errorMessage(err)}`,
      );
      return !(err instanceof ProvisionError) ? false : true;
    }
    if (refs.provisioner) {
      const data = await secretData(this.#o.client, refs.provisioner);
      if (!data) {
        await this.#event(
          pvc,
          "Warning",
          "ProvisioningFailed",
          `failed to provision volume with StorageClass "${sc.metadata.name}": error getting secret ${refs.provisioner.name} in namespace ${refs.provisioner.namespace}: not found`,
        );
        return false;
      }
      request.secrets = data;
    }
    await this.#event(
      pvc,
      "Normal",
      "Provisioning",
      `External provisioner is provisioning volume for claim "${claim}"`,
    );
    let volume;
    try {
      volume = (await this.#csi!.controller.createVolume(request)).volume;
    } catch (err) {
      const e = err as { code?: number; details?: string };
      await this.#event(
        pvc,
        "Warning",
        "ProvisioningFailed",
        `failed to provision volume with StorageClass "${sc.metadata.name}": rpc error: code = ${e.code} desc = ${
          e.details ?? errorMessage(err)
        }`,
      );
      return false;
    }
    if (!volume?.volumeId) {
      await this.#event(pvc, "Warning", "ProvisioningFailed", "CreateVolume returned no volume ID");
      return false;
    }
    const pv = persistentVolume(pvc, sc, volume, this.#identity, refs);
    try {
      await this.#o.client.create(PVS, pv);
    } catch (err) {
      if (!(err instanceof AlreadyExistsError)) throw err;
    }
    this.#log.info("Provisioned {pv} for {claim}", { pv: pvName, claim });
    await this.#event(
      pvc,
      "Normal",
      "ProvisioningSucceeded",
      `Successfully provisioned volume ${pvName}`,
    );
    return true;
  }
}
