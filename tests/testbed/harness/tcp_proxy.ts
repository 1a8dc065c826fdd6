/**
 * A TCP proxy that can be switched off and on, to play an API server outage without losing the
 * emulator's state: while down, nothing listens on its port and every open connection is closed.
 *
 * @module
 */

/** A switchable TCP proxy on 127.0.0.1. */
export interface TcpProxy extends AsyncDisposable {
  /** The proxy's port. */
  readonly port: number;
  /** Stop listening and close every connection (connections are refused from now on). */
  down(): Promise<void>;
  /** Listen again on the same port. */
  up(): void;
}

/** Start a proxy to `target` (`host:port`). */
export function startTcpProxy(target: { hostname: string; port: number }): TcpProxy {
  let listener: Deno.Listener | undefined;
  let port = 0;
  const conns = new Set<Deno.Conn>();
  let accepting: Promise<void> | undefined;
  const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
    try {
      await from.readable.pipeTo(to.writable);
    } catch {
      // closed
    }
  };
  const serve = (l: Deno.Listener) =>
    (async () => {
      for (;;) {
        let client: Deno.Conn;
        try {
          client = await l.accept();
        } catch {
          return;
        }
        conns.add(client);
        Deno.connect(target).then((upstream) => {
          conns.add(upstream);
          const end = () => {
            for (const c of [client, upstream]) {
              conns.delete(c);
              try {
                c.close();
              } catch { /* closed */ }
            }
          };
          Promise.race([pipe(client, upstream), pipe(upstream, client)]).finally(end);
        }, () => {
          conns.delete(client);
          client.close();
        });
      }
    })();
  const up = () => {
    listener = Deno.listen({ hostname: "127.0.0.1", port });
    port = (listener.addr as Deno.NetAddr).port;
    accepting = serve(listener);
  };
  const down = async () => {
    listener?.close();
    listener = undefined;
    await accepting;
    for (const c of conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    conns.clear();
  };
  up();
  return {
    get port() {
      return port;
    },
    down,
    up,
    [Symbol.asyncDispose]: down,
  };
}
