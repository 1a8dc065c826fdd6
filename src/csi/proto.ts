/**
 * Run-time view of the CSI proto: service definitions built from the generated descriptor with
 * `@grpc/proto-loader`, using the options the generated TypeScript types assume.
 *
 * @module
 */
import { fromJSON, type Options } from "@grpc/proto-loader";
import {
  loadPackageDefinition,
  type ServiceClientConstructor,
  type ServiceDefinition,
} from "@grpc/grpc-js";
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

interface CsiPackage {
  csi: { v1: Record<CsiServiceName, ServiceClientConstructor> };
}

let cached: CsiPackage | undefined;

function csiPackage(): CsiPackage {
  cached ??= loadPackageDefinition(
    fromJSON(CSI_DESCRIPTOR as Parameters<typeof fromJSON>[0], LOADER_OPTIONS),
  ) as unknown as CsiPackage;
  return cached;
}

/** gRPC service definition of a CSI service (for `Server.addService`). */
export function serviceDefinition(name: CsiServiceName): ServiceDefinition {
  return csiPackage().csi.v1[name].service;
}

/** gRPC client constructor of a CSI service. */
export function clientConstructor(name: CsiServiceName): ServiceClientConstructor {
  return csiPackage().csi.v1[name];
}
