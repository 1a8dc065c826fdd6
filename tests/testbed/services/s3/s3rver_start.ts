// In-process fake S3 (npm:s3rver) for runs without root or without Ceph.
//
//   deno run -A --node-modules-dir=auto tests/testbed/services/s3/s3rver_start.ts [--port N] [--dir PATH] [--env-file PATH]
//
// Serves on 127.0.0.1:<port> (port 0 = pick a free one; also S3RVER_PORT).
// Once it listens it prints the same env lines as rgw_start.sh on stdout
// (S3_SERVER=s3rver), writes them to --env-file if given (atomically), and
// runs until SIGTERM/SIGINT. Progress and errors go to stderr.
//
// Limits of s3rver (also in tests/testbed/services/s3/README.md): it does not
// enforce bucket ownership (the second user is NOT denied), ListObjectsV2
// pagination answers 500 under Deno, aws-chunked uploads are stored with
// their framing unless clients use requestChecksumCalculation=WHEN_REQUIRED,
// and Content-MD5 is not checked. Use RGW (rgw_start.sh) when that matters.
import S3rver from "npm:s3rver@3.7.1";
import AWSAccount from "npm:s3rver@3.7.1/lib/models/account.js";

// Same fixed keys as rgw_start.sh, so tests see one set of credentials.
const MAIN_AK = "S3CSITESTACCESSKEY01";
const MAIN_SK = "s3csiTestSecretKey0000000000000000000001";
const OTHER_AK = "S3CSIOTHERACCESSKEY2";
const OTHER_SK = "s3csiOtherSecretKey000000000000000000002";
const REGION = "us-east-1";

interface Options {
  port: number;
  dir?: string;
  envFile?: string;
}

const encoder = new TextEncoder();

/** Progress and errors go to stderr; stdout carries only the env lines. */
function say(msg: string): void {
  Deno.stderr.writeSync(encoder.encode(`s3rver_start: ${msg}\n`));
}

function fail(msg: string): never {
  say(`ERROR: ${msg}`);
  Deno.exit(1);
}

function parseArgs(args: string[]): Options {
  const opts: Options = { port: Number(Deno.env.get("S3RVER_PORT") ?? "0") };
  for (let i = 0; i < args.length; i++) {
    const value = () => args[++i] ?? fail(`${args[i - 1]} needs a value`);
    switch (args[i]) {
      case "--port":
        opts.port = Number(value());
        break;
      case "--dir":
        opts.dir = value();
        break;
      case "--env-file":
        opts.envFile = value();
        break;
      default:
        fail(`unknown argument ${args[i]} (usage: [--port N] [--dir PATH] [--env-file PATH])`);
    }
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    fail(`invalid port ${opts.port}`);
  }
  return opts;
}

function envText(port: number): string {
  return [
    `S3_ENDPOINT=http://127.0.0.1:${port}`,
    `AWS_ACCESS_KEY_ID=${MAIN_AK}`,
    `AWS_SECRET_ACCESS_KEY=${MAIN_SK}`,
    `AWS_REGION=${REGION}`,
    `S3_SERVER=s3rver`,
    `S3_OTHER_ACCESS_KEY_ID=${OTHER_AK}`,
    `S3_OTHER_SECRET_ACCESS_KEY=${OTHER_SK}`,
    `AWS_REQUEST_CHECKSUM_CALCULATION=WHEN_REQUIRED`,
    `AWS_RESPONSE_CHECKSUM_VALIDATION=WHEN_REQUIRED`,
  ].join("\n") + "\n";
}

/** Fails fast (instead of an uncaught EADDRINUSE event inside s3rver). */
function checkPortFree(port: number): void {
  if (port === 0) return;
  try {
    Deno.listen({ hostname: "127.0.0.1", port }).close();
  } catch (e) {
    fail(`cannot listen on 127.0.0.1:${port}: ${(e as Error).message}`);
  }
}

async function main(): Promise<void> {
  const opts = parseArgs(Deno.args);
  checkPortFree(opts.port);
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? await Deno.makeTempDir({ prefix: "s3csi-s3rver-" });
  await Deno.mkdir(dir, { recursive: true });
  const cleanup = async () => {
    if (opts.envFile) await Deno.remove(opts.envFile).catch(() => {});
    if (ownDir) await Deno.remove(dir, { recursive: true }).catch(() => {});
  };

  AWSAccount.DUMMY_ACCOUNT.createKeyPair(MAIN_AK, MAIN_SK);
  new AWSAccount(123456789001, "S3rverOther").createKeyPair(OTHER_AK, OTHER_SK);

  const server = new S3rver({
    address: "127.0.0.1",
    port: opts.port,
    directory: dir,
    silent: true,
    vhostBuckets: false,
  });
  let addr: { port: number };
  try {
    addr = await server.run();
  } catch (e) {
    await cleanup();
    fail(`cannot listen on 127.0.0.1:${opts.port}: ${(e as Error).message}`);
  }
  const env = envText(addr.port);
  if (opts.envFile) {
    await Deno.writeTextFile(`${opts.envFile}.tmp`, env);
    await Deno.rename(`${opts.envFile}.tmp`, opts.envFile);
  }
  await Deno.stdout.write(encoder.encode(env));
  say(`serving http://127.0.0.1:${addr.port} from ${dir} (pid ${Deno.pid})`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`${signal}, stopping`);
    // Bounded: if close() hangs, clean up and exit anyway.
    const timer = setTimeout(() => void cleanup().finally(() => Deno.exit(0)), 3000);
    try {
      // Idle keep-alive sockets would otherwise hold close() open.
      server.httpServer?.closeAllConnections?.();
      await server.close();
    } catch { /* already closed */ }
    await cleanup();
    clearTimeout(timer);
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => void stop("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => void stop("SIGINT"));
}

await main();
