/**
 * The shared skeleton of every `src/cmd/<binary>/main.ts`: parse flags and environment, answer
 * `--help`/`--version`, configure logging, run the binary's `run()` with an AbortSignal that fires on
 * SIGTERM/SIGINT, and turn a failure into a one-line error and a non-zero exit code.
 *
 * @module
 */
import {
  type ConfigResult,
  helpText,
  type OptionSpecs,
  parseConfig,
  type ParsedConfig,
} from "./config.ts";
import { ConfigError, errorMessage, EXIT_CONFIG } from "./errors.ts";
import { configureLogging, LOG_OPTIONS, logger } from "./log.ts";
import { writeStderr, writeStdout } from "./stdio.ts";
import { versionLine } from "./version.ts";

/** Exit code for an unexpected runtime failure. */
export const EXIT_FAILURE = 1;

/** Description of a binary for {@link runCli}. */
export interface CliSpec<T extends OptionSpecs> {
  /** Binary name as shown in help and errors, e.g. `s3-csi-node`. */
  readonly binary: string;
  /** One-line summary for `--help`. */
  readonly summary: string;
  /** The binary's own settings; the logging flags are added automatically. */
  readonly options: T;
  /**
   * Run the binary until `signal` aborts (SIGTERM/SIGINT) or the work ends. Resolve with the
   * process exit code. Throw {@link ConfigError} for a configuration problem found late
   * (e.g. a kubeconfig that cannot be loaded).
   */
  run(config: ParsedConfig<T & typeof LOG_OPTIONS>, signal: AbortSignal): Promise<number>;
}

/** Parse, configure and run. Returns the exit code; the entrypoint calls `Deno.exit` with it. */
export async function runCli<T extends OptionSpecs>(
  spec: CliSpec<T>,
  args: readonly string[] = Deno.args,
  env: (name: string) => string | undefined = (n) => Deno.env.get(n),
): Promise<number> {
  const specs = { ...spec.options, ...LOG_OPTIONS } as T & typeof LOG_OPTIONS;
  let parsed: ConfigResult<T & typeof LOG_OPTIONS>;
  try {
    parsed = parseConfig(specs, args, env);
  } catch (err) {
    writeStderr(`${spec.binary}: error: ${errorMessage(err)}\n`);
    return EXIT_CONFIG;
  }
  if (parsed.kind === "help") {
    writeStdout(helpText(spec.binary, spec.summary, specs));
    return 0;
  }
  if (parsed.kind === "version") {
    writeStdout(`${versionLine(spec.binary)}\n`);
    return 0;
  }
  const config = parsed.config;
  const logConfig = config as unknown as ParsedConfig<typeof LOG_OPTIONS>;
  configureLogging({ level: logConfig["log-level"], format: logConfig["log-format"] });
  const log = logger("cli");
  const controller = new AbortController();
  const onSignal = (name: Deno.Signal) => () => {
    log.info("Received {signal}, shutting down", { signal: name });
    controller.abort(new Error(`received ${name}`));
  };
  const handlers = (["SIGTERM", "SIGINT"] as const).map((s) => [s, onSignal(s)] as const);
  for (const [s, h] of handlers) Deno.addSignalListener(s, h);
  try {
    return await spec.run(config, controller.signal);
  } catch (err) {
    if (controller.signal.aborted && !(err instanceof ConfigError)) {
      // SIGTERM/SIGINT arrived during start-up: a normal stop, not a failure.
      log.info("{binary} stopped before start-up finished", { binary: spec.binary });
      return 0;
    }
    if (err instanceof ConfigError) {
      writeStderr(`${spec.binary}: error: ${errorMessage(err)}\n`);
      return EXIT_CONFIG;
    }
    log.fatal("{binary} failed: {error}", { binary: spec.binary, error: errorMessage(err) });
    writeStderr(`${spec.binary}: error: ${errorMessage(err)}\n`);
    return EXIT_FAILURE;
  } finally {
    for (const [s, h] of handlers) Deno.removeSignalListener(s, h);
  }
}
