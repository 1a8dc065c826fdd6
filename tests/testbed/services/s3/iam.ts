/**
 * The IAM API of a Ceph RGW started with `RGW_STS=1` (its main user has the `oidc-provider` and
 * `roles` caps): OIDC providers, roles and their policies, for pod-identity tests. Requests are
 * form-encoded POSTs to the S3 endpoint, signed with AWS Signature V4 (service `iam`).
 *
 * @module
 */
import { createHash, createHmac } from "node:crypto";

/** Where and as whom. */
export interface IamTarget {
  readonly S3_ENDPOINT: string;
  readonly AWS_ACCESS_KEY_ID: string;
  readonly AWS_SECRET_ACCESS_KEY: string;
  readonly AWS_REGION?: string;
}

const sha256 = (data: string) => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string) =>
  createHmac("sha256", key).update(data).digest();

/** One IAM call; resolves with the response body, rejects with status and body. */
export async function iamCall(t: IamTarget, params: Record<string, string>): Promise<string> {
  const url = new URL(t.S3_ENDPOINT);
  const region = t.AWS_REGION ?? "us-east-1";
  const body = new URLSearchParams({ Version: "2010-05-08", ...params }).toString();
  const now = new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+/, "");
  const day = now.slice(0, 8);
  const contentType = "application/x-www-form-urlencoded; charset=utf-8";
  const signed = "content-type;host;x-amz-date";
  const canonical = [
    "POST",
    "/",
    "",
    `content-type:${contentType}\nhost:${url.host}\nx-amz-date:${now}\n`,
    signed,
    sha256(body),
  ].join("\n");
  const scope = `${day}/${region}/iam/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", now, scope, sha256(canonical)].join("\n");
  let key: Buffer = hmac(`AWS4${t.AWS_SECRET_ACCESS_KEY}`, day);
  for (const part of [region, "iam", "aws4_request"]) key = hmac(key, part);
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  const res = await fetch(`${url.origin}/`, {
    method: "POST",
    headers: {
      "content-type": contentType,
      "x-amz-date": now,
      authorization:
        `AWS4-HMAC-SHA256 Credential=${t.AWS_ACCESS_KEY_ID}/${scope}, SignedHeaders=${signed}, Signature=${signature}`,
    },
    body,
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`IAM ${params.Action}: HTTP ${res.status} ${text.slice(0, 300)}`);
  return text;
}

/**
 * Register an OIDC provider (`url` without its scheme is how RGW names it) for the audience
 * `clientId`. Ceph RGW 16 requires a thumbprint but does not compare it with the certificates it
 * gets (see `tests/testbed/services/s3/README.md`); `thumbprint` is stored as given.
 */
export async function createOidcProvider(
  t: IamTarget,
  url: string,
  clientId: string,
  thumbprint: string,
): Promise<void> {
  await iamCall(t, {
    Action: "CreateOpenIDConnectProvider",
    Url: url,
    "ClientIDList.member.1": clientId,
    "ThumbprintList.member.1": thumbprint,
  });
}

/**
 * A role that the ServiceAccount `namespace/name` may assume through the OIDC provider of
 * `issuer` (trust policy on the token's `sub`), allowed everything on `bucket` only.
 */
export async function createBucketRole(
  t: IamTarget,
  role: string,
  issuer: string,
  serviceAccount: { namespace: string; name: string },
  bucket: string,
): Promise<string> {
  const idp = issuer.replace(/^https?:\/\//, "");
  const trust = {
    Version: "2012-10-17",
    Statement: [{
      Effect: "Allow",
      Principal: { Federated: [`arn:aws:iam:::oidc-provider/${idp}`] },
      Action: ["sts:AssumeRoleWithWebIdentity"],
      Condition: {
        StringEquals: {
          [`${idp}:sub`]:
            `system:serviceaccount:${serviceAccount.namespace}:${serviceAccount.name}`,
        },
      },
    }],
  };
  await iamCall(t, {
    Action: "CreateRole",
    RoleName: role,
    Path: "/",
    AssumeRolePolicyDocument: JSON.stringify(trust),
  });
  const permissions = {
    Version: "2012-10-17",
    Statement: [{
      Effect: "Allow",
      Action: ["s3:*"],
      Resource: [`arn:aws:s3:::${bucket}`, `arn:aws:s3:::${bucket}/*`],
    }],
  };
  await iamCall(t, {
    Action: "PutRolePolicy",
    RoleName: role,
    PolicyName: "bucket",
    PolicyDocument: JSON.stringify(permissions),
  });
  return `arn:aws:iam:::role/${role}`;
}
