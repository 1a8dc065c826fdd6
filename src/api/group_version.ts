/**
 * API group and version of the project's custom resources. The group equals the CSI driver name,
 * as in the upstream design.
 *
 * @module
 */
import { DRIVER_NAME } from "../util/version.ts";

/** API group of our CRDs. */
export const GROUP = DRIVER_NAME;
/** The served and stored version. */
export const VERSION = "v2";
/** `apiVersion` field value of our custom resources. */
export const API_VERSION = `${GROUP}/${VERSION}`;
