/**
 * Build the driver's images on this machine, without a registry, Docker or BuildKit, as OCI image
 * archives that `ctr images import` (containerd) reads — the real-node test tier runs them.
 *
 * Same images as `images/*.Dockerfile` (`scripts/build_images.sh`), from the same inputs:
 *
 * | image | entrypoint | user | contents |
 * |---|---|---|---|
 * | `s3-csi-node`, `s3-csi-controller` | `/bin/s3-csi-driver` | 65532 | glibc + libgcc (as distroless/cc), CA certificates, the component |
 * | `s3-csi-mounter` | `/bin/s3-csi-mounter` | 1000 | the same base, the mounter, its supervisor `s3-csi-supervisor`, `rclone`, and our `mount-s3` engine |
 *
 * One difference, forced by this machine: `deno compile` downloads a Deno runtime (`denort`) that
 * cannot be reached here, and no package in the reachable registries ships one. So the component is
 * the `deno task build` bundle run by the image's `deno` binary (the one running this script), and
 * the entrypoint is a static launcher (`images/deno_launcher.c`) passing the V8 flags the Dockerfile
 * bakes in (`V8_FLAGS` in `scripts/build.ts`). No shell, no package manager.
 *
 * Layers are shared between the images (the Deno runtime layer is stored once by containerd).
 *
 * Usage:
 *   deno run -A scripts/build_images_local.ts [--only node,controller,mounter] [--out dist/images]
 *     [--registry localhost/s3csi] [--version V] [--tag <version>] [--engine-bin PATH]
 *     [--import [--containerd-address SOCK] [--namespace k8s.io]]
 *
 * `--version` (or `S3CSI_VERSION`): build that version of this tree instead of `deno.json`'s — the
 * binaries embed it (`scripts/build.ts`), the images are tagged and labelled with it. Two builds of
 * one tree then give two versions to upgrade between (the real node's `upgrade` scenario).
 *
 * stdout: one `IMAGE_<COMPONENT>=<reference> <archive>` line per image. Timings go to stderr.
 * `--engine-bin`: the `mount-s3` engine to put in the Mountpoint image, with `s3-csi-supervisor`
 * beside it (the mounter execs into it: required); default `ENGINE_BIN`, else the output of
 * `scripts/build_engine.sh`.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { fromFileUrl } from "./_gen_util.ts";
import { buildVersion, COMPONENTS, imageEnv, V8_FLAGS } from "./build.ts";
import { VERSION_ENV } from "../src/util/version.ts";
import {
  CA_BUNDLE,
  copyElf,
  copyInto,
  DISTROLESS_USERS,
  type ImageUser,
  writeEtc,
} from "./image_rootfs.ts";
import {
  type ImageRuntimeConfig,
  type LayerBlob,
  ociArchitecture,
  tarLayer,
  writeImageArchive,
} from "./oci_layout.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url)).replace(/\/$/, "");
const enc = new TextEncoder();
const log = (text: string) => Deno.stderr.writeSync(enc.encode(`build_images_local: ${text}\n`));

type Component = keyof typeof COMPONENTS;

/** Where things live inside the images. */
export const IMAGE_PATHS = {
  deno: "/usr/lib/s3-csi/deno",
  bundle: (c: Component) => `/usr/lib/s3-csi/${c}.js`,
  entrypoint: (c: Component) => c === "mounter" ? "/bin/s3-csi-mounter" : "/bin/s3-csi-driver",
} as const;

/** Non-root uid/gid of the Mountpoint container (the controller's MOUNTPOINT_UID default). */
export const MOUNTER_UID = 1000;

/** Image reference of a component. */
export function imageRef(registry: string, c: Component, tag: string): string {
  return `${registry.replace(/\/+$/, "")}/s3-csi-${c}:${tag}`;
}

/** The Dockerfiles' labels, user and entrypoint for a component. */
export function runtimeConfig(
  c: Component,
  version: string,
  engines: string,
): ImageRuntimeConfig {
  const env = [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    `SSL_CERT_FILE=${CA_BUNDLE}`,
    ...Object.entries(imageEnv(c)).map(([k, v]) => `${k}=${v}`),
  ];
  if (c === "mounter") {
    return {
      user: `${MOUNTER_UID}:${MOUNTER_UID}`,
      entrypoint: [IMAGE_PATHS.entrypoint(c)],
      env,
      labels: {
        "org.opencontainers.image.title": "s3-csi-mounter",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.description": `s3.csi.scality.com Mountpoint Pod: ${engines}`,
      },
    };
  }
  return {
    user: "65532:65532",
    entrypoint: [IMAGE_PATHS.entrypoint(c)],
    env,
    labels: {
      "org.opencontainers.image.title": `s3-csi-${c}`,
      "org.opencontainers.image.version": version,
      "org.opencontainers.image.source": "https://github.com/scality/s3-csi-driver",
      "org.opencontainers.image.description": `s3.csi.scality.com ${c}`,
    },
  };
}

