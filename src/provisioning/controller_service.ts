/**
 * The CSI Controller service (dynamic provisioning), served by `s3-csi-controller` next to the
 * `csi-provisioner` sidecar: ControllerGetCapabilities (CREATE_DELETE_VOLUME), CreateVolume,
 * DeleteVolume, ValidateVolumeCapabilities; every other RPC answers Unimplemented (the server does
 * that for methods this class does not define).
 *
 * - CreateVolume is idempotent by name: the bucket (mode `bucket`) or key prefix (mode `prefix`) is
 *   derived from the name, and ownership is recorded on it (bucket tags, or a marker object at the
 *   prefix) with the volume ID and a fingerprint of the request; a retry returns the same volume, a
 *   different request under the same name gets AlreadyExists.
 * - DeleteVolume applies the delete policy recorded in the volume ID, and only to buckets/prefixes
 *   whose ownership record names exactly this volume ID; a volume that no longer exists is success.
 *
 * @module
 */
import { VOLUME_CONTEXT } from "../csi/volume_context.ts";
import { createHash } from "node:crypto";
import { Code, CsiError, invalidArgument } from "../csi/errors.ts";
import type {
  ControllerGetCapabilitiesResponse,
  ControllerHandlers,
  CreateVolumeRequest,
  CreateVolumeResponse,
  DeleteVolumeRequest,
  DeleteVolumeResponse,
  ValidateVolumeCapabilitiesRequest,
  ValidateVolumeCapabilitiesResponse,
} from "../csi/gen/csi_types.ts";
import type { BucketStore, BucketStoreFactory, S3Credentials } from "../s3/bucket_store.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { logger } from "../util/log.ts";
import { capabilitiesProblem, checkCapabilities, requestedCapacity } from "./capabilities.ts";
import { createCredentials, deleteCredentials, type ResolvedCredentials } from "./credentials.ts";
import { ensureBucket, ensurePrefix, type Ownership } from "./ownership.ts";
import { parseParameters, type VolumeParams } from "./parameters.ts";
import { bucketNameFor } from "./bucket_naming.ts";
import { s3Failure } from "./s3_failure.ts";
import { deleteVolumeData } from "./volume_deletion.ts";
import { formatVolumeId, MAX_VOLUME_ID, parseVolumeId, type VolumeRef } from "./volume_id.ts";

/** Options of {@link ControllerService}. */
export interface ControllerServiceOptions {
  /** Makes S3 stores (the endpoint, CA and proxy are the factory's). */
  readonly stores: BucketStoreFactory;
  /** Region when the StorageClass sets none. */
  readonly defaultRegion: string;
  /** Driver credentials; used only when the StorageClass names no provisioner secret. */
  readonly driverCredentials: S3Credentials | undefined;
  /** Endpoint, for messages. */
  readonly endpoint: string | undefined;
  /** Deadline of one CreateVolume/DeleteVolume's S3 work. @default 120000 */
  readonly operationTimeoutMs?: number;
}

/** Volume context keys (what `src/node/publish_request.ts` reads). */
/** Key prefix in a volume name: safe names are kept, others hashed. */
function prefixFor(name: string, basePrefix: string): string {
  const safe = /^[A-Za-z0-9._-]{1,63}$/.test(name) && name !== "." && name !== "..";
  const leaf = safe ? name : `v-${createHash("sha256").update(name).digest("hex").slice(0, 32)}`;
  return `${basePrefix}${leaf}/`;
}

/** The Controller service. */
export class ControllerService implements Partial<ControllerHandlers> {
  readonly #o: ControllerServiceOptions;
  readonly #log = logger("controller", "provisioning");
  readonly #locks = new KeyedMutex();

  /** Create the service. */
  constructor(options: ControllerServiceOptions) {
    this.#o = options;
  }

  /** CREATE_DELETE_VOLUME only (no attach, no topology, no snapshots, no expansion). */
  controllerGetCapabilities(): Promise<ControllerGetCapabilitiesResponse> {
    return Promise.resolve({
      capabilities: [{ rpc: { type: "CREATE_DELETE_VOLUME" }, type: "rpc" }],
    });
  }

