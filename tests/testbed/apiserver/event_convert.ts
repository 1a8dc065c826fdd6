/**
 * core/v1 and events.k8s.io/v1 Events share one storage, as on a real API server. Objects are
 * stored in the core/v1 shape and converted when read or written through events.k8s.io/v1.
 *
 * @module
 */
import type { JsonObject } from "./json_value.ts";

/** [events.k8s.io/v1 field, core/v1 field] pairs that differ in name. */
const RENAMES: readonly (readonly [string, string])[] = [
  ["regarding", "involvedObject"],
  ["note", "message"],
  ["reportingController", "reportingComponent"],
  ["deprecatedSource", "source"],
  ["deprecatedFirstTimestamp", "firstTimestamp"],
  ["deprecatedLastTimestamp", "lastTimestamp"],
  ["deprecatedCount", "count"],
];

function rename(
  obj: JsonObject,
  pairs: readonly (readonly [string, string])[],
  apiVersion: string,
): JsonObject {
  const out: JsonObject = { ...obj, apiVersion };
  for (const [from, to] of pairs) {
    if (from in out) {
      out[to] = out[from];
      delete out[from];
    }
  }
  return out;
}

/** Convert an events.k8s.io/v1 Event to the stored core/v1 shape. */
export function eventToCore(obj: JsonObject): JsonObject {
  return rename(obj, RENAMES, "v1");
}

/** Convert a stored core/v1 Event to events.k8s.io/v1. */
export function eventToEventsV1(obj: JsonObject): JsonObject {
  return rename(obj, RENAMES.map(([a, b]) => [b, a] as const), "events.k8s.io/v1");
}
