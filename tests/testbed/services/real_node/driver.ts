/**
 * The driver on the real node, the way a user installs it: our images built without a registry
 * (`scripts/build_images_local.ts --import`), the driver-level credentials Secret, then
 * `deno task deploy` with a values file that overrides only the images, the pull policy and the S3
 * endpoint (nothing hand-edited); `deno task undeploy --purge` removes it again.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { RestKubeClient } from "../../../../src/kube/rest_client.ts";
import { kubeConfigFromFile } from "../../../../src/kube/kube_config.ts";
import { CSI_NODES, SECRETS } from "../../../../src/kube/resources.ts";
import type { KubeClient, KubeObject } from "../../../../src/kube/client.ts";
import { waitFor } from "../../../../src/util/wait_for.ts";
import { defaultValues } from "../../../../src/deploy/values.ts";
import { DRIVER_NAME, DRIVER_VERSION } from "../../../../src/util/version.ts";
import { type DriverS3, driverValues, imageArchives, LOCAL_REGISTRY } from "./driver_values.ts";
import type { RealNode } from "./real_node.ts";

export { type DriverS3, driverValues, imageArchives, LOCAL_REGISTRY };

const REPO = fileURLToPath(new URL("../../../../", import.meta.url));

/** A command failed; `output` holds its last lines. */
export class DriverCommandError extends Error {
  override name = "DriverCommandError";
}

async function run(
  what: string,
  args: string[],
  env: Record<string, string>,
  logPath: string,
  signal?: AbortSignal,
): Promise<string> {
  await Deno.writeTextFile(logPath, `$ deno ${args.join(" ")}\n`, { append: true });
  const r = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: REPO,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    ...(signal ? { signal } : {}),
  }).output();
  const dec = new TextDecoder();
  const out = dec.decode(r.stdout);
  const err = dec.decode(r.stderr);
  await Deno.writeTextFile(logPath, `${err}${out}\n`, { append: true });
  if (!r.success) {
    const tail = `${err}${out}`.trim().split("\n").slice(-12).join("\n");
    throw new DriverCommandError(`${what} failed (exit ${r.code}, log ${logPath}):\n${tail}`);
  }
  return out;
}

/**
 * Our `mount-s3` engine and the supervisor beside it for the Mountpoint image
 * (`scripts/build_engine.sh`: cached outside the repository, built when missing): its path, or
 * undefined with the reason when this machine cannot build it (exit 3: no Rust toolchain, build
 * dependencies missing) — then no Mountpoint image can be built.
 */
export async function resolveEngine(
  logPath: string,
  signal?: AbortSignal,
): Promise<{ bin?: string; reason?: string }> {
  await Deno.writeTextFile(logPath, "$ bash scripts/build_engine.sh\n", { append: true });
  const r = await new Deno.Command("bash", {
    args: ["scripts/build_engine.sh"],
    cwd: REPO,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    ...(signal ? { signal } : {}),
  }).output();
  const dec = new TextDecoder();
  const err = dec.decode(r.stderr);
  await Deno.writeTextFile(logPath, err, { append: true });
  const line = dec.decode(r.stdout).trim().split("\n").pop() ?? "";
  if (r.code === 0 && line.startsWith("ENGINE_BIN=")) {
    return { bin: line.slice("ENGINE_BIN=".length) };
  }
  const last = err.trim().split("\n").pop() ?? "";
  if (r.code === 3) return { reason: last.replace(/^build_engine: SKIP: /, "") };
  throw new DriverCommandError(
    `scripts/build_engine.sh failed (exit ${r.code}, log ${logPath}): ${last}`,
  );
}

/**
 * Build the driver images and import them into the node's containerd; the Mountpoint image gets
 * `engineBin` and the supervisor beside it. Resolves with the `IMAGE_<COMPONENT>=<ref> <archive>`
 * lines.
 */
export async function buildDriverImages(
  node: Pick<RealNode, "containerdAddress">,
  logPath: string,
  engineBin: string,
  signal?: AbortSignal,
): Promise<string> {
  return await run(
    "scripts/build_images_local.ts",
    [
      "run",
      "-A",
      "scripts/build_images_local.ts",
      "--import",
      "--containerd-address",
      node.containerdAddress,
      "--registry",
      LOCAL_REGISTRY,
      "--tag",
      DRIVER_VERSION,
      "--engine-bin",
      engineBin,
    ],
    {},
    logPath,
    signal,
  );
}

/** The deployed driver. */
export interface DeployedDriver {
  /** The values file given to `deno task deploy`. */
  readonly valuesPath: string;
  /** What `deno task deploy` printed (its summary). */
  readonly summary: string;
  /** `deno task undeploy --purge`, then the credentials Secret. */
  undeploy(signal?: AbortSignal): Promise<string>;
}

/**
 * Create the credentials Secret, write the values file and run `deno task deploy` (which waits for
 * the rollout: exit 3 when it does not complete).
 */
export async function deployDriver(
  node: Pick<RealNode, "kubeconfig" | "imagePrefix" | "state">,
  s3: DriverS3,
  logPath: string,
  signal?: AbortSignal,
): Promise<DeployedDriver> {
  const defaults = defaultValues();
  const secret = defaults.s3CredentialSecret;
  const client = new RestKubeClient(kubeConfigFromFile(node.kubeconfig), {
    userAgent: "s3csi-real-node",
  });
  try {
    const body = {
      metadata: { name: secret.name, namespace: defaults.namespace },
      type: "Opaque",
      stringData: {
        [secret.accessKeyId]: s3.accessKeyId,
        [secret.secretAccessKey]: s3.secretAccessKey,
      },
    } as KubeObject;
    await client.delete(SECRETS, secret.name, defaults.namespace).catch(() => false);
    await client.create(SECRETS, body);
  } finally {
    await client.close();
  }
  const dir = `${node.state}/driver`;
  await Deno.mkdir(dir, { recursive: true });
  const valuesPath = `${dir}/values.yaml`;
  // JSON is YAML: the values loader reads both.
  await Deno.writeTextFile(valuesPath, `${JSON.stringify(driverValues(node, s3), null, 2)}\n`);
  const env = { KUBECONFIG: node.kubeconfig, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" };
  const summary = await run(
    "deno task deploy",
    ["task", "deploy", "--values", valuesPath],
    env,
    logPath,
    signal,
  );
  return {
    valuesPath,
    summary,
    async undeploy(sig?: AbortSignal) {
      const out = await run(
        "deno task undeploy",
        ["task", "undeploy", "--values", valuesPath, "--purge"],
        env,
        logPath,
        sig,
      );
      const c = new RestKubeClient(kubeConfigFromFile(node.kubeconfig), {
        userAgent: "s3csi-real-node",
      });
      try {
        await c.delete(SECRETS, secret.name, defaults.namespace).catch(() => false);
      } finally {
        await c.close();
      }
      return out;
    },
  };
}

/**
 * Wait until the kubelet of `nodeName` lists the driver in its CSINode (the registrar registered
 * it): Ready containers do not mean that happened yet.
 */
export async function driverRegistered(
  client: KubeClient,
  nodeName: string,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(`CSINode ${nodeName} to list the driver`, async () => {
    const n = await client.get<{ spec?: { drivers?: { name: string }[] } } & KubeObject>(
      CSI_NODES,
      nodeName,
    );
    return n?.spec?.drivers?.some((d) => d.name === DRIVER_NAME) ?? false;
  }, { timeoutMs, intervalMs: 200 });
}
