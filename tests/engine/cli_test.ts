/**
 * The command line of our mount-s3 (needs only the built binary): `--version`, `--help`, and one
 * clear line with exit code 2 for every usage mistake.
 *
 * @module
 */
import assert from "node:assert/strict";
import { engineBin, engineTest, failingEngine } from "../testbed/harness/engine.ts";

const reason = engineBin().reason;

engineTest(
  "engine cli: --version names our version and the Mountpoint libraries",
  reason,
  async () => {
    const r = await failingEngine({ args: ["--version"] });
    assert.equal(r.code, 0);
    assert.match(
      r.stdout.trim(),
      /^mount-s3 \d+\.\d+\.\d+ \(s3\.csi\.scality\.com engine\) mountpoint-s3-fs 0\.11\.0 mountpoint-s3-client 0\.22\.1 mountpoint-s3-crt \d+\.\d+\.\d+$/,
    );
    assert.equal(r.stderr, "");
  },
);

engineTest("engine cli: --help lists the options and exit codes", reason, async () => {
  const r = await failingEngine({ args: ["--help"] });
  assert.equal(r.code, 0);
  for (
    const word of [
      "--allow-delete",
      "--cache",
      "--metadata-ttl",
      "/dev/fd/N",
      "Exit codes",
      "AWS_CA_BUNDLE",
    ]
  ) {
    assert.ok(r.stdout.includes(word), word);
  }
});

engineTest(
  "engine cli: bad command lines exit 2 with one line naming the problem",
  reason,
  async () => {
    const cases: [string[], RegExp][] = [
      [["bucket", "/mnt", "--frobnicate"], /unknown option '--frobnicate'/],
      [
        ["bucket", "/mnt", "--profile=dev"],
        /option '--profile' is not supported: credentials come from the driver, the volume's secret or the workload's ServiceAccount/,
      ],
      [["bucket", "/mnt", "--read-only=yes"], /option '--read-only' takes no value/],
      [
        ["bucket", "/mnt", "--part-size=8MiB"],
        /option '--part-size=8MiB' is invalid: must be a size in bytes/,
      ],
      [["bucket", "/mnt", "--metadata-ttl=forever"], /option '--metadata-ttl=forever' is invalid/],
      [["bucket", "/mnt", "--uid"], /option '--uid' needs a value/],
      [["bucket", "/mnt", "--max-cache-size=5"], /'--max-cache-size' needs '--cache=<DIRECTORY>'/],
      [["bucket"], /missing the <MOUNT_POINT> argument/],
      [[], /missing <BUCKET> and <MOUNT_POINT>/],
      [
        ["bucket", "/mnt", "-o", "allow_other"],
        /option '-o' \(fstab-style options\) is not supported/,
      ],
    ];
    for (const [args, line] of cases) {
      const r = await failingEngine({ args });
      const lines = r.stderr.trim().split("\n");
      assert.equal(r.code, 2, `${args.join(" ")}: exit ${r.code}`);
      assert.equal(lines.length, 1, `${args.join(" ")}: ${r.stderr}`);
      assert.match(lines[0]!, /^mount-s3: error: .*; run 'mount-s3 --help' for usage$/);
      assert.match(lines[0]!, line);
      assert.equal(r.stdout, "");
    }
  },
);

engineTest("engine cli: bad environment values exit 2 naming the variable", reason, async () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ AWS_ENDPOINT_URL: "s3.local:9000" }, /AWS_ENDPOINT_URL='s3.local:9000' must be an http/],
    [{ AWS_REGION: "Europe West" }, /AWS_REGION='Europe West' is not a region name/],
    [{ HTTPS_PROXY: "proxy:3128" }, /HTTPS_PROXY='proxy:3128' must be an http/],
    [{ AWS_MAX_ATTEMPTS: "0" }, /AWS_MAX_ATTEMPTS='0' must be a number of attempts/],
  ];
  for (const [env, line] of cases) {
    const r = await failingEngine({
      args: ["bucket", "/tmp"],
      env: { PATH: "/usr/bin:/bin", ...env },
    });
    assert.equal(r.code, 2, `${JSON.stringify(env)}: exit ${r.code} ${r.stderr}`);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, line);
  }
});
