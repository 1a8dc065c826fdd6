/**
 * `/proc/<pid>/stat` parsed: the fields the scripts and tests use. The command name (field 2) is
 * in parentheses and may hold spaces or parentheses, so fields are counted from its last `)`.
 *
 * @module
 */

/** The fields of one `/proc/<pid>/stat` line that are used here. */
export interface ProcStat {
  /** `R`, `S`, `D`, `Z`, … (field 3). */
  readonly state: string;
  /** Parent pid (field 4). */
  readonly ppid: number;
  /** CPU seconds in user and kernel mode (fields 14 and 15; USER_HZ is 100 on Linux). */
  readonly cpuSeconds: number;
  /** Start time after boot in clock ticks, as written (field 22): with the pid, a process's identity. */
  readonly startTime: string;
}

/** Parse one `/proc/<pid>/stat` text. @throws {Error} when it is not one. */
export function parseProcStat(text: string): ProcStat {
  const close = text.lastIndexOf(")");
  const rest = close < 0 ? [] : text.slice(close + 2).trim().split(" ");
  if (rest.length < 20) throw new Error(`not a /proc/<pid>/stat line: ${text.slice(0, 80)}`);
  return {
    state: rest[0]!,
    ppid: Number(rest[1]),
    cpuSeconds: (Number(rest[11]) + Number(rest[12])) / 100,
    startTime: rest[19]!,
  };
}

/** {@link parseProcStat} of a live process, or undefined when it is gone or unreadable. */
export async function readProcStat(pid: number): Promise<ProcStat | undefined> {
  const text = await Deno.readTextFile(`/proc/${pid}/stat`).catch(() => undefined);
  return text === undefined ? undefined : parseProcStat(text);
}
