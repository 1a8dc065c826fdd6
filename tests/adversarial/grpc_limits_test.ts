/**
 * The node plugin's gRPC server against a hostile local peer (issue 23, items 3 and 4): a raw
 * HTTP/2 client (`tests/testbed/harness/raw_grpc.ts`) on the socket of a real node plugin process (on the API
 * emulator, as in the soak) tries to make it hold memory without bound: an HPACK integer that
 * decodes to NaN and disables the dynamic table's eviction; request bodies sent beyond the
 * flow-control window, or within it but never finished, on many streams and connections; more
 * connections than the server allows; a `grpc-timeout` too long for a timer. Each test prints the
 * bound it holds on a `LIMIT <name> {...}` line: the node plugin's resident memory (VmRSS) before
 * and after (peak), the bytes it let the peer buffer, what it refused or cut.
 *
 * Before these limits: the NaN table size grew the table by ~55 MiB on one connection, and two
 * connections of 32 streams × 4 MiB held +330 MiB (windows reopened on every DATA frame).
 */
import assert from "node:assert/strict";
import { connectCsi } from "../../src/csi/client.ts";
import { Code } from "../../src/csi/errors.ts";
import { encodeHeaders } from "../../src/csi/grpc/hpack.ts";
import { ErrorCode, Flag, frame, FrameType } from "../../src/csi/grpc/http2_frames.ts";
import { DEFAULT_LIMITS } from "../../src/csi/grpc/limits.ts";
import { csiMethods } from "../../src/csi/proto.ts";
import { grpcRequestHeaders, rawGrpcCall, RawHttp2 } from "../testbed/harness/raw_grpc.ts";
import {
  type BareNode,
  CRASH_SIGNS,
  exited,
  rssMiB,
  rssPeak,
  startBareNode,
} from "./_adversarial.ts";

const MiB = 1024 * 1024;
/** The defaults the node plugin runs with (`src/csi/grpc/limits.ts`). */
const CONNECTION_LIMIT = DEFAULT_LIMITS.maxReceiveBytes + 5 + DEFAULT_LIMITS.connectionBufferSlack;
const SERVER_LIMIT = Math.max(DEFAULT_LIMITS.maxServerBufferBytes, 2 * CONNECTION_LIMIT);
/** The most the node plugin's memory may grow in these tests (it grew by 55-330 MiB before). */
const GROWTH_BOUND_MIB = 64;
const PUBLISH = "/csi.v1.Node/NodePublishVolume";
const CAPABILITIES = "/csi.v1.Node/NodeGetCapabilities";

const mib = (bytes: number) => Math.round(bytes / MiB * 10) / 10;

function report(name: string, fields: Record<string, unknown>): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`LIMIT ${name} ${JSON.stringify(fields)}\n`));
}

/** A bare node plugin, warmed up (its first calls allocate what every later call reuses). */
async function node(args: string[] = []): Promise<BareNode> {
  const n = await startBareNode(args);
  const csi = connectCsi(n.socket, { timeoutMs: 10_000 });
  try {
    for (let i = 0; i < 20; i++) await csi.identity.probe({});
  } finally {
    csi.close();
  }
  return n;
}

/** The node plugin survived and still serves. */
async function assertServing(n: BareNode): Promise<void> {
  assert.equal(await exited(n.node), false, "the node plugin is still running");
  assert.doesNotMatch(n.node.stderr(), CRASH_SIGNS);
  const csi = connectCsi(n.socket, { timeoutMs: 10_000 });
  try {
    assert.deepEqual(await csi.identity.probe({}), { ready: { value: true } });
  } finally {
    csi.close();
  }
}

/** Wait for `check`, bounded; false (not a throw) when the time is up, so the test can report. */
async function settled(c: RawHttp2, what: string, check: () => boolean, ms: number) {
  return await c.until(what, check, ms).then(() => true, () => false);
}

const test = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name: `grpc limits: ${name}`, sanitizeResources: false, sanitizeOps: false, fn });

