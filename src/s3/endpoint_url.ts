/**
 * S3 endpoint URLs given per volume (the `endpoint` key of a node-publish Secret): what is
 * accepted and the normal form handed to the engines and the bucket check.
 *
 * Accepted: `http://` or `https://`, a host name or IP address, an optional port, nothing else —
 * no user name or password (credentials belong in the Secret's own keys, and a URL is logged and
 * shown in Events), no path, query or fragment (the engines and the SDK append the bucket and key
 * to the endpoint; a path would silently change which objects a volume sees).
 *
 * Pure: no I/O.
 *
 * @module
 */

/** A rejected endpoint; the message says what is wrong and never repeats a password. */
export class EndpointUrlError extends Error {
  override name = "EndpointUrlError";
}

const SCHEMES = ["http:", "https:"];

/**
 * Validate `raw` and return its normal form (`scheme://host[:port]`, no trailing slash).
 * @throws {EndpointUrlError}
 */
export function parseS3Endpoint(raw: string): string {
  const text = raw.trim();
  if (text === "") {
    throw new EndpointUrlError("is empty: give a URL such as https://s3.example.com");
  }
  // deno-lint-ignore no-control-regex
  if (/[\x00-\x20\x7f]/.test(text)) {
    throw new EndpointUrlError("contains spaces or control characters");
  }
  // A URL with "@" may hold a user name or password: it is never repeated.
  const shown = text.includes("@") ? '(not shown: it contains "@")' : `"${text.slice(0, 120)}"`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new EndpointUrlError(
      `${shown} is not a URL: give scheme and host, e.g. https://s3.example.com`,
    );
  }
  if (url.username !== "" || url.password !== "") {
    throw new EndpointUrlError(
      "contains a user name or password: put the access keys in the Secret's access_key_id and secret_access_key instead",
    );
  }
  if (!SCHEMES.includes(url.protocol)) {
    throw new EndpointUrlError(
      `${shown} has scheme "${url.protocol.replace(/:$/, "")}": use http or https`,
    );
  }
  if (url.hostname === "") throw new EndpointUrlError(`${shown} has no host`);
  if (url.search !== "" || text.includes("?")) {
    throw new EndpointUrlError(`${shown} has a query: remove everything after "?"`);
  }
  if (url.hash !== "" || text.includes("#")) {
    throw new EndpointUrlError(`${shown} has a fragment: remove everything after "#"`);
  }
  if (url.pathname !== "/" && url.pathname !== "") {
    throw new EndpointUrlError(
      `${shown} has a path ("${url.pathname}"): give only scheme, host and port (buckets are addressed by the driver)`,
    );
  }
  return `${url.protocol}//${url.host}`;
}
