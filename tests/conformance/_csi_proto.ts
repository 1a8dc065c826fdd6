/**
 * The CSI proto as the conformance tier reads it: `@grpc/proto-loader` on `proto/csi/v1/csi.proto`
 * itself. The tier uses none of the driver's gRPC server code (`src/csi/proto.ts`,
 * `src/csi/server.ts`, the generated descriptor and method tables): the proxy relays and decodes
 * calls from the proto text, so it checks the driver against the proto rather than against the
 * driver's own view of it (and kept working when the server was replaced, ADR 0008).
 * `imports_test.ts` keeps it that way.
 *
 * @module
 */
import { loadSync, type MethodDefinition, type PackageDefinition } from "@grpc/proto-loader";
import { Buffer } from "node:buffer";
import { ROOT } from "../_helpers.ts";

/** The proto file the driver implements. */
export const CSI_PROTO = `${ROOT}proto/csi/v1/csi.proto`;

/** The CSI services the tier relays. */
export type CsiServiceName = "Identity" | "Controller" | "Node";
/** Every {@link CsiServiceName}. */
export const CSI_SERVICE_NAMES: readonly CsiServiceName[] = ["Identity", "Controller", "Node"];

/**
 * Decoded messages have the shape of the driver's message types (`src/csi/gen/csi_types.ts`):
 * camelCase fields, enum names, 64-bit integers as numbers, defaults filled in, and a virtual
 * field naming the set member of a oneof.
 */
const LOAD_OPTIONS = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
} as const;

type Methods = Record<string, MethodDefinition<unknown, unknown>>;

let loaded: PackageDefinition | undefined;

function methodsOf(service: CsiServiceName): Methods {
  loaded ??= loadSync(CSI_PROTO, LOAD_OPTIONS);
  const def = loaded[`csi.v1.${service}`];
  if (!def || "format" in def) {
    throw new Error(`csi.v1.${service} is not a service in ${CSI_PROTO}`);
  }
  return def as unknown as Methods;
}

function method(service: CsiServiceName, name: string): MethodDefinition<unknown, unknown> {
  const m = methodsOf(service)[name];
  if (!m) throw new Error(`csi.v1.${service} has no method ${name} in ${CSI_PROTO}`);
  return m;
}

/** The unary RPCs of a service, named as in the proto (e.g. `NodePublishVolume`). */
export function unaryMethods(service: CsiServiceName): string[] {
  return Object.entries(methodsOf(service))
    .filter(([, m]) => !m.requestStream && !m.responseStream)
    .map(([name]) => name);
}

/** Decode the request of `service`/`name` from its wire bytes. */
export function decodeRequest<T>(service: CsiServiceName, name: string, bytes: Uint8Array): T {
  return method(service, name).requestDeserialize(Buffer.from(bytes)) as T;
}

/** Encode a request of `service`/`name` (for tests of the proxy's byte-level rewrites). */
export function encodeRequest(service: CsiServiceName, name: string, message: object): Uint8Array {
  return new Uint8Array(method(service, name).requestSerialize(message));
}
