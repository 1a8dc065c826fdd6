/**
 * CSI endpoints. Kubelet, the sidecars and our binaries talk over unix sockets only, given as
 * `unix:///absolute/path` (or `unix:/absolute/path`).
 *
 * @module
 */
import { ConfigError } from "../util/errors.ts";

/** Longest unix socket path the kernel accepts (sun_path is 108 bytes including the NUL). */
export const MAX_SOCKET_PATH = 107;

/** Parse a CSI endpoint into the socket's absolute path. @throws {ConfigError} */
export function parseEndpoint(endpoint: string): string {
  const text = endpoint.trim();
  const m = text.startsWith("unix://")
    ? /^unix:\/\/(\/.*)$/.exec(text)
    : /^unix:(\/.*)$/.exec(text);
  if (!m) {
    throw new ConfigError(
      `endpoint must be a unix socket URL such as unix:///csi/csi.sock, got "${endpoint}"`,
    );
  }
  const path = m[1]!.replace(/\/+/g, "/");
  if (path.endsWith("/")) {
    throw new ConfigError(`endpoint "${endpoint}" names a directory, not a socket file`);
  }
  if (new TextEncoder().encode(path).length > MAX_SOCKET_PATH) {
    throw new ConfigError(
      `endpoint path "${path}" is longer than ${MAX_SOCKET_PATH} bytes, the unix socket limit`,
    );
  }
  return path;
}

/** Validator for {@link OptionSpec.validate}: returns a problem text or undefined. */
export function endpointProblem(value: string): string | undefined {
  try {
    parseEndpoint(value);
    return undefined;
  } catch (err) {
    return (err as Error).message.replace(/^endpoint /, "");
  }
}
