/**
 * Harness of the provisioning tests: the RGW environment (exported by `scripts/test.sh`, or read
 * from `S3_ENV_FILE` / `/var/tmp/s3csi-rgw/env` for local runs), a Controller service served on a
 * temp unix socket and reached through the real gRPC client, and raw S3 access for assertions.
 *
 * @module
 */
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  GetBucketTaggingCommand,
  HeadBucketCommand,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { connectCsi, type CsiClient } from "../../src/csi/client.ts";
import { IdentityService } from "../../src/csi/identity_service.ts";
import { CsiServer } from "../../src/csi/server.ts";
import { createProvisioning } from "../../src/provisioning/create_provisioning.ts";
import { S3ClientFactory } from "../../src/s3/client_factory.ts";
import type { S3Credentials } from "../../src/s3/bucket_store.ts";
import { tempDir, testOrSkip } from "../_helpers.ts";

/** The RGW settings. */
export interface Rgw {
  readonly endpoint: string;
  readonly region: string;
  readonly main: S3Credentials;
  readonly other: S3Credentials;
}

function readEnvFile(path: string): Record<string, string> {
  try {
    const env: Record<string, string> = {};
    for (const line of Deno.readTextFileSync(path).split("\n")) {
      const m = /^(?:export\s+)?([A-Z0-9_]+)=["']?(.*?)["']?$/.exec(line.trim());
      if (m) env[m[1]!] = m[2]!;
    }
    return env;
  } catch {
    return {};
  }
}

/** RGW from the environment, else undefined (the caller skips with {@link SKIP_REASON}). */
export function rgw(): Rgw | undefined {
  let env: Record<string, string | undefined> = Deno.env.toObject();
  if (!env.S3_ENDPOINT) {
    env = readEnvFile(Deno.env.get("S3_ENV_FILE") ?? "/var/tmp/s3csi-rgw/env");
  }
  if (!env.S3_ENDPOINT || !env.AWS_ACCESS_KEY_ID || !env.S3_OTHER_ACCESS_KEY_ID) return undefined;
  return {
    endpoint: env.S3_ENDPOINT,
    region: env.AWS_REGION ?? "us-east-1",
    main: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY! },
    other: {
      accessKeyId: env.S3_OTHER_ACCESS_KEY_ID,
      secretAccessKey: env.S3_OTHER_SECRET_ACCESS_KEY!,
    },
  };
}

/** Printed when RGW is not available. */
export const SKIP_REASON =
  "provisioning tests: S3_ENDPOINT unset and no RGW env file; run tests/testbed/services/s3/rgw_start.sh (skipped)";

/** A test on RGW: skipped, with the reason in its name, when no RGW is configured. */
export function rgwTest(name: string, fn: () => Promise<void>): void {
  testOrSkip(
    rgw()
      ? undefined
      : "needs RGW (S3_ENDPOINT or its env file; scripts/test.sh starts one as root)",
    {
      name,
      sanitizeResources: false,
      sanitizeOps: false,
      fn,
    },
  );
}

