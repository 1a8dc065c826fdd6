/**
 * Messages written once and filled in two places: here with values (the node plugin, the
 * provisioner), and as CEL string concatenations in the admission policies that must refuse with
 * the same words (`src/deploy/cel.ts`). A template is text with `{name}` placeholders.
 *
 * @module
 */

const PLACEHOLDER = /\{([A-Za-z][A-Za-z0-9]*)\}/g;

/** One piece of a template: literal text or a placeholder's name. */
export type TemplatePiece = { readonly text: string } | { readonly name: string };

/** The pieces of `template`, in order. */
export function templatePieces(template: string): TemplatePiece[] {
  const out: TemplatePiece[] = [];
  let last = 0;
  for (const m of template.matchAll(PLACEHOLDER)) {
    if (m.index > last) out.push({ text: template.slice(last, m.index) });
    out.push({ name: m[1]! });
    last = m.index + m[0].length;
  }
  if (last < template.length) out.push({ text: template.slice(last) });
  return out;
}

/**
 * `template` with each placeholder replaced by its value (values are not read again).
 * @throws {Error} when a placeholder has no value (a bug)
 */
export function fill(template: string, values: Readonly<Record<string, string | number>>): string {
  return templatePieces(template).map((p) => {
    if ("text" in p) return p.text;
    const v = values[p.name];
    if (v === undefined) throw new Error(`message template: no value for {${p.name}}`);
    return String(v);
  }).join("");
}
