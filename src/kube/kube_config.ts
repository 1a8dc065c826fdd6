/**
 * Kubeconfig loading with client-go's rules, and where the in-cluster binaries find the API.
 *
 * Files: an explicit file (`--kubeconfig`) is used alone; otherwise every file of the `KUBECONFIG`
 * list (`:`-separated; missing files are skipped, as client-go does) is merged, otherwise
 * `~/.kube/config`. Merging follows client-go: for clusters, users and contexts the **first file
 * that defines a name wins**, and `current-context` comes from the first file that sets one.
 * Relative file references (CA, client certificate and key, token file, an exec command with a
 * `/`) resolve against the file that holds them.
 *
 * Users: bearer token (inline or `tokenFile`), client certificate and key (file or data; one
 * without the other is an error), basic auth, and — only where the caller allows it (the CLI) —
 * exec credential plugins (`exec_credential.ts`). `auth-provider` entries were removed from
 * client-go in 1.26; they are refused with the exec plugin to use instead.
 *
 * Clusters: `server` must be https unless the caller accepts plain http (`allowHttp`), CA (file or
 * data, not together with `insecure-skip-tls-verify`), `tls-server-name`.
 *
 * The loader is our own (YAML via `yaml`) rather than client-node's `KubeConfig`: importing
 * client-node costs about 80 MB of resident memory in every process (ADR 0005).
 *
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { parse } from "yaml";
import { ConfigError, errorMessage } from "../util/errors.ts";
import type { CredentialSource } from "./credentials.ts";
import { ExecCredentialSource, type ExecPluginConfig } from "./exec_credential.ts";

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
  /** The context used (kubeconfig files only). */
  readonly context?: string;
}

/** In-cluster service-account directory. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

type Yaml = Record<string, unknown>;

/** A named entry of a merged kubeconfig and the file that defined it. */
interface Entry {
  readonly value: Yaml;
  readonly file: string;
}

/** Kubeconfig files merged with client-go's rules. */
export interface MergedKubeconfig {
  /** Files read, in order. */
  readonly files: readonly string[];
  readonly clusters: ReadonlyMap<string, Entry>;
  readonly users: ReadonlyMap<string, Entry>;
  readonly contexts: ReadonlyMap<string, Entry>;
  /** From the first file that sets one. */
  readonly currentContext?: string;
}

/** How the caller wants users and servers treated. */
export interface ResolveOptions {
  /** Context to use instead of `current-context`. */
  readonly context?: string;
  /** Run exec credential plugins (the CLI); otherwise a user with one is refused. */
  readonly exec?: { readonly stdinIsTerminal: boolean };
  /** Accept `http://` servers. @default false */
  readonly allowHttp?: boolean;
}

/** Read and parse one kubeconfig file. @throws {ConfigError} */
function readDoc(path: string, text?: string): Yaml {
  let raw = text;
  if (raw === undefined) {
    try {
      raw = readFileSync(path, "utf8");
    } catch (err) {
      throw new ConfigError(`kubeconfig "${path}" cannot be read: ${errorMessage(err)}`);
    }
  }
  let doc: unknown;
  try {
    doc = parse(raw) ?? {};
  } catch (err) {
    throw new ConfigError(`kubeconfig "${path}" is not valid YAML: ${errorMessage(err)}`);
  }
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new ConfigError(`kubeconfig "${path}" is not a kubeconfig (a YAML mapping)`);
  }
  return doc as Yaml;
}

/**
 * Merge kubeconfig documents in order (client-go: first definition of a name wins; current-context
 * from the first file that sets one). `docs` are (path, parsed document) pairs.
 */
