/**
 * Where user overrides come from: YAML/JSON values files (`--values a.yaml,b.json`, later files
 * win) and `--set path=value` pairs (`--set image.tag=1.2.3,node.logLevel=debug`; `\,` is a literal
 * comma; a value starting with `[` or `{` is parsed as JSON). Shape and content are checked by
 * `resolveValues`.
 *
 * @module
 */
import { parse } from "yaml";
import { ConfigError, errorMessage } from "../util/errors.ts";
import { resolveValues } from "./values_validate.ts";
import type { DeployValues } from "./values.ts";

/** Read one values file. @throws {ConfigError} when it cannot be read or parsed or is not a map. */
export function readValuesFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (err) {
    throw new ConfigError(`values file "${path}" cannot be read: ${errorMessage(err)}`);
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new ConfigError(`values file "${path}" is not valid YAML/JSON: ${errorMessage(err)}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) {
    throw new ConfigError(`values file "${path}" must contain a map of values at the top level`);
  }
  return doc as Record<string, unknown>;
}

/** Split on commas not preceded by a backslash. */
function splitPairs(text: string): string[] {
  const out: string[] = [];
  let cur = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\\" && text[i + 1] === ",") {
      cur += ",";
      i++;
    } else if (c === ",") {
      out.push(cur);
      cur = "";
    } else cur += c;
  }
  out.push(cur);
  return out.filter((s) => s.trim() !== "");
}

/** Parse `--set` text into a nested override object. @throws {ConfigError} */
export function parseSetFlag(text: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const pair of splitPairs(text)) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new ConfigError(`--set "${pair}" must look like path.to.key=value`);
    const path = pair.slice(0, eq).trim().split(".");
    const raw = pair.slice(eq + 1);
    let value: unknown = raw;
    if (/^\s*[[{]/.test(raw)) {
      try {
        value = JSON.parse(raw);
      } catch (err) {
        throw new ConfigError(
          `--set ${path.join(".")}: value is not valid JSON: ${errorMessage(err)}`,
        );
      }
    }
    let node = root;
    for (const key of path.slice(0, -1)) {
      if (!key) throw new ConfigError(`--set "${pair}": empty key in the path`);
      const next = node[key];
      if (typeof next !== "object" || next === null || Array.isArray(next)) node[key] = {};
      node = node[key] as Record<string, unknown>;
    }
    node[path[path.length - 1]!] = value;
  }
  return root;
}

/**
 * Values from files (comma-separated paths, in order) then `--set`; `version` (`S3CSI_VERSION`)
 * first sets `version` and the default `image.tag`. @throws {ConfigError}
 */
export function loadValues(
  files: string | undefined,
  set: string | undefined,
  version?: string,
): DeployValues {
  const overrides: unknown[] = version ? [{ version, image: { tag: version } }] : [];
  for (const f of (files ?? "").split(",").map((s) => s.trim()).filter(Boolean)) {
    overrides.push(readValuesFile(f));
  }
  if (set) overrides.push(parseSetFlag(set));
  return resolveValues(...overrides);
}
