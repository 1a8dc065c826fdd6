/**
 * Memory benchmark: idle resident memory of the node plugin and the controller started as the
 * images start them — `deno run --no-config --no-lock --no-remote --no-code-cache
 * --v8-flags=<production flags> dist/<name>.js` (images/deno_launcher.c) with a cache dir Deno
 * cannot write (the images' root is read-only and has no home) — on the API emulator, with the
 * attachment CRD installed and nothing to do, with the images' environment (`GLIBC_TUNABLES`,
 * scripts/build.ts). Compared artefacts:
 *
 * - `loader + CommonJS bundle`: what `deno task build` makes now (scripts/build.ts);
 * - the same with glibc's default malloc settings (the images before `GLIBC_TUNABLES`);
 * - `ES module bundle`: the former artefact (one ES module), built here for the comparison;
 * - `source, warm cache`: `deno run` of src/cmd/<name>/main.ts with its analysis cached (what the
 *   node and controller benchmarks measured before).
 *
 * And the mounter's bundle as a Mountpoint Pod starts it, waiting for its mount message: the Deno
 * process a Mountpoint Pod holds until the node plugin's first publish (or, after a container
 * restart, until the node plugin hands the kept FUSE connection back). Once it has the FUSE fd it
 * `execve`s the supervisor: the memory of a pod serving a mount is the session benchmark's.
 *
 * Each figure is the median of `--runs` starts (VmRSS 8 s after start; anonymous and file-backed
 * parts beside it: the file-backed part is the Deno binary's own pages).
 *
 * Usage: `deno run -A tests/bench/bench_memory.ts [--runs=5]` — prints a Markdown section.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { fromFileUrl } from "../../scripts/_gen_util.ts";
import { COMPONENTS, imageEnv, V8_FLAGS } from "../../scripts/build.ts";
import { s3paCrd } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import { CRDS } from "../../src/kube/resources.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";

const ROOT = fromFileUrl(new URL("../../", import.meta.url));
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));

type Name = "node" | "controller" | "mounter";

/** The goals of issue 24 (idle; the controller's is at 2,000 pods, see the controller section). */
const GOALS: Record<Name, string> = {
  node: "≤ 80 MiB idle",
  controller: "≤ 90 MB at 2k pods",
  // Issue 24's goal is the pod serving a mount (supervisor + engine, the session section).
  mounter: "transient (pod serving a mount: session section, ≤ 30 MiB)",
};

async function run(args: string[]): Promise<void> {
  const r = await new Deno.Command(Deno.execPath(), { args, cwd: ROOT, stdout: "null" }).output();
  if (!r.success) throw new Error(`deno ${args.join(" ")} failed`);
}

