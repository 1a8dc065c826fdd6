import assert from "node:assert/strict";
import { errnoMessage, errnoName, errnoNumber, isErrno, SysError } from "./errno.ts";

Deno.test("errnoName() and errnoNumber() map both ways", () => {
  assert.equal(errnoName(2), "ENOENT");
  assert.equal(errnoName(107), "ENOTCONN");
  assert.equal(errnoName(9999), "E9999");
  assert.equal(errnoNumber("EROFS"), 30);
  assert.equal(errnoMessage(111), "Connection refused");
  assert.equal(errnoMessage(9999), "Unknown error 9999");
});

Deno.test("SysError carries code, errno, syscall and path", () => {
  const err = new SysError(2, "mount", { path: "/a b" });
  assert.equal(err.code, "ENOENT");
  assert.equal(err.errno, 2);
  assert.equal(err.syscall, "mount");
  assert.equal(err.path, "/a b");
  assert.equal(err.message, `mount "/a b": No such file or directory (ENOENT)`);
  assert.equal(new SysError(9, "close").message, "close: Bad file descriptor (EBADF)");
});

Deno.test("isErrno() matches SysError and Deno errors by code", () => {
  assert.equal(isErrno(new SysError(107, "stat"), "ENOTCONN"), true);
  assert.equal(isErrno(new SysError(107, "stat"), "EINVAL", "ENOENT"), false);
  const denoErr = Object.assign(new Error("x"), { code: "ENOENT" });
  assert.equal(isErrno(denoErr, "ENOENT"), true);
  assert.equal(isErrno("ENOENT", "ENOENT"), false);
  assert.equal(isErrno(undefined, "ENOENT"), false);
});
