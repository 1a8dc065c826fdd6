import assert from "node:assert/strict";
import { helpText, type OptionSpecs, parseConfig, parseDuration } from "./config.ts";
import { ConfigError } from "./errors.ts";

const SPECS = {
  endpoint: {
    type: "string",
    env: "CSI_ENDPOINT",
    default: "unix:///csi/csi.sock",
    description: "Endpoint",
  },
  "node-id": { type: "string", env: "CSI_NODE_NAME", required: true, description: "Node" },
  verbose: { type: "boolean", env: "VERBOSE", default: false, description: "Verbose" },
  workers: {
    type: "integer",
    default: 2,
    description: "Workers",
    validate: (n: number) => (n > 0 ? undefined : "must be positive"),
  },
  timeout: { type: "duration", env: "TIMEOUT", default: 30_000, description: "Timeout" },
  mode: { type: "string", choices: ["a", "b"], description: "Mode" },
} as const satisfies OptionSpecs;

const noEnv = () => undefined;

function run(args: string[], env: Record<string, string> = {}) {
  const r = parseConfig(SPECS, args, (n) => env[n]);
  assert.equal(r.kind, "run");
  return (r as Extract<typeof r, { kind: "run" }>).config;
}

function fails(args: string[], env: Record<string, string>, pattern: RegExp) {
  assert.throws(() => parseConfig(SPECS, args, (n) => env[n]), (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${err}`);
    assert.match(err.message, pattern);
    assert.ok(!err.message.includes("\n"), "message must be one line");
    return true;
  });
}

Deno.test("parseConfig() applies flag > env > default precedence", () => {
  const c = run(["--node-id", "n1", "--timeout=2m"], {
    CSI_ENDPOINT: "unix:///x.sock",
    TIMEOUT: "5s",
  });
  assert.equal(c["node-id"], "n1");
  assert.equal(c.endpoint, "unix:///x.sock");
  assert.equal(c.timeout, 120_000);
  assert.equal(c.verbose, false);
  assert.equal(c.workers, 2);
  assert.equal(c.mode, undefined);
});

Deno.test("parseConfig() reads booleans from env and flags", () => {
  assert.equal(run(["--node-id=n", "--verbose"]).verbose, true);
  assert.equal(run(["--node-id=n"], { VERBOSE: "true" }).verbose, true);
  assert.equal(run(["--node-id=n", "--verbose=false"], { VERBOSE: "true" }).verbose, false);
  assert.equal(run(["--node-id=n", "--verbose=true"]).verbose, true);
  fails(
    ["--node-id=n", "--verbose=sure"],
    {},
    /--verbose \(env VERBOSE\) must be true or false, got "sure"/,
  );
  fails(["--node-id=n"], { VERBOSE: "maybe" }, /VERBOSE\) must be true or false, got "maybe"/);
});

Deno.test("parseConfig() reports bad input with one clear line", async (t) => {
  const cases: [string, string[], Record<string, string>, RegExp][] = [
    ["unknown flag", ["--node-id=n", "--bogus"], {}, /Unknown option '--bogus'.*--help/],
    ["missing required", [], {}, /Missing required setting --node-id \(env CSI_NODE_NAME\)/],
    [
      "bad integer",
      ["--node-id=n", "--workers=two"],
      {},
      /--workers must be a whole number, got "two"/,
    ],
    ["validator", ["--node-id=n", "--workers=0"], {}, /--workers must be positive/],
    ["bad duration", ["--node-id=n"], { TIMEOUT: "soon" }, /TIMEOUT\) must be a duration/],
    ["bad choice", ["--node-id=n", "--mode=c"], {}, /--mode must be one of a, b, got "c"/],
    ["positional", ["--node-id=n", "extra"], {}, /extra/],
  ];
  for (const [name, args, env, pattern] of cases) {
    await t.step(name, () => fails(args, env, pattern));
  }
});

Deno.test("parseConfig() short-circuits --help and --version", () => {
  assert.deepEqual(parseConfig(SPECS, ["--help"], noEnv), { kind: "help" });
  assert.deepEqual(parseConfig(SPECS, ["-h"], noEnv), { kind: "help" });
  assert.deepEqual(parseConfig(SPECS, ["--version"], noEnv), { kind: "version" });
});

Deno.test("parseDuration() accepts units and rejects garbage", () => {
  assert.equal(parseDuration("250ms"), 250);
  assert.equal(parseDuration("1.5s"), 1500);
  assert.equal(parseDuration("2m"), 120_000);
  assert.equal(parseDuration("1h"), 3_600_000);
  assert.equal(parseDuration("10"), undefined);
  assert.equal(parseDuration("-1s"), undefined);
});

Deno.test("helpText() lists every flag with env, default and required marks", () => {
  const text = helpText("bin", "does things", SPECS);
  assert.match(
    text,
    /--endpoint=<string>\s+Endpoint \[env CSI_ENDPOINT, default unix:\/\/\/csi\/csi.sock\]/,
  );
  assert.match(text, /--node-id=<string>\s+Node \[env CSI_NODE_NAME, required\]/);
  assert.match(text, /--mode=<a\|b>/);
  assert.match(text, /--timeout=<duration>\s+Timeout \[env TIMEOUT, default 30000ms\]/);
});

Deno.test("parseConfig() reads an empty variable as empty for strings and unset for other types", () => {
  const c = run(["--node-id=n"], { CSI_ENDPOINT: "", TIMEOUT: "" });
  assert.equal(c.endpoint, "");
  assert.equal(c.timeout, 30_000);
  fails([], { CSI_NODE_NAME: "" }, /Missing required setting --node-id/);
});
