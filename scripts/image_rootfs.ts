/**
 * Root file systems for the images built from this machine's own files (no base image, no package
 * manager inside): ELF programs with the shared libraries `ldd` resolves for them, CA certificates,
 * and minimal `/etc` files, like a distroless base (glibc + libgcc, nothing else).
 *
 * @module
 */
import { dirname } from "node:path";

/** A user of the image's `/etc/passwd` (with a group of the same name and id). */
export interface ImageUser {
  /** Login name. */
  name: string;
  /** uid = gid. */
  id: number;
  /** Home directory. */
  home: string;
}

/** The users of a distroless image: root, nobody and nonroot (65532). */
export const DISTROLESS_USERS: readonly ImageUser[] = [
  { name: "root", id: 0, home: "/root" },
  { name: "nobody", id: 65534, home: "/nonexistent" },
  { name: "nonroot", id: 65532, home: "/home/nonroot" },
];

/** Libraries an ELF program needs, as `ldd` prints them (path as the loader looks it up). */
export function parseLdd(output: string): string[] {
  const libs: string[] = [];
  for (const line of output.split("\n")) {
    const arrow = /=>\s+(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    const bare = /^\s*(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    const m = arrow ?? bare;
    if (m) libs.push(m[1]!);
    else if (/=>\s+not found/.test(line)) {
      throw new Error(`ldd: missing library: ${line.trim()}`);
    }
  }
  return [...new Set(libs)];
}

async function output(cmd: string, args: string[]): Promise<{ code: number; text: string }> {
  const r = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  return { code: r.code, text: dec.decode(r.stdout) + dec.decode(r.stderr) };
}

/** Copies a host file (symlinks followed) to `root` + `dest`, keeping its mode. */
export async function copyInto(root: string, src: string, dest: string = src): Promise<void> {
  const target = `${root}${dest}`;
  await Deno.mkdir(dirname(target), { recursive: true });
  const real = await Deno.realPath(src);
  await Deno.copyFile(real, target);
  const { mode } = await Deno.stat(real);
  if (mode !== null) await Deno.chmod(target, mode & 0o7777);
}

/** The shared libraries of an ELF program (none when it is static). */
export async function sharedLibraries(program: string): Promise<string[]> {
  const { code, text } = await output("ldd", [program]);
  if (/not a dynamic executable|statically linked/.test(text)) return [];
  if (code !== 0) throw new Error(`ldd ${program} failed: ${text.trim()}`);
  return parseLdd(text);
}

/**
 * Copies an ELF program to `root` + `dest` with every shared library it needs (at the paths the
 * loader looks them up). Returns the library paths.
 */
export async function copyElf(root: string, src: string, dest: string): Promise<string[]> {
  await copyInto(root, src, dest);
  const libs = await sharedLibraries(src);
  for (const lib of libs) await copyInto(root, lib);
  return libs;
}

/** Writes `/etc/passwd`, `/etc/group`, `/etc/nsswitch.conf`, and creates `/tmp` (1777). */
export async function writeEtc(root: string, users: readonly ImageUser[]): Promise<void> {
  await Deno.mkdir(`${root}/etc`, { recursive: true });
  const shell = "/sbin/nologin";
  await Deno.writeTextFile(
    `${root}/etc/passwd`,
    users.map((u) => `${u.name}:x:${u.id}:${u.id}:${u.name}:${u.home}:${shell}\n`).join(""),
  );
  await Deno.writeTextFile(
    `${root}/etc/group`,
    users.map((u) => `${u.name}:x:${u.id}:\n`).join(""),
  );
  await Deno.writeTextFile(
    `${root}/etc/nsswitch.conf`,
    "passwd: files\ngroup: files\nhosts: files dns\n",
  );
  await Deno.mkdir(`${root}/tmp`, { recursive: true });
  await Deno.chmod(`${root}/tmp`, 0o1777);
}

/** The host's CA bundle (Debian `ca-certificates`), at the same path in the image. */
export const CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
