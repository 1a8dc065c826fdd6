import assert from "node:assert/strict";
import { IdentityService } from "./identity_service.ts";
import { DRIVER_NAME, DRIVER_VERSION } from "../util/version.ts";

Deno.test("IdentityService.getPluginInfo() names the driver and its version", async () => {
  const info = await new IdentityService({ controllerService: false }).getPluginInfo();
  assert.equal(info.name, DRIVER_NAME);
  assert.equal(info.name, "s3.csi.scality.com");
  assert.equal(info.vendorVersion, DRIVER_VERSION);
  assert.match(DRIVER_VERSION, /^\d+\.\d+\.\d+/);
});

Deno.test("IdentityService.getPluginCapabilities() advertises the controller only where it runs", async () => {
  assert.deepEqual(
    await new IdentityService({ controllerService: false }).getPluginCapabilities(),
    {
      capabilities: [],
    },
  );
  assert.deepEqual(await new IdentityService({ controllerService: true }).getPluginCapabilities(), {
    capabilities: [{ service: { type: "CONTROLLER_SERVICE" } }],
  });
});

Deno.test("IdentityService.probe() reports the readiness check", async () => {
  assert.deepEqual(await new IdentityService({ controllerService: false }).probe(), {
    ready: { value: true },
  });
  let ready = false;
  const svc = new IdentityService({ controllerService: false, ready: () => ready });
  assert.deepEqual(await svc.probe(), { ready: { value: false } });
  ready = true;
  assert.deepEqual(await svc.probe(), { ready: { value: true } });
});
