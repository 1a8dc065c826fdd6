/**
 * Several volumes in one pod: two buckets and a prefix mount (volume attribute `prefix`) of the
 * first bucket; each write lands in the right bucket/prefix, and the prefix mount shows only the
 * keys under its prefix.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Scenario, unique } from "./cluster.ts";

/** The scenario. */
export const MULTI_VOLUME: Scenario = {
  name: "several volumes in one pod",
  nodes: 1,
  async run(e, step) {
    await step("three volumes (two buckets, one prefix mount) in one pod", async () => {
      const b1 = await e.bucket("multi-a");
      const b2 = await e.bucket("multi-b");
      await e.put(b1, "root.txt", "root of a\n");
      await e.put(b1, "team/inside.txt", "inside the prefix\n");
      const v1 = `multi-a-${unique()}`;
      const v2 = `multi-b-${unique()}`;
      const v3 = `multi-p-${unique()}`;
      await e.staticVolume(v1, { bucket: b1 });
      await e.staticVolume(v2, { bucket: b2 });
      await e.staticVolume(v3, { bucket: b1, attributes: { prefix: "team/" } });
      try {
        const out = await e.run({
          name: `multi-${unique()}`,
          volumes: [
            { claim: v1, mountPath: "/one" },
            { claim: v2, mountPath: "/two" },
            { claim: v3, mountPath: "/three" },
          ],
          script:
            "set -e; echo 1 > /one/one.txt; echo 2 > /two/two.txt; echo 3 > /three/three.txt; " +
            "echo LIST3; ls -A /three; echo END; cat /three/inside.txt",
        });
        assert.equal(await e.get(b1, "one.txt"), "1\n");
        assert.equal(await e.get(b2, "two.txt"), "2\n");
        assert.equal(await e.get(b1, "team/three.txt"), "3\n");
        assert.deepEqual(await e.keys(b2), ["two.txt"]);
        const listing = (/LIST3\n([\s\S]*?)END/.exec(out)?.[1] ?? "").trim().split("\n").sort();
        assert.deepEqual(listing, ["inside.txt", "three.txt"], `prefix mount listing: ${out}`);
        assert.match(out, /inside the prefix/);
        await e.waitReleased();
        assert.deepEqual(await e.fuseMounts(), [], "all three unmounted once released");
      } finally {
        for (const v of [v1, v2, v3]) await e.dropVolume(v);
        await e.dropBucket(b1);
        await e.dropBucket(b2);
      }
    });
  },
};
