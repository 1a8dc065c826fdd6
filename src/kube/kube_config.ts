/**
 * Where a binary finds the Kubernetes API: the file named by `KUBECONFIG` when set, otherwise the
 * in-cluster service account. There is no silent fallback from one to the other.
 *
 * @module
 */
import { KubeConfig } from "@kubernetes/client-node";
import { ConfigError, errorMessage } from "../util/errors.ts";

/** Environment lookup, injectable for tests. */
export type EnvLookup = (name: string) => string | undefined;

/** Where the configuration came from, for logs. */
export interface LoadedKubeConfig {
  readonly config: KubeConfig;
  readonly source: string;
  readonly server: string;
}

/**
 * Load the Kubernetes client configuration.
 * @throws {ConfigError} when `KUBECONFIG` cannot be read or parsed, or when neither it nor the
 * in-cluster environment is present.
 */
export function loadKubeConfig(env: EnvLookup = (n) => Deno.env.get(n)): LoadedKubeConfig {
  const config = new KubeConfig();
  const path = env("KUBECONFIG");
  if (path) {
    const first = path.split(":")[0]!;
    try {
      config.loadFromFile(first);
    } catch (err) {
      throw new ConfigError(`KUBECONFIG "${first}" cannot be loaded: ${errorMessage(err)}`);
    }
    const cluster = config.getCurrentCluster();
    if (!cluster) {
      throw new ConfigError(
        `KUBECONFIG "${first}" has no current context with a cluster: set current-context`,
      );
    }
    return { config, source: `KUBECONFIG ${first}`, server: cluster.server };
  }
  if (env("KUBERNETES_SERVICE_HOST")) {
    try {
      config.loadFromCluster();
    } catch (err) {
      throw new ConfigError(`In-cluster Kubernetes config cannot be loaded: ${errorMessage(err)}`);
    }
    return {
      config,
      source: "in-cluster service account",
      server: config.getCurrentCluster()?.server ?? "",
    };
  }
  throw new ConfigError(
    "No Kubernetes API configuration: set KUBECONFIG to a kubeconfig file, or run inside a cluster",
  );
}
