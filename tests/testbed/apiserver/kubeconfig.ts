/**
 * The kubeconfig written for clients of the emulator: one cluster with
 * `insecure-skip-tls-verify: true`, a bearer token user and a context with namespace `default`.
 * It works for kubectl (https + token) and client-node (which also needs the skip-verify flag on
 * plain http).
 *
 * @module
 */
import { stringify } from "yaml";

/** Inputs of {@link renderKubeconfig}. */
export interface KubeconfigInput {
  /** Server URL, e.g. `https://127.0.0.1:6443`. */
  readonly server: string;
  /** Bearer token; omitted when undefined. */
  readonly token?: string | undefined;
  /** Cluster, user and context name. @default "emu" */
  readonly name?: string;
}

/** Render the kubeconfig YAML. */
export function renderKubeconfig(input: KubeconfigInput): string {
  const name = input.name ?? "emu";
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name, cluster: { server: input.server, "insecure-skip-tls-verify": true } }],
    users: [{ name, user: input.token ? { token: input.token } : {} }],
    contexts: [{ name, context: { cluster: name, user: name, namespace: "default" } }],
    "current-context": name,
  });
}
