/** The shared {@link Sys} contract against the real kernel (root + /dev/fuse). */
import { sysContract } from "../../src/sys/sys_contract.ts";
import { RealSys } from "../../src/sys/sys.ts";
import { rootSkipReason, tempDir } from "../testbed/harness/sys_helpers.ts";

sysContract("RealSys", async () => {
  const dir = await tempDir("contract");
  return {
    sys: new RealSys(),
    dir: dir.path,
    mkdir: (path: string) => Deno.mkdir(path),
    [Symbol.asyncDispose]: () => dir[Symbol.asyncDispose](),
  };
}, { skipReason: rootSkipReason() });
