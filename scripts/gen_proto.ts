/**
 * Generate `src/csi/gen/` from `proto/csi/v1/csi.proto`:
 * - `csi_descriptor.ts`: the protobufjs JSON descriptor, loaded at run time by `@grpc/proto-loader`
 *   (`fromJSON`), so the binaries need no `.proto` file on disk and bundle into one file;
 * - `csi_types.ts`: TypeScript interfaces for every message and enum, shaped as proto-loader
 *   delivers them with {@link LOADER_OPTIONS} (camelCase fields, enums as names, int64 as number),
 *   plus one handler interface per service.
 *
 * Usage: `deno run -A scripts/gen_proto.ts [--out DIR]` (DIR defaults to src/csi/gen).
 *
 * @module
 */
import protobuf from "protobufjs";
import { parseArgs } from "node:util";
import { fromFileUrl, generatedHeader, writeGenerated } from "./_gen_util.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url));
const PROTO = `${ROOT}proto/csi/v1/csi.proto`;
const PACKAGE = "csi.v1";

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function lowerFirst(name: string): string {
  return name.charAt(0).toLowerCase() + name.slice(1);
}

/** Flattened TS name for a reflected type: `csi.v1.VolumeCapability.AccessMode` → `VolumeCapability_AccessMode`. */
function tsName(t: protobuf.ReflectionObject): string {
  const full = t.fullName.replace(/^\./, "");
  if (full.startsWith(`${PACKAGE}.`)) return full.slice(PACKAGE.length + 1).replace(/\./g, "_");
  return full.replace(/^google\.protobuf\./, "Google_").replace(/\./g, "_");
}

const SCALARS: Readonly<Record<string, string>> = {
  double: "number",
  float: "number",
  int32: "number",
  uint32: "number",
  sint32: "number",
  fixed32: "number",
  sfixed32: "number",
  int64: "number",
  uint64: "number",
  sint64: "number",
  fixed64: "number",
  sfixed64: "number",
  bool: "boolean",
  string: "string",
  bytes: "Uint8Array",
};

function fieldType(f: protobuf.Field): string {
  const base = f.resolvedType ? tsName(f.resolvedType) : SCALARS[f.type] ?? "unknown";
  if (f instanceof protobuf.MapField) return `Record<string, ${base}>`;
  return f.repeated ? `${base}[]` : base;
}

function doc(comment: string | null | undefined, indent = ""): string {
  if (!comment) return "";
  return `${indent}/** ${comment.replace(/\s+/g, " ").trim()} */\n`;
}

function collect(ns: protobuf.NamespaceBase, out: protobuf.ReflectionObject[]): void {
  for (const obj of ns.nestedArray) {
    if (
      obj instanceof protobuf.Type || obj instanceof protobuf.Enum ||
      obj instanceof protobuf.Service
    ) out.push(obj);
    if (obj instanceof protobuf.Namespace || obj instanceof protobuf.Type) collect(obj, out);
  }
}

function emitTypes(root: protobuf.Root): string {
  const objs: protobuf.ReflectionObject[] = [];
  collect(root, objs);
  const parts: string[] = [
    generatedHeader("scripts/gen_proto.ts"),
    "// deno-lint-ignore-file\n",
    'import type { CallContext } from "../call_context.ts";\n',
  ];
  for (const obj of objs) {
    if (obj instanceof protobuf.Enum) {
      const names = Object.keys(obj.values);
      parts.push(
        `export type ${tsName(obj)} = ${names.map((n) => JSON.stringify(n)).join(" | ")};\n`,
      );
      parts.push(
        `export const ${tsName(obj)}_VALUES = ${JSON.stringify(obj.values)} as const;\n`,
      );
    } else if (obj instanceof protobuf.Type) {
      const lines = [`export interface ${tsName(obj)} {`];
      for (const f of obj.fieldsArray) {
        lines.push(`${doc(f.comment, "  ")}  ${camel(f.name)}?: ${fieldType(f)} | null;`);
      }
      for (const o of obj.oneofsArray) {
        if (o.name.startsWith("_")) continue;
        lines.push(`  /** Name of the member of oneof \`${o.name}\` that is set. */`);
        lines.push(
          `  ${camel(o.name)}?: ${o.oneof.map((n) => JSON.stringify(camel(n))).join(" | ")};`,
        );
      }
      lines.push("}\n");
      parts.push(lines.join("\n"));
    } else if (obj instanceof protobuf.Service) {
      const lines = [`export interface ${obj.name}Handlers {`];
      for (const m of obj.methodsArray) {
        const req = tsName(root.lookupType(m.requestType));
        const res = tsName(root.lookupType(m.responseType));
        lines.push(
          `  ${lowerFirst(m.name)}(request: ${req}, context?: CallContext): Promise<${res}>;`,
        );
      }
      lines.push("}\n");
      const methods = obj.methodsArray.map((m) =>
        `  ${lowerFirst(m.name)}: ${JSON.stringify(m.name)},`
      );
      lines.push(`export const ${obj.name}_METHODS = {\n${methods.join("\n")}\n} as const;\n`);
      parts.push(lines.join("\n"));
    }
  }
  return parts.join("\n");
}

function emitDescriptor(root: protobuf.Root): string {
  const json = JSON.stringify(root.toJSON({ keepComments: false }), null, 1);
  return `${generatedHeader("scripts/gen_proto.ts")}// deno-lint-ignore-file
/** protobufjs JSON descriptor of \`proto/csi/v1/csi.proto\` (with the google.protobuf types it imports). */
export const CSI_DESCRIPTOR: Record<string, unknown> = ${json};
`;
}

/** Load and resolve the CSI proto. */
export function loadCsiProto(): protobuf.Root {
  const root = new protobuf.Root();
  root.loadSync(PROTO, { keepCase: false, alternateCommentMode: true });
  root.resolveAll();
  return root;
}

/** Generate both files into `outDir`; returns the paths written. */
export function generateProto(outDir: string): string[] {
  const root = loadCsiProto();
  return [
    writeGenerated(`${outDir}/csi_types.ts`, emitTypes(root)),
    writeGenerated(`${outDir}/csi_descriptor.ts`, emitDescriptor(root)),
  ];
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: { out: { type: "string" } } });
  for (const p of generateProto(values.out ?? `${ROOT}src/csi/gen`)) {
    Deno.stderr.writeSync(new TextEncoder().encode(`wrote ${p}\n`));
  }
}
