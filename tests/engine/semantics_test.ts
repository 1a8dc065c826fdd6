/**
 * File-system semantics of our mount-s3 against versitygw: deletes and overwrites only when
 * allowed, read-only mounts, owner and modes, prefix confinement, serving a pre-mounted
 * `/dev/fd/N`, credentials from a profile, and the exit codes of failures at start.
 *
 * @module
 */
import assert from "node:assert/strict";
import { HeadObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import {
  engineEnv,
  engineTest,
  errno,
  failingEngine,
  fuseReason,
  type Mounted,
  mountEngine,
  type Server,
  startVersitygw,
  versitygwReason,
  withBucket,
} from "../testbed/harness/engine.ts";
import {
  bindMount,
  clearCloexec,
  closeFd,
  fdTarget,
  mountFuse,
  openFuse,
  unmount,
} from "../../src/sys/mount.ts";
import { freePort } from "../_helpers.ts";

const reason = fuseReason() ?? versitygwReason();

async function exists(s3: S3Client, bucket: string, key: string): Promise<boolean> {
  return await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })).then(
    () => true,
    () => false,
  );
}

engineTest(
  "engine: without --allow-delete rm fails with EPERM and the object stays",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "keep.txt", Body: "data" }));
      {
        await using m = await mountEngine({ bucket, server });
        const err = await Deno.remove(`${m.dir}/keep.txt`).then(() => undefined, (e) => e);
        assert.equal(errno(err), "EPERM", `rm gave ${err}`);
        assert.equal(await m.unmount(), 0);
      }
      assert.ok(await exists(s3, bucket, "keep.txt"), "the object was deleted");
      // Control: with --allow-delete the same rm works (the test can fail).
      {
        await using m = await mountEngine({ bucket, server, args: ["--allow-delete"] });
        await Deno.remove(`${m.dir}/keep.txt`);
        assert.equal(await m.unmount(), 0);
      }
      assert.ok(!(await exists(s3, bucket, "keep.txt")), "--allow-delete did not delete");
    }),
);

engineTest(
  "engine: without --allow-overwrite an overwrite fails and the object is unchanged",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "f.txt", Body: "original" }));
      {
        await using m = await mountEngine({ bucket, server });
        const err = await Deno.writeTextFile(`${m.dir}/f.txt`, "replaced").then(
          () => undefined,
          (e) => e,
        );
        assert.equal(errno(err), "EPERM", `overwrite gave ${err}`);
        // Appending to an existing object is refused too.
        const append = await Deno.writeTextFile(`${m.dir}/f.txt`, "more", { append: true })
          .then(() => undefined, (e) => e);
        assert.ok(append instanceof Error, "append succeeded");
        assert.equal(await Deno.readTextFile(`${m.dir}/f.txt`), "original");
        assert.equal(await m.unmount(), 0);
      }
      // Control: with --allow-overwrite a truncating write replaces the object.
      {
        await using m = await mountEngine({ bucket, server, args: ["--allow-overwrite"] });
        await Deno.writeTextFile(`${m.dir}/f.txt`, "replaced");
        assert.equal(await m.unmount(), 0);
      }
      await using m = await mountEngine({ bucket, server, args: ["--read-only"] });
      assert.equal(await Deno.readTextFile(`${m.dir}/f.txt`), "replaced");
    }),
);

engineTest(
  "engine: --read-only gives EROFS for writes, deletes and mkdir",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "r.txt", Body: "read me" }));
      await using m = await mountEngine({
        bucket,
        server,
        args: ["--read-only", "--allow-delete"],
      });
      assert.equal(await Deno.readTextFile(`${m.dir}/r.txt`), "read me");
      for (
        const [what, op] of [
          ["create", () => Deno.writeTextFile(`${m.dir}/new.txt`, "x")],
          ["delete", () => Deno.remove(`${m.dir}/r.txt`)],
          ["mkdir", () => Deno.mkdir(`${m.dir}/d`)],
        ] as const
      ) {
        const err = await op().then(() => undefined, (e) => e);
        assert.equal(errno(err), "EROFS", `${what} gave ${err}`);
      }
      assert.ok(await exists(s3, bucket, "r.txt"));
      assert.ok(!(await exists(s3, bucket, "new.txt")));
      const mi = await Deno.readTextFile("/proc/self/mountinfo");
      assert.match(mi.split("\n").find((l) => l.includes(` ${m.dir} `)) ?? "", / ro,/);
    }),
);

