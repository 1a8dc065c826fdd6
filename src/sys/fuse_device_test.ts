import assert from "node:assert/strict";
import { deviceNumbers, isFuseDeviceFile } from "./fuse_device.ts";

/** glibc's makedev(). */
function makedev(major: number, minor: number): number {
  const low = ((major & 0xfff) << 8) | (minor & 0xff) | ((minor & 0xfff00) << 12);
  const high = (major & ~0xfff) + ((minor >>> 20) & 0xfff);
  return (low >>> 0) + high * 2 ** 32;
}

Deno.test("deviceNumbers() splits dev_t as glibc does, high bits included", () => {
  assert.deepEqual(deviceNumbers(0xae5), { major: 10, minor: 229 }); // /dev/fuse
  assert.deepEqual(deviceNumbers(0x103), { major: 1, minor: 3 }); // /dev/null
  for (const [major, minor] of [[10, 229], [4106, 229], [10, 229 + (1 << 20)], [259, 70000]]) {
    assert.deepEqual(deviceNumbers(makedev(major!, minor!)), { major, minor });
  }
});

Deno.test("isFuseDeviceFile() accepts only the character device 10:229", () => {
  const st = (isCharDevice: boolean, rdev: number | null) => ({ isCharDevice, rdev });
  assert.equal(isFuseDeviceFile(st(true, makedev(10, 229))), true);
  assert.equal(isFuseDeviceFile(st(false, makedev(10, 229))), false, "a block device 10:229");
  // Numbers whose low 32 bits look like 10:229.
  assert.equal(isFuseDeviceFile(st(true, makedev(4106, 229))), false);
  assert.equal(isFuseDeviceFile(st(true, makedev(10, 229 + (1 << 20)))), false);
  assert.equal(isFuseDeviceFile(st(true, makedev(1, 3))), false);
  assert.equal(isFuseDeviceFile(st(true, null)), false);
});
