/**
 * CSI gRPC server on a unix socket, on our own unary gRPC server (`grpc/`, see ADR 0008).
 *
 * - Binds `unix://` endpoints only. A stale socket file left by a crashed process is removed; a
 *   socket that still answers is refused (another instance is serving it). The socket is chmod 0700.
 * - Every call goes through one wrapper that logs method, duration and result code at info level
 *   (the request itself only at debug level, and always through `redact`, so `secrets` maps and
 *   credential env never reach the log), passes the call's {@link CallContext} (an AbortSignal for
 *   the caller's deadline and cancellation) and maps anything thrown, synchronously or not, to
 *   the spec's gRPC status (`toStatus`).
 * - RPCs a service object does not implement answer `UNIMPLEMENTED`.
 * - `stop()` drains in-flight calls for a bounded time, then forces the shutdown.
 * - The server's limits (connections, request bytes held, request time; `grpc/limits.ts`) hold
 *   against any local peer; each time one refuses or cuts something it is logged at warn level,
 *   at most once per kind and {@link LIMIT_LOG_INTERVAL_MS}, with the count of those not logged.
 *
 * @module
 */
import { chmod, lstat, mkdir, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { ConfigError, errorMessage } from "../util/errors.ts";
import { logger, redact } from "../util/log.ts";
import type { CallContext } from "./call_context.ts";
import { Code, codeName, toStatus, unimplemented } from "./errors.ts";
import type { ControllerHandlers, IdentityHandlers, NodeHandlers } from "./gen/csi_types.ts";
import { Controller_METHODS, Identity_METHODS, Node_METHODS } from "./gen/csi_types.ts";
import {
  type GrpcCall,
  GrpcServer,
  GrpcStatusError,
  type UnaryHandler,
} from "./grpc/grpc_server.ts";
import type { LimitEvent, LimitKind } from "./grpc/limits.ts";
import { csiMethods, type CsiServiceName } from "./proto.ts";

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

/** At most one warning per this interval about the server's limits (a flood would flood the log). */
export const LIMIT_LOG_INTERVAL_MS = 10_000;

const METHODS: Record<CsiServiceName, Record<string, string>> = {
  Identity: Identity_METHODS,
  Controller: Controller_METHODS,
  Node: Node_METHODS,
};

type Handler = (request: unknown, context: CallContext) => Promise<unknown> | unknown;

/** A CSI gRPC server bound to one unix socket. */
export class CsiServer {
  readonly #options: CsiServerOptions;
  readonly #log = logger("csi");
  #server: GrpcServer | undefined;
  /** Per kind of limit event: when one was last logged, and how many were not since. */
  readonly #limitLog = new Map<LimitKind, { at: number; notLogged: number }>();

  /** Create a server; nothing is bound until {@link start}. */
  constructor(options: CsiServerOptions) {
    this.#options = options;
  }

  /** Path of the unix socket. */
  get socketPath(): string {
    return this.#options.socketPath;
  }

  /** Handlers still running (including calls whose client has gone), for tests. */
  get activeCalls(): number {
    return this.#server?.activeCalls ?? 0;
  }

  /** Bind the socket and start serving. @throws {ConfigError} when the socket is in use. */
  async start(): Promise<void> {
    const path = this.#options.socketPath;
    await prepareSocketPath(path);
    const methods = new Map<string, UnaryHandler>();
    const { identity, controller, node } = this.#options.services;
    const add = (name: CsiServiceName, impl: object | undefined) => {
      if (!impl) return;
      const defs = csiMethods(name);
      for (const [jsName, rpcName] of Object.entries(METHODS[name])) {
        const def = defs[rpcName];
        if (!def) throw new Error(`CSI method ${name}/${rpcName} is missing from the descriptor`);
        const fn = (impl as Record<string, unknown>)[jsName];
        const handler: Handler = typeof fn === "function"
          ? (fn as Handler).bind(impl)
          : () => Promise.reject(unimplemented(rpcName));
        methods.set(def.path, this.#wrap(def.path, handler, def));
      }
    };
    add("Identity", identity);
    add("Controller", controller);
    add("Node", node);
    const server = new GrpcServer(methods, {
      maxReceiveBytes: this.#options.maxReceiveBytes ?? 4 * 1024 * 1024,
      onConnectionEnd: (end) => {
        if (end.reason === "error") {
          this.#log.warn("Closed a CSI connection after a protocol error: {detail}", {
            detail: end.detail ?? "",
          });
        }
      },
      onLimit: (event) => this.#logLimit(event),
    });
    server.listenUnix(path);
    await chmod(path, 0o700);
    this.#server = server;
    this.#log.info("Serving CSI {services} on {socket}", {
      services: Object.entries(this.#options.services).filter(([, v]) => v).map(([k]) => k),
      socket: path,
    });
  }

  #logLimit({ kind, detail }: LimitEvent): void {
    const now = performance.now();
    const last = this.#limitLog.get(kind);
    if (last && now - last.at < LIMIT_LOG_INTERVAL_MS) {
      last.notLogged++;
      return;
    }
    this.#log.warn(
      "CSI server limit ({kind}) on {socket}: {detail} ({notLogged} more not logged since the last)",
      { kind, socket: this.#options.socketPath, detail, notLogged: last?.notLogged ?? 0 },
    );
    this.#limitLog.set(kind, { at: now, notLogged: 0 });
  }

  /** Stop accepting calls, wait up to `graceMs` for in-flight ones, then force; remove the socket. */
  async stop(graceMs = 5000): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    await server.shutdown(graceMs);
    await rm(this.#options.socketPath, { force: true });
    this.#log.info("Stopped serving on {socket}", { socket: this.#options.socketPath });
  }

  /**
   * One wrapper for every method: decode the request, run the handler with the call's context,
   * map whatever it throws — synchronously or not — to the spec's status, log and observe.
   */
  #wrap(
    method: string,
    handler: Handler,
    codec: {
      requestDeserialize(bytes: never): unknown;
      responseSerialize(value: never): Uint8Array;
    },
  ): UnaryHandler {
    return async (bytes: Uint8Array, call: GrpcCall): Promise<Uint8Array> => {
      const started = performance.now();
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
      let request: unknown;
      try {
        request = (codec.requestDeserialize as (b: Uint8Array) => unknown)(bytes);
      } catch (err) {
        const message = `The request of ${method} is not a valid protobuf message: ${
          errorMessage(err)
        }`;
        finish(codeName(Code.INVALID_ARGUMENT), message);
        throw new GrpcStatusError(Code.INVALID_ARGUMENT, message);
      }
      this.#log.debug("Call {method}", { method, request: redact(request) });
      const context: CallContext = { signal: call.signal, deadline: call.deadline };
      try {
        // An async function: a handler that throws synchronously is mapped like a rejection.
        const response = await (async () => await handler(request, context))();
        const out = (codec.responseSerialize as (v: unknown) => Uint8Array)(response ?? {});
        finish("OK");
        return out;
      } catch (err) {
        const status = toStatus(err, call.signal);
        finish(codeName(status.code), status.message);
        throw new GrpcStatusError(status.code, status.message);
      }
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
