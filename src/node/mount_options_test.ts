import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import { parseMountOptions, renderArgs } from "./mount_options.ts";

Deno.test("parseMountOptions() accepts mount-s3 syntax variants and renders sorted args", () => {
  const o = parseMountOptions([
    "allow-delete",
    "--uid=1000",
    "gid 2000",
    " prefix=env=prod/ ",
    "--region us-west-2",
    "",
  ]);
  assert.deepEqual(renderArgs(o), [
    "--allow-delete",
    "--gid=2000",
    "--prefix=env=prod/",
    "--region=us-west-2",
    "--uid=1000",
  ]);
});

Deno.test("parseMountOptions() rejects with InvalidArgument naming the option", async (t) => {
  const cases: [string[], RegExp][] = [
    [
      ["endpoint-url=http://x"],
      /"endpoint-url=http:\/\/x" is not allowed: a volume's own endpoint comes from its node-publish Secret \(key endpoint\)/,
    ],
    [["--profile=p"], /"--profile=p" is not allowed: AWS profiles/],
    [["foreground"], /"foreground" is not allowed/],
    [["-o allow_other"], /"-o allow_other" is not allowed: FUSE -o/],
    [["rw"], /Mount option "rw" is not supported/],
    [["uid=-1"], /"uid=-1" is invalid/],
    [["dir-mode=999"], /"dir-mode=999" is invalid: must be an octal mode/],
    [["prefix=/abs/"], /"prefix=\/abs\/" is invalid/],
    [["prefix=no-slash"], /"prefix=no-slash" is invalid/],
    [["prefix=a/../"], /must not contain/],
    [["read-only=yes"], /"read-only" takes no value/],
    [["region"], /"region" needs a value/],
    [["uid=1", "uid=2"], /"uid" is given more than once/],
    [["sse=rot13"], /must be aws:kms/],
    [["cache=/tmp/x\n--endpoint-url=http://evil"], /contains control characters/],
    [["cache=\u0000"], /contains control characters/],
    [["region=us-east-1\r"], /contains control characters/],
    [[`cache=${"a".repeat(300)}`], /must be a path of at most 256/],
  ];
  for (const [flags, re] of cases) {
    await t.step(flags.join(" "), () => {
      assert.throws(
        () => parseMountOptions(flags),
        (e: unknown) => e instanceof CsiError && e.code === 3 && re.test(e.message),
      );
    });
  }
});
