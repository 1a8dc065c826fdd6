/**
 * JSON merge patch (RFC 7386, `application/merge-patch+json`): objects merge recursively, `null`
 * deletes a key, and every other value (lists included) replaces the target whole.
 *
 * @module
 */
import { clone, isObject } from "./json_value.ts";

/** Apply `patch` to `target` and return the result; `target` is not modified. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