engineTest(
  "engine: --uid, --gid, --dir-mode and --file-mode are what stat shows",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "d/f.txt", Body: "x" }));
      await using m = await mountEngine({
        bucket,
        server,
        args: ["--uid=1234", "--gid=4321", "--dir-mode=0710", "--file-mode=0640", "--allow-other"],
      });
      const file = await Deno.stat(`${m.dir}/d/f.txt`);
      const dir = await Deno.stat(`${m.dir}/d`);
      const root = await Deno.stat(m.dir);
      for (
        const [what, st, mode] of [["file", file, 0o640], ["dir", dir, 0o710], [
          "root",
          root,
          0o710,
        ]] as const
      ) {
        assert.equal(st.uid, 1234, `${what} uid`);
        assert.equal(st.gid, 4321, `${what} gid`);
        assert.equal(st.mode! & 0o777, mode, `${what} mode ${(st.mode! & 0o777).toString(8)}`);
      }
      assert.ok(file.isFile && dir.isDirectory);
      // Defaults for comparison: the caller's ids (root) and 0755/0644.
      await using d = await mountEngine({ bucket, server });
      const f2 = await Deno.stat(`${d.dir}/d/f.txt`);
      assert.equal(f2.uid, 0);
      assert.equal(f2.mode! & 0o777, 0o644);
    }),
);

engineTest(
  "engine: --prefix confines the view and the writes to the prefix",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      for (const key of ["inside/a.txt", "inside/sub/b.txt", "outside.txt", "insider.txt"]) {
        await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: key }));
      }
      await using m = await mountEngine({ bucket, server, args: ["--prefix=inside/"] });
      const names: string[] = [];
      for await (const e of Deno.readDir(m.dir)) names.push(e.name);
      assert.deepEqual(names.sort(), ["a.txt", "sub"]);
      assert.equal(await Deno.readTextFile(`${m.dir}/sub/b.txt`), "inside/sub/b.txt");
      await assert.rejects(Deno.stat(`${m.dir}/outside.txt`), Deno.errors.NotFound);
      await Deno.writeTextFile(`${m.dir}/new.txt`, "n");
      assert.equal(await m.unmount(), 0);
      assert.ok(await exists(s3, bucket, "inside/new.txt"));
      assert.ok(!(await exists(s3, bucket, "new.txt")));
    }),
);

/**
 * Mount FUSE on `dir` with the fd `open()` gives (as the node plugin does), hand it to the engine
 * as `/dev/fd/N` (as the mounter does), run `use` on the served mount, then unmount.
 */
async function serveFd(
  server: Server,
  bucket: string,
  dir: string,
  open: () => number,
  use: (mounted: Mounted, fd: number) => Promise<void>,
): Promise<void> {
  const fd = open();
  let mounted: Mounted;
  try {
    mountFuse(dir, { fd, allowOther: true });
    clearCloexec(fd); // the child inherits it, as the mounter does
    mounted = await mountEngine({ bucket, server, mountPoint: `/dev/fd/${fd}`, dir });
  } catch (err) {
    // The engine refused the fd: nothing serves the mount we made; leave nothing mounted.
    unmount(dir, { detach: true });
    throw err;
  } finally {
    closeFd(fd); // our copy; the engine holds its own
  }
  try {
    await use(mounted, fd);
    assert.equal(await mounted.unmount(), 0);
  } finally {
    await mounted.unmount();
  }
}

engineTest(
  "engine: serves a FUSE fd that the caller mounted (/dev/fd/N), exits 0 after umount",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "hello.txt", Body: "hello" }));
      const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-" });
      try {
        await serveFd(server, bucket, dir, openFuse, async (mounted, fd) => {
          assert.match(mounted.proc.stdout(), new RegExp(`is mounted at /dev/fd/${fd}`));
          assert.equal(await Deno.readTextFile(`${dir}/hello.txt`), "hello");
          await Deno.writeTextFile(`${dir}/via-fd.txt`, "written through the fd");
        });
      } finally {
        await Deno.remove(dir).catch(() => {});
      }
      assert.ok(await exists(s3, bucket, "via-fd.txt"));
    }),
);

engineTest(
  "engine: serves a FUSE fd whose path shows another root (/dev bound elsewhere, as for a caller in a chroot)",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "hello.txt", Body: "hello" }));
      const base = await Deno.makeTempDir({ prefix: "s3csi-engine-root-" });
      await Deno.mkdir(`${base}/dev`);
      await Deno.mkdir(`${base}/mnt`);
      bindMount("/dev", `${base}/dev`);
      const openThroughRoot = () => {
        const fd = openFuse(`${base}/dev/fuse`);
        // What Mountpoint's own check compares, and refuses: the path is not /dev/fuse.
        assert.equal(fdTarget(fd), `${base}/dev/fuse`);
        return fd;
      };
      try {
        await serveFd(server, bucket, `${base}/mnt`, openThroughRoot, async () => {
          assert.equal(await Deno.readTextFile(`${base}/mnt/hello.txt`), "hello");
        });
      } finally {
        unmount(`${base}/dev`, { detach: true });
        await Deno.remove(base, { recursive: true }).catch(() => {});
      }
    }),
);

