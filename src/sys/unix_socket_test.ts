import assert from "node:assert/strict";
import {
  checkSocketPath,
  MAX_UNIX_PATH_BYTES,
  sockaddrUn,
  UnixSocketPathError,
} from "./unix_socket.ts";
import { fuseMountData, fuseMountFlags } from "./mount.ts";
import { MS_NOATIME, MS_NODEV, MS_NOSUID, MS_RDONLY } from "./libc.ts";

Deno.test("sockaddrUn() lays out family, path and NUL", () => {
  const { addr, length } = sockaddrUn("/comm/mount.sock");
  assert.equal(addr.length, 110);
  assert.equal(new DataView(addr.buffer).getUint16(0, true), 1);
  assert.equal(new TextDecoder().decode(addr.subarray(2, length - 1)), "/comm/mount.sock");
  assert.equal(addr[length - 1], 0);
  assert.equal(length, 2 + 16 + 1);
});

Deno.test("sockaddrUn() refuses empty, NUL-holding and too long paths", () => {
  assert.ok(sockaddrUn("/" + "x".repeat(MAX_UNIX_PATH_BYTES - 1)));
  for (const p of ["", "/a\0b", "/" + "x".repeat(MAX_UNIX_PATH_BYTES)]) {
    assert.throws(() => sockaddrUn(p), UnixSocketPathError);
  }
});

Deno.test("checkSocketPath() accepts long paths with a short file name", () => {
  checkSocketPath(`/${"d".repeat(200)}/mount.sock`);
  checkSocketPath("/comm/mount.sock");
  assert.throws(
    () => checkSocketPath(`/${"d".repeat(200)}/${"n".repeat(90)}`),
    UnixSocketPathError,
  );
  assert.throws(() => checkSocketPath(""), UnixSocketPathError);
});

Deno.test("fuseMountData() and fuseMountFlags() follow the upstream mount", () => {
  assert.equal(
    fuseMountData({ fd: 7, allowOther: true }),
    "fd=7,rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other",
  );
  assert.equal(
    fuseMountData({ fd: 3 }),
    "fd=3,rootmode=40000,user_id=0,group_id=0,default_permissions",
  );
  assert.equal(fuseMountFlags({}), MS_NODEV | MS_NOSUID | MS_NOATIME);
  assert.equal(fuseMountFlags({ readOnly: true }), MS_NODEV | MS_NOSUID | MS_NOATIME | MS_RDONLY);
});
