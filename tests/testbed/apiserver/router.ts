/**
 * HTTP front of the emulator: authentication, URL routing, content negotiation, and conversion of
 * {@link ApiError}s into `Status` bodies. Every request is answered with JSON (never HTML).
 *
 * Routes:
 * - `/version`, `/healthz`, `/livez`, `/readyz`
 * - discovery: `/api`, `/apis`, `/api/v1`, `/apis/<g>`, `/apis/<g>/<v>` (legacy or aggregated)
 * - `/openapi/v3`, `/openapi/v3/<gv>` (`/openapi/v2` is 404)
 * - resources: `<prefix>[/namespaces/<ns>]/<plural>[/<name>[/status]]`
 * - `GET /api/v1/namespaces/<ns>/pods/<name>/log` from the node's kubelet ({@link PodLogs})
 *
 * @module
 */
import { parse as parseYaml } from "yaml";
import type { Cluster, DeleteOptions, WriteOptions } from "./cluster.ts";
import {
  AGGREGATED_CONTENT_TYPE,
  aggregatedDiscovery,
  apiGroupDoc,
  apiGroupList,
  apiResourceList,
  apiVersions,
  versionInfo,
  wantsAggregated,
} from "./discovery.ts";
import { isObject, type JsonObject, meta } from "./json_value.ts";
import { listObjects, parseSelection } from "./list_request.ts";
import { openApiGroupVersion, openApiIndex } from "./openapi.ts";
import { patchObject } from "./patch_request.ts";
import { podLogResponse, type PodLogs } from "./pod_logs.ts";
import { decodeKubeProtobuf, ProtobufDecodeError } from "./protobuf_decode.ts";
import type { ResourceType } from "./resources.ts";
import {
  ApiError,
  badRequest,
  internalError,
  invalid,
  methodNotAllowed,
  pathNotFound,
  statusBody,
  unsupportedMediaType,
} from "./status_errors.ts";
import { includeObjectOf, toTable, wantsTable } from "./table.ts";
import { watchStream } from "./watch_stream.ts";
import { logger } from "../../../src/util/log.ts";

const log = logger("apiserver", "http");

/** Options of {@link ApiRouter}. */
export interface RouterOptions {
  /** Bearer token required on every API request; undefined = no authentication. */
  readonly token?: string | undefined;
  /** Accept requests without an Authorization header (plain-HTTP mode). */
  readonly allowAnonymous: boolean;
  /** `host:port` advertised in `/api`. */
  readonly serverAddress: () => string;
  /** Watch bookmark period. @default 60000 */
  readonly bookmarkIntervalMs?: number;
  /** Ends open watches when the server stops. */
  readonly signal: AbortSignal;
  /** Kubelets serving `pods/log`. */
  readonly podLogs: PodLogs;
}

/** A parsed resource URL. */
interface ResourcePath {
  readonly type: ResourceType;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  readonly subresource: string | undefined;
}

const PUBLIC_PATHS: ReadonlySet<string> = new Set(["/version", "/healthz", "/livez", "/readyz"]);

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: {
      "content-type": "application/json",
      "cache-control": "no-cache, private",
      ...headers,
    },
  });
}

function errorResponse(err: ApiError): Response {
  return json(err.toStatus(), err.code);
}

function mediaType(header: string | null): string {
  return (header ?? "").split(";")[0]!.trim().toLowerCase();
}

function queryBool(q: URLSearchParams, name: string): boolean | undefined {
  const v = q.get(name);
  if (v === null) return undefined;
  return v === "" || v === "true" || v === "1";
}

function queryInt(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  if (v === null || v === "") return undefined;
  if (!/^-?\d+$/.test(v)) throw badRequest(`invalid value for ${name}: ${v}`);
  return Number(v);
}

/** Routes HTTP requests to the {@link Cluster}. */
export class ApiRouter {
  #cluster: Cluster;
  #options: RouterOptions;

  /** Create a router for `cluster`. */
  constructor(cluster: Cluster, options: RouterOptions) {
    this.#cluster = cluster;
    this.#options = options;
  }