async function run(cmd: string, args: string[], cwd = ROOT): Promise<string> {
  const r = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  if (r.code !== 0) {
    throw new Error(
      `${cmd} ${args.join(" ")} failed (exit ${r.code}):\n${dec.decode(r.stderr)}${
        dec.decode(r.stdout)
      }`,
    );
  }
  return dec.decode(r.stdout);
}

async function timed<T>(what: string, f: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const v = await f();
  log(`${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return v;
}

/**
 * The engine binary (explicit, ENGINE_BIN, or scripts/build_engine.sh) and the supervisor beside it.
 * @throws when there is none: the Mountpoint image cannot work without the supervisor
 */
async function findEngine(
  arg: string | undefined,
): Promise<{ engine: string; supervisor: string }> {
  let engine = arg ?? Deno.env.get("ENGINE_BIN");
  if (engine) {
    await Deno.stat(engine).catch(() => {
      throw new Error(`--engine-bin ${engine}: no such file`);
    });
  } else {
    const r = await new Deno.Command("bash", {
      args: [`${ROOT}/scripts/build_engine.sh`],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    const line = new TextDecoder().decode(r.stdout).trim().split("\n").pop() ?? "";
    if (r.code !== 0 || !line.startsWith("ENGINE_BIN=")) {
      throw new Error(
        `scripts/build_engine.sh failed (exit ${r.code}): the Mountpoint image needs mount-s3 and s3-csi-supervisor`,
      );
    }
    engine = line.slice("ENGINE_BIN=".length);
  }
  const supervisor = engine.replace(/[^/]+$/, "s3-csi-supervisor");
  await Deno.stat(supervisor).catch(() => {
    throw new Error(`no s3-csi-supervisor beside ${engine}: rebuild with scripts/build_engine.sh`);
  });
  return { engine, supervisor };
}

async function firstLine(cmd: string, args: string[]): Promise<string> {
  try {
    return (await run(cmd, args)).split("\n")[0]!.trim();
  } catch {
    return "";
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      only: { type: "string" },
      out: { type: "string" },
      registry: { type: "string" },
      tag: { type: "string" },
      version: { type: "string" },
      "engine-bin": { type: "string" },
      deno: { type: "string" },
      import: { type: "boolean" },
      "containerd-address": { type: "string" },
      namespace: { type: "string" },
    },
  });
  if (Deno.build.os !== "linux") throw new Error("Images are built on Linux only");
  const arch = ociArchitecture();
  const override = buildVersion(values.version, Deno.env.get(VERSION_ENV));
  const version = override ??
    (JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)) as { version: string }).version;
  const tag = values.tag ?? version;
  const registry = values.registry ?? Deno.env.get("REGISTRY") ?? "localhost/s3csi";
  const out = values.out ?? `${ROOT}/dist/images`;
  const components = (values.only?.split(",") ?? Object.keys(COMPONENTS)) as Component[];
  for (const c of components) {
    if (!(c in COMPONENTS)) throw new Error(`Unknown component "${c}" (node, controller, mounter)`);
  }
  const deno = await Deno.realPath(values.deno ?? Deno.execPath());
  const t0 = performance.now();

  await Deno.mkdir(out, { recursive: true });
  const work = await Deno.makeTempDir({ dir: out, prefix: ".work-" });
  try {
    await timed(
      `deno bundle ${components.join(",")}`,
      () =>
        run(Deno.execPath(), [
          "run",
          "-A",
          "scripts/build.ts",
          "--only",
          components.join(","),
          ...(override ? ["--version", override] : []),
        ]),
    );

    // Layer 1 (all images): glibc + libgcc as the Deno binary needs them, CA bundle, deno.
    const runtime = `${work}/runtime`;
    const runtimeLayer = await timed("runtime layer (deno + libc + CA bundle)", async () => {
      const libs = await copyElf(runtime, deno, IMAGE_PATHS.deno);
      // The node plugin's FFI opens libc.so.6 by name: it is among Deno's own libraries.
      if (!libs.some((l) => l.endsWith("/libc.so.6"))) {
        throw new Error("deno does not link libc.so.6");
      }
      await copyInto(runtime, CA_BUNDLE);
      return tarLayer(runtime, `${work}/runtime.tar`, `deno ${Deno.version.deno} + glibc (host)`);
    });

    const etcLayers = new Map<string, LayerBlob>();
    const etcLayer = async (name: string, users: readonly ImageUser[]) => {
      const have = etcLayers.get(name);
      if (have) return have;
      const dir = `${work}/etc-${name}`;
      await writeEtc(dir, users);
      const layer = await tarLayer(dir, `${work}/etc-${name}.tar`, `/etc, /tmp (${name} users)`);
      etcLayers.set(name, layer);
      return layer;
    };

    let engines = "";
    let engineLayer: LayerBlob | undefined;
    if (components.includes("mounter")) {
      const engine = await findEngine(values["engine-bin"]);
      engineLayer = await timed("engines layer", async () => {
        const dir = `${work}/engines`;
        await copyElf(dir, "/usr/bin/rclone", "/usr/bin/rclone");
        await copyElf(dir, engine.engine, "/usr/bin/mount-s3");
        await copyElf(dir, engine.supervisor, "/usr/bin/s3-csi-supervisor");
        const parts = [
          await firstLine(engine.engine, ["--version"]) || "mount-s3",
          await firstLine("/usr/bin/rclone", ["version"]),
        ];
        engines = parts.filter(Boolean).join(" and ");
        return tarLayer(dir, `${work}/engines.tar`, `engines: ${engines}`);
      });
    }

    for (const c of components) {
      const ref = imageRef(registry, c, tag);
      const archive = `${out}/s3-csi-${c}.oci.tar`;
      await timed(`image ${ref}`, async () => {
        const dir = `${work}/app-${c}`;
        await copyInto(dir, `${ROOT}/dist/${c}.js`, IMAGE_PATHS.bundle(c));
        // The loader runs the CommonJS bundle beside it (scripts/build.ts).
        await copyInto(
          dir,
          `${ROOT}/dist/${c}.cjs`,
          IMAGE_PATHS.bundle(c).replace(/\.js$/, ".cjs"),
        );
        const launcher = `${dir}${IMAGE_PATHS.entrypoint(c)}`;
        await Deno.mkdir(launcher.replace(/\/[^/]+$/, ""), { recursive: true });
        await run("gcc", [
          "-static",
          "-Os",
          "-s",
          "-Wall",
          "-Werror",
          `-DDENO="${IMAGE_PATHS.deno}"`,
          `-DBUNDLE="${IMAGE_PATHS.bundle(c)}"`,
          `-DV8_FLAGS="${V8_FLAGS[c]}"`,
          "-o",
          launcher,
          `${ROOT}/images/deno_launcher.c`,
        ]);
        const app = await tarLayer(dir, `${work}/app-${c}.tar`, `s3-csi-${c} bundle + launcher`);
        const etc = c === "mounter"
          ? await etcLayer("mounter", [
            DISTROLESS_USERS[0]!,
            DISTROLESS_USERS[1]!,
            { name: "mounter", id: MOUNTER_UID, home: "/home/mounter" },
          ])
          : await etcLayer("distroless", DISTROLESS_USERS);
        const layers = [runtimeLayer, etc, ...(c === "mounter" ? [engineLayer!] : []), app];
        await writeImageArchive(ref, runtimeConfig(c, version, engines), layers, archive, arch);
      });
      if (values.import) {
        const address = values["containerd-address"] ?? Deno.env.get("CONTAINERD_ADDRESS");
        if (!address) throw new Error("--import needs --containerd-address or CONTAINERD_ADDRESS");
        await timed(`ctr import ${ref}`, () =>
          run("ctr", [
            "--address",
            address,
            "-n",
            values.namespace ?? "k8s.io",
            "images",
            "import",
            archive,
          ]));
      }
      Deno.stdout.writeSync(enc.encode(`IMAGE_${c.toUpperCase()}=${ref} ${archive}\n`));
    }
  } finally {
    await Deno.remove(work, { recursive: true });
  }
  log(`done in ${((performance.now() - t0) / 1000).toFixed(1)} s (${out})`);
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    log(`ERROR: ${e instanceof Error ? e.message : String(e)}`);
    Deno.exit(1);
  }
}
