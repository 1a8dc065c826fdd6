import assert from "node:assert/strict";
import { engineMetricsLabels, metricsLabelsProblem } from "./engine_metrics.ts";

Deno.test("engineMetricsLabels(): volume, volume id and Mountpoint Pod", () => {
  assert.deepEqual(engineMetricsLabels("mp-1", "pv-1", "vol,1"), {
    "volume": "pv-1",
    "volume_id": "vol,1",
    "mountpoint_pod": "mp-1",
  });
});

Deno.test("metricsLabelsProblem(): what the engine accepts, and why not", () => {
  assert.equal(
    metricsLabelsProblem(JSON.stringify(engineMetricsLabels("a", "b", 'c"='))),
    undefined,
  );
  assert.equal(metricsLabelsProblem("{}"), undefined);
  for (
    const [bad, why] of [
      ["volume=pv", /must be a JSON object/],
      ['["a"]', /must be a JSON object/],
      ['{"a":1}', /label "a" must be a string/],
      ['{"__a":"x"}', /label name "__a"/],
      ['{"le":"x"}', /label name "le"/],
      ['{"a-b":"x"}', /label name "a-b"/],
      ['{"a":"x\\ny"}', /without control characters/],
      [JSON.stringify({ a: "é".repeat(513) }), /at most 1024 bytes/],
    ] as const
  ) {
    assert.match(metricsLabelsProblem(bad) ?? "accepted", why, bad);
  }
});
