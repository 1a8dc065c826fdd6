import assert from "node:assert/strict";
import { parseProcStat } from "./proc_stat.ts";

Deno.test("parseProcStat counts fields after the last ')' of the command name", () => {
  const line =
    "4242 (a ) b (x)) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 987654 1000 10 " +
    "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  assert.deepEqual(parseProcStat(line), {
    state: "S",
    ppid: 17,
    cpuSeconds: 3.25,
    startTime: "987654",
  });
});

Deno.test("parseProcStat refuses what is not a stat line", () => {
  assert.throws(() => parseProcStat("hello"), /not a \/proc\/<pid>\/stat line/);
  assert.throws(() => parseProcStat("1 (x) S 0"), /not a \/proc\/<pid>\/stat line/);
});
