import assert from "node:assert/strict";
import { endpointProblem, parseEndpoint } from "./endpoint.ts";
import { ConfigError } from "../util/errors.ts";

Deno.test("parseEndpoint() accepts unix URLs in both spellings", () => {
  assert.equal(parseEndpoint("unix:///csi/csi.sock"), "/csi/csi.sock");
  assert.equal(
    parseEndpoint("unix:/var/lib/kubelet/plugins/x/csi.sock"),
    "/var/lib/kubelet/plugins/x/csi.sock",
  );
  assert.equal(parseEndpoint("unix:////tmp//a.sock"), "/tmp/a.sock");
});

Deno.test("parseEndpoint() rejects what is not a unix socket file", async (t) => {
  const cases: [string, RegExp][] = [
    ["tcp://127.0.0.1:10000", /must be a unix socket URL/],
    ["/csi/csi.sock", /must be a unix socket URL/],
    ["unix://relative.sock", /must be a unix socket URL/],
    ["unix:///csi/", /names a directory/],
    [`unix:///${"x".repeat(120)}`, /longer than 107 bytes/],
  ];
  for (const [input, pattern] of cases) {
    await t.step(input.slice(0, 30), () => {
      assert.throws(
        () => parseEndpoint(input),
        (e: unknown) => e instanceof ConfigError && pattern.test(e.message),
      );
    });
  }
  assert.match(endpointProblem("tcp://x") ?? "", /^must be a unix socket URL/);
  assert.equal(endpointProblem("unix:///ok.sock"), undefined);
});