/** An API emulator with the CRD, on a free port; its kubeconfig. */
async function startApi(dir: string): Promise<{ kubeconfig: string; stop: () => Promise<void> }> {
  const kubeconfig = `${dir}/kubeconfig`;
  const api = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "tests/testbed/cmd/apiserver/main.ts",
      "--port",
      "0",
      "--kubeconfig-out",
      kubeconfig,
    ],
    cwd: ROOT,
    stdout: "null",
    stderr: "null",
  }).spawn();
  for (let i = 0; i < 300; i++) {
    if (await Deno.stat(kubeconfig).then(() => true, () => false)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const kube = new RestKubeClient(kubeConfigFromFile(kubeconfig));
  for (let i = 0;; i++) {
    try {
      await kube.create(CRDS, s3paCrd());
      break;
    } catch (err) {
      if (i > 50) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await kube.close();
  return {
    kubeconfig,
    stop: async () => {
      api.kill("SIGTERM");
      await api.status;
    },
  };
}

interface Rss {
  rss: number;
  anon: number;
  file: number;
}

/** Start `name` from `entry` the way `how` says; its memory 8 s later. */
async function idle(
  name: Name,
  entry: string,
  how: "image" | "source",
  kubeconfig: string,
  dir: string,
  tunables?: string,
): Promise<Rss> {
  const glibcTunables = tunables ?? (how === "image" ? imageEnv(name).GLIBC_TUNABLES : undefined);
  const flags = `--v8-flags=${V8_FLAGS[name]}`;
  const args = how === "image"
    ? [
      "run",
      "--allow-all",
      "--no-config",
      "--no-lock",
      "--no-remote",
      "--no-code-cache",
      flags,
      entry,
    ]
    : ["run", "-A", flags, entry];
  if (name === "mounter") {
    await Deno.mkdir(`${dir}/comm`, { recursive: true });
    await Deno.mkdir(`${dir}/work`, { recursive: true });
    args.push(`--comm-dir=${dir}/comm`, `--work-dir=${dir}/work`);
  } else if (name === "node") {
    await Deno.mkdir(`${dir}/kubelet`, { recursive: true });
    args.push(
      "--node-id=bench-node",
      `--kubelet-path=${dir}/kubelet`,
      `--endpoint=unix://${dir}/csi.sock`,
    );
  } else {
    args.push("--leader-elect=false", "--metrics-address=127.0.0.1:0");
  }
  args.push("--log-level=warning");
  const p = new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    env: {
      KUBECONFIG: kubeconfig,
      AWS_ACCESS_KEY_ID: "bench",
      AWS_SECRET_ACCESS_KEY: "bench",
      // The images' cache dir: none that Deno can write (it analyses in memory).
      ...(how === "image" ? { DENO_DIR: `${dir}/no-such-dir/deno`, HOME: "/nonexistent" } : {}),
      ...(glibcTunables ? { GLIBC_TUNABLES: glibcTunables } : {}),
    },
    stdout: "null",
    stderr: "null",
  }).spawn();
  await new Promise((r) => setTimeout(r, 8000));
  const status = await Deno.readTextFile(`/proc/${p.pid}/status`).catch(() => "");
  p.kill("SIGTERM");
  await p.status;
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  if (!status) throw new Error(`${name} (${entry}) exited before it was measured`);
  return { rss: kib("VmRSS") / 1024, anon: kib("RssAnon") / 1024, file: kib("RssFile") / 1024 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

async function main(runs: number): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-bench-memory-" });
  const esm = `${dir}/esm`;
  try {
    await run(["run", "-A", "scripts/build.ts", "--only", "node,controller,mounter"]);
    for (const name of ["node", "controller"] as const) {
      await run([
        "bundle",
        "--quiet",
        "--platform",
        "deno",
        "--packages",
        "bundle",
        "--output",
        `${esm}/${name}.js`,
        COMPONENTS[name],
      ]);
    }
    const api = await startApi(dir);
    /** `tunables`: GLIBC_TUNABLES ("" none; undefined: the image's for image runs). */
    const artefacts = [
      {
        label: "loader + CommonJS bundle (now)",
        how: "image" as const,
        entry: (n: Name) => `dist/${n}.js`,
        tunables: undefined,
      },
      {
        label: "the same, glibc's default malloc (before)",
        how: "image" as const,
        entry: (n: Name) => `dist/${n}.js`,
        tunables: "",
      },
      {
        label: "ES module bundle (before)",
        how: "image" as const,
        entry: (n: Name) => `${esm}/${n}.js`,
        tunables: "",
      },
      {
        label: "source, warm cache",
        how: "source" as const,
        entry: (n: Name) => COMPONENTS[n],
        tunables: undefined,
      },
    ];
    const rows: string[] = [];
    try {
      for (const name of ["node", "controller", "mounter"] as const) {
        const chosen = name === "mounter" ? artefacts.slice(0, 1) : artefacts;
        // Warm the source's analysis cache first (the source rows assume it).
        if (name !== "mounter") {
          await idle(name, COMPONENTS[name], "source", api.kubeconfig, `${dir}/warm-${name}`);
        }
        // Artefacts alternate within each run, so the machine's load falls on all alike.
        const samples = chosen.map(() => [] as Rss[]);
        for (let i = 0; i < runs; i++) {
          for (const [j, a] of chosen.entries()) {
            samples[j]!.push(
              await idle(
                name,
                a.entry(name),
                a.how,
                api.kubeconfig,
                `${dir}/${name}-${j}-${i}`,
                a.tunables,
              ),
            );
          }
        }
        for (const [j, a] of chosen.entries()) {
          const m = (k: keyof Rss) => median(samples[j]!.map((s) => s[k])).toFixed(0);
          rows.push(
            `| ${name} | ${a.label} | ${m("rss")} | ${m("anon")} / ${m("file")} | ${
              a.label.endsWith("(now)") ? GOALS[name] : ""
            } |`,
          );
        }
      }
    } finally {
      await api.stop();
    }
    const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
    out(
      `Idle resident memory as the images start the binaries (deno run --no-config --no-lock --no-remote --no-code-cache, production V8 flags of scripts/build.ts, the images' GLIBC_TUNABLES, no writable cache dir) on the API emulator with nothing to do; medians of ${runs} starts (artefacts alternating), 8 s after start; load average ${load}.`,
    );
    out("");
    out("| binary | artefact | RSS MiB | anonymous / file-backed MiB | goal |");
    out("|---|---|---|---|---|");
    for (const r of rows) out(r);
    out("");
    out(
      "File-backed pages are the Deno binary's own code and data that the process touched (shared between processes of one binary); the anonymous part is V8's heap and Deno's native memory.",
    );
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { runs: { type: "string", default: "5" } },
  });
  await main(Number(values.runs));
}
