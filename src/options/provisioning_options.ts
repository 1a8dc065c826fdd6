/**
 * Driver-level S3 settings of the CSI Controller service (dynamic provisioning): the `s3-*` flags
 * that `s3-csi-controller` adds to its options. `src/provisioning/create_provisioning.ts` turns
 * them into a ready service.
 *
 * @module
 */
import type { OptionSpecs, ParsedConfig } from "../util/config.ts";

function urlOrEmpty(v: string): string | undefined {
  if (v === "") return undefined;
  try {
    const u = new URL(v);
    if (u.protocol === "http:" || u.protocol === "https:") return undefined;
  } catch { /* fall through */ }
  return `must be an http:// or https:// URL, got "${v}"`;
}

/** Flags of the Controller service (merged into the controller's options). */
export const PROVISIONING_OPTIONS = {
  "s3-endpoint-url": {
    type: "string",
    env: "AWS_ENDPOINT_URL",
    default: "",
    description: "S3 endpoint for provisioning (e.g. https://s3.example.com); AWS when empty",
    validate: urlOrEmpty,
  },
  "s3-region": {
    type: "string",
    env: "AWS_REGION",
    default: "us-east-1",
    description: "Default S3 region of provisioned volumes (StorageClass parameter region wins)",
  },
  "s3-force-path-style": {
    type: "boolean",
    env: "S3_FORCE_PATH_STYLE",
    default: true,
    description: "Path-style S3 addressing (needed by most S3-compatible servers)",
  },
  "s3-ca-bundle": {
    type: "string",
    env: "AWS_CA_BUNDLE",
    default: "",
    description: "PEM file of extra CA certificates trusted for the S3 endpoint",
  },
  "s3-proxy": {
    type: "string",
    env: "S3_PROXY",
    default: "",
    description: "Proxy URL for S3 requests (e.g. http://proxy:3128); none when empty",
    validate: urlOrEmpty,
  },
  "s3-request-timeout": {
    type: "duration",
    env: "S3_REQUEST_TIMEOUT",
    default: 8_000,
    description: "Deadline of one S3 request of the Controller service",
  },
} as const satisfies OptionSpecs;

/** The parsed values of {@link PROVISIONING_OPTIONS}. */
export type ProvisioningSettings = ParsedConfig<typeof PROVISIONING_OPTIONS>;
