/**
 * CSI gRPC server on a unix socket.
 *
 * - Binds `unix://` endpoints only. A stale socket file left by a crashed process is removed; a
 *   socket that still answers is refused (another instance is serving it). The socket is chmod 0700.
 * - Every call goes through one wrapper that logs method, duration and result code at info level
 *   (the request itself only at debug level, and always through `redact`, so `secrets` maps and
 *   credential env never reach the log), and maps thrown errors to gRPC statuses (`toStatus`).
 * - RPCs a service object does not implement answer `UNIMPLEMENTED`.
 * - `stop()` drains in-flight calls for a bounded time, then forces the shutdown.
 *
 * @module
 */
import {
  type sendUnaryData,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type status as GrpcStatus,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { chmod, lstat, mkdir, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { ConfigError } from "../util/errors.ts";
import { logger, redact } from "../util/log.ts";
import { codeName, toStatus, unimplemented } from "./errors.ts";
import type { ControllerHandlers, IdentityHandlers, NodeHandlers } from "./gen/csi_types.ts";
import { Controller_METHODS, Identity_METHODS, Node_METHODS } from "./gen/csi_types.ts";
import { type CsiServiceName, serviceDefinition } from "./proto.ts";

/** Service implementations to serve; any subset. Missing methods answer UNIMPLEMENTED. */
export interface CsiServices {
  readonly identity?: IdentityHandlers;
  readonly controller?: Partial<ControllerHandlers>;
  readonly node?: Partial<NodeHandlers>;
}

/** Observer of finished calls (metrics). */
export type CallObserver = (method: string, code: string, seconds: number) => void;

/** Options of {@link CsiServer}. */
export interface CsiServerOptions {
  /** Absolute path of the unix socket. */
  readonly socketPath: string;
  readonly services: CsiServices;
  /** Called after every call. */
  readonly observe?: CallObserver;
  /** Largest accepted request. @default 4 MiB */
  readonly maxReceiveBytes?: number;
}

const METHODS: Record<CsiServiceName, Record<string, string>> = {
  Identity: Identity_METHODS,
  Controller: Controller_METHODS,
  Node: Node_METHODS,
};

type Handler = (request: unknown) => Promise<unknown>;

/** A CSI gRPC server bound to one unix socket. */
export class CsiServer {
  readonly #options: CsiServerOptions;
  readonly #log = logger("csi");
  #server: Server | undefined;

  /** Create a server; nothing is bound until {@link start}. */
  constructor(options: CsiServerOptions) {
    this.#options = options;
  }

  /** Path of the unix socket. */
  get socketPath(): string {
    return this.#options.socketPath;
  }

  /** Bind the socket and start serving. @throws {ConfigError} when the socket is in use. */
  async start(): Promise<void> {
    const path = this.#options.socketPath;
    await prepareSocketPath(path);
    const server = new Server({
      "grpc.max_receive_message_length": this.#options.maxReceiveBytes ?? 4 * 1024 * 1024,
    });
    const { identity, controller, node } = this.#options.services;
    const add = (name: CsiServiceName, impl: object | undefined) => {
      if (impl) server.addService(serviceDefinition(name), this.#implementation(name, impl));
    };
    add("Identity", identity);
    add("Controller", controller);
    add("Node", node);
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(
        `unix:${path}`,
        ServerCredentials.createInsecure(),
        (err) => (err ? reject(err) : resolve()),
      );
    });
    await chmod(path, 0o700);
    this.#server = server;
    this.#log.info("Serving CSI {services} on {socket}", {
      services: Object.entries(this.#options.services).filter(([, v]) => v).map(([k]) => k),
      socket: path,
    });
  }

  /** Stop accepting calls, wait up to `graceMs` for in-flight ones, then force; remove the socket. */
  async stop(graceMs = 5000): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
      new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.#log.warn("Forcing shutdown: calls still running after {ms} ms", { ms: graceMs });
          server.forceShutdown();
          resolve();
        }, graceMs);
      }),
    ]);
    clearTimeout(timer);
    await rm(this.#options.socketPath, { force: true });
    this.#log.info("Stopped serving on {socket}", { socket: this.#options.socketPath });
  }

  #implementation(service: CsiServiceName, impl: object): UntypedServiceImplementation {
    const out: UntypedServiceImplementation = {};
    for (const [jsName, rpcName] of Object.entries(METHODS[service])) {
      const fn = (impl as Record<string, unknown>)[jsName];
      const handler: Handler = typeof fn === "function"
        ? (fn as Handler).bind(impl)
        : () => Promise.reject(unimplemented(rpcName));
      out[rpcName] = this.#wrap(`/csi.v1.${service}/${rpcName}`, handler);
    }
    return out;
  }

  #wrap(method: string, handler: Handler) {
    return (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      const started = performance.now();
      this.#log.debug("Call {method}", { method, request: redact(call.request) });
      const finish = (code: string, error?: string) => {
        const seconds = (performance.now() - started) / 1000;
        const fields = {
          method,
          code,
          durationMs: Math.round(seconds * 10000) / 10,
          ...(error ? { error } : {}),
        };
        if (error) this.#log.warn("{method} failed with {code}: {error}", fields);
        else this.#log.info("{method} {code}", fields);
        this.#options.observe?.(method, code, seconds);
      };
      handler(call.request).then(
        (response) => {
          finish("OK");
          callback(null, response ?? {});
        },
        (err: unknown) => {
          const status = toStatus(err);
          finish(codeName(status.code), status.message);
          callback({ code: status.code as number as GrpcStatus, details: status.message });
        },
      );
    };
  }
}

/**
 * Make `path` ready for binding: create its folder, remove a stale socket, refuse a live one or a
 * path that is not a socket.
 */
async function prepareSocketPath(path: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  let stat;
  try {
    stat = await lstat(path);
  } catch {
    return;
  }
  if (!stat.isSocket()) {
    throw new ConfigError(
      `Socket path "${path}" exists and is not a socket: remove it or choose another endpoint`,
    );
  }
  if (await socketAnswers(path)) {
    throw new ConfigError(`Socket "${path}" is in use by another process: stop it first`);
  }
  await rm(path, { force: true });
}

async function socketAnswers(path: string): Promise<boolean> {
  try {
    const conn = await Deno.connect({ transport: "unix", path });
    conn.close();
    return true;
  } catch {
    return false;
  }
}