  /** Create (or find again) the bucket or prefix of volume `req.name`. */
  async createVolume(req: CreateVolumeRequest): Promise<CreateVolumeResponse> {
    const name = req.name ?? "";
    if (!name) {
      throw invalidArgument(
        "Volume name not provided: CreateVolume needs a name (csi-provisioner sends pvc-<uid>)",
      );
    }
    checkCapabilities(req.volumeCapabilities);
    if (req.volumeContentSource?.snapshot || req.volumeContentSource?.volume) {
      throw invalidArgument(
        "Volume content sources (snapshots, clones) are not supported: remove dataSource from the PVC",
      );
    }
    const params = parseParameters(req.parameters);
    const capacity = requestedCapacity(req.capacityRange);
    const creds = createCredentials(req.secrets, this.#o.driverCredentials);
    const authenticationSource = params.authenticationSource ?? creds.source;
    const ref: VolumeRef = {
      mode: params.mode,
      deletePolicy: params.deletePolicy,
      credentials: creds.source,
      region: params.region ?? "",
      bucket: params.mode === "bucket"
        ? bucketNameFor(name, params.bucketNamePrefix)
        : params.bucketName!,
      prefix: params.mode === "prefix" ? prefixFor(name, params.basePrefix) : "",
    };
    const volumeId = formatVolumeId(ref);
    if (volumeId.length > MAX_VOLUME_ID) {
      throw invalidArgument(
        `The volume ID would be ${volumeId.length} bytes, over the CSI limit of ${MAX_VOLUME_ID}: use a shorter ${
          params.mode === "prefix" ? "bucketName or basePrefix" : "bucketNamePrefix"
        }`,
      );
    }
    const own: Ownership = {
      name,
      volumeId,
      fingerprint: fingerprint(volumeId, capacity, authenticationSource, params),
      capacity,
      pvcName: params.pvcName,
      pvcNamespace: params.pvcNamespace,
    };
    const lockKey = `${ref.bucket}/${ref.prefix}`;
    await this.#withStore(
      creds,
      ref,
      `provision volume "${name}"`,
      (store, signal) =>
        this.#locks.run(
          lockKey,
          () =>
            ref.mode === "bucket"
              ? ensureBucket(store, ref.bucket, own, signal)
              : ensurePrefix(store, ref.bucket, ref.prefix, own, signal),
        ),
    );
    const volumeContext: Record<string, string> = {
      [VOLUME_CONTEXT.bucketName]: ref.bucket,
      [VOLUME_CONTEXT.authenticationSource]: authenticationSource,
    };
    if (ref.prefix) volumeContext[VOLUME_CONTEXT.prefix] = ref.prefix;
    if (params.region) volumeContext[VOLUME_CONTEXT.region] = params.region;
    if (params.engine) volumeContext[VOLUME_CONTEXT.engine] = params.engine;
    Object.assign(volumeContext, params.passthrough);
    this.#log.info("Volume {name} is {volumeId}", { name, volumeId });
    return { volume: { volumeId, capacityBytes: capacity, volumeContext } };
  }

  /** Apply the volume's delete policy; success when the volume no longer exists. */
  async deleteVolume(req: DeleteVolumeRequest): Promise<DeleteVolumeResponse> {
    const volumeId = req.volumeId ?? "";
    if (!volumeId) throw invalidArgument("Volume ID not provided");
    const ref = parseVolumeId(volumeId);
    if (!ref) {
      this.#log.warn(
        "DeleteVolume {volumeId}: not a volume this driver provisioned; nothing deleted (give static PVs reclaimPolicy Retain)",
        { volumeId },
      );
      return {};
    }
    if (ref.deletePolicy === "retain") {
      this.#log.info("DeleteVolume {volumeId}: deletePolicy retain, data kept in {where}", {
        volumeId,
        where: `${ref.bucket}/${ref.prefix}`,
      });
      return {};
    }
    const creds = deleteCredentials(
      ref.credentials,
      volumeId,
      req.secrets,
      this.#o.driverCredentials,
    );
    await this.#withStore(
      creds,
      ref,
      `delete volume "${volumeId}"`,
      (store, signal) =>
        this.#locks.run(
          `${ref.bucket}/${ref.prefix}`,
          () => deleteVolumeData(store, volumeId, ref, signal),
        ),
    );
    return {};
  }

  /** Confirm the capabilities S3 volumes can serve. */
  async validateVolumeCapabilities(
    req: ValidateVolumeCapabilitiesRequest,
  ): Promise<ValidateVolumeCapabilitiesResponse> {
    const volumeId = req.volumeId ?? "";
    if (!volumeId) throw invalidArgument("Volume ID not provided");
    if (!req.volumeCapabilities?.length) throw invalidArgument("Volume capabilities not provided");
    const ref = parseVolumeId(volumeId);
    if (!ref) {
      throw new CsiError(Code.NOT_FOUND, `Volume "${volumeId}" was not provisioned by this driver`);
    }
    const creds = deleteCredentials(
      ref.credentials,
      volumeId,
      req.secrets,
      this.#o.driverCredentials,
    );
    const exists = await this.#withStore(
      creds,
      ref,
      `look up volume "${volumeId}"`,
      async (store, signal) =>
        (await store.head(ref.bucket, signal)) !== "missing" &&
        (ref.mode === "bucket" ||
          (await store.headObject(ref.bucket, ref.prefix, signal)) !== undefined),
    );
    if (!exists) throw new CsiError(Code.NOT_FOUND, `Volume "${volumeId}" does not exist`);
    const problem = capabilitiesProblem(req.volumeCapabilities) ??
      (() => {
        try {
          parseParameters(req.parameters);
          return undefined;
        } catch (err) {
          return (err as Error).message;
        }
      })();
    if (problem) return { message: problem };
    return {
      confirmed: {
        volumeContext: req.volumeContext ?? {},
        volumeCapabilities: req.volumeCapabilities,
        parameters: req.parameters ?? {},
      },
    };
  }

  async #withStore<T>(
    creds: ResolvedCredentials,
    ref: VolumeRef,
    action: string,
    fn: (store: BucketStore, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const store = this.#o.stores({
      credentials: creds.credentials,
      region: ref.region || this.#o.defaultRegion,
    });
    const signal = AbortSignal.timeout(this.#o.operationTimeoutMs ?? 120_000);
    try {
      return await fn(store, signal);
    } catch (err) {
      const failure = s3Failure(err, { action, source: creds.source, endpoint: this.#o.endpoint });
      // The answer (and so the PVC's Event) does not name the access key id; the log does.
      this.#log.warn("S3 failed to {action} with access key id {accessKeyId}: {error}", {
        action,
        accessKeyId: creds.credentials.accessKeyId,
        error: failure.message,
      });
      throw failure;
    } finally {
      store.close();
    }
  }
}

/** Fingerprint of everything a retried CreateVolume must repeat. */
function fingerprint(
  volumeId: string,
  capacity: number,
  authenticationSource: string,
  params: VolumeParams,
): string {
  const text = JSON.stringify([
    volumeId,
    capacity,
    authenticationSource,
    params.engine ?? "",
    ...(Object.keys(params.passthrough).length ? [params.passthrough] : []),
  ]);
  return createHash("sha256").update(text).digest("hex").slice(0, 16);
}
