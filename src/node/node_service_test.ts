import assert from "node:assert/strict";
import { NodeService } from "./node_service.ts";

Deno.test("NodeService.nodeGetInfo() returns the node id without topology", async () => {
  assert.deepEqual(await new NodeService({ nodeId: "worker-1" }).nodeGetInfo(), {
    nodeId: "worker-1",
  });
});
