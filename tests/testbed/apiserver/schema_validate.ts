/**
 * Validation, pruning and defaulting of custom resources against their CRD's structural OpenAPI v3
 * schema, as described in
 * https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/
 * Supported keywords: `type`, `properties`, `required`, `additionalProperties`, `items`, `enum`,
 * `pattern`, `minLength`, `maxLength`, `minimum`, `maximum`, `minItems`, `maxItems`,
 * `format: date-time`, `nullable`, `default` and `x-kubernetes-preserve-unknown-fields`.
 * `metadata` is never pruned.
 *
 * @module
 */
import { clone, isObject, type JsonObject } from "./json_value.ts";
import type { StatusCause } from "./status_errors.ts";

/** Result of {@link validateCustomResource}. */
export interface SchemaResult {
  /** Pruned and defaulted copy of the input. */
  readonly value: JsonObject;
  /** Validation failures (empty = valid). */
  readonly causes: StatusCause[];
  /** Paths of unknown fields that were pruned (e.g. `spec.extra`). */
  readonly unknownFields: string[];
}

/** A (structural) OpenAPI v3 schema object. */
export type Schema = Record<string, unknown>;

function typeName(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

const DATE_TIME_REGEXP = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

class Walker {
  readonly causes: StatusCause[] = [];
  readonly unknown: string[] = [];

  walk(value: unknown, schema: Schema, path: string): unknown {
    if (value === null && schema.nullable) return value;
    const type = schema.type as string | undefined;
    const actual = typeName(value);
    if (type && !(type === actual || (type === "number" && actual === "integer"))) {
      this.causes.push({
        reason: "FieldValueTypeInvalid",
        message: `Invalid value: "${actual}": ${path} in body must be of type ${type}: "${actual}"`,
        field: path,
      });
      return value;
    }
    if (Array.isArray(schema.enum) && !schema.enum.some((e) => e === value)) {
      const allowed = schema.enum.map((e) => JSON.stringify(e)).join(", ");
      this.causes.push({
        reason: "FieldValueNotSupported",
        message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${allowed}`,
        field: path,
      });
    }
    if (typeof value === "string") this.checkString(value, schema, path);
    if (typeof value === "number") this.checkNumber(value, schema, path);
    if (Array.isArray(value)) return this.walkArray(value, schema, path);
    if (isObject(value)) return this.walkObject(value, schema, path);
    return value;
  }

  checkString(value: string, schema: Schema, path: string): void {
    if (typeof schema.minLength === "number" && value.length < schema.minLength) {
      this.causes.push({
        reason: "FieldValueInvalid",
        message:
          `Invalid value: "${value}": ${path} in body should be at least ${schema.minLength} chars long`,
        field: path,
      });
    }
    if (typeof schema.maxLength === "number" && value.length > schema.maxLength) {
      this.causes.push({
        reason: "FieldValueTooLong",
        message: `Too long: may not be more than ${schema.maxLength} bytes`,
        field: path,
      });
    }
    if (typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(value)) {
      this.causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${value}": ${path} in body should match '${schema.pattern}'`,
        field: path,
      });
    }
    if (schema.format === "date-time" && !DATE_TIME_REGEXP.test(value)) {
      this.causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${value}": ${path} in body must be of type date-time: "${value}"`,
        field: path,
      });
    }
  }

  checkNumber(value: number, schema: Schema, path: string): void {
    if (typeof schema.minimum === "number" && value < schema.minimum) {
      this.causes.push({
        reason: "FieldValueInvalid",
        message:
          `Invalid value: ${value}: ${path} in body should be greater than or equal to ${schema.minimum}`,
        field: path,
      });
    }
    if (typeof schema.maximum === "number" && value > schema.maximum) {
      this.causes.push({
        reason: "FieldValueInvalid",
        message:
          `Invalid value: ${value}: ${path} in body should be less than or equal to ${schema.maximum}`,
        field: path,
      });
    }
  }

  walkArray(value: unknown[], schema: Schema, path: string): unknown[] {
    if (typeof schema.minItems === "number" && value.length < schema.minItems) {
      this.causes.push({
        reason: "FieldValueInvalid",
        message:
          `Invalid value: ${value.length}: ${path} in body should have at least ${schema.minItems} items`,
        field: path,
      });
    }
    if (typeof schema.maxItems === "number" && value.length > schema.maxItems) {
      this.causes.push({
        reason: "FieldValueTooMany",
        message: `Too many: ${value.length}: must have at most ${schema.maxItems} items`,
        field: path,
      });
    }
    const items = isObject(schema.items) ? schema.items : undefined;
    return items ? value.map((v, i) => this.walk(v, items, `${path}[${i}]`)) : value;
  }

  walkObject(value: JsonObject, schema: Schema, path: string): JsonObject {
    const props = isObject(schema.properties)
      ? schema.properties as Record<string, Schema>
      : undefined;
    const additional = schema.additionalProperties;
    const preserve = schema["x-kubernetes-preserve-unknown-fields"] === true;
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(value)) {
      const child = path ? `${path}.${k}` : k;
      const propSchema = props?.[k];
      if (propSchema) out[k] = this.walk(v, propSchema, child);
      else if (isObject(additional)) out[k] = this.walk(v, additional, child);
      else if (preserve || additional === true || (!props && additional === undefined)) out[k] = v;
      else if (path === "" && (k === "apiVersion" || k === "kind" || k === "metadata")) out[k] = v;
      else this.unknown.push(child);
    }
    for (const [k, s] of Object.entries(props ?? {})) {
      if (out[k] === undefined && s.default !== undefined) out[k] = clone(s.default);
    }
    for (const r of (Array.isArray(schema.required) ? schema.required : []) as string[]) {
      if (out[r] === undefined) {
        this.causes.push({
          reason: "FieldValueRequired",
          message: "Required value",
          field: path ? `${path}.${r}` : r,
        });
      }
    }
    return out;
  }
}

/**
 * Validate `obj` against `schema`; prune unknown fields and apply defaults.
 * `status` is pruned when the schema does not declare it, as a real API server prunes it.
 */
export function validateCustomResource(obj: JsonObject, schema: Schema | undefined): SchemaResult {
  if (!schema) return { value: clone(obj), causes: [], unknownFields: [] };
  const w = new Walker();
  const value = w.walk(obj, { ...schema, type: "object" }, "") as JsonObject;
  if (isObject(value.metadata)) value.metadata = obj.metadata;
  return { value, causes: w.causes, unknownFields: w.unknown };
}
