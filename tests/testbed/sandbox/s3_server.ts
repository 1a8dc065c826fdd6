/**
 * The sandbox's S3 server, in a state dir and on ports of its own (so the shared test servers are
 * never touched, and teardown stops it):
 *
 * - versitygw (`tests/testbed/services/versitygw/`), the default: it accepts Mountpoint's
 *   multipart uploads, so the sandbox runs on our `mount-s3`;
 * - Ceph RGW (`tests/testbed/services/s3/rgw_start.sh`): Mountpoint's writes fail on RGW 16.2
 *   (empty ETag of CompleteMultipartUpload), so volumes there run on `rclone mount2`;
 * - the s3rver fallback (`tests/testbed/services/s3/s3rver_start.ts`) when neither can run.
 *
 * @module
 */
import { errorMessage } from "../../../src/util/errors.ts";
import { ChildProcess, REPO_ROOT } from "./child_process.ts";
import { freePort } from "../../_helpers.ts";

/** Which server to use. */
export type S3Choice = "auto" | "versitygw" | "rgw" | "s3rver";

/** Connection settings, as the scripts print them. */
export interface S3Env {
  readonly S3_ENDPOINT: string;
  readonly AWS_ACCESS_KEY_ID: string;
  readonly AWS_SECRET_ACCESS_KEY: string;
  readonly AWS_REGION: string;
  readonly S3_SERVER: string;
  readonly [key: string]: string;
}

/** A started server. */
export interface S3Server {
  readonly kind: "versitygw" | "rgw" | "s3rver";
  readonly env: S3Env;
  /** Why RGW was not used, when it was not. */
  readonly note: string;
  stop(): Promise<void>;
}

/**
 * State dir prefix of the sandbox's own RGW; each run adds its pid, so concurrent sandboxes (and
 * test runs) never stop each other's cluster. Distinct from the shared test clusters' dirs.
 */
export const SANDBOX_RGW_STATE_DIR = "/var/tmp/s3csi-sandbox-rgw";

/** Candidate RGW ports; the mon uses +10, the OSDs +20…+99. Other RGW users take 17480, 17580. */
export const SANDBOX_RGW_PORTS = [17680, 17780, 17880] as const;

function portFree(port: number): boolean {
  try {
    Deno.listen({ hostname: "127.0.0.1", port }).close();
    return true;
  } catch {
    return false;
  }
}

/** rgw_start.sh settings for the first candidate whose ports are free. */
export function sandboxRgwEnv(): Record<string, string> {
  const base = SANDBOX_RGW_PORTS.find((p) => portFree(p) && portFree(p + 10)) ??
    SANDBOX_RGW_PORTS[0];
  return {
    // Unique per sandbox: test files run with --parallel share one process (and pid).
    S3_STATE_DIR: `${SANDBOX_RGW_STATE_DIR}-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`,
    RGW_PORT: String(base),
    RGW_MON_PORT: String(base + 10),
    RGW_OSD_PORTS: `${base + 20}-${base + 99}`,
  };
}

/** State dir prefix of the sandbox's own versitygw (one per run, like its RGW). */
export const SANDBOX_VGW_STATE_DIR = "/var/tmp/s3csi-sandbox-vgw";

