/**
 * Clusters for the deploy tests: a fresh API emulator, or the shared real kube-apiserver tier when
 * `KUBE_REAL_KUBECONFIG` is set. On the shared cluster every namespace and PriorityClass name gets
 * a unique suffix (other tests use `mount-s3-critical`), and the CRD is never purged.
 *
 * @module
 */
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import type { Manifest } from "../../src/deploy/k8s_objects.ts";
import { resourceOf } from "../../src/deploy/kinds.ts";
import { renderManifests } from "../../src/deploy/render.ts";
import { resolveValues } from "../../src/deploy/values_validate.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { realTierSkipReason, ROOT, runToEnd, testOrSkip } from "../_helpers.ts";

/** A cluster and the values the tests deploy to it. */
export interface DeployCluster extends AsyncDisposable {
  readonly name: "emulator" | "real";
  readonly kubeconfig: string;
  readonly client: RestKubeClient;
  /** `--set` text making names unique on a shared cluster ("" on the emulator). */
  readonly set: string;
  /** The objects those values render. */
  readonly objects: Manifest[];
}

/** The clusters every deploy variant runs on; the real one is skipped (with the reason) where absent. */
export function deployClusterKinds(): ("emulator" | "real")[] {
  return ["emulator", "real"];
}

/** Register the `kind` variant of a test: skipped with the reason when the real tier is absent. */
export function deployTest(kind: "emulator" | "real", name: string, fn: () => Promise<void>): void {
  testOrSkip(kind === "real" ? realTierSkipReason() : undefined, { name, fn });
}

/** Start or connect to a cluster. */
export async function deployCluster(kind: "emulator" | "real"): Promise<DeployCluster> {
  let kubeconfig: string;
  let stop = () => Promise.resolve();
  let set = "";
  if (kind === "emulator") {
    // https, as a real cluster: the CLI refuses plain http unless told otherwise.
    const server = await startApiServer({ podTerminationMs: 0, tls: true });
    kubeconfig = server.kubeconfigPath;
    stop = async () => {
      await server.stop();
      await Deno.remove(kubeconfig).catch(() => {});
    };
  } else {
    kubeconfig = Deno.env.get("KUBE_REAL_KUBECONFIG")!;
    const s = crypto.randomUUID().slice(0, 6);
    set = [
      `namespace=deploy-${s}`,
      `mountpointPod.namespace=deploy-${s}-mp`,
      `mountpointPod.priorityClassName=deploy-${s}-critical`,
      `mountpointPod.preemptingPriorityClassName=deploy-${s}-preempting`,
      `mountpointPod.headroomPriorityClassName=deploy-${s}-headroom`,
    ].join(",");
  }
  const client = new RestKubeClient(kubeConfigFromFile(kubeconfig));
  const objects = renderManifests(resolveValues(setObject(set)));
  return {
    name: kind,
    kubeconfig,
    client,
    set,
    objects,
    async [Symbol.asyncDispose]() {
      if (kind === "real") {
        // Leave nothing behind on the shared cluster, whatever the test did.
        await runTask("undeploy", kubeconfig, ["--set", set, "--force", "--no-wait"]);
        const mp = objects.find((o) => o.kind === "Namespace" && o.metadata.name.endsWith("-mp"));
        if (mp) await client.delete(resourceOf(mp), mp.metadata.name).catch(() => {});
      }
      await client.close();
      await stop();
    },
  };
}

function setObject(set: string): Record<string, unknown> {
  const out: Record<string, Record<string, string> | string> = {};
  for (const pair of set.split(",").filter(Boolean)) {
    const [path, value] = pair.split("=") as [string, string];
    const [a, b] = path.split(".") as [string, string | undefined];
    if (b) out[a] = { ...(out[a] as Record<string, string> ?? {}), [b]: value };
    else out[a] = value;
  }
  return out;
}

/** Run `deno task <render|deploy|undeploy>` (the entrypoint, as the task does) against `kubeconfig`. */
export async function runTask(
  task: "render" | "deploy" | "undeploy",
  kubeconfig: string,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  const r = await runToEnd(Deno.execPath(), [
    "run",
    "-A",
    "--quiet",
    `${ROOT}src/cmd/${task}/main.ts`,
    ...args,
  ], {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    KUBECONFIG: kubeconfig,
  });
  return { ...r, ms: Math.round(performance.now() - started) };
}

/** `resourceVersion` and `generation` of every object, or "absent". */
export async function snapshot(
  client: RestKubeClient,
  objects: readonly Manifest[],
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const o of objects) {
    const got = await client.get(resourceOf(o), o.metadata.name, o.metadata.namespace).catch(
      () => undefined,
    );
    const key = `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`;
    out[key] = got
      ? `rv=${got.metadata?.resourceVersion} gen=${
        (got.metadata as { generation?: number }).generation ?? "-"
      }`
      : "absent";
  }
  return out;
}
