/**
 * A TCP relay from the node's address to a server on the host's loopback, in this process: pods
 * cannot reach 127.0.0.1 of the host (it is their own loopback), and the test S3 servers (Ceph RGW,
 * s3rver) listen only there. The driver's pods get `http://<node address>:<relay port>` as their S3
 * endpoint; SigV4 signs the Host header, which the relay passes through unchanged.
 *
 * The relay lives and dies with the process that started it (tests, the sandbox): nothing is left
 * behind on the host when that process ends, however it ends.
 *
 * @module
 */

/** A running relay. */
export interface TcpRelay {
  /** Where it listens. */
  readonly hostname: string;
  readonly port: number;
  /** Connections relayed so far. */
  readonly connections: number;
  /** Stop listening and close every relayed connection. */
  close(): Promise<void>;
}

/** Settings of {@link startTcpRelay}. */
export interface TcpRelayOptions {
  /** Address to listen on (the node address). */
  readonly hostname: string;
  /** Port to listen on; 0 (default) picks a free one. */
  readonly port?: number;
  /** Where connections go. */
  readonly target: { readonly hostname: string; readonly port: number };
}

/** Start relaying (listening when this returns). */
export function startTcpRelay(o: TcpRelayOptions): TcpRelay {
  const listener = Deno.listen({ hostname: o.hostname, port: o.port ?? 0, transport: "tcp" });
  const open = new Set<Deno.Conn>();
  const pipes = new Set<Promise<void>>();
  let connections = 0;
  let closed = false;

  const relay = async (inbound: Deno.TcpConn) => {
    let outbound: Deno.TcpConn | undefined;
    try {
      outbound = await Deno.connect({ hostname: o.target.hostname, port: o.target.port });
    } catch {
      inbound.close();
      return;
    }
    inbound.setNoDelay(true);
    outbound.setNoDelay(true);
    open.add(inbound);
    open.add(outbound);
    const out = outbound;
    // Plain read/write loops: a Conn's `readable` closes the whole socket at EOF, which would
    // drop the answer after a client's half-close (`printf … | nc`).
    const copy = async (from: Deno.TcpConn, to: Deno.TcpConn) => {
      const buf = new Uint8Array(64 * 1024);
      try {
        for (;;) {
          const n = await from.read(buf);
          if (n === null) break;
          let off = 0;
          while (off < n) off += await to.write(buf.subarray(off, n));
        }
        // Half-close: the other side may still answer.
        await to.closeWrite();
      } catch { /* reset or closed by either side */ }
    };
    await Promise.all([copy(inbound, out), copy(out, inbound)]);
    for (const c of [inbound, out]) {
      open.delete(c);
      try {
        c.close();
      } catch { /* closed */ }
    }
  };

  const accepting = (async () => {
    for (;;) {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept() as Deno.TcpConn;
      } catch {
        return; // closed
      }
      connections++;
      const p = relay(conn);
      pipes.add(p);
      p.finally(() => pipes.delete(p));
    }
  })();

  const addr = listener.addr as Deno.NetAddr;
  return {
    hostname: addr.hostname,
    port: addr.port,
    get connections() {
      return connections;
    },
    async close() {
      if (closed) return;
      closed = true;
      listener.close();
      await accepting;
      for (const c of open) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await Promise.allSettled([...pipes]);
    },
  };
}