export function mergeKubeconfigs(docs: readonly (readonly [string, Yaml])[]): MergedKubeconfig {
  const clusters = new Map<string, Entry>();
  const users = new Map<string, Entry>();
  const contexts = new Map<string, Entry>();
  let currentContext: string | undefined;
  for (const [file, doc] of docs) {
    for (
      const [key, inner, into] of [
        ["clusters", "cluster", clusters],
        ["users", "user", users],
        ["contexts", "context", contexts],
      ] as const
    ) {
      const list = doc[key];
      if (list === undefined || list === null) continue;
      if (!Array.isArray(list)) {
        throw new ConfigError(`kubeconfig "${file}": ${key} must be a list`);
      }
      for (const e of list as Yaml[]) {
        const name = e?.name;
        if (typeof name !== "string" || !name) {
          throw new ConfigError(`kubeconfig "${file}": an entry of ${key} has no name`);
        }
        if (!into.has(name)) into.set(name, { value: (e[inner] ?? {}) as Yaml, file });
      }
    }
    const cc = doc["current-context"];
    if (currentContext === undefined && typeof cc === "string" && cc) currentContext = cc;
  }
  return {
    files: docs.map(([f]) => f),
    clusters,
    users,
    contexts,
    ...(currentContext !== undefined ? { currentContext } : {}),
  };
}

/**
 * The kubeconfig files a CLI reads: `explicit` alone when given (it must exist), else the
 * `KUBECONFIG` list (missing files skipped), else `~/.kube/config`.
 * @throws {ConfigError} when no file is there
 */
export function kubeconfigFiles(explicit: string | undefined, env: EnvLookup): string[] {
  if (explicit) {
    if (!existsSync(explicit)) {
      throw new ConfigError(`--kubeconfig "${explicit}" does not exist`);
    }
    return [explicit];
  }
  const list = env("KUBECONFIG");
  if (list) {
    const files = [...new Set(list.split(":").filter(Boolean))];
    const present = files.filter((f) => existsSync(f));
    if (!present.length) {
      throw new ConfigError(
        `none of the KUBECONFIG files exists (${
          files.join(", ")
        }): fix KUBECONFIG or pass --kubeconfig`,
      );
    }
    return present;
  }
  const home = env("HOME") || homedir();
  const path = join(home, ".kube", "config");
  if (!existsSync(path)) {
    throw new ConfigError(
      `no kubeconfig: ${path} does not exist and KUBECONFIG is not set; pass --kubeconfig or set KUBECONFIG`,
    );
  }
  return [path];
}

function fileOrData(obj: Yaml, fileKey: string, dataKey: string, base: string): string | undefined {
  const data = obj[dataKey];
  if (typeof data === "string" && data) {
    try {
      return atob(data.replace(/\s+/g, ""));
    } catch {
      throw new ConfigError(`${dataKey} is not valid base64`);
    }
  }
  const file = obj[fileKey];
  if (typeof file === "string" && file) {
    const path = isAbsolute(file) ? file : join(base, file);
    try {
      return readFileSync(path, "utf8");
    } catch (err) {
      throw new ConfigError(`${fileKey} "${path}" cannot be read: ${errorMessage(err)}`);
    }
  }
  return undefined;
}

/** What to use instead of a removed auth-provider. */
const AUTH_PROVIDER_REPLACEMENTS: Readonly<Record<string, string>> = {
  gcp:
    "the exec plugin gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin; " +
    "then gcloud container clusters get-credentials …)",
  azure:
    "the exec plugin kubelogin (az aks get-credentials …; kubelogin convert-kubeconfig -l azurecli)",
  oidc: "an exec plugin such as kubelogin (kubectl oidc-login), or a token",
};

function refuseAuthProvider(where: string, provider: Yaml): never {
  const name = String(provider.name ?? "");
  const instead = AUTH_PROVIDER_REPLACEMENTS[name] ?? "an exec credential plugin or a token";
  throw new ConfigError(
    `${where} uses the auth-provider "${name}", which kubectl and client-go removed in Kubernetes 1.26: use ${instead}`,
  );
}

