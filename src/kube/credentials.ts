/**
 * Credentials that change while a client runs (exec credential plugins), as the REST client asks
 * for them.
 *
 * @module
 */

/** Credentials that a {@link CredentialSource} hands out. */
export interface Credentials {
  /** Bearer token. */
  readonly token?: string;
  /** PEM client certificate and key. */
  readonly cert?: string;
  readonly key?: string;
}

/** Credentials that change over time (exec plugins): cached, refreshed on expiry or a 401. */
export interface CredentialSource {
  /** Current credentials (from the cache while they are valid). */
  get(signal?: AbortSignal): Promise<Credentials>;
  /** Drop the cached credentials (the server answered 401). */
  invalidate(): void;
}
