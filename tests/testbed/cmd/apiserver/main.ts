/**
 * `s3-csi-apiserver`: the Kubernetes API emulator used by the sandbox and fast tests. Thin
 * entrypoint: all logic lives in `tests/testbed/apiserver/`.
 *
 * @module
 */
import { startApiServer } from "../../apiserver/api_server.ts";
import { runCli } from "../../../../src/util/cli.ts";
import type { OptionSpecs } from "../../../../src/util/config.ts";

/** Flags of the emulator binary. */
export const APISERVER_OPTIONS = {
  port: { type: "integer", default: 0, description: "TCP port to listen on (0 = pick a free one)" },
  host: { type: "string", default: "127.0.0.1", description: "Address to listen on" },
  "kubeconfig-out": {
    type: "string",
    description: "Write a kubeconfig for kubectl and the driver binaries to this file",
  },
  token: {
    type: "string",
    env: "APISERVER_TOKEN",
    description: "Bearer token clients must send (default: random)",
  },
  insecure: {
    type: "boolean",
    default: false,
    description: "Serve plain HTTP instead of self-signed HTTPS",
  },
  "pod-termination": {
    type: "duration",
    description:
      "Remove gracefully deleted pods after this long (default: wait for a kubelet to confirm)",
  },
} as const satisfies OptionSpecs;

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-apiserver",
      summary:
        "Kubernetes API emulator (kubectl and client-node compatible) for tests and the sandbox",
      options: APISERVER_OPTIONS,
      run: async (config, signal) => {
        const api = await startApiServer({
          port: config.port,
          host: config.host,
          tls: !config.insecure,
          signal,
          ...(config["kubeconfig-out"] ? { kubeconfigPath: config["kubeconfig-out"] } : {}),
          ...(config.token ? { token: config.token } : {}),
          ...(config["pod-termination"] !== undefined
            ? { podTerminationMs: config["pod-termination"] }
            : {}),
        });
        await api.finished;
        return 0;
      },
    }),
  );
}