async function startVersitygw(logDir: string, signal: AbortSignal): Promise<S3Server> {
  const env = {
    VGW_STATE_DIR: `${SANDBOX_VGW_STATE_DIR}-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`,
    VGW_PORT: String(freePort()),
  };
  const dir = `${REPO_ROOT}tests/testbed/services/versitygw`;
  const stop = async () => {
    await new Deno.Command("bash", {
      args: [`${dir}/stop.sh`, "--purge"],
      env,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
  };
  const out = await new Deno.Command("bash", {
    args: [`${dir}/start.sh`],
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal,
  }).output();
  await Deno.writeFile(`${logDir}/versitygw_start.log`, out.stderr);
  if (!out.success) {
    await stop();
    const tail = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-2).join(" ");
    throw new Error(`versitygw start.sh failed (${tail})`);
  }
  const s3env = asS3Env(parseEnvLines(new TextDecoder().decode(out.stdout)), "versitygw start.sh");
  return { kind: "versitygw", env: s3env, note: "", stop };
}

/** Parse `KEY=value` lines. */
export function parseEnvLines(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i > 0 && !line.startsWith("#")) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

function asS3Env(env: Record<string, string>, what: string): S3Env {
  for (const k of ["S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]) {
    if (!env[k]) throw new Error(`${what} printed no ${k}`);
  }
  return { AWS_REGION: "us-east-1", S3_SERVER: "unknown", ...env } as S3Env;
}

/**
 * A Ceph RGW of its own (state dir and ports: {@link sandboxRgwEnv}); `settings` are more
 * `rgw_start.sh` settings (e.g. `RGW_STS=1`).
 */
export async function startRgw(
  logDir: string,
  signal: AbortSignal,
  settings: Record<string, string> = {},
): Promise<S3Server> {
  const rgwEnv = { ...sandboxRgwEnv(), ...settings };
  const stop = async () => {
    await new Deno.Command("bash", {
      args: [`${REPO_ROOT}tests/testbed/services/s3/rgw_stop.sh`, "--purge"],
      env: rgwEnv,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
  };
  const out = await new Deno.Command("bash", {
    args: [`${REPO_ROOT}tests/testbed/services/s3/rgw_start.sh`],
    env: rgwEnv,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal,
  }).output();
  await Deno.writeFile(`${logDir}/rgw_start.log`, out.stderr);
  if (!out.success) {
    await stop();
    const tail = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-2).join(" ");
    throw new Error(`rgw_start.sh failed (${tail})`);
  }
  const env = asS3Env(parseEnvLines(new TextDecoder().decode(out.stdout)), "rgw_start.sh");
  return {
    kind: "rgw",
    env,
    note: "",
    stop,
  };
}

async function startS3rver(dir: string, logDir: string, note: string): Promise<S3Server> {
  const envFile = `${dir}/s3rver.env`;
  await Deno.mkdir(`${dir}/s3rver`, { recursive: true });
  const child = await ChildProcess.start(
    "s3rver",
    [
      Deno.execPath(),
      "run",
      "-A",
      "--quiet",
      `${REPO_ROOT}tests/testbed/services/s3/s3rver_start.ts`,
      "--port",
      "0",
      "--dir",
      `${dir}/s3rver`,
      "--env-file",
      envFile,
    ],
    {},
    `${logDir}/s3rver.log`,
  );
  const deadline = Date.now() + 60_000;
  let text = "";
  while (Date.now() < deadline && child.exitCode === undefined) {
    text = await Deno.readTextFile(envFile).catch(() => "");
    if (text.includes("S3_ENDPOINT=")) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!text.includes("S3_ENDPOINT=")) {
    await child.stop(2000);
    throw new Error(`s3rver did not start (log ${logDir}/s3rver.log)`);
  }
  return {
    kind: "s3rver",
    env: asS3Env(parseEnvLines(text), "s3rver_start.ts"),
    note,
    stop: async () => {
      await child.stop(5000);
    },
  };
}

/**
 * Start the server `choice` asks for. `auto`: versitygw, else (with the reason in `note`) RGW
 * when running as root, else s3rver. An RGW that cannot start fails the step: falling back
 * silently to s3rver would drop the S3 features the scenario shows.
 */
export async function startS3Server(
  choice: S3Choice,
  dir: string,
  logDir: string,
  signal: AbortSignal,
): Promise<S3Server> {
  if (choice === "s3rver") return await startS3rver(dir, logDir, "s3rver requested");
  let why = "";
  if (choice === "versitygw" || choice === "auto") {
    try {
      return await startVersitygw(logDir, signal);
    } catch (err) {
      if (choice === "versitygw") throw err;
      why = `versitygw unavailable: ${errorMessage(err)}; `;
    }
  }
  if (choice === "auto" && Deno.uid() !== 0) {
    return await startS3rver(dir, logDir, `${why}not root: RGW needs root to install and start`);
  }
  try {
    const rgw = await startRgw(logDir, signal);
    return why ? { ...rgw, note: why.replace(/; $/, "") } : rgw;
  } catch (err) {
    throw new Error(
      `${why}${
        errorMessage(err)
      }; --s3 s3rver runs without versitygw or RGW (dynamic provisioning is then skipped)`,
    );
  }
}
