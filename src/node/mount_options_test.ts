import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import {
  MAX_MOUNT_OPTIONS,
  MOUNT_OPTION_SPECS,
  REFUSED_FORMS,
  SHORT_OPTION_NAMES,
} from "../mppod/mount_option_spec.ts";
import { patternPortabilityProblem } from "../util/value_rules.ts";
import { mountOptionsProblem, parseMountOptions, renderArgs, splitEntry } from "./mount_options.ts";

Deno.test("parseMountOptions() accepts mount-s3 syntax variants and renders sorted args", () => {
  const o = parseMountOptions([
    "allow-delete",
    "--uid=1000",
    "gid 2000",
    " prefix=env=prod/ ",
    "--region us-west-2",
    "-d",
    "",
  ]);
  assert.deepEqual(renderArgs(o), [
    "--allow-delete",
    "--debug",
    "--gid=2000",
    "--prefix=env=prod/",
    "--region=us-west-2",
    "--uid=1000",
  ]);
});

Deno.test("splitEntry() reads name and value as upstream (and CEL's trim) does", () => {
  assert.deepEqual(splitEntry(" --region  us-east-1 "), {
    trimmed: "--region  us-east-1",
    name: "region",
    value: "us-east-1",
  });
  assert.deepEqual(splitEntry("-f"), { trimmed: "-f", name: "foreground", value: "" });
  assert.deepEqual(splitEntry("\u00a0prefix=a=b/\u3000"), {
    trimmed: "prefix=a=b/",
    name: "prefix",
    value: "a=b/",
  });
  assert.deepEqual(splitEntry("=x"), { trimmed: "=x", name: "", value: "x" });
});

Deno.test("every option row: examples are accepted, invalid values and refused names are refused with the reason", async (t) => {
  for (const spec of MOUNT_OPTION_SPECS) {
    await t.step(spec.name, () => {
      const withNeeds = (entry: string) => [entry, ...(spec.needs ?? [])];
      if (spec.status === "volume") {
        for (
          const entry of spec.value ? (spec.examples ?? []).map((v) => `${spec.name}=${v}`) : [
            spec.name,
          ]
        ) {
          assert.equal(mountOptionsProblem(withNeeds(entry)), undefined, entry);
        }
        assert.ok(!spec.value || (spec.examples ?? []).length > 0, "a value option needs examples");
        for (const bad of spec.invalid ?? []) {
          const problem = mountOptionsProblem(withNeeds(`${spec.name}=${bad}`));
          assert.match(
            problem ?? "",
            new RegExp(`^Mount option "${spec.name}=.*" is invalid: `),
            `${spec.name}=${bad}`,
          );
        }
      } else if (spec.status === "ignored") {
        assert.deepEqual([...parseMountOptions([spec.name, "allow-delete"]).keys()], [
          "allow-delete",
        ]);
      } else {
        assert.ok(spec.reason, "a refused option says why");
        const entry = spec.value ? `--${spec.name}=x` : `--${spec.name}`;
        assert.equal(
          mountOptionsProblem([entry]),
          `Mount option "${entry}" is not allowed: ${spec.reason}`,
        );
      }
      for (const c of spec.short ?? []) {
        assert.equal(SHORT_OPTION_NAMES.get(c), spec.name);
        assert.equal(splitEntry(`-${c}`).name, spec.name);
      }
    });
  }
});

Deno.test("the rule patterns compile in Unicode mode and use only syntax RE2 reads alike", () => {
  for (const spec of MOUNT_OPTION_SPECS) {
    for (const rule of spec.value?.rules ?? []) {
      for (const re of [rule.match, rule.reject]) {
        if (re === undefined) continue;
        assert.equal(patternPortabilityProblem(re), undefined, `${spec.name}: ${re}`);
      }
    }
  }
});

Deno.test("parseMountOptions() rejects with InvalidArgument naming the option", async (t) => {
  const cases: [string[], RegExp][] = [
    [
      ["endpoint-url=http://x"],
      /"endpoint-url=http:\/\/x" is not allowed: the S3 endpoint is set.*node-publish Secret \(key endpoint\)/,
    ],
    [["--profile=p"], /"--profile=p" is not allowed: credentials come from the driver/],
    [["-o allow_other"], /"-o allow_other" is not allowed: fstab-style -o options/],
    [["session-dir=/x"], /"session-dir=\/x" is not allowed: internal/],
    [["resume"], /"resume" is not allowed: internal/],
    [["max-memory-target=1024"], /renamed: use memory-target=<MiB>/],
    [["-l /var/log"], /"-l \/var\/log" is not allowed: the engine logs to the Mountpoint Pod/],
    [["rw"], /Mount option "rw" is not supported/],
    [["uid=-1"], /"uid=-1" is invalid/],
    [["uid=0"], /"uid=0" is invalid: must be a user id from 1/],
    [["gid 0"], /"gid=0" is invalid: must be a group id from 1/],
    [["dir-mode=999"], /"dir-mode=999" is invalid: must be an octal mode/],
    [["prefix=/abs/"], /"prefix=\/abs\/" is invalid/],
    [["prefix=no-slash"], /"prefix=no-slash" is invalid/],
    [["prefix=a/../"], /must not contain/],
    [["read-only=yes"], /"read-only" takes no value/],
    [["region"], /"region" needs a value/],
    [["uid=1", "uid=2"], /"uid" is given more than once/],
    [["debug", "-d"], /"debug" is given more than once/],
    [["-f", "foreground"], /"foreground" is given more than once/],
    [["sse=rot13"], /must be aws:kms/],
    [["upload-checksums=sha1"], /must be crc32c, crc64nvme or off/],
    [["memory-target=256"], /at least 512/],
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

Deno.test("foreground and -f are accepted and dropped (as upstream drivers do)", () => {
  assert.deepEqual(renderArgs(parseMountOptions(["-f", "read-only"])), ["--read-only"]);
  assert.deepEqual(renderArgs(parseMountOptions(["--foreground"])), []);
});

Deno.test("control characters are named without them; the first problem wins", () => {
  assert.equal(
    mountOptionsProblem(["allow-delete", "\nregion=x\t"]),
    `Mount option "region=x" contains control characters (e.g. a newline): remove them`,
  );
  assert.equal(
    mountOptionsProblem(["rw", "uid=0"]),
    mountOptionsProblem(["rw"]),
  );
  assert.equal(
    mountOptionsProblem(["-o", "x"]),
    `Mount option "-o" is not allowed: ${REFUSED_FORMS.o}`,
  );
});

Deno.test("a volume has at most 64 mount options", () => {
  const many = Array.from({ length: MAX_MOUNT_OPTIONS + 1 }, () => "");
  assert.equal(
    mountOptionsProblem(many),
    `A volume may have at most ${MAX_MOUNT_OPTIONS} mount options (it has ${
      MAX_MOUNT_OPTIONS + 1
    }): remove some`,
  );
  assert.equal(mountOptionsProblem(many.slice(1)), undefined);
});

Deno.test("parseMountOptions(): OTLP metrics export of a volume", () => {
  const o = parseMountOptions([
    "otlp-endpoint=http://otel.monitoring:4318",
    "otlp-export-interval=15",
  ]);
  assert.deepEqual(renderArgs(o), [
    "--otlp-endpoint=http://otel.monitoring:4318",
    "--otlp-export-interval=15",
  ]);
  for (
    const bad of ["otlp-endpoint=otel:4318", "otlp-endpoint=http://u@h", "otlp-export-interval=0"]
  ) {
    assert.throws(() => parseMountOptions([bad]), (e: unknown) => e instanceof CsiError, bad);
  }
});