  /** Answer one request. Never throws. */
  async handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const started = Date.now();
    let res: Response;
    try {
      this.#authenticate(req, url.pathname);
      res = await this.#route(req, url);
    } catch (err) {
      if (err instanceof ApiError) res = errorResponse(err);
      else {
        log.error("Request {method} {path} failed: {error}", {
          method: req.method,
          path: url.pathname,
          error: err instanceof Error ? err.stack ?? err.message : String(err),
        });
        res = errorResponse(internalError(err instanceof Error ? err.message : String(err)));
      }
    }
    log.debug("{method} {path}{query} {status} {ms}ms", {
      method: req.method,
      path: url.pathname,
      query: url.search,
      status: res.status,
      ms: Date.now() - started,
    });
    return res;
  }

  #authenticate(req: Request, path: string): void {
    const token = this.#options.token;
    if (token === undefined || PUBLIC_PATHS.has(path)) return;
    const header = req.headers.get("authorization");
    if (header === null) {
      if (this.#options.allowAnonymous) return;
      throw new ApiError(
        403,
        "Forbidden",
        `forbidden: User "system:anonymous" cannot ${req.method.toLowerCase()} path "${path}"`,
        {},
      );
    }
    if (header !== `Bearer ${token}`) throw new ApiError(401, "Unauthorized", "Unauthorized");
  }

  async #route(req: Request, url: URL): Promise<Response> {
    const path = url.pathname.replace(/\/+$/, "") || "/";
    const accept = req.headers.get("accept");
    const registry = this.#cluster.registry;
    if (PUBLIC_PATHS.has(path)) {
      return path === "/version" ? json(versionInfo()) : new Response("ok");
    }
    if (path === "/api" || path === "/apis") {
      if (wantsAggregated(accept)) {
        return json(aggregatedDiscovery(registry, path === "/api"), 200, {
          "content-type": AGGREGATED_CONTENT_TYPE,
        });
      }
      return json(
        path === "/api" ? apiVersions(this.#options.serverAddress()) : apiGroupList(registry),
      );
    }
    if (path === "/openapi/v3") return json(openApiIndex(registry));
    if (path.startsWith("/openapi/v3/")) {
      const doc = openApiGroupVersion(registry, path.slice("/openapi/v3/".length));
      if (doc) return json(doc);
      throw pathNotFound();
    }
    const segs = path.split("/").filter((s) => s).map(decodeURIComponent);
    let group: string;
    let version: string;
    let rest: string[];
    if (segs[0] === "api" && segs[1] === "v1") {
      [group, version, rest] = ["", "v1", segs.slice(2)];
    } else if (segs[0] === "apis" && segs.length >= 2) {
      if (segs.length === 2) {
        const doc = apiGroupDoc(registry, segs[1]!);
        if (doc) return json(doc);
        throw pathNotFound();
      }
      [group, version, rest] = [segs[1]!, segs[2]!, segs.slice(3)];
    } else throw pathNotFound();
    if (!registry.hasGroupVersion(group, version)) throw pathNotFound();
    if (rest.length === 0) return json(apiResourceList(registry, group, version));
    const rp = this.#parseResourcePath(group, version, rest);
    return await this.#resource(req, url, rp);
  }

  #parseResourcePath(group: string, version: string, rest: string[]): ResourcePath {
    const registry = this.#cluster.registry;
    if (rest[0] === "namespaces" && rest.length >= 3) {
      const t = registry.find(group, version, rest[2]!);
      if (t?.namespaced && rest.length <= 5) {
        return { type: t, namespace: rest[1]!, name: rest[3], subresource: rest[4] };
      }
    }
    const t = registry.find(group, version, rest[0]!);
    if (!t || rest.length > 3) throw pathNotFound();
    return { type: t, namespace: undefined, name: rest[1], subresource: rest[2] };
  }

  #writeOptions(req: Request, q: URLSearchParams, warnings: string[]): WriteOptions {
    const dryRun = q.getAll("dryRun");
    if (dryRun.some((d) => d !== "All")) {
      throw invalid("CreateOptions", "meta.k8s.io", "", [{
        reason: "FieldValueNotSupported",
        message: `Unsupported value: []string{${
          dryRun.map((d) => JSON.stringify(d)).join(", ")
        }}: supported values: "All"`,
        field: "dryRun",
      }]);
    }
    const agent = (req.headers.get("user-agent") ?? "unknown").split("/")[0]!;
    return {
      manager: q.get("fieldManager") ??
        (req.headers.get("content-type")?.includes("apply-patch") ? "" : agent),
      dryRun: dryRun.length > 0,
      fieldValidation: q.get("fieldValidation") ?? "Warn",
      warnings,
    };
  }

  async #readBody(req: Request): Promise<unknown> {
    const ct = mediaType(req.headers.get("content-type"));
    if (ct.includes("protobuf")) {
      try {
        return decodeKubeProtobuf(new Uint8Array(await req.arrayBuffer()));
      } catch (err) {
        if (!(err instanceof ProtobufDecodeError)) throw err;
        throw unsupportedMediaType(
          "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        );
      }
    }
    const text = await req.text();
    try {
      return ct === "application/yaml" ? parseYaml(text) : JSON.parse(text);
    } catch (err) {
      throw badRequest(
        `the body of the request could not be decoded: ${err instanceof Error ? err.message : err}`,
      );
    }
  }

  async #resource(req: Request, url: URL, rp: ResourcePath): Promise<Response> {
    const { type: t, name, subresource } = rp;
    const q = url.searchParams;
    const c = this.#cluster;
    const ns = rp.namespace ?? "";
    if (subresource === "log" && t.kind === "Pod" && t.group === "" && name !== undefined) {
      if (req.method.toUpperCase() !== "GET") {
        throw methodNotAllowed("the server does not allow this method on the requested resource");
      }
      return await podLogResponse({
        pod: c.get(t, ns, name),
        query: q,
        logs: this.#options.podLogs,
        reread: () => {
          try {
            return c.get(t, ns, name);
          } catch {
            return undefined;
          }
        },
        signal: this.#options.signal,
      });
    }
    if (subresource !== undefined && !(subresource === "status" && t.statusSubresource)) {
      throw pathNotFound();
    }
    const warnings: string[] = [];
    const withWarnings = (res: Response) => {
      for (const w of warnings) res.headers.append("warning", `299 - ${JSON.stringify(w)}`);
      return res;
    };
    const table = wantsTable(req.headers.get("accept"));
    const method = req.method.toUpperCase();
    if (name === undefined) {
      const sel = parseSelection(t, rp.namespace, q);
      if (method === "GET" && queryBool(q, "watch")) {
        if (
          queryBool(q, "sendInitialEvents") &&
          (q.get("resourceVersionMatch") !== "NotOlderThan" || !queryBool(q, "allowWatchBookmarks"))
        ) {
          throw invalid("ListOptions", "meta.k8s.io", "", [{
            reason: "FieldValueForbidden",
            message:
              "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan and allowWatchBookmarks",
            field: "sendInitialEvents",
          }]);
        }
        const body = watchStream(c, {
          type: t,
          selection: sel,
          resourceVersion: q.get("resourceVersion") ?? "",
          bookmarks: queryBool(q, "allowWatchBookmarks") === true,
          sendInitialEvents: queryBool(q, "sendInitialEvents") === true,
          timeoutSeconds: queryInt(q, "timeoutSeconds"),
          table,
          includeObject: includeObjectOf(q),
          bookmarkIntervalMs: this.#options.bookmarkIntervalMs ?? 60_000,
          signal: this.#options.signal,
        });
        return new Response(body, {
          headers: { "content-type": "application/json", "cache-control": "no-cache, private" },
        });
      }
      if (method === "GET") {
        const list = listObjects(c, t, sel, q);
        if (!table) return json(list);
        return json(
          toTable(t, list.items as JsonObject[], list.metadata as JsonObject, {
            now: Date.now(),
            includeObject: includeObjectOf(q),
          }),
        );
      }
      if (method === "POST") {
        if (t.namespaced && rp.namespace === undefined) {
          throw methodNotAllowed("the server does not allow this method on the requested resource");
        }
        const obj = c.create(
          t,
          ns,
          await this.#readBody(req),
          this.#writeOptions(req, q, warnings),
        );
        return withWarnings(json(obj, 201));
      }
      if (method === "DELETE") {
        const list = listObjects(c, t, sel, new URLSearchParams());
        const opts = await this.#deleteOptions(req, q);
        const deleted: JsonObject[] = [];
        for (const o of list.items as JsonObject[]) {
          const m = meta(o);
          try {
            const gone = c.delete(t, String(m.namespace ?? ""), String(m.name), opts).object;
            if (t.custom) deleted.push(gone);
            else {
              const { apiVersion: _a, kind: _k, ...item } = gone;
              deleted.push(item);
            }
          } catch (err) {
            if (!(err instanceof ApiError && err.code === 404)) throw err;
          }
        }
        return json({ ...list, items: deleted });
      }
      throw methodNotAllowed("the server does not allow this method on the requested resource");
    }
    switch (method) {
      case "GET": {
        const obj = c.get(t, ns, name);
        if (!table) return json(obj);
        return json(
          toTable(t, [obj], { resourceVersion: String(meta(obj).resourceVersion) }, {
            now: Date.now(),
            includeObject: includeObjectOf(q),
          }),
        );
      }
      case "PUT": {
        const r = c.update(
          t,
          ns,
          name,
          await this.#readBody(req),
          this.#writeOptions(req, q, warnings),
          subresource,
        );
        return withWarnings(json(r.object, r.created ? 201 : 200));
      }
      case "PATCH": {
        const r = patchObject(c, {
          type: t,
          namespace: ns,
          name,
          subresource,
          contentType: mediaType(req.headers.get("content-type")),
          body: await req.text(),
          force: queryBool(q, "force"),
        }, this.#writeOptions(req, q, warnings));
        return withWarnings(json(r.object, r.created ? 201 : 200));
      }
      case "DELETE": {
        if (subresource) {
          throw methodNotAllowed("the server does not allow this method on the requested resource");
        }
        const r = c.delete(t, ns, name, await this.#deleteOptions(req, q));
        if (!r.gone || (t.kind === "Pod" && t.group === "")) return json(r.object);
        const details: JsonObject = { name, kind: t.plural, uid: meta(r.object).uid };
        if (t.group) details.group = t.group;
        return json({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details });
      }
    }
    throw methodNotAllowed("the server does not allow this method on the requested resource");
  }

  async #deleteOptions(req: Request, q: URLSearchParams): Promise<DeleteOptions> {
    const text = await req.text();
    let body: JsonObject = {};
    if (text.trim()) {
      try {
        const parsed = JSON.parse(text);
        if (isObject(parsed)) body = parsed;
      } catch {
        throw badRequest("the body of the request could not be decoded as DeleteOptions");
      }
    }
    const grace = queryInt(q, "gracePeriodSeconds") ??
      (typeof body.gracePeriodSeconds === "number" ? body.gracePeriodSeconds : undefined);
    const policy = q.get("propagationPolicy") ??
      (typeof body.propagationPolicy === "string" ? body.propagationPolicy : undefined);
    const pre = isObject(body.preconditions) ? body.preconditions : undefined;
    return {
      ...(grace !== undefined ? { gracePeriodSeconds: grace } : {}),
      ...(policy ? { propagationPolicy: policy } : {}),
      ...(pre ? { preconditions: pre as { uid?: string; resourceVersion?: string } } : {}),
      ...(q.getAll("dryRun").length || (Array.isArray(body.dryRun) && body.dryRun.length)
        ? { dryRun: true }
        : {}),
    };
  }
}

/** Status body for a request that matched no route (exported for tests). */
export function notFoundBody(): JsonObject {
  return statusBody(404, "NotFound", "the server could not find the requested resource", {});
}
