/**
 * versitygw's admin commands from Deno (the `versitygw admin` CLI built by `build.sh`): what its S3
 * API cannot do for a user of role `user`, which may not create buckets — a bucket the second test
 * user owns is created by the root user for that owner.
 *
 * @module
 */
import { fileURLToPath } from "node:url";

const HERE = fileURLToPath(new URL("./", import.meta.url));

/** The settings `start.sh` printed (root keys, endpoint, region). */
export interface VersitygwEnv {
  readonly S3_ENDPOINT: string;
  readonly AWS_ACCESS_KEY_ID: string;
  readonly AWS_SECRET_ACCESS_KEY: string;
  readonly AWS_REGION: string;
}

async function binary(): Promise<string> {
  const r = await new Deno.Command("bash", {
    args: ["-c", `. "${HERE}lib.sh" && printf '%s' "$VGW_BIN"`],
    stdout: "piped",
    stderr: "null",
  }).output();
  return new TextDecoder().decode(r.stdout);
}

/** `versitygw admin create-bucket`: a bucket owned by the account `owner` (its access key). */
export async function createBucketFor(
  env: VersitygwEnv,
  bucket: string,
  owner: string,
): Promise<void> {
  const r = await new Deno.Command(await binary(), {
    args: [
      "admin",
      "--access",
      env.AWS_ACCESS_KEY_ID,
      "--secret",
      env.AWS_SECRET_ACCESS_KEY,
      "--region",
      env.AWS_REGION,
      "--endpoint-url",
      env.S3_ENDPOINT,
      "create-bucket",
      "--bucket",
      bucket,
      "--owner",
      owner,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!r.success) {
    const dec = new TextDecoder();
    throw new Error(
      `versitygw admin create-bucket ${bucket} --owner ${owner} failed (exit ${r.code}): ${
        dec.decode(r.stderr).trim()
      }${dec.decode(r.stdout).trim()}`,
    );
  }
}