/**
 * Resolve the context of a merged kubeconfig into client settings.
 * @throws {ConfigError} naming the file and what to change
 */
export function resolveKubeconfig(
  merged: MergedKubeconfig,
  options: ResolveOptions = {},
): LoadedKubeConfig {
  const files = merged.files.join(", ");
  const ctxName = options.context ?? merged.currentContext;
  if (!ctxName) {
    throw new ConfigError(
      `kubeconfig ${files} has no current-context: set one (kubectl config use-context) or pass --context`,
    );
  }
  const ctx = merged.contexts.get(ctxName);
  if (!ctx) throw new ConfigError(`kubeconfig ${files} has no context named "${ctxName}"`);
  const clusterName = String(ctx.value.cluster ?? "");
  const cluster = merged.clusters.get(clusterName);
  if (!cluster) {
    throw new ConfigError(
      `kubeconfig ${files}: context "${ctxName}" names cluster "${clusterName}", which is not defined`,
    );
  }
  const userName = ctx.value.user ? String(ctx.value.user) : undefined;
  const userEntry = userName ? merged.users.get(userName) : undefined;
  if (userName && !userEntry) {
    throw new ConfigError(
      `kubeconfig ${files}: context "${ctxName}" names user "${userName}", which is not defined`,
    );
  }
  const c = cluster.value;
  const server = String(c.server ?? "");
  const where = `kubeconfig "${cluster.file}" cluster "${clusterName}"`;
  let url: URL | undefined;
  try {
    url = new URL(server);
  } catch { /* below */ }
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:")) {
    throw new ConfigError(`${where}: server "${server}" is not an https:// URL`);
  }
  if (url.protocol === "http:" && !options.allowHttp) {
    throw new ConfigError(
      `${where}: server "${server}" is plain http: credentials and every object would cross the network unencrypted. Use https, or pass --allow-insecure-http if you mean it (e.g. a local test API server)`,
    );
  }
  if (c["proxy-url"]) {
    throw new ConfigError(`${where}: proxy-url is not supported; reach the server directly`);
  }
  const out: { -readonly [K in keyof KubeClientConfig]: KubeClientConfig[K] } = {
    server: server.replace(/\/+$/, ""),
  };
  const cbase = dirname(cluster.file);
  try {
    const ca = fileOrData(c, "certificate-authority", "certificate-authority-data", cbase);
    if (ca) out.ca = ca;
  } catch (err) {
    throw new ConfigError(`${where}: ${errorMessage(err)}`);
  }
  if (c["insecure-skip-tls-verify"] === true) {
    if (out.ca) {
      throw new ConfigError(
        `${where}: certificate-authority and insecure-skip-tls-verify are set together; keep one`,
      );
    }
    out.insecureSkipTLSVerify = true;
  }
  if (typeof c["tls-server-name"] === "string" && c["tls-server-name"]) {
    out.tlsServerName = c["tls-server-name"];
  }
  if (userEntry) resolveUser(userEntry, userName!, out, c, options);
  return {
    config: out,
    source: merged.files.length > 1
      ? `kubeconfig ${files} (merged), context ${ctxName}`
      : `kubeconfig ${files}, context ${ctxName}`,
    server: out.server,
    context: ctxName,
  };
}

