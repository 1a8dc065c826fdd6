import assert from "node:assert/strict";
import { EndpointUrlError, parseS3Endpoint } from "./endpoint_url.ts";

Deno.test("parseS3Endpoint() accepts scheme, host and port, in normal form", () => {
  assert.equal(parseS3Endpoint("https://s3.example.com"), "https://s3.example.com");
  assert.equal(parseS3Endpoint(" http://127.0.0.1:7480/ "), "http://127.0.0.1:7480");
  assert.equal(parseS3Endpoint("HTTPS://S3.Example.com:443"), "https://s3.example.com");
  assert.equal(parseS3Endpoint("http://[::1]:9000"), "http://[::1]:9000");
});

Deno.test("parseS3Endpoint() refuses what is not scheme://host[:port], saying what to fix", () => {
  const cases: [string, RegExp][] = [
    ["", /is empty/],
    ["s3.example.com", /"s3.example.com" is not a URL: give scheme and host/],
    ["ftp://s3.example.com", /scheme "ftp": use http or https/],
    ["file:///etc/passwd", /scheme "file"/],
    ["https://s3.example.com/tenant-a", /has a path \("\/tenant-a"\)/],
    ["https://s3.example.com/?x=1", /has a query/],
    ["https://s3.example.com?", /has a query/],
    ["https://s3.example.com#f", /has a fragment/],
    ["https://s3.example.com:99999", /is not a URL/],
    ["https://s3 .example.com", /spaces or control characters/],
    ["https://s3.example.com/\u0000", /spaces or control/],
  ];
  for (const [raw, want] of cases) {
    assert.throws(() => parseS3Endpoint(raw), (err: unknown) => {
      assert.ok(err instanceof EndpointUrlError, raw);
      assert.match(err.message, want, `${JSON.stringify(raw)}: ${err.message}`);
      return true;
    });
  }
});

Deno.test("parseS3Endpoint() never repeats credentials given in the URL", () => {
  for (
    const raw of [
      "https://AKIA:s3cr3t@s3.example.com",
      "https://user@s3.example.com",
      "AKIA:s3cr3t@host",
    ]
  ) {
    assert.throws(() => parseS3Endpoint(raw), (err: unknown) => {
      assert.ok(err instanceof EndpointUrlError);
      assert.doesNotMatch(err.message, /s3cr3t|AKIA|user@/);
      return true;
    });
  }
  assert.throws(
    () => parseS3Endpoint("https://AKIA:s3cr3t@s3.example.com"),
    /user name or password: put the access keys in the Secret/,
  );
});