/** A unique lowercase token for bucket and volume names. */
export function unique(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 7)}`;
}

/** A Controller service on a temp socket. */
export interface ControllerUnderTest extends AsyncDisposable {
  readonly csi: CsiClient;
  readonly socket: string;
}

/** Serve the Controller service like `s3-csi-controller` does, against `endpoint`. */
export async function startController(
  s: Rgw,
  opts: { endpoint?: string; driverCredentials?: boolean } = {},
): Promise<ControllerUnderTest> {
  const dir = await tempDir("s3csi-prov-");
  const socket = `${dir.path}/csi.sock`;
  const env: Record<string, string> = opts.driverCredentials === false ? {} : {
    AWS_ACCESS_KEY_ID: s.main.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s.main.secretAccessKey,
  };
  const provisioning = await createProvisioning({
    "s3-endpoint-url": opts.endpoint ?? s.endpoint,
    "s3-region": s.region,
    "s3-force-path-style": true,
    "s3-ca-bundle": "",
    "s3-proxy": "",
    "s3-request-timeout": 3_000,
  }, (n) => env[n]);
  const server = new CsiServer({
    socketPath: socket,
    services: {
      identity: new IdentityService({ controllerService: true }),
      controller: provisioning.service,
    },
  });
  await server.start();
  const csi = connectCsi(socket, { timeoutMs: 60_000 });
  return {
    csi,
    socket,
    async [Symbol.asyncDispose]() {
      csi.close();
      await server.stop(2_000);
      provisioning.close();
      await dir[Symbol.asyncDispose]();
    },
  };
}

/** Raw S3 for assertions and fixtures. */
export class RawS3 {
  readonly #factory: S3ClientFactory;
  readonly #clients = new Map<string, Promise<S3Client>>();
  readonly #s: Rgw;

  /** Clients for the two RGW users. */
  constructor(s: Rgw) {
    this.#s = s;
    this.#factory = new S3ClientFactory({ endpoint: s.endpoint, forcePathStyle: true });
  }

  /** The SDK client of `who`. */
  client(who: "main" | "other" = "main"): Promise<S3Client> {
    let c = this.#clients.get(who);
    if (!c) {
      c = this.#factory.create({ credentials: this.#s[who], region: this.#s.region });
      this.#clients.set(who, c);
    }
    return c;
  }

  /** True when `bucket` exists (for `who`). */
  async exists(bucket: string, who: "main" | "other" = "main"): Promise<boolean> {
    try {
      await (await this.client(who)).send(new HeadBucketCommand({ Bucket: bucket }));
      return true;
    } catch (err) {
      if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) {
        return false;
      }
      throw err;
    }
  }

  /** Tags of `bucket`. */
  async tags(bucket: string): Promise<Record<string, string>> {
    const out = await (await this.client()).send(new GetBucketTaggingCommand({ Bucket: bucket }));
    return Object.fromEntries((out.TagSet ?? []).map((t) => [t.Key!, t.Value!]));
  }

  /** Put an object. */
  async put(
    bucket: string,
    key: string,
    body = "x",
    who: "main" | "other" = "main",
  ): Promise<void> {
    await (await this.client(who)).send(
      new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }),
    );
  }

  /** Keys of all versions under `prefix`. */
  async keys(bucket: string, prefix = "", who: "main" | "other" = "main"): Promise<string[]> {
    const out = await (await this.client(who)).send(
      new ListObjectVersionsCommand({ Bucket: bucket, Prefix: prefix }),
    );
    return [...(out.Versions ?? []), ...(out.DeleteMarkers ?? [])].map((v) => v.Key!).sort();
  }

  /** Create a bucket. */
  async createBucket(bucket: string, who: "main" | "other" = "main"): Promise<void> {
    await (await this.client(who)).send(new CreateBucketCommand({ Bucket: bucket }));
  }

  /** Turn on versioning. */
  async enableVersioning(bucket: string): Promise<void> {
    await (await this.client()).send(
      new PutBucketVersioningCommand({
        Bucket: bucket,
        VersioningConfiguration: { Status: "Enabled" },
      }),
    );
  }

  /** Delete a bucket and everything in it (test cleanup; errors ignored). */
  async remove(bucket: string, who: "main" | "other" = "main"): Promise<void> {
    try {
      const c = await this.client(who);
      for (;;) {
        const out = await c.send(new ListObjectVersionsCommand({ Bucket: bucket }));
        const objects = [...(out.Versions ?? []), ...(out.DeleteMarkers ?? [])].map((v) => ({
          Key: v.Key!,
          VersionId: v.VersionId!,
        }));
        if (objects.length === 0) break;
        await c.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: objects } }));
      }
      await c.send(new DeleteBucketCommand({ Bucket: bucket }));
    } catch {
      // already gone
    }
  }

  /** Release clients. */
  async close(): Promise<void> {
    for (const c of this.#clients.values()) (await c).destroy();
    this.#factory.close();
  }
}

/** The gRPC status of a failed call, as `[code, details]`. */
export async function grpcError(p: Promise<unknown>): Promise<[number, string]> {
  try {
    await p;
  } catch (err) {
    const e = err as { code?: number; details?: string };
    if (typeof e.code === "number") return [e.code, e.details ?? ""];
    throw err;
  }
  throw new Error("expected the call to fail");
}
