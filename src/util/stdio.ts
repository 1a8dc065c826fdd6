/**
 * Direct writes to stdout/stderr for CLI output that is not a log record (`--help`, `--version`,
 * the one-line fatal error). Everything else goes through `log.ts`.
 *
 * @module
 */
const encoder = new TextEncoder();

/** Write `text` to stdout, synchronously. */
export function writeStdout(text: string): void {
  Deno.stdout.writeSync(encoder.encode(text));
}

/** Write `text` to stderr, synchronously. */
export function writeStderr(text: string): void {
  Deno.stderr.writeSync(encoder.encode(text));
}
