/**
 * The last lines of a process's log, for the conformance tier's failure reports (the node plugin's
 * and the controller's stderr are collected in memory and would otherwise be lost with them).
 *
 * @module
 */

/** The last `maxLines` lines of `text`, at most `maxChars` characters, colours stripped. */
export function logTail(text: string, maxLines = 60, maxChars = 8000): string {
  // deno-lint-ignore no-control-regex
  const plain = text.replace(/\x1b\[[0-9;]*m/g, "").replace(/\n+$/, "");
  if (plain === "") return "";
  const lines = plain.split("\n");
  let tail = lines.slice(-maxLines).join("\n");
  let cut = lines.length > maxLines;
  if (tail.length > maxChars) {
    tail = tail.slice(-maxChars);
    tail = tail.slice(tail.indexOf("\n") + 1);
    cut = true;
  }
  return cut ? `[...]\n${tail}` : tail;
}

/** The log tails of the tier's two driver processes. */
export interface LogTails {
  /** The node plugin's stderr. */
  node: string;
  /** `s3-csi-controller`'s stderr. */
  controller: string;
}

/** The tails as one printable block. */
export function formatLogTails(logs: LogTails, why: string): string {
  const part = (name: string, text: string) =>
    `--- ${name}: last lines of its log ---\n${text === "" ? "(nothing logged)" : text}`;
  return [
    `=== ${why}`,
    part("node plugin (s3-csi-node)", logs.node),
    part("controller (s3-csi-controller)", logs.controller),
    "===",
  ].join("\n");
}