test("an HPACK integer that overflows to NaN ends the connection (COMPRESSION_ERROR) before the table can grow", async () => {
  await using n = await node();
  const pid = n.node.child.pid;
  const before = await rssMiB(pid);
  await using c = await RawHttp2.connect(n.socket);
  // A dynamic table size update whose integer has 150 continuation bytes of 0x80: the shift
  // passes 2^1023, `0 * 2 ** shift` is NaN, and a `size > max` check lets it through.
  const poison = Uint8Array.from([0x3f, ...new Array(150).fill(0x80), 0x00]);
  // Then header blocks of ~12 KiB of new entries each (below the 16 KiB header list limit): a
  // table that is never evicted grows by that much per block.
  const entries = (i: number) =>
    encodeHeaders([0, 1, 2].map((k) => [`x-fill-${i}-${k}`, "v".repeat(4000)]), undefined, true);
  const first = entries(0);
  const block = new Uint8Array(poison.length + first.length);
  block.set(poison);
  block.set(first, poison.length);
  const flags = Flag.END_HEADERS | Flag.END_STREAM;
  let sent = await c.send(frame(FrameType.HEADERS, flags, 1, block)) ? 1 : 0;
  let last = 1;
  for (let i = 1; i < 4800 && !c.closed && !c.writeFailed && c.goaway === undefined; i++) {
    if (!await c.send(frame(FrameType.HEADERS, flags, 2 * i + 1, entries(i)))) break;
    last = 2 * i + 1;
    sent++;
  }
  await settled(
    c,
    "the end of the connection, or the answer to the last header block",
    () => c.closed || c.goaway !== undefined || c.ended.has(last),
    120_000,
  );
  const after = await rssMiB(pid);
  report("hpack", {
    headerBlocksSent: sent,
    headerBlocksServed: c.ended.size,
    goaway: c.goaway,
    rssBeforeMiB: before,
    rssAfterMiB: after,
    growthMiB: Math.round((after - before) * 10) / 10,
  });
  assert.equal(
    c.goaway?.code,
    ErrorCode.COMPRESSION_ERROR,
    "the poisoned block ends the connection",
  );
  assert.match(c.goaway!.debug, /Integer encoding too long/);
  assert.equal(c.ended.size, 0, "no header block was served after it");
  assert.ok(after - before < GROWTH_BOUND_MIB, `the node plugin grew by ${after - before} MiB`);
  await assertServing(n);
});

/** The bytes each connection of one attack had sent when the first of them saw a stream reset. */
interface Snapshot {
  readonly conns: RawHttp2[];
  sentAtFirstReset?: number[];
}

/**
 * One connection that opens `streams` requests whose bodies never end and sends `bodyBytes` on
 * each, in 16 KiB DATA frames taken in turn: beyond the server's windows (`respectWindows`
 * false), or only as far as they allow, waiting while they are closed. Ends when everything is
 * sent, every stream is reset, the connection ends, or nothing moves for `stallMs`. Fills in
 * `snapshot` (shared by the connections of one attack) before sending anything after a reset.
 */
async function hoard(
  socket: string,
  options: { streams: number; bodyBytes: number; respectWindows: boolean; stallMs: number },
  snapshot: Snapshot,
): Promise<RawHttp2> {
  const c = await RawHttp2.connect(socket);
  snapshot.conns.push(c);
  const ids = Array.from({ length: options.streams }, (_, i) => 2 * i + 1);
  for (const id of ids) {
    await c.send(frame(FrameType.HEADERS, Flag.END_HEADERS, id, grpcRequestHeaders(CAPABILITIES)));
  }
  const left = new Map(ids.map((id) => [id, options.bodyBytes]));
  const zeros = new Uint8Array(16_384);
  const open = () => ids.filter((id) => !c.resets.has(id) && left.get(id)! > 0);
  const room = (id: number) =>
    options.respectWindows ? Math.min(c.connWindow, c.streamWindow(id)) : zeros.length;
  while (!c.closed && !c.writeFailed && c.goaway === undefined && open().length > 0) {
    if (snapshot.conns.some((p) => p.resets.size > 0)) {
      snapshot.sentAtFirstReset ??= snapshot.conns.map((p) => p.sentData);
    }
    let progressed = false;
    for (const id of open()) {
      const size = Math.min(zeros.length, room(id), left.get(id)!);
      if (size <= 0) continue;
      if (!await c.sendData(id, zeros.subarray(0, size))) break;
      left.set(id, left.get(id)! - size);
      progressed = true;
    }
    if (!progressed) {
      const resets = c.resets.size;
      const moved = await settled(
        c,
        "a window to open or a stream to be reset",
        () => c.closed || c.resets.size > resets || open().some((id) => room(id) > 0),
        options.stallMs,
      );
      if (!moved) break;
    }
  }
  return c;
}

