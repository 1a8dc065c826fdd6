/**
 * A tiny counting HTTP proxy for tests that prove an engine uses the proxy settings it is given,
 * and that record what the engine sends (the headers of plain-HTTP requests).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { connect, createServer, type Server as NetServer, type Socket } from "node:net";
import { freePort } from "../../_helpers.ts";

/** What the proxy saw. */
export interface ProxyLog {
  /** `host:port` of each CONNECT. */
  connects: string[];
  /** Absolute URIs of forwarded requests. */
  forwards: string[];
  /** Forwarded requests with their headers (names in lower case), in order. */
  requests: ForwardedRequest[];
}

/** A request the proxy forwarded. */
export interface ForwardedRequest {
  readonly method: string;
  /** Absolute URI. */
  readonly target: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * A raw HTTP response to send instead of forwarding a request (its body, if any, is dropped), or
 * `undefined` to forward it; see {@link s3ErrorResponse}.
 */
export type Answer = (request: ForwardedRequest) => string | undefined;

/** A raw S3 error response (XML body, `Connection: keep-alive`). */
export function s3ErrorResponse(status: number, reason: string, code: string): string {
  const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code>` +
    `<Message>injected by the test proxy</Message></Error>`;
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/xml\r\n` +
    `Content-Length: ${body.length}\r\nConnection: keep-alive\r\n\r\n${body}`;
}

/**
 * A tiny HTTP proxy on 127.0.0.1: CONNECT tunnels, and forwarding of absolute-form requests
 * (rewritten to origin-form, one request after the other per connection, bodies by
 * Content-Length). `options.answer` may answer a forwarded request itself (failures injected).
 */
export async function startProxy(
  options: { answer?: Answer } = {},
): Promise<{ url: string; log: ProxyLog } & AsyncDisposable> {
  const log: ProxyLog = { connects: [], forwards: [], requests: [] };
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => s.destroy());
  };
  const server: NetServer = createServer((client) => {
    track(client);
    let buffer = Buffer.alloc(0);
    let upstream: Socket | undefined;
    let bodyLeft = 0;
    let dropBody = false;
    let tunnel = false;
    const pump = () => {
      while (!tunnel) {
        if (bodyLeft > 0) {
          if (buffer.length === 0) return;
          const n = Math.min(bodyLeft, buffer.length);
          if (!dropBody) upstream!.write(buffer.subarray(0, n));
          buffer = buffer.subarray(n);
          bodyLeft -= n;
          continue;
        }
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString("latin1");
        buffer = buffer.subarray(end + 4);
        const [requestLine, ...headers] = head.split("\r\n");
        const [method, target, version] = requestLine!.split(" ");
        if (method === "CONNECT") {
          tunnel = true;
          log.connects.push(target!);
          const [host, port] = target!.split(":");
          const pending = buffer;
          buffer = Buffer.alloc(0);
          const up = connect(Number(port), host!, () => {
            client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
            if (pending.length) up.write(pending);
            client.pipe(up);
            up.pipe(client);
          });
          track(up);
          up.on("close", () => client.destroy());
          client.on("close", () => up.destroy());
          return;
        }
        const url = new URL(target!);
        log.forwards.push(target!);
        const request: ForwardedRequest = {
          method: method!,
          target: target!,
          headers: Object.fromEntries(headers.map((h) => {
            const i = h.indexOf(":");
            return [h.slice(0, i).trim().toLowerCase(), h.slice(i + 1).trim()];
          })),
        };
        log.requests.push(request);
        const length = headers.find((h) => /^content-length:/i.test(h));
        bodyLeft = length ? Number(length.split(":")[1]!.trim()) : 0;
        const answer = options.answer?.(request);
        dropBody = answer !== undefined;
        if (answer !== undefined) {
          client.write(answer);
          continue;
        }
        if (!upstream) {
          const up = connect(Number(url.port || 80), url.hostname);
          upstream = up;
          track(up);
          up.on("close", () => client.destroy());
          client.on("close", () => up.destroy());
          up.pipe(client);
        }
        const kept = headers.filter((h) => !/^proxy-/i.test(h));
        upstream.write(
          `${method} ${url.pathname}${url.search} ${version}\r\n${kept.join("\r\n")}\r\n\r\n`,
        );
      }
    };
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      pump();
      if (tunnel) client.off("data", onData); // the tunnel pipes from here on
    };
    client.on("data", onData);
  });
  const port = freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    [Symbol.asyncDispose]: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
