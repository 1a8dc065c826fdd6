/**
 * Test clusters for controller tests: the API emulator (always) and a real kube-apiserver when
 * `KUBE_REAL_KUBECONFIG` names its kubeconfig (else those variants are reported as skipped) (the tier started by `tests/testbed/services/kube_real/start.sh`).
 * Both are reached through the same client code production uses.
 *
 * @module
 */
import { s3paCrd } from "../../../src/api/mountpoint_s3_pod_attachment.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import {
  CRDS,
  NAMESPACES,
  PRIORITY_CLASSES,
  SERVICE_ACCOUNTS,
} from "../../../src/kube/resources.ts";
import { RestKubeClient } from "../../../src/kube/rest_client.ts";
import { kubeConfigFromFile } from "../../../src/kube/kube_config.ts";
import { startApiServer } from "../apiserver/api_server.ts";
import { realTierSkipReason, testOrSkip, waitFor } from "../../_helpers.ts";

/** A cluster to test against. */
export interface TestCluster extends AsyncDisposable {
  readonly name: "emulator" | "real";
  readonly kubeconfig: string;
  readonly client: RestKubeClient;
  /** A namespace unique to this test, for workloads. */
  readonly namespace: string;
  /** The Mountpoint Pod namespace, unique to this test. */
  readonly mpNamespace: string;
}

/** The clusters every variant runs on; the real one is skipped (with the reason) where absent. */
export function clusterKinds(): ("emulator" | "real")[] {
  return ["emulator", "real"];
}

/**
 * Register the `kind` variant of a test: always registered, skipped with the reason when the real
 * tier is not available (`KUBE_REAL_KUBECONFIG`).
 */
export function clusterTest(
  kind: "emulator" | "real",
  name: string,
  fn: (t: Deno.TestContext) => Promise<void>,
): void {
  testOrSkip(kind === "real" ? realTierSkipReason() : undefined, { name, fn });
}

/** Create the S3PA CRD if missing and wait until it is Established. */
export async function ensureCrd(client: KubeClient): Promise<void> {
  const crd = s3paCrd() as { metadata: { name: string } };
  if (!(await client.get(CRDS, crd.metadata.name))) {
    await client.create(CRDS, crd as never).catch((err) => {
      if (!/already exists/i.test(String(err))) throw err;
    });
  }
  await waitFor("the CRD to be served", async () => {
    const got = await client.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
      CRDS,
      crd.metadata.name,
    );
    return got?.status?.conditions?.some((c) => c.type === "Established" && c.status === "True") ??
      false;
  }, { timeoutMs: 20_000, intervalMs: 100 });
}

/** Start (emulator) or connect to (real) a cluster, with the CRD and two fresh namespaces. */
export async function testCluster(kind: "emulator" | "real"): Promise<TestCluster> {
  let kubeconfig: string;
  let stop = () => Promise.resolve();
  if (kind === "emulator") {
    const server = await startApiServer({ podTerminationMs: 0 });
    kubeconfig = server.kubeconfigPath;
    stop = async () => {
      await server.stop();
      await Deno.remove(kubeconfig).catch(() => {});
    };
  } else {
    kubeconfig = Deno.env.get("KUBE_REAL_KUBECONFIG")!;
  }
  const client = new RestKubeClient(kubeConfigFromFile(kubeconfig));
  await ensureCrd(client);
  // The PriorityClass of Mountpoint Pods, as the deployment creates it (the real API server's
  // Priority admission refuses pods naming a missing class).
  await client.create(PRIORITY_CLASSES, {
    metadata: { name: "mount-s3-critical" },
    value: 1_000_000_000,
    description: "Mountpoint Pods",
  } as never).catch((err) => {
    if (!/already exists/i.test(String(err))) throw err;
  });
  const suffix = crypto.randomUUID().slice(0, 8);
  const namespace = `w-${suffix}`;
  const mpNamespace = `mp-${suffix}`;
  for (const ns of [namespace, mpNamespace]) {
    await client.create(NAMESPACES, { metadata: { name: ns } });
  }
  if (kind === "real") {
    // The ServiceAccount admission plugin needs each namespace's "default" account (made by
    // kube-controller-manager) before it admits pods.
    for (const ns of [namespace, mpNamespace]) {
      await waitFor(
        `serviceaccount ${ns}/default`,
        () => client.get(SERVICE_ACCOUNTS, "default", ns),
        {
          timeoutMs: 30_000,
          intervalMs: 200,
        },
      );
    }
  }
  return {
    name: kind,
    kubeconfig,
    client,
    namespace,
    mpNamespace,
    async [Symbol.asyncDispose]() {
      if (kind === "real") {
        for (const ns of [namespace, mpNamespace]) {
          await client.delete(NAMESPACES, ns).catch(() => {});
        }
      }
      await stop();
    },
  };
}
