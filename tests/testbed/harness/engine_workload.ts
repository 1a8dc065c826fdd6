/**
 * A workload for the session tests, run as its own process (never the test process: a process
 * that starts programs must not hold files on a mount whose engine is being restarted — closing
 * them at exec time waits for the engine).
 *
 *   deno run -A tests/testbed/harness/engine_workload.ts <dir> <held-file> <stop-file> <report.json>
 *
 * It makes `<dir>` its working directory (a directory held as cwd across engine restarts), opens
 * `<held-file>` (relative to it) for reading and keeps it open, then loops until `<stop-file>`
 * exists: write a new file and close it, read it back, list the directory, stat, and read the next
 * chunk of the held file. Every operation's start and end go into the report with any error, so
 * the test can tell whether an error reached the workload and how long each engine restart paused
 * it (times are epoch milliseconds). Files it wrote and closed are listed with their sha256, and
 * the held file's bytes as read are summed up (size, sha256).
 *
 * @module
 */
const [dir, held, stopFile, reportPath] = Deno.args;
if (!dir || !held || !stopFile || !reportPath) {
  Deno.stderr.writeSync(
    new TextEncoder().encode(
      "usage: engine_workload.ts <dir> <held-file> <stop-file> <report.json>\n",
    ),
  );
  Deno.exit(2);
}

interface Op {
  readonly op: string;
  readonly start: number;
  readonly end: number;
  readonly error?: string;
}

const ops: Op[] = [];
const written: Record<string, string> = {};
const heldBytes: Uint8Array[] = [];

async function sha256(bytes: Uint8Array): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(d)).map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function timed(op: string, f: () => Promise<void>): Promise<void> {
  const start = Date.now();
  try {
    await f();
    ops.push({ op, start, end: Date.now() });
  } catch (err) {
    ops.push({ op, start, end: Date.now(), error: String(err) });
  }
}

Deno.chdir(dir);
const file = await Deno.open(held, { read: true });
const buf = new Uint8Array(64 * 1024);
let heldDone = false;
let i = 0;
for (; !(await Deno.stat(stopFile).then(() => true, () => false)); i++) {
  const name = `w-${i}.txt`;
  const body = new TextEncoder().encode(`${name} ${"x".repeat(1000 + (i % 7) * 513)}\n`);
  // Written as a careful program writes: the data is flushed (fsync) and its error checked before
  // the close, whose error Deno drops. Sync calls: Deno's async ones work on a dup of the fd and
  // close it after, and every close of a FUSE file is a FLUSH.
  await timed("write", async () => {
    // deno-lint-ignore no-sync-fn-in-async-fn
    const f = Deno.openSync(name, { write: true, create: true, truncate: true });
    try {
      f.writeSync(body);
      f.syncSync();
    } finally {
      f.close();
    }
    written[name] = await sha256(body);
  });
  // A write can fail (its file open when the engine died): only what was written is read back.
  if (written[name]) {
    await timed("read", async () => {
      const back = await Deno.readFile(name);
      if (await sha256(back) !== written[name]) throw new Error(`${name}: read back differs`);
    });
  }
  await timed("list", async () => {
    for await (const _ of Deno.readDir(".")) { /* every entry */ }
  });
  await timed("stat", async () => void await Deno.stat(held));
  if (!heldDone) {
    await timed("read-held", async () => {
      const n = await file.read(buf);
      if (n === null) heldDone = true;
      else heldBytes.push(buf.slice(0, n));
    });
  }
  await new Promise((r) => setTimeout(r, 20));
}
// The rest of the held file, then close it (a read handle of an earlier engine is re-opened).
await timed("read-held-rest", async () => {
  for (;;) {
    const n = await file.read(buf);
    if (n === null) break;
    heldBytes.push(buf.slice(0, n));
  }
});
await timed("close-held", () => Promise.resolve(file.close()));
const all = new Uint8Array(heldBytes.reduce((n, b) => n + b.length, 0));
heldBytes.reduce((at, b) => (all.set(b, at), at + b.length), 0);
await Deno.writeTextFile(
  reportPath,
  JSON.stringify({
    ops,
    written,
    held: { bytes: all.length, sha256: await sha256(all) },
    iterations: i,
  }),
);
