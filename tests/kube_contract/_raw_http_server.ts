/**
 * A raw TCP server speaking just enough HTTP/1.1 for the client tests that need a server to
 * misbehave below HTTP: it reads request heads (bodies are not parsed) and answers each with what
 * `onRequest` returns — bytes written as they are, or nothing (the request stalls). `onRequest`
 * also gets the connection, to close it instead of answering.
 *
 * @module
 */

/** A running {@link rawHttpServer}. */
export interface RawHttpServer extends AsyncDisposable {
  readonly url: string;
  /** Requests received (first line of each). */
  readonly requests: string[];
  /** Connections accepted so far. */
  accepted(): number;
  /** Connections ended so far (by either side). */
  closed(): number;
}

/** Start a server on 127.0.0.1 answering each request head with `onRequest(line, conn)`. */
export function rawHttpServer(
  onRequest: (line: string, conn: Deno.Conn) => string | undefined,
): RawHttpServer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const requests: string[] = [];
  const conns = new Set<Deno.Conn>();
  let accepted = 0;
  let closed = 0;
  const close = (c: Deno.Conn) => {
    try {
      c.close();
    } catch { /* gone */ }
  };
  (async () => {
    for await (const conn of listener) {
      accepted++;
      conns.add(conn);
      (async () => {
        const buf = new Uint8Array(65536);
        let text = "";
        try {
          for (;;) {
            const n = await conn.read(buf);
            if (n === null) break;
            text += new TextDecoder().decode(buf.subarray(0, n));
            if (!text.includes("\r\n\r\n")) continue;
            const line = text.slice(0, text.indexOf("\r\n"));
            requests.push(line);
            text = "";
            const answer = onRequest(line, conn);
            if (answer) await conn.write(new TextEncoder().encode(answer));
          }
        } catch { /* closed */ }
        closed++;
        conns.delete(conn);
        close(conn);
      })();
    }
  })().catch(() => {});
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    requests,
    accepted: () => accepted,
    closed: () => closed,
    [Symbol.asyncDispose]() {
      listener.close();
      for (const c of conns) close(c);
      return Promise.resolve();
    },
  };
}
