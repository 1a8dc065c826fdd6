/**
 * Container image references (`[registry[:port]/]path[:tag][@sha256:<64 hex>]`), checked against
 * the grammar of `distribution/reference` so a typo fails before anything is applied rather than
 * as `ErrImagePull` on every node.
 *
 * @module
 */

const COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const DOMAIN =
  "(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?";
const REFERENCE = new RegExp(
  `^(?:(${DOMAIN})/)?(${COMPONENT}(?:/${COMPONENT})*)(?::([\\w][\\w.-]{0,127}))?(?:@(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128}))?$`,
);

/** A parsed image reference. */
export interface ImageRef {
  /** Registry host[:port]. */
  readonly domain?: string;
  /** Repository path. */
  readonly path: string;
  /** Tag, if any. */
  readonly tag?: string;
  /** Digest (`sha256:…`), if any. */
  readonly digest?: string;
}

/** Parse `ref`; undefined when it is not a valid reference. */
export function parseImageRef(ref: string): ImageRef | undefined {
  const m = REFERENCE.exec(ref);
  if (!m) return undefined;
  // A first component with a dot, colon or "localhost" is a registry; otherwise it is a path.
  return {
    ...(m[1] ? { domain: m[1] } : {}),
    path: m[2]!,
    ...(m[3] ? { tag: m[3] } : {}),
    ...(m[4] ? { digest: m[4] } : {}),
  };
}

/**
 * Why `ref` cannot be used as a container image, or undefined when it can. A tag or a digest is
 * required: an implicit `latest` makes rollouts unreproducible.
 */
export function imageProblem(ref: string): string | undefined {
  if (ref.length > 4096) return "is longer than 4096 characters";
  if (ref.length > 255 && !ref.includes("@")) return "is longer than 255 characters";
  const parsed = parseImageRef(ref);
  if (!parsed) {
    return `"${ref}" is not an image reference like registry.example.com/path/name:tag or name@sha256:<64 hex digits>`;
  }
  if (!parsed.tag && !parsed.digest) return `"${ref}" needs a tag or a digest (no implicit latest)`;
  return undefined;
}
