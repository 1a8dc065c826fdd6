import assert from "node:assert/strict";
import { parseLdd } from "./image_rootfs.ts";

Deno.test("ldd output: resolved libraries and the loader, not the vDSO", () => {
  const out = `\tlinux-vdso.so.1 (0x00007ffd)
\tlibdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x00007fd8a6cce000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fd8a0b3e000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007fd8a6ce7000)
`;
  assert.deepEqual(parseLdd(out), [
    "/lib/x86_64-linux-gnu/libdl.so.2",
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib64/ld-linux-x86-64.so.2",
  ]);
});

Deno.test("a library ldd cannot find is an error", () => {
  assert.throws(() => parseLdd("\tlibfuse3.so.3 => not found\n"), /libfuse3/);
});
