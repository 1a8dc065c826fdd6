/**
 * A typed, promise-based CSI client over a unix socket. Used by tests, the sandbox's kubelet and
 * provisioner emulators, and operators' scripts — never by the driver itself.
 *
 * @module
 */
import {
  type Client,
  credentials,
  loadPackageDefinition,
  type ServiceClientConstructor,
  type ServiceError,
} from "@grpc/grpc-js";
import type { ControllerHandlers, IdentityHandlers, NodeHandlers } from "./gen/csi_types.ts";
import { Controller_METHODS, Identity_METHODS, Node_METHODS } from "./gen/csi_types.ts";
import { csiPackageDefinition, type CsiServiceName } from "./proto.ts";

let constructors: Record<CsiServiceName, ServiceClientConstructor> | undefined;

/** gRPC client constructor of a CSI service. */
function clientConstructor(name: CsiServiceName): ServiceClientConstructor {
  constructors ??= (loadPackageDefinition(csiPackageDefinition()) as unknown as {
    csi: { v1: Record<CsiServiceName, ServiceClientConstructor> };
  }).csi.v1;
  return constructors[name];
}

/** A CSI client: the three services' methods, each returning a promise. */
export interface CsiClient {
  readonly identity: IdentityHandlers;
  readonly controller: ControllerHandlers;
  readonly node: NodeHandlers;
  /** Close the underlying channels. */
  close(): void;
}

/** Options of {@link connectCsi}. */
export interface ConnectOptions {
  /** Per-call deadline. @default 30000 */
  readonly timeoutMs?: number;
}

function wrap<T>(client: Client, methods: Record<string, string>, timeoutMs: number): T {
  const out: Record<string, (req: unknown) => Promise<unknown>> = {};
  for (const [jsName, rpc] of Object.entries(methods)) {
    const fn = (client as unknown as Record<string, unknown>)[rpc] as (
      req: unknown,
      opts: { deadline: Date },
      cb: (err: ServiceError | null, res: unknown) => void,
    ) => void;
    out[jsName] = (req) =>
      new Promise((resolve, reject) => {
        fn.call(
          client,
          req,
          { deadline: new Date(Date.now() + timeoutMs) },
          (err, res) => (err ? reject(err) : resolve(res)),
        );
      });
  }
  return out as T;
}

/** Connect to the CSI plugin listening on `socketPath`. */
export function connectCsi(socketPath: string, options: ConnectOptions = {}): CsiClient {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const clients: Client[] = [];
  const make = <T>(name: CsiServiceName, methods: Record<string, string>): T => {
    const Ctor = clientConstructor(name);
    const client = new Ctor(`unix:${socketPath}`, credentials.createInsecure());
    clients.push(client);
    return wrap<T>(client, methods, timeoutMs);
  };
  return {
    identity: make<IdentityHandlers>("Identity", Identity_METHODS),
    controller: make<ControllerHandlers>("Controller", Controller_METHODS),
    node: make<NodeHandlers>("Node", Node_METHODS),
    close: () => clients.forEach((c) => c.close()),
  };
}
