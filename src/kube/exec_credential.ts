/**
 * Exec credential plugins (`users[].user.exec` of a kubeconfig), as client-go runs them: `aws eks
 * get-token`, `gke-gcloud-auth-plugin`, `kubelogin`, …
 *
 * - The plugin runs with the kubeconfig's `args`, its `env` added to ours, and
 *   `KUBERNETES_EXEC_INFO` = an `ExecCredential` whose spec says whether it may talk to the user
 *   (`interactive`) and, with `provideClusterInfo`, describes the cluster.
 * - `interactiveMode`: `Never` — no standard input; `IfAvailable` — standard input when it is a
 *   terminal; `Always` — refused unless standard input is a terminal. The plugin's standard error
 *   goes to ours, so its prompts and messages reach the user.
 * - Its standard output must be an `ExecCredential` of the same apiVersion with a token or a client
 *   certificate and key; `expirationTimestamp` (RFC 3339) bounds how long it is cached. Without one
 *   it is cached until the server rejects it.
 * - {@link ExecCredentialSource.invalidate} after a 401 drops the cache: the next call runs the
 *   plugin again. Concurrent calls share one run.
 *
 * @module
 */
import { ConfigError, errorMessage } from "../util/errors.ts";
import type { Credentials, CredentialSource } from "./credentials.ts";

/** The `exec` entry of a kubeconfig user, checked. */
export interface ExecPluginConfig {
  readonly apiVersion: string;
  /** Command (a bare name is looked up on PATH). */
  readonly command: string;
  readonly args: readonly string[];
  readonly env: readonly { name: string; value: string }[];
  readonly interactiveMode: "Never" | "IfAvailable" | "Always";
  readonly provideClusterInfo: boolean;
  readonly installHint?: string;
  /** `kubeconfig "<file>" user "<name>"`, for messages. */
  readonly where: string;
}

/** Options of {@link ExecCredentialSource}. */
export interface ExecCredentialOptions {
  /** Whether our standard input is a terminal. */
  readonly stdinIsTerminal: boolean;
  /** The cluster, passed with `provideClusterInfo`. */
  readonly cluster?: Record<string, unknown>;
  /** Clock for expiry. @default Date.now */
  readonly now?: () => number;
}

/** A plugin that failed: not found, a non-zero exit, or output we cannot use. */
export class ExecPluginError extends ConfigError {
  override name = "ExecPluginError";
}

interface Cached {
  readonly creds: Credentials;
  /** Epoch ms, or undefined: valid until invalidated. */
  readonly expiresAt: number | undefined;
}

/** Credentials from an exec plugin, cached until they expire or the server rejects them. */
export class ExecCredentialSource implements CredentialSource {
  readonly #c: ExecPluginConfig;
  readonly #o: ExecCredentialOptions;
  #cached: Cached | undefined;
  #running: Promise<Credentials> | undefined;
  /** How many times the plugin ran (tests). */
  runs = 0;

  /** Create a source; the plugin runs on the first {@link get}. */
  constructor(config: ExecPluginConfig, options: ExecCredentialOptions) {
    this.#c = config;
    this.#o = options;
    if (config.interactiveMode === "Always" && !options.stdinIsTerminal) {
      throw new ExecPluginError(
        `${config.where}: the exec plugin "${config.command}" needs an interactive terminal (interactiveMode: Always), but standard input is not a terminal`,
      );
    }
  }

  /** @inheritdoc */
  get(signal?: AbortSignal): Promise<Credentials> {
    const now = (this.#o.now ?? Date.now)();
    const c = this.#cached;
    if (c && (c.expiresAt === undefined || now < c.expiresAt)) return Promise.resolve(c.creds);
    this.#running ??= this.#run(signal).finally(() => (this.#running = undefined));
    return this.#running;
  }

  /** @inheritdoc */
  invalidate(): void {
    this.#cached = undefined;
  }

  async #run(signal?: AbortSignal): Promise<Credentials> {
    const c = this.#c;
    const interactive = c.interactiveMode !== "Never" && this.#o.stdinIsTerminal;
    const info = {
      apiVersion: c.apiVersion,
      kind: "ExecCredential",
      spec: {
        interactive,
        ...(c.provideClusterInfo && this.#o.cluster ? { cluster: this.#o.cluster } : {}),
      },
    };
    const env: Record<string, string> = {};
    for (const e of c.env) env[e.name] = e.value;
    env.KUBERNETES_EXEC_INFO = JSON.stringify(info);
    this.runs++;
    let out: Deno.CommandOutput;
    try {
      out = await new Deno.Command(c.command, {
        args: [...c.args],
        env, // added to our own environment, which the plugin inherits
        stdin: interactive ? "inherit" : "null",
        stdout: "piped",
        stderr: "inherit",
        ...(signal ? { signal } : {}),
      }).output();
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        throw new ExecPluginError(
          `${c.where}: the exec credential plugin "${c.command}" was not found (not installed, or not on PATH)${
            c.installHint ? `. ${c.installHint.trim()}` : ""
          }`,
        );
      }
      throw new ExecPluginError(
        `${c.where}: the exec credential plugin "${c.command}" could not run: ${errorMessage(err)}`,
      );
    }
    if (!out.success) {
      throw new ExecPluginError(
        `${c.where}: the exec credential plugin "${c.command}" failed with exit code ${out.code} (its messages are above)`,
      );
    }
    const creds = this.#parse(new TextDecoder().decode(out.stdout));
    this.#cached = creds;
    return creds.creds;
  }

  #parse(text: string): Cached {
    const c = this.#c;
    const bad = (why: string) =>
      new ExecPluginError(`${c.where}: the exec credential plugin "${c.command}" ${why}`);
    let doc: {
      apiVersion?: string;
      kind?: string;
      status?: {
        token?: string;
        clientCertificateData?: string;
        clientKeyData?: string;
        expirationTimestamp?: string;
      };
    };
    try {
      doc = JSON.parse(text);
    } catch {
      throw bad("printed something that is not an ExecCredential (JSON)");
    }
    if (doc?.kind !== "ExecCredential") {
      throw bad(`printed kind "${doc?.kind}", not ExecCredential`);
    }
    if (doc.apiVersion !== c.apiVersion) {
      throw bad(
        `answered with apiVersion "${doc.apiVersion}" although the kubeconfig asks for "${c.apiVersion}"`,
      );
    }
    const s = doc.status ?? {};
    const cert = s.clientCertificateData;
    const key = s.clientKeyData;
    if (!!cert !== !!key) {
      throw bad("returned a client certificate without its key (or a key without its certificate)");
    }
    if (!s.token && !cert) throw bad("returned neither a token nor a client certificate");
    let expiresAt: number | undefined;
    if (s.expirationTimestamp) {
      expiresAt = Date.parse(s.expirationTimestamp);
      if (!Number.isFinite(expiresAt)) {
        throw bad(`returned an invalid expirationTimestamp "${s.expirationTimestamp}"`);
      }
    }
    return {
      creds: {
        ...(s.token ? { token: s.token } : {}),
        ...(cert && key ? { cert, key } : {}),
      },
      expiresAt,
    };
  }
}
