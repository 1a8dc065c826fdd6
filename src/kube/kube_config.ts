/**
 * Where a binary finds the Kubernetes API: the file named by `KUBECONFIG` when set, otherwise the
 * in-cluster service account. There is no silent fallback from one to the other.
 *
 * The loader is our own (YAML via `yaml`) rather than client-node's `KubeConfig`: importing
 * client-node costs about 80 MB of resident memory in every process, for features (cloud auth
 * plugins, generated models) the driver does not use. Supported: server, CA (file or data),
 * `insecure-skip-tls-verify`, bearer token (inline or `tokenFile`, re-read on refresh), client
 * certificate and key (file or data), basic auth. `exec` and `auth-provider` users are refused with
 * a clear error.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { dirname, isAbsolute, join } from "node:path";
import { parse } from "yaml";
import { ConfigError, errorMessage } from "../util/errors.ts";
import type { CredentialSource } from "./credentials.ts";

/** Environment lookup, injectable for tests. */
export type EnvLookup = (name: string) => string | undefined;

/** Everything a client needs to reach and authenticate to one API server. */
export interface KubeClientConfig {
  /** Base URL, e.g. `https://10.0.0.1:443`. */
  readonly server: string;
  /** PEM CA bundle trusted for the server. */
  readonly ca?: string;
  readonly insecureSkipTLSVerify?: boolean;
  /** Static bearer token. */
  readonly token?: string;
  /** File holding the bearer token (re-read periodically: projected tokens rotate). */
  readonly tokenFile?: string;
  /** PEM client certificate and key. */
  readonly cert?: string;
  readonly key?: string;
  readonly username?: string;
  readonly password?: string;
  /** Server name to verify in the server's certificate (kubeconfig `tls-server-name`). */
  readonly tlsServerName?: string;
  /** Credentials from a plugin; replaces token and certificate when set. */
  readonly credentials?: CredentialSource;
}

/** Where the configuration came from, for logs. */
export interface LoadedKubeConfig {
  readonly config: KubeClientConfig;
  readonly source: string;
  readonly server: string;
}

/** In-cluster service-account directory. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

type Yaml = Record<string, unknown>;

function named(list: unknown, name: string, what: string, path: string): Yaml {
  const entry = (Array.isArray(list) ? list : []).find((e: Yaml) => e?.name === name) as
    | Yaml
    | undefined;
  if (!entry) throw new ConfigError(`kubeconfig "${path}" has no ${what} named "${name}"`);
  return (entry[what] ?? {}) as Yaml;
}

function fileOrData(obj: Yaml, fileKey: string, dataKey: string, base: string): string | undefined {
  const data = obj[dataKey];
  if (typeof data === "string" && data) return atob(data.replace(/\s+/g, ""));
  const file = obj[fileKey];
  if (typeof file === "string" && file) {
    return readFileSync(isAbsolute(file) ? file : join(base, file), "utf8");
  }
  return undefined;
}

/**
 * Parse kubeconfig `text` (read from `path`, for relative file references and messages), using
 * `context` or the file's `current-context`.
 * @throws {ConfigError}
 */
export function parseKubeconfig(text: string, path: string, context?: string): KubeClientConfig {
  let doc: Yaml;
  try {
    doc = (parse(text) ?? {}) as Yaml;
  } catch (err) {
    throw new ConfigError(`kubeconfig "${path}" is not valid YAML: ${errorMessage(err)}`);
  }
  const ctxName = context ?? (doc["current-context"] as string | undefined);
  if (!ctxName) throw new ConfigError(`kubeconfig "${path}" has no current-context: set one`);
  const ctx = named(doc.contexts, ctxName, "context", path);
  const cluster = named(doc.clusters, String(ctx.cluster ?? ""), "cluster", path);
  const user = ctx.user ? named(doc.users, String(ctx.user), "user", path) : {};
  if (user.exec || user["auth-provider"]) {
    throw new ConfigError(
      `kubeconfig "${path}" user "${ctx.user}" uses an exec or auth-provider plugin, which this driver does not run: use a token or client certificate`,
    );
  }
  const server = String(cluster.server ?? "");
  if (!/^https?:\/\//.test(server)) {
    throw new ConfigError(`kubeconfig "${path}" cluster server "${server}" is not an http(s) URL`);
  }
  const base = dirname(path);
  const out: { -readonly [K in keyof KubeClientConfig]: KubeClientConfig[K] } = {
    server: server.replace(/\/+$/, ""),
  };
  const ca = fileOrData(cluster, "certificate-authority", "certificate-authority-data", base);
  if (ca) out.ca = ca;
  if (cluster["insecure-skip-tls-verify"] === true) out.insecureSkipTLSVerify = true;
  if (typeof user.token === "string") out.token = user.token;
  if (typeof user.tokenFile === "string") {
    out.tokenFile = isAbsolute(user.tokenFile) ? user.tokenFile : join(base, user.tokenFile);
  }
  const cert = fileOrData(user, "client-certificate", "client-certificate-data", base);
  const key = fileOrData(user, "client-key", "client-key-data", base);
  if (cert && key) {
    out.cert = cert;
    out.key = key;
  }
  if (typeof user.username === "string") out.username = user.username;
  if (typeof user.password === "string") out.password = user.password;
  return out;
}

/** Load a kubeconfig file. @throws {ConfigError} */
export function kubeConfigFromFile(path: string, context?: string): KubeClientConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(`KUBECONFIG "${path}" cannot be loaded: ${errorMessage(err)}`);
  }
  return parseKubeconfig(text, path, context);
}

/**
 * Load the Kubernetes client configuration.
 * @throws {ConfigError} when `KUBECONFIG` cannot be read or parsed, or when neither it nor the
 * in-cluster environment is present.
 */
export function loadKubeConfig(env: EnvLookup = (n) => Deno.env.get(n)): LoadedKubeConfig {
  const path = env("KUBECONFIG");
  if (path) {
    const first = path.split(":")[0]!;
    const config = kubeConfigFromFile(first);
    return { config, source: `KUBECONFIG ${first}`, server: config.server };
  }
  const host = env("KUBERNETES_SERVICE_HOST");
  if (host) {
    const port = env("KUBERNETES_SERVICE_PORT") ?? "443";
    let ca: string;
    try {
      ca = readFileSync(`${SERVICE_ACCOUNT_DIR}/ca.crt`, "utf8");
    } catch (err) {
      throw new ConfigError(`In-cluster Kubernetes config cannot be loaded: ${errorMessage(err)}`);
    }
    const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
    return {
      config: { server, ca, tokenFile: `${SERVICE_ACCOUNT_DIR}/token` },
      source: "in-cluster service account",
      server,
    };
  }
  throw new ConfigError(
    "No Kubernetes API configuration: set KUBECONFIG to a kubeconfig file, or run inside a cluster",
  );
}
