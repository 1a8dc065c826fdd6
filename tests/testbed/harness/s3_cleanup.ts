/**
 * Removing a test bucket and everything in it, so test runs do not fill the test S3 server.
 *
 * @module
 */
import {
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  type S3Client,
} from "@aws-sdk/client-s3";

/** Delete every object of `bucket` (pages of 1000), then the bucket. Bounded to 60 s. */
export async function emptyAndDeleteBucket(s3: S3Client, bucket: string): Promise<void> {
  const abortSignal = AbortSignal.timeout(60_000);
  for (;;) {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket }), { abortSignal });
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length === 0) break;
    await s3.send(
      new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }),
      { abortSignal },
    );
  }
  await s3.send(new DeleteBucketCommand({ Bucket: bucket }), { abortSignal });
}
