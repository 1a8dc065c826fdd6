/**
 * The values `deno task deploy` gets on the real node: only the images (ours, built locally and
 * never pulled; the sidecar stand-ins; the pause image for headroom pods), the pull policy and the
 * S3 endpoint the pods reach.
 *
 * @module
 */
import { DRIVER_VERSION } from "../../../../src/util/version.ts";
import { type RealNode, realNodeImageValues } from "./real_node.ts";

/** Registry (prefix) of our locally built images. */
export const LOCAL_REGISTRY = "localhost/s3csi";

/** The S3 service the driver's pods use. */
export interface DriverS3 {
  /** Endpoint as the pods reach it (the node address, e.g. through a relay). */
  readonly endpoint: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/**
 * The values file's content: images (the headroom pods' pause image is the node's own sandbox
 * image) of `version` (deno.json's, or another build of this tree), pull policy, S3; everything
 * else stays default.
 */
export function driverValues(
  node: Pick<RealNode, "imagePrefix">,
  s3: DriverS3,
  version: string = DRIVER_VERSION,
): unknown {
  return {
    image: realNodeImageValues(node, LOCAL_REGISTRY, version),
    mountpointPod: { headroomImage: `${node.imagePrefix}/pause:3.10` },
    s3: { endpointUrl: s3.endpoint, region: s3.region },
  };
}

/**
 * The OCI archives named by `scripts/build_images_local.ts`' output (`IMAGE_<C>=<ref> <archive>`
 * lines), to import into another node too.
 */
export function imageArchives(buildOutput: string): string[] {
  return buildOutput.split("\n").flatMap((l) => {
    const m = /^IMAGE_\w+=\S+ (\S+)$/.exec(l.trim());
    return m ? [m[1]!] : [];
  });
}
