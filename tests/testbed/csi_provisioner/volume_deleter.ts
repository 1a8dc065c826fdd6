/**
 * The delete half of the csi-provisioner emulation (`Delete` in the sidecar's
 * `pkg/controller/controller.go`): for a PV this driver owns that is `Released` with reclaim policy
 * `Delete`, call DeleteVolume with the deletion secret named in the PV's annotations (if that
 * Secret cannot be read, the call goes without secrets, as the sidecar does), then delete the PV
 * and drop the provisioner's finalizer. A failed DeleteVolume becomes a `VolumeFailedDelete` event
 * and a retry. `Retain` PVs lose the finalizer.
 *
 * @module
 */
import type { CsiClient } from "../../../src/csi/client.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { PVS, SECRETS } from "../../../src/kube/resources.ts";
import type { PersistentVolume } from "../../../src/kube/types.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import { ANN, PV_FINALIZER } from "./provision_request.ts";

/** A Secret's data as strings; undefined when the Secret does not exist. */
export async function secretData(
  client: KubeClient,
  ref: { name: string; namespace: string },
): Promise<Record<string, string> | undefined> {
  const secret = await client.get<{ data?: Record<string, string> }>(
    SECRETS,
    ref.name,
    ref.namespace,
  );
  if (!secret) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) {
    out[k] = new TextDecoder().decode(Uint8Array.from(atob(v), (c) => c.charCodeAt(0)));
  }
  return out;
}

/** Options of {@link VolumeDeleter}. */
export interface VolumeDeleterOptions {
  /** API client. */
  readonly client: KubeClient;
  /** The driver's Controller service. */
  readonly csi: CsiClient;
  /** PVs provisioned by (or, without annotation, of) this driver are ours. */
  readonly driverName: string;
  /** Warning events on PVs. */
  readonly events: (pv: PersistentVolume, reason: string, message: string) => Promise<void>;
}

/** Deletes released PVs. */
export class VolumeDeleter {
  readonly #o: VolumeDeleterOptions;
  readonly #log = logger("sandbox", "provisioner");

  /** Create the deleter. */
  constructor(options: VolumeDeleterOptions) {
    this.#o = options;
  }

  /** True when `pv` is this driver's (`isProvisionerForVolume`). */
  owns(pv: PersistentVolume): boolean {
    const by = pv.metadata.annotations?.[ANN.provisionedBy];
    return by !== undefined
      ? by === this.#o.driverName
      : pv.spec.csi?.driver === this.#o.driverName;
  }

  /** Handle one PV; true when done, false to retry with backoff. */
  async sync(pv: PersistentVolume): Promise<boolean> {
    if (!this.owns(pv)) return true;
    const hasFinalizer = (pv.metadata.finalizers ?? []).includes(PV_FINALIZER);
    if ((pv.spec.persistentVolumeReclaimPolicy ?? "Delete") !== "Delete") {
      if (hasFinalizer) await this.#dropFinalizer(pv);
      return true;
    }
    if (pv.status?.phase !== "Released") return true;
    if (!hasFinalizer && pv.metadata.deletionTimestamp) return true;
    const ann = pv.metadata.annotations ?? {};
    let secrets: Record<string, string> = {};
    const name = ann[ANN.deletionSecretName];
    const namespace = ann[ANN.deletionSecretNamespace];
    if (name && namespace) {
      const data = await secretData(this.#o.client, { name, namespace });
      if (data) {
        secrets = data;
      } else {
        this.#log.warn("Deletion secret {ns}/{name} not found; deleting without secrets", {
          ns: namespace,
          name,
        });
      }
    }
    try {
      await this.#o.csi.controller.deleteVolume({
        volumeId: pv.spec.csi?.volumeHandle ?? "",
        secrets,
      });
    } catch (err) {
      const e = err as { code?: number; details?: string };
      await this.#o.events(
        pv,
        "VolumeFailedDelete",
        `rpc error: code = ${e.code} desc = ${e.details ?? errorMessage(err)}`,
      );
      return false;
    }
    await this.#o.client.delete(PVS, pv.metadata.name!);
    await this.#dropFinalizer(pv);
    this.#log.info("Deleted {pv}", { pv: pv.metadata.name });
    return true;
  }

  async #dropFinalizer(pv: PersistentVolume): Promise<void> {
    const current = await this.#o.client.get<PersistentVolume>(PVS, pv.metadata.name!);
    if (!current?.metadata.finalizers?.includes(PV_FINALIZER)) return;
    await this.#o.client.patch(PVS, pv.metadata.name!, undefined, {
      metadata: {
        finalizers: current.metadata.finalizers.filter((f) => f !== PV_FINALIZER),
        resourceVersion: current.metadata.resourceVersion,
      },
    });
  }
}
