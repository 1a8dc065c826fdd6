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
import { DRIVER_NAME, DRIVER_VERSION, VERSION_ENV } from "../../../../src/util/version.ts";
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
 * lines. `version`: another version of this tree (`S3CSI_VERSION`: the binaries embed it, the
 * images are tagged with it), its archives in a folder of their own.
 */
export async function buildDriverImages(
  node: Pick<RealNode, "containerdAddress">,
  logPath: string,
  engineBin: string,
  signal?: AbortSignal,
  version: string = DRIVER_VERSION,
): Promise<string> {
  const other = version !== DRIVER_VERSION;
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
      ...(other ? ["--version", version, "--out", `${REPO}dist/images/${version}`] : []),
      "--tag",
      version,
      "--engine-bin",
      engineBin,
    ],
    {},
    logPath,
    signal,
  );
}

/** Import OCI archives into a node's containerd (a second node that needs another version). */
export async function importImages(
  node: Pick<RealNode, "containerdAddress">,
  archives: readonly string[],
  logPath: string,
  signal?: AbortSignal,
): Promise<void> {
  for (const archive of archives) {
    const args = ["--address", node.containerdAddress, "-n", "k8s.io", "images", "import", archive];
    await Deno.writeTextFile(logPath, `$ ctr ${args.join(" ")}\n`, { append: true });
    const r = await new Deno.Command("ctr", {
      args,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      ...(signal ? { signal } : {}),
    }).output();
    if (!r.success) {
      throw new DriverCommandError(
        `ctr import ${archive} failed (exit ${r.code}): ${
          new TextDecoder().decode(r.stderr).trim()
        }`,
      );
    }
  }
}

/** The deployed driver. */
export interface DeployedDriver {
  /** The values file given to `deno task deploy`. */
  readonly valuesPath: string;
  /** What `deno task deploy` printed (its summary). */
  readonly summary: string;
  /** `deno task undeploy --purge`, then the credentials Secret. */
  undeploy(signal?: AbortSignal): Promise<string>;
  /**
   * `deno task deploy` again with `S3CSI_VERSION=<version>` (its images, built and imported
   * before): an upgrade or a rollback, as an operator runs it. Resolves with its summary.
   */
  deployVersion(version: string, signal?: AbortSignal): Promise<string>;
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
  const writeValues = (version: string) =>
    Deno.writeTextFile(valuesPath, `${JSON.stringify(driverValues(node, s3, version), null, 2)}\n`);
  await writeValues(DRIVER_VERSION);
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
    async deployVersion(version: string, sig?: AbortSignal) {
      await writeValues(version);
      return await run(
        `S3CSI_VERSION=${version} deno task deploy`,
        ["task", "deploy", "--values", valuesPath],
        { ...env, [VERSION_ENV]: version },
        logPath,
        sig,
      );
    },
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

/** What {@link DriverVersions} builds and deploys with. */
export interface DriverVersionsOptions {
  readonly node: Pick<RealNode, "containerdAddress">;
  /** The second node(s) running now (they get each version's images too). */
  readonly workers: () => readonly Pick<RealNode, "containerdAddress">[];
  /** `mount-s3` for the Mountpoint image (the supervisor beside it). */
  readonly engineBin: string;
  readonly driver: () => DeployedDriver | undefined;
  readonly logDir: string;
}

/**
 * Other versions of the driver on the running cluster, for the upgrade scenario: each is built
 * once from this tree (`S3CSI_VERSION`), imported into every node, then deployed with
 * `deno task deploy` like an operator's upgrade or rollback. `deno.json`'s version is the one
 * built and deployed at start.
 */
export class DriverVersions {
  readonly #built = new Map<string, string[]>();
  readonly #o: DriverVersionsOptions;

  constructor(o: DriverVersionsOptions) {
    this.#o = o;
  }

  /** Build (once) and import `version`'s images, then deploy it; resolves with deploy's summary. */
  async deploy(version: string, signal?: AbortSignal): Promise<string> {
    const o = this.#o;
    const driver = o.driver();
    if (!driver) throw new Error("the driver is not deployed");
    if (version !== DRIVER_VERSION) {
      const log = `${o.logDir}/images-${version}.log`;
      let archives = this.#built.get(version);
      if (!archives) {
        archives = imageArchives(
          await buildDriverImages(o.node, log, o.engineBin, signal, version),
        );
        this.#built.set(version, archives);
      }
      for (const w of o.workers()) await importImages(w, archives, log, signal);
    }
    return (await driver.deployVersion(version, signal)).trim().split("\n")[0] ?? "";
  }
}
