/**
 * The tier cleans up after itself when its own setup fails: here the controller's API emulator
 * does not start. Needs what the node harness needs (root, FUSE, mount-s3, setpriv, RGW); not
 * csi-sanity, which is never reached.
 */
import { testOrSkip } from "../_helpers.ts";
import assert from "node:assert/strict";
import { skipReason } from "../testbed/harness/node_harness.ts";
import { ConformanceError, runConformance } from "./_conformance.ts";

testOrSkip(skipReason({ defaultEngine: "mount-s3" }), {
  name: "conformance: no temp dir is left when the controller's API emulator fails to start",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const parent = await Deno.makeTempDir({ prefix: "s3csi-conformance-setup-test-" });
    try {
      let attempts = 0;
      await assert.rejects(
        runConformance({
          bin: "/nonexistent/csi-sanity",
          skip: [],
          log: () => {},
          tempParent: parent,
          startApi: () => {
            attempts++;
            return Promise.reject(new Error("injected: the API emulator cannot listen"));
          },
        }),
        (err: unknown) =>
          err instanceof ConformanceError && /injected: the API emulator/.test(err.message),
      );
      assert.equal(attempts, 1);
      const left: string[] = [];
      for await (const e of Deno.readDir(parent)) left.push(e.name);
      assert.deepEqual(left, [], `the tier left ${left.join(", ")} in its temp dir's parent`);
    } finally {
      // Empty when the test passes; never recursive: otherwise it stays for inspection and the
      // assertion above says what is in it.
      await Deno.remove(parent).catch(() => {});
    }
  },
});