test("request bodies sent beyond the flow-control window end the connection (FLOW_CONTROL_ERROR)", async () => {
  await using n = await node();
  const pid = n.node.child.pid;
  const before = await rssMiB(pid);
  await using peak = rssPeak(pid);
  // The attack: two connections, 32 streams each, 4 MiB of body on each stream.
  const attack = { streams: 32, bodyBytes: 4 * MiB, respectWindows: false, stallMs: 10_000 };
  const snapshot: Snapshot = { conns: [] };
  const peers = await Promise.all([0, 1].map(() => hoard(n.socket, attack, snapshot)));
  for (const c of peers) {
    await settled(c, "the server to end the connection", () => c.goaway !== undefined, 10_000);
  }
  const top = await peak.peak();
  report("bodies beyond the window", {
    connections: peers.length,
    streamsEach: attack.streams,
    bodyBytesEachMiB: mib(attack.bodyBytes),
    sentMiB: peers.map((c) => mib(c.sentData)),
    grantedMiB: peers.map((c) => mib(c.granted)),
    connectionLimitMiB: mib(CONNECTION_LIMIT),
    goaway: peers.map((c) => c.goaway),
    rssBeforeMiB: before,
    rssPeakMiB: top,
    growthMiB: Math.round((top - before) * 10) / 10,
  });
  for (const c of peers) {
    assert.equal(c.goaway?.code, ErrorCode.FLOW_CONTROL_ERROR, JSON.stringify(c.goaway));
    assert.ok(c.granted <= CONNECTION_LIMIT, `the server granted ${c.granted} bytes`);
  }
  assert.ok(top - before < GROWTH_BOUND_MIB, `the node plugin grew by ${top - before} MiB`);
  for (const c of peers) await c[Symbol.asyncDispose]();
  await assertServing(n);
});

test("request bodies sent within the windows but never finished stall at the limits, then are reset", async () => {
  await using n = await node();
  const pid = n.node.child.pid;
  const before = await rssMiB(pid);
  await using peak = rssPeak(pid);
  // Four connections of 32 streams that each want 1 MiB: 128 MiB if nothing stopped them; the
  // connections' limits together (4 × ~5 MiB) exceed the server's, so both bind.
  const attack = {
    streams: 32,
    bodyBytes: MiB,
    respectWindows: true,
    stallMs: DEFAULT_LIMITS.requestTimeoutMs + 20_000,
  };
  const t0 = performance.now();
  const snapshot: Snapshot = { conns: [] };
  const peers = await Promise.all([0, 1, 2, 3].map(() => hoard(n.socket, attack, snapshot)));
  const seconds = Math.round((performance.now() - t0) / 100) / 10;
  const top = await peak.peak();
  // What the server let them buffer before the first reset (or in all, when nothing was reset).
  const buffered = snapshot.sentAtFirstReset ?? peers.map((c) => c.sentData);
  const held = buffered.reduce((sum, b) => sum + b, 0);
  const resets = peers.flatMap((c) => [...c.resets.values()]);
  report("bodies within the window, never finished", {
    connections: peers.length,
    streamsEach: attack.streams,
    bodyBytesEachMiB: mib(attack.bodyBytes),
    bufferedBeforeResetMiB: buffered.map(mib),
    bufferedTotalMiB: mib(held),
    connectionLimitMiB: mib(CONNECTION_LIMIT),
    serverLimitMiB: mib(SERVER_LIMIT),
    streamsReset: resets.length,
    resetCodes: [...new Set(resets)],
    secondsUntilReset: seconds,
    requestTimeoutMs: DEFAULT_LIMITS.requestTimeoutMs,
    rssBeforeMiB: before,
    rssPeakMiB: top,
    growthMiB: Math.round((top - before) * 10) / 10,
  });
  // A connection holds at most its limit, the server at most its budget plus one window per
  // connection; one more window each for frames a peer sent before it read the first reset.
  for (const [i, c] of peers.entries()) {
    assert.ok(buffered[i]! <= CONNECTION_LIMIT + 65_535, `a connection buffered ${buffered[i]}`);
    assert.equal(c.goaway, undefined, "a peer that keeps to its windows is not cut off");
  }
  assert.ok(held <= SERVER_LIMIT + 2 * peers.length * 65_535, `the server buffered ${held} bytes`);
  assert.equal(resets.length, 4 * 32, "every unfinished request was reset");
  assert.deepEqual([...new Set(resets)], [ErrorCode.CANCEL]);
  assert.match(n.node.stderr(), /was not complete within 10000 ms/);
  assert.ok(top - before < GROWTH_BOUND_MIB, `the node plugin grew by ${top - before} MiB`);
  for (const c of peers) await c[Symbol.asyncDispose]();
  await assertServing(n);
});

