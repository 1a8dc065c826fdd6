import assert from "node:assert/strict";
import { awsStsEndpoint, parseAssumeRoleResponse, sessionName, StsError } from "./sts.ts";
import { FakeSts } from "./fake_sts.ts";

const OK = `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>ASIAXYZ</AccessKeyId>
      <SecretAccessKey>s/e+c=r</SecretAccessKey>
      <SessionToken>tok&amp;en</SessionToken>
      <Expiration>2026-11-28T07:13:44.474803916Z</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:ns:sa</SubjectFromWebIdentityToken>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>`;

Deno.test("parseAssumeRoleResponse() reads the credentials and their expiration", () => {
  const c = parseAssumeRoleResponse(200, OK);
  assert.deepEqual(
    [c.accessKeyId, c.secretAccessKey, c.sessionToken],
    ["ASIAXYZ", "s/e+c=r", "tok&en"],
  );
  assert.equal(c.expiresAt, Date.parse("2026-11-28T07:13:44.474Z"));
  assert.throws(() => parseAssumeRoleResponse(200, "<x/>"), /without complete credentials/);
});

Deno.test("parseAssumeRoleResponse() classifies errors (AWS and Ceph RGW shapes)", () => {
  const kind = (status: number, xml: string) => {
    try {
      parseAssumeRoleResponse(status, xml);
    } catch (err) {
      assert.ok(err instanceof StsError);
      return `${err.kind}: ${err.message}`;
    }
    return "no error";
  };
  const aws = (code: string, msg: string) =>
    `<ErrorResponse><Error><Type>Sender</Type><Code>${code}</Code><Message>${msg}</Message></Error></ErrorResponse>`;
  assert.equal(
    kind(400, aws("InvalidIdentityToken", "Token expired")),
    "invalid-token: STS answered HTTP 400 InvalidIdentityToken: Token expired",
  );
  assert.equal(
    kind(403, aws("AccessDenied", "Not authorized")),
    "access-denied: STS answered HTTP 403 AccessDenied: Not authorized",
  );
  // Ceph RGW 16: a refused token or trust policy is a bare 403.
  assert.equal(kind(403, ""), "access-denied: STS answered HTTP 403");
  assert.equal(kind(500, "oops"), "other: STS answered HTTP 500");
});

Deno.test("sessionName() keeps what STS accepts, 2 to 64 characters", () => {
  assert.equal(sessionName("s3-csi/ns:pod uid"), "s3-csi-ns-pod-uid");
  assert.equal(sessionName("x".repeat(80)).length, 64);
  assert.equal(sessionName("a"), "s3-csi-a");
  assert.equal(awsStsEndpoint("eu-west-1"), "https://sts.eu-west-1.amazonaws.com");
});

Deno.test("FakeSts: only trusted tokens get credentials, which expire after the duration", async () => {
  const sts = new FakeSts(() => 1000);
  sts.trust.set("arn:role/a", new Set(["tok-a"]));
  const req = {
    endpoint: "http://s",
    roleArn: "arn:role/a",
    sessionName: "x",
    durationSeconds: 900,
  };
  const c = await sts.assumeRoleWithWebIdentity({ ...req, token: "tok-a" });
  assert.equal(c.expiresAt, 1000 + 900_000);
  await assert.rejects(
    sts.assumeRoleWithWebIdentity({ ...req, token: "tok-b" }),
    (e: unknown) => e instanceof StsError && e.kind === "access-denied",
  );
});
