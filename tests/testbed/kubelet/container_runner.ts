/**
 * One container's life on an emulated node: start the process (env resolved, image mapped, paths
 * rewritten, identity applied), record running and terminated states, and restart it per the pod's
 * `restartPolicy` with CrashLoopBackOff back-off, `Started`/`BackOff`/`Failed` events and a status
 * sync on every change — until it is done or the pod terminates.
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import { SECRETS } from "../../../src/kube/resources.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import { Backoff, type BackoffSettings, RESTART_BACKOFF } from "./backoff.ts";
import { ContainerProcess } from "./container_process.ts";
import {
  buildProcessSpec,
  ContainerConfigError,
  type ImageMapping,
  resolveEnv,
  type ValueLookup,
} from "./container_spec.ts";
import type { ApiEventRecorder } from "../../../src/kube/event_recorder.ts";
import type { Container, Pod } from "./k8s_types.ts";
import { type ContainerRecord, terminatedReason } from "./pod_status.ts";
import { pause } from "../../../src/util/sleep.ts";
import { CONFIGMAPS } from "../../../src/kube/resources.ts";

/** What a container loop needs from its pod worker. */
export interface ContainerRunContext {
  /** The latest pod object. */
  readonly pod: () => Pod;
  readonly client: KubeClient;
  readonly events: ApiEventRecorder;
  readonly nodeName: string;
  readonly mountpointImage: ImageMapping;
  readonly restartBackoff?: BackoffSettings;
  /** Log file of a run. */
  readonly logPath: (container: string, restart: number) => string;
  /** Aborts when the pod terminates; the loop then returns after the process exits. */
  readonly terminate: AbortSignal;
  /** Queue a status update. */
  readonly sync: () => void;
  /** Running processes by container name (the worker stops them on termination). */
  readonly procs: Map<string, ContainerProcess>;
}

const log = logger("kubelet", "pod");

/**
 * Run container `c` (record `rec`, volumes at `paths`) until done or the pod terminates; resolves
 * with the last exit code (undefined when it never ran). `policy` overrides the pod's restart
 * policy (init containers restart on failure unless the pod says `Never`).
 */
export async function runContainer(
  ctx: ContainerRunContext,
  c: Container,
  rec: ContainerRecord,
  paths: Map<string, string>,
  policy: "Always" | "OnFailure" | "Never" = ctx.pod().spec.restartPolicy ?? "Always",
): Promise<number | undefined> {
  let last: number | undefined;
  const term = ctx.terminate;
  const backoff = new Backoff(ctx.restartBackoff ?? RESTART_BACKOFF);
  const lookup: ValueLookup = async (kind, ns, name, key) => {
    const obj = await ctx.client.get<{ data?: Record<string, string> }>(
      kind === "Secret" ? SECRETS : CONFIGMAPS,
      name,
      ns,
    );
    const v = obj?.data?.[key];
    if (v === undefined || kind === "ConfigMap") return v;
    return new TextDecoder().decode(Uint8Array.from(atob(v), (ch) => ch.charCodeAt(0)));
  };
  while (!term.aborted) {
    let proc: ContainerProcess;
    try {
      const env = await resolveEnv(ctx.pod(), c, lookup);
      const spec = buildProcessSpec({
        pod: ctx.pod(),
        container: c,
        volumePaths: paths,
        env,
        mountpointImage: ctx.mountpointImage,
        defaultCwd: "/",
      });
      proc = await ContainerProcess.start(spec, ctx.logPath(c.name, rec.restartCount));
    } catch (err) {
      const reason = err instanceof ContainerConfigError
        ? "CreateContainerConfigError"
        : "RunContainerError";
      rec.state = { waiting: { reason, message: errorMessage(err) } };
      ctx.sync();
      await ctx.events.record(ctx.pod(), "Warning", "Failed", `Error: ${errorMessage(err)}`);
      await pause(backoff.next(), term);
      continue;
    }
    ctx.procs.set(c.name, proc);
    rec.state = { running: { startedAt: proc.startedAt } };
    rec.started = true;
    rec.containerID = `emulator://${ctx.nodeName}/${proc.pid}`;
    ctx.sync();
    void ctx.events.record(ctx.pod(), "Normal", "Started", `Started container ${c.name}`);
    const exit = await proc.exited;
    ctx.procs.delete(c.name);
    last = exit.exitCode;
    rec.state = {
      terminated: {
        exitCode: exit.exitCode,
        reason: terminatedReason(exit.exitCode),
        startedAt: exit.startedAt,
        finishedAt: exit.finishedAt,
        containerID: rec.containerID,
      },
    };
    log.info("Container {container} of pod {pod} exited with {code}", {
      container: c.name,
      pod: `${ctx.pod().metadata.namespace}/${ctx.pod().metadata.name}`,
      code: exit.exitCode,
    });
    if (term.aborted) return last;
    const restart = policy === "Always" || (policy === "OnFailure" && exit.exitCode !== 0);
    if (!restart) {
      ctx.sync();
      return last;
    }
    const delay = backoff.next();
    rec.lastState = rec.state;
    rec.state = {
      waiting: {
        reason: "CrashLoopBackOff",
        message: `back-off ${
          Math.round(delay / 1000)
        }s restarting failed container=${c.name} pod=${ctx.pod().metadata.name}_${ctx.pod().metadata.namespace}(${ctx.pod().metadata.uid})`,
      },
    };
    ctx.sync();
    void ctx.events.record(
      ctx.pod(),
      "Warning",
      "BackOff",
      "Back-off restarting failed container " +
        `${c.name} in pod ${ctx.pod().metadata.name}_${ctx.pod().metadata.namespace}(${ctx.pod().metadata.uid})`,
    );
    await pause(delay, term);
    if (term.aborted) return last;
    rec.restartCount++;
  }
  return last;
}