function resolveUser(
  entry: Entry,
  name: string,
  out: { -readonly [K in keyof KubeClientConfig]: KubeClientConfig[K] },
  cluster: Yaml,
  options: ResolveOptions,
): void {
  const u = entry.value;
  const where = `kubeconfig "${entry.file}" user "${name}"`;
  const base = dirname(entry.file);
  if (u["auth-provider"]) refuseAuthProvider(where, u["auth-provider"] as Yaml);
  const methods = [
    ...(u.token || u.tokenFile ? ["token"] : []),
    ...(u.username !== undefined || u.password !== undefined ? ["basic auth"] : []),
    ...(u.exec ? ["exec"] : []),
  ];
  if (methods.length > 1) {
    throw new ConfigError(`${where} sets ${methods.join(" and ")}: only one may be used`);
  }
  if (typeof u.token === "string") out.token = u.token;
  if (typeof u.tokenFile === "string") {
    out.tokenFile = isAbsolute(u.tokenFile) ? u.tokenFile : join(base, u.tokenFile);
  }
  let cert: string | undefined;
  let key: string | undefined;
  try {
    cert = fileOrData(u, "client-certificate", "client-certificate-data", base);
    key = fileOrData(u, "client-key", "client-key-data", base);
  } catch (err) {
    throw new ConfigError(`${where}: ${errorMessage(err)}`);
  }
  if (cert && !key) {
    throw new ConfigError(
      `${where} has a client certificate but no client key: set client-key or client-key-data`,
    );
  }
  if (key && !cert) {
    throw new ConfigError(
      `${where} has a client key but no client certificate: set client-certificate or client-certificate-data`,
    );
  }
  if (cert && key) {
    out.cert = cert;
    out.key = key;
  }
  if (typeof u.username === "string") out.username = u.username;
  if (typeof u.password === "string") out.password = u.password;
  if (u.exec) {
    if (!options.exec) {
      throw new ConfigError(
        `${where} uses an exec credential plugin, which this binary does not run (in a cluster it uses its ServiceAccount): use a token or a client certificate`,
      );
    }
    const extension = clusterExecConfig(cluster);
    out.credentials = new ExecCredentialSource(execConfig(u.exec as Yaml, where, base), {
      stdinIsTerminal: options.exec.stdinIsTerminal,
      cluster: {
        server: out.server,
        ...(out.tlsServerName ? { "tls-server-name": out.tlsServerName } : {}),
        ...(out.insecureSkipTLSVerify ? { "insecure-skip-tls-verify": true } : {}),
        ...(out.ca ? { "certificate-authority-data": btoa(out.ca) } : {}),
        ...(extension !== undefined ? { config: extension } : {}),
      },
    });
  }
}

/** The cluster's `extensions[name=client.authentication.k8s.io/exec].extension`, if any. */
function clusterExecConfig(cluster: Yaml): unknown {
  const ext = (Array.isArray(cluster.extensions) ? cluster.extensions : []) as Yaml[];
  return ext.find((e) => e?.name === "client.authentication.k8s.io/exec")?.extension;
}

function execConfig(exec: Yaml, where: string, base: string): ExecPluginConfig {
  const apiVersion = String(exec.apiVersion ?? "");
  if (
    apiVersion !== "client.authentication.k8s.io/v1" &&
    apiVersion !== "client.authentication.k8s.io/v1beta1"
  ) {
    throw new ConfigError(
      `${where}: exec apiVersion "${apiVersion}" is not supported: use client.authentication.k8s.io/v1 or v1beta1 (v1alpha1 was removed in Kubernetes 1.24)`,
    );
  }
  let command = String(exec.command ?? "");
  if (!command) throw new ConfigError(`${where}: exec has no command`);
  // client-go: a relative command with a path separator is relative to the kubeconfig file.
  if (command.includes("/") && !isAbsolute(command)) command = join(base, command);
  const args = exec.args ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) {
    throw new ConfigError(`${where}: exec args must be a list of strings`);
  }
  const env = (exec.env ?? []) as Yaml[];
  if (!Array.isArray(env) || !env.every((e) => typeof e?.name === "string")) {
    throw new ConfigError(`${where}: exec env must be a list of {name, value}`);
  }
  const mode = exec.interactiveMode;
  let interactiveMode: "Never" | "IfAvailable" | "Always";
  if (mode === undefined || mode === "") {
    if (apiVersion.endsWith("/v1")) {
      throw new ConfigError(
        `${where}: exec interactiveMode is required with client.authentication.k8s.io/v1 (Never, IfAvailable or Always)`,
      );
    }
    interactiveMode = "IfAvailable";
  } else if (mode === "Never" || mode === "IfAvailable" || mode === "Always") {
    interactiveMode = mode;
  } else {
    throw new ConfigError(
      `${where}: exec interactiveMode "${mode}" is not one of Never, IfAvailable, Always`,
    );
  }
  return {
    apiVersion,
    command,
    args: args as string[],
    env: env.map((e) => ({ name: String(e.name), value: String(e.value ?? "") })),
    interactiveMode,
    provideClusterInfo: exec.provideClusterInfo === true,
    ...(typeof exec.installHint === "string" ? { installHint: exec.installHint } : {}),
    where,
  };
}