test("connections above the limit are refused while all are busy; idle ones make room", async () => {
  await using n = await node();
  const pid = n.node.child.pid;
  const before = await rssMiB(pid);
  const limit = DEFAULT_LIMITS.maxConnections;
  const held: RawHttp2[] = [];
  const extra: RawHttp2[] = [];
  try {
    // `limit` connections, each with a request in flight: the first with its header block left
    // unfinished, the others with a body that never ends.
    for (let i = 0; i < limit; i++) {
      const c = await RawHttp2.connect(n.socket);
      held.push(c);
      // Once the server's SETTINGS are acknowledged: nothing may come between a HEADERS frame
      // without END_HEADERS and its CONTINUATION.
      await c.until(`connection ${i} to be accepted`, () => c.serverSettings || c.closed);
      const headers = grpcRequestHeaders(CAPABILITIES);
      await c.send(frame(FrameType.HEADERS, i === 0 ? 0 : Flag.END_HEADERS, 1, headers));
      // The stream is open on the server before the next connection comes (so none is idle).
      if (i > 0) await c.roundTrip();
    }
    for (let i = 0; i < 8; i++) {
      const c = await RawHttp2.connect(n.socket);
      extra.push(c);
      await settled(c, `extra connection ${i} to be refused`, () => c.goaway !== undefined, 10_000);
    }
    const during = await rssMiB(pid);
    report("connections", {
      limit,
      heldOpen: held.filter((c) => !c.closed).length,
      extraRefused: extra.filter((c) => c.goaway?.code === ErrorCode.ENHANCE_YOUR_CALM).length,
      extraGoaway: extra.map((c) => c.goaway?.debug),
      heldClosed: held.flatMap((c, i) =>
        c.closed || c.goaway ? [{ i, goaway: c.goaway, writeFailed: c.writeFailed }] : []
      ),
      nodeLog: n.node.stderr().split("\n").filter((l) => /limit|CSI connection/.test(l)),
      rssBeforeMiB: before,
      rssDuringMiB: during,
    });
    for (const c of extra) {
      assert.equal(c.goaway?.code, ErrorCode.ENHANCE_YOUR_CALM, "an extra connection is refused");
      assert.match(c.goaway!.debug, /too many connections \(limit 128\)/);
    }
    assert.equal(held.filter((c) => c.goaway !== undefined).length, 0, "the held ones are kept");
    assert.match(n.node.stderr(), /refused a connection: 128 are open, the limit/);

    // The request timeout: the unfinished header block ends its connection, the other requests
    // are reset; their connections stay open, idle.
    const t0 = performance.now();
    await held[0]!.until("the unfinished header block's GOAWAY", () => !!held[0]!.goaway, 30_000);
    for (const c of held.slice(1)) {
      await c.until("the unfinished request's reset", () => c.resets.has(1), 30_000);
    }
    const seconds = Math.round((performance.now() - t0) / 100) / 10;
    report("request timeout", {
      requestTimeoutMs: DEFAULT_LIMITS.requestTimeoutMs,
      headerBlockGoaway: held[0]!.goaway,
      requestsReset: held.filter((c) => c.resets.get(1) === ErrorCode.CANCEL).length,
      secondsAfterRefusals: seconds,
    });
    assert.equal(held[0]!.goaway?.code, ErrorCode.ENHANCE_YOUR_CALM);
    assert.match(held[0]!.goaway!.debug, /header block was not complete/);
    assert.equal(held.filter((c) => c.resets.get(1) === ErrorCode.CANCEL).length, limit - 1);

    // Back at the limit with idle connections: a new client's call closes the one idle the
    // longest (GOAWAY NO_ERROR) and is served.
    const filler = await RawHttp2.connect(n.socket);
    held.push(filler);
    await filler.until("the filler to be accepted", () => filler.serverSettings || filler.closed);
    const probe = await rawGrpcCall(n.socket, "/csi.v1.Identity/Probe", new Uint8Array(0));
    assert.equal(probe.get("grpc-status"), "0", probe.get("grpc-message") ?? "");
    const evicted = held.filter((c) => c.goaway?.code === ErrorCode.NO_ERROR);
    assert.equal(evicted.length, 1, "exactly one idle connection made room");
  } finally {
    for (const c of [...held, ...extra]) await c[Symbol.asyncDispose]();
  }
  await assertServing(n);
});

test("a grpc-timeout too long for a timer means no practical deadline, not 1 ms", async () => {
  // Publish waits for a Mountpoint Pod assignment that never comes, up to --attachment-timeout.
  await using n = await node(["--attachment-timeout=3s"]);
  const uid = "limits-uid";
  const request = csiMethods("Node")["NodePublishVolume"]!.requestSerialize({
    volumeId: "vol-limits",
    targetPath: `${n.root}/pods/${uid}/volumes/kubernetes.io~csi/pv-limits/mount`,
    volumeCapability: { mount: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } },
    volumeContext: { bucketName: "limits-bucket", "csi.storage.k8s.io/pod.uid": uid },
  });
  const t0 = performance.now();
  const answer = await rawGrpcCall(n.socket, PUBLISH, request, [["grpc-timeout", "99999999H"]]);
  const ms = Math.round(performance.now() - t0);
  report("grpc-timeout", {
    grpcTimeout: "99999999H",
    status: answer.get("grpc-status"),
    message: answer.get("grpc-message"),
    answeredAfterMs: ms,
  });
  assert.equal(
    answer.get("grpc-status"),
    String(Code.FAILED_PRECONDITION),
    `the call ran until the attachment timeout: ${answer.get("grpc-message")}`,
  );
  await assertServing(n);
});
