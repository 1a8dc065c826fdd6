/**
 * A byte-for-byte CSI proxy between csi-sanity and our two processes. Every unary CSI method
 * known to our proto is relayed unchanged (request bytes, response bytes, status code, message
 * and trailers) to the backend that `route` names. Two hooks let the conformance tier play the
 * parts csi-sanity has no hook for:
 *
 * - `before` may replace the request bytes (the kubelet target-path rename, see
 *   `_kubelet_paths.ts`) and prepare what the controller would have prepared (the S3PA and the
 *   Mountpoint Pod) before the call reaches the node plugin;
 * - `after` sees the outcome (e.g. tear the Mountpoint Pod down after a successful unpublish).
 *
 * @module
 */
import {
  Client,
  credentials,
  Metadata,
  type sendUnaryData,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServiceDefinition,
  type ServiceError,
  status,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import { CSI_SERVICE_NAMES, type CsiServiceName, unaryMethods } from "./_csi_proto.ts";

/** Where calls can go. */
export type Backend = "node" | "controller";

/** One relayed call. */
export interface ProxiedCall {
  readonly service: CsiServiceName;
  /** RPC name, e.g. `NodePublishVolume`. */
  readonly method: string;
  /** Request bytes as csi-sanity sent them. */
  readonly request: Uint8Array;
}

/** What the proxy does with calls. */
export interface ProxyOptions {
  /** Unix socket the proxy serves (csi-sanity's `--csi.endpoint`). */
  readonly socketPath: string;
  /** Backend sockets. */
  readonly backends: Readonly<Record<Backend, string>>;
  /** Which backend serves a call. */
  route(service: CsiServiceName, method: string): Backend;
  /** Runs before forwarding; returns the bytes to forward. A throw fails the call (Internal). */
  before?(call: ProxiedCall): Promise<Uint8Array>;
  /** Runs after the backend answered, with the request actually forwarded and the status code. */
  after?(call: ProxiedCall, forwarded: Uint8Array, code: number): Promise<void>;
  /** Deadline of a forwarded call without one of its own. @default 300000 */
  readonly defaultDeadlineMs?: number;
}

/** The unary RPCs of each service, from the proto file (see `_csi_proto.ts`). */
const SERVICES: Readonly<Record<CsiServiceName, readonly string[]>> = {
  Identity: unaryMethods("Identity"),
  Controller: unaryMethods("Controller"),
  Node: unaryMethods("Node"),
};

const raw = (b: Buffer): Buffer => b;

function passthroughDefinition(service: CsiServiceName): ServiceDefinition {
  const def: Record<string, unknown> = {};
  for (const rpc of SERVICES[service]) {
    def[rpc] = {
      path: `/csi.v1.${service}/${rpc}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: raw,
      requestDeserialize: raw,
      responseSerialize: raw,
      responseDeserialize: raw,
    };
  }
  return def as ServiceDefinition;
}

/** A running proxy. */
export interface CsiProxy extends AsyncDisposable {
  /** Calls relayed so far, by `Service/Method`. */
  readonly counts: ReadonlyMap<string, number>;
  /** Errors thrown by the hooks (they also fail the call). */
  readonly hookErrors: readonly string[];
}

/** Start the proxy. */
export async function startProxy(options: ProxyOptions): Promise<CsiProxy> {
  const clients: Record<Backend, Client> = {
    node: new Client(`unix:${options.backends.node}`, credentials.createInsecure()),
    controller: new Client(`unix:${options.backends.controller}`, credentials.createInsecure()),
  };
  const counts = new Map<string, number>();
  const hookErrors: string[] = [];
  const server = new Server();
  for (const service of CSI_SERVICE_NAMES) {
    const impl: UntypedServiceImplementation = {};
    for (const rpc of SERVICES[service]) {
      impl[rpc] = (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
        const key = `${service}/${rpc}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
        relay(service, rpc, call, callback);
      };
    }
    server.addService(passthroughDefinition(service), impl);
  }

  const relay = async (
    service: CsiServiceName,
    method: string,
    call: ServerUnaryCall<Buffer, Buffer>,
    callback: sendUnaryData<Buffer>,
  ) => {
    const proxied: ProxiedCall = { service, method, request: new Uint8Array(call.request) };
    let forwarded = proxied.request;
    try {
      if (options.before) forwarded = await options.before(proxied);
    } catch (err) {
      const message = `conformance proxy: preparing ${method} failed: ${
        err instanceof Error ? err.message : String(err)
      }`;
      hookErrors.push(message);
      callback({ code: status.INTERNAL, details: message });
      return;
    }
    const deadline = call.getDeadline();
    const finite = deadline instanceof Date || Number.isFinite(deadline);
    const client = clients[options.route(service, method)];
    client.makeUnaryRequest<Buffer, Buffer>(
      `/csi.v1.${service}/${method}`,
      raw,
      raw,
      Buffer.from(forwarded),
      new Metadata(),
      { deadline: finite ? deadline : Date.now() + (options.defaultDeadlineMs ?? 300_000) },
      (err: ServiceError | null, response?: Buffer) => {
        const code = err ? err.code : status.OK;
        const answer = () => {
          if (err) {
            callback({ code: err.code, details: err.details, metadata: err.metadata });
          } else callback(null, response);
        };
        if (!options.after) return answer();
        options.after(proxied, forwarded, code).catch((e) => {
          hookErrors.push(
            `conformance proxy: after ${method}: ${e instanceof Error ? e.message : String(e)}`,
          );
        }).finally(answer);
      },
    );
  };

  await new Promise<void>((resolve, reject) =>
    server.bindAsync(
      `unix:${options.socketPath}`,
      ServerCredentials.createInsecure(),
      (err) => (err ? reject(err) : resolve()),
    )
  );
  return {
    counts,
    hookErrors,
    async [Symbol.asyncDispose]() {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 5_000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      clients.node.close();
      clients.controller.close();
      await Deno.remove(options.socketPath).catch(() => {});
    },
  };
}