engineTest(
  "engine: SIGTERM unmounts cleanly and exits 0",
  reason,
  () =>
    withBucket(startVersitygw, async (server, _s3, bucket) => {
      await using m = await mountEngine({ bucket, server });
      assert.equal(await m.proc.stop("SIGTERM", 20_000), 0);
      const mi = await Deno.readTextFile("/proc/self/mountinfo");
      assert.ok(!mi.includes(` ${m.dir} `), "still mounted after SIGTERM");
    }),
);

engineTest(
  "engine: failures at start exit with their code and one line on stderr",
  reason,
  () =>
    withBucket(startVersitygw, async (server, _s3, bucket) => {
      const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-" });
      try {
        const cases: {
          what: string;
          args: string[];
          env: Record<string, string>;
          code: number;
          line: RegExp;
        }[] = [
          {
            what: "bucket not found",
            args: ["no-such-bucket-here", dir],
            env: engineEnv(server),
            code: 4,
            line: /bucket 'no-such-bucket-here' does not exist/,
          },
          {
            what: "wrong secret",
            args: [bucket, dir],
            env: engineEnv(server, { AWS_SECRET_ACCESS_KEY: "wrongwrongwrongwrongwrong" }),
            code: 5,
            line: /access to bucket '.*' was denied/,
          },
          {
            what: "second user without access",
            args: [bucket, dir],
            env: engineEnv(server, {
              AWS_ACCESS_KEY_ID: server.env.S3_OTHER_ACCESS_KEY_ID!,
              AWS_SECRET_ACCESS_KEY: server.env.S3_OTHER_SECRET_ACCESS_KEY!,
            }),
            code: 5,
            line: /was denied/,
          },
          {
            what: "nothing listens",
            args: [bucket, dir],
            env: engineEnv(server, { AWS_ENDPOINT_URL: `http://127.0.0.1:${freePort()}` }),
            code: 6,
            line: /cannot reach bucket/,
          },
          {
            what: "mount point missing",
            args: [bucket, `${dir}/missing`],
            env: engineEnv(server),
            code: 3,
            line: /mount point .*missing.* does not exist/,
          },
          {
            what: "not a FUSE fd",
            args: [bucket, "/dev/fd/0"],
            env: engineEnv(server),
            code: 3,
            line: /mount point \/dev\/fd\/0 to be the FUSE device/,
          },
          {
            what: "unreadable credentials file",
            args: [bucket, dir],
            env: engineEnv(server, { AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/credentials" }),
            code: 3,
            line: /AWS_SHARED_CREDENTIALS_FILE='\/nonexistent\/credentials' cannot be read/,
          },
        ];
        for (const c of cases) {
          const started = Date.now();
          const r = await failingEngine({ args: [...c.args, "--force-path-style"], env: c.env });
          const lines = r.stderr.trim().split("\n");
          assert.equal(r.code, c.code, `${c.what}: exit ${r.code}, stderr ${r.stderr}`);
          assert.equal(lines.length, 1, `${c.what}: stderr has ${lines.length} lines: ${r.stderr}`);
          assert.match(lines[0]!, /^mount-s3: error: /, c.what);
          assert.match(lines[0]!, c.line, c.what);
          // Failing fast is part of the contract (bounded generously for a busy machine).
          assert.ok(Date.now() - started < 30_000, `${c.what}: took ${Date.now() - started} ms`);
        }
      } finally {
        await Deno.remove(dir).catch(() => {}); // empty; never recursive where a mount may be
      }
    }),
);

engineTest(
  "engine: credentials from a shared-credentials profile (as the mounter hands them over)",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "p.txt", Body: "profile" }));
      const creds = await Deno.makeTempDir({ prefix: "s3csi-engine-creds-" });
      try {
        await Deno.writeTextFile(
          `${creds}/s3-csi-credentials`,
          `[s3-csi]\naws_access_key_id=${server.env.AWS_ACCESS_KEY_ID}\naws_secret_access_key=${server.env.AWS_SECRET_ACCESS_KEY}\n`,
          { mode: 0o600 },
        );
        await Deno.writeTextFile(`${creds}/s3-csi-config`, "[profile s3-csi]\n", { mode: 0o600 });
        const env = engineEnv(server, {
          AWS_CONFIG_FILE: `${creds}/s3-csi-config`,
          AWS_PROFILE: "s3-csi",
          AWS_SHARED_CREDENTIALS_FILE: `${creds}/s3-csi-credentials`,
        });
        delete env.AWS_ACCESS_KEY_ID;
        delete env.AWS_SECRET_ACCESS_KEY;
        await using m = await mountEngine({ bucket, server, fullEnv: env });
        assert.equal(await Deno.readTextFile(`${m.dir}/p.txt`), "profile");
      } finally {
        await Deno.remove(`${creds}/s3-csi-credentials`).catch(() => {});
        await Deno.remove(`${creds}/s3-csi-config`).catch(() => {});
        await Deno.remove(creds).catch(() => {});
      }
    }),
);
