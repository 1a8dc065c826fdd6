/**
 * CSI Identity service: plugin name and version, capabilities, readiness.
 *
 * @module
 */
import type {
  GetPluginCapabilitiesResponse,
  GetPluginInfoResponse,
  IdentityHandlers,
  PluginCapability,
  ProbeResponse,
} from "./gen/csi_types.ts";
import { DRIVER_NAME, DRIVER_VERSION } from "../util/version.ts";

/** Options of {@link IdentityService}. */
export interface IdentityServiceOptions {
  /** Advertise CONTROLLER_SERVICE: true only in the process that serves the Controller service. */
  readonly controllerService: boolean;
  /** Readiness check used by Probe. @default always ready */
  readonly ready?: () => boolean | Promise<boolean>;
}

/** The Identity service shared by the node plugin and the controller. */
export class IdentityService implements IdentityHandlers {
  readonly #options: IdentityServiceOptions;

  /** Create the service. */
  constructor(options: IdentityServiceOptions) {
    this.#options = options;
  }

  /** Name `s3.csi.scality.com` and the driver version. */
  getPluginInfo(): Promise<GetPluginInfoResponse> {
    return Promise.resolve({ name: DRIVER_NAME, vendorVersion: DRIVER_VERSION, manifest: {} });
  }

  /** CONTROLLER_SERVICE where the controller service runs; nothing else (no topology, no expansion). */
  getPluginCapabilities(): Promise<GetPluginCapabilitiesResponse> {
    const capabilities: PluginCapability[] = this.#options.controllerService
      ? [{ service: { type: "CONTROLLER_SERVICE" } }]
      : [];
    return Promise.resolve({ capabilities });
  }

  /** Ready when the owner's readiness check says so. */
  async probe(): Promise<ProbeResponse> {
    const ready = this.#options.ready ? await this.#options.ready() : true;
    return { ready: { value: ready } };
  }
}