/**
 * Parse kubeconfig `text` (read from `path`, for relative file references and messages), using
 * `context` or the file's `current-context`. Exec plugins are refused; http is accepted.
 * @throws {ConfigError}
 */
export function parseKubeconfig(text: string, path: string, context?: string): KubeClientConfig {
  return resolveKubeconfig(
    mergeKubeconfigs([[path, readDoc(path, text)]]),
    { allowHttp: true, ...(context ? { context } : {}) },
  ).config;
}

/** Load one kubeconfig file (tests and in-cluster binaries). @throws {ConfigError} */
export function kubeConfigFromFile(path: string, context?: string): KubeClientConfig {
  return resolveKubeconfig(
    mergeKubeconfigs([[path, readDoc(path)]]),
    { allowHttp: true, ...(context ? { context } : {}) },
  ).config;
}

/** Options of {@link loadCliKubeConfig}. */
export interface CliKubeConfigOptions {
  /** `--kubeconfig`: this file alone. */
  readonly kubeconfig?: string;
  /** `--context`. */
  readonly context?: string;
  /** `--allow-insecure-http`. */
  readonly allowHttp?: boolean;
  /** Whether standard input is a terminal (exec plugins' interactiveMode). */
  readonly stdinIsTerminal: boolean;
  readonly env?: EnvLookup;
}

/**
 * The kubeconfig of `deno task deploy`/`undeploy`: client-go's file selection and merging, exec
 * plugins run, http refused unless allowed. @throws {ConfigError}
 */
export function loadCliKubeConfig(o: CliKubeConfigOptions): LoadedKubeConfig {
  const env = o.env ?? ((n: string) => Deno.env.get(n));
  const files = kubeconfigFiles(o.kubeconfig, env);
  return resolveKubeconfig(mergeKubeconfigs(files.map((f) => [f, readDoc(f)] as const)), {
    ...(o.context ? { context: o.context } : {}),
    exec: { stdinIsTerminal: o.stdinIsTerminal },
    allowHttp: o.allowHttp ?? false,
  });
}

/**
 * Where an in-cluster binary (controller, node plugin) finds the API: the `KUBECONFIG` files
 * (merged as client-go does) when set, otherwise the in-cluster ServiceAccount. There is no silent
 * fallback from one to the other. Exec plugins are refused: in a cluster the ServiceAccount is used.
 * @throws {ConfigError}
 */
export function loadKubeConfig(env: EnvLookup = (n) => Deno.env.get(n)): LoadedKubeConfig {
  const list = env("KUBECONFIG");
  if (list) {
    const listed = list.split(":").filter(Boolean);
    // client-go skips missing files of the list; if none is there, say which one we tried.
    const files = listed.filter((f) => existsSync(f));
    if (!files.length) files.push(listed[0]!);
    const docs = files.map((f) => {
      try {
        return [f, readDoc(f)] as const;
      } catch (err) {
        throw new ConfigError(`KUBECONFIG "${f}" cannot be loaded: ${errorMessage(err)}`);
      }
    });
    const loaded = resolveKubeconfig(mergeKubeconfigs(docs), { allowHttp: true });
    return { ...loaded, source: `KUBECONFIG ${files.join(":")}` };
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
