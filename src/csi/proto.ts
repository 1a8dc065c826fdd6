/**
 * Run-time view of the CSI proto: the package definition built from the generated descriptor with
 * `@grpc/proto-loader` (protobufjs underneath), using the options the generated TypeScript types
 * assume. Serving needs only this (no gRPC runtime); `client.ts` turns it into grpc-js clients.
 *
 * @module
 */
import {
  fromJSON,
  type MethodDefinition,
  type Options,
  type PackageDefinition,
} from "@grpc/proto-loader";
import { CSI_DESCRIPTOR } from "./gen/csi_descriptor.ts";

/**
 * proto-loader options matching `src/csi/gen/csi_types.ts`: camelCase fields, enums as names,
 * 64-bit integers as numbers, defaults filled in, and a virtual field naming the set oneof member.
 */
export const LOADER_OPTIONS: Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  bytes: Uint8Array,
  defaults: true,
  oneofs: true,
};

/** The CSI services. */
export type CsiServiceName = "Identity" | "Controller" | "Node";

let cached: PackageDefinition | undefined;

/** The CSI package definition (loaded once). */
export function csiPackageDefinition(): PackageDefinition {
  cached ??= fromJSON(CSI_DESCRIPTOR as Parameters<typeof fromJSON>[0], LOADER_OPTIONS);
  return cached;
}

/** The methods of a CSI service by RPC name (e.g. `NodePublishVolume`), with their codecs. */
export function csiMethods(name: CsiServiceName): Record<string, MethodDefinition<object, object>> {
  const service = csiPackageDefinition()[`csi.v1.${name}`];
  if (!service || "format" in service) {
    throw new Error(`CSI service ${name} is missing from the descriptor`);
  }
  return service as Record<string, MethodDefinition<object, object>>;
}
