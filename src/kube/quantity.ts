/**
 * Kubernetes resource quantities (`100m`, `64Mi`, `1.5`, `2e3`): parsed to a number so values can
 * be compared (request ≤ limit, capacity ≥ request) and checked for sign, and bytes written back
 * in binary SI form.
 *
 * @module
 */

/** A quantity, as a pattern JavaScript and RE2 (CEL) read alike. */
export const QUANTITY_PATTERN =
  "^([+-]?(?:[0-9]+(?:[.][0-9]*)?|[.][0-9]+))(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+)?$";
const QUANTITY = new RegExp(QUANTITY_PATTERN);

const SUFFIX: Readonly<Record<string, number>> = {
  "": 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The value of `text` in base units (cores, bytes), or undefined when it is not a quantity. */
export function parseQuantity(text: string): number | undefined {
  const m = QUANTITY.exec(text.trim());
  if (!m) return undefined;
  const n = Number(m[1]);
  const suffix = m[2] ?? "";
  if (/^[eE]/.test(suffix)) return n * 10 ** Number(suffix.slice(1));
  return n * SUFFIX[suffix]!;
}

/** A non-negative quantity in base units, or undefined (not a quantity, or negative). */
export function nonNegativeQuantity(text: string): number | undefined {
  const n = parseQuantity(text);
  return n !== undefined && n >= 0 ? n : undefined;
}

const BINARY_SUFFIXES = ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"] as const;

/** Bytes as a binary SI quantity (`5Gi`), or plain bytes when no suffix divides them. */
export function bytesQuantity(bytes: number): string {
  for (const suffix of BINARY_SUFFIXES) {
    const f = SUFFIX[suffix]!;
    if (bytes >= f && bytes % f === 0) return `${bytes / f}${suffix}`;
  }
  return String(bytes);
}
