import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { type Attribution, describeLeaks, findLeaks, type Proc } from "./leftovers.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url)).replace(/\/$/, "");

function proc(pid: number, cmdline: string, more: Partial<Proc> = {}): Proc {
  return { pid, start: `${pid}00`, ppid: 1, cmdline, cwd: "/", environ: "", ...more };
}

const before = {
  processes: [{ pid: 10, start: "1000" }],
  mounts: [{ id: "1", mountPoint: "/", fsType: "ext4" }],
};

function attribution(more: Partial<Attribution> = {}): Attribution {
  return {
    namespaced: false,
    runId: "run-1",
    ignorePids: new Set([99]),
    keptPids: new Set(),
    ...more,
  };
}

Deno.test("leftovers: in the suite's own namespaces every new process and mount is a leak", () => {
  const now = {
    processes: [
      proc(10, "sshd", { start: "1000" }), // there before
      proc(11, "rclone mount2 :s3:b /dev/fd/3"),
      proc(99, "bash scripts/test.sh"), // the runner
    ],
    mounts: [
      { id: "1", mountPoint: "/", fsType: "ext4" },
      { id: "7", mountPoint: "/srv/anything", fsType: "tmpfs" },
    ],
  };
  const l = findLeaks(before, now, attribution({ namespaced: true }));
  assert.deepEqual(l.processes.map((p) => p.pid), [11]);
  assert.deepEqual(l.mounts.map((m) => m.mountPoint), ["/srv/anything"]);
});

Deno.test("leftovers: without namespaces only what names the suite counts; kept services apart", () => {
  const now = {
    processes: [
      proc(20, "vim notes.txt"), // someone else's
      proc(21, `deno run -A ${REPO}/src/cmd/mounter/main.ts`),
      proc(22, "radosgw -f -c /var/tmp/s3csi-rgw/ceph.conf"),
      proc(23, "rclone mount2", { environ: "A=b\0S3CSI_TEST_RUN=run-1\0" }),
      proc(24, "rclone mount2", { environ: "S3CSI_TEST_RUN=other-run\0" }),
      proc(25, "sleep 100", { cwd: `${REPO}/dist` }),
      proc(26, "ceph-mon -f -c /var/tmp/s3csi-rgw/ceph.conf"),
    ],
    mounts: [
      { id: "8", mountPoint: "/tmp/s3csi-e2e-x/node-1/pods/u/mount", fsType: "fuse.rclone" },
      { id: "9", mountPoint: "/tmp/s3csi-prov-sandbox-y/src", fsType: "none" },
      { id: "10", mountPoint: "/media/usb", fsType: "vfat" },
    ],
  };
  const l = findLeaks(before, now, attribution({ keptPids: new Set([26]) }));
  assert.deepEqual(l.processes.map((p) => p.pid), [21, 22, 23, 25]);
  assert.deepEqual(l.kept.map((p) => p.pid), [26]);
  assert.deepEqual(l.mounts.map((m) => m.id), ["8", "9"]);
});

Deno.test("leftovers: the report names mounts, processes and their listening ports", () => {
  const text = describeLeaks({
    processes: [proc(30, "kube-apiserver --secure-port=26443", { ppid: 1 })],
    mounts: [{ id: "3", mountPoint: "/tmp/s3csi-x/m", fsType: "fuse.rclone" }],
    listening: new Map([[30, [26443]]]),
    kept: [],
  });
  assert.equal(
    text,
    "mounted: /tmp/s3csi-x/m (fuse.rclone)\n" +
      "running: pid 30 (parent 1) kube-apiserver --secure-port=26443 — listening on TCP 26443",
  );
  assert.equal(describeLeaks({ processes: [], mounts: [], listening: new Map(), kept: [] }), "");
});
