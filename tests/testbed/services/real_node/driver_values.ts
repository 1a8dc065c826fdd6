/**
 * The values `deno task deploy` gets on the real node: only the images (ours, built locally and
 * never pulled; the sidecar stand-ins), the pull policy and the S3 endpoint the pods reach.
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

/** The values file's content: images, pull policy, S3; everything else stays default. */
export function driverValues(node: Pick<RealNode, "imagePrefix">, s3: DriverS3): unknown {
  return {
    image: realNodeImageValues(node, LOCAL_REGISTRY, DRIVER_VERSION),
    s3: { endpointUrl: s3.endpoint, region: s3.region },
  };
}
