/**
 * {@link FakeSts}: an in-memory {@link StsClient} for unit tests.
 *
 * @module
 */
import {
  type AssumeRoleRequest,
  type StsClient,
  StsError,
  type TemporaryCredentials,
} from "./sts.ts";

/** An in-memory {@link StsClient}: roles, who may assume them, and the calls made. */
export class FakeSts implements StsClient {
  /** Every call, in order. */
  readonly calls: AssumeRoleRequest[] = [];
  /** Role ARN → the tokens that may assume it. */
  readonly trust = new Map<string, Set<string>>();
  /** Error the next call throws (then cleared). */
  failNext: StsError | undefined;
  #serial = 0;

  /** Create the fake with `now` for the expirations. */
  constructor(readonly now: () => number = Date.now) {}

  /** {@inheritDoc StsClient.assumeRoleWithWebIdentity} */
  assumeRoleWithWebIdentity(req: AssumeRoleRequest): Promise<TemporaryCredentials> {
    this.calls.push(req);
    const fail = this.failNext;
    this.failNext = undefined;
    if (fail) return Promise.reject(fail);
    if (!this.trust.get(req.roleArn)?.has(req.token)) {
      return Promise.reject(new StsError("access-denied", `STS answered HTTP 403 AccessDenied`));
    }
    const n = ++this.#serial;
    return Promise.resolve({
      accessKeyId: `ASIAFAKE${n}`,
      secretAccessKey: `secret${n}`,
      sessionToken: `session${n}`,
      expiresAt: this.now() + req.durationSeconds * 1000,
    });
  }
}
