/**
 * client-node informers (`makeInformer`, `ListWatch`) against the emulator: add/update/delete,
 * recovery after the server closes all watches, and relist after a 410 on resume.
 */
import assert from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { type ApiServer, startApiServer } from "../testbed/apiserver/api_server.ts";
import { waitFor } from "./_helpers.ts";

interface Seen {
  readonly type: string;
  readonly name: string;
  readonly data?: Record<string, string> | undefined;
}

async function withInformer(
  fn: (api: ApiServer, core: k8s.CoreV1Api, seen: Seen[], errors: unknown[]) => Promise<void>,
): Promise<void> {
  const api = await startApiServer({ port: 0 });
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const informer = k8s.makeInformer(
    kc,
    "/api/v1/namespaces/default/configmaps",
    () => core.listNamespacedConfigMap({ namespace: "default" }),
  );
  const seen: Seen[] = [];
  const errors: unknown[] = [];
  for (const type of ["add", "update", "delete"] as const) {
    informer.on(
      type,
      (o: k8s.V1ConfigMap) => seen.push({ type, name: o.metadata!.name!, data: o.data }),
    );
  }
  informer.on("error", (err: unknown) => errors.push(err));
  await informer.start();
  try {
    await fn(api, core, seen, errors);
  } finally {
    await informer.stop();
    await api.stop();
  }
}

const has = (seen: Seen[], type: string, name: string) =>
  seen.some((s) => s.type === type && s.name === name);

Deno.test({
  name: "makeInformer() sees add, update and delete from the emulator",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withInformer(async (_api, core, seen, errors) => {
      await core.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: "a" }, data: { x: "1" } },
      });
      await waitFor("add of a", () => has(seen, "add", "a"));
      await core.patchNamespacedConfigMap(
        { namespace: "default", name: "a", body: { data: { x: "2" } } },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      );
      await waitFor(
        "update of a",
        () => seen.some((s) => s.type === "update" && s.data?.x === "2"),
      );
      await core.deleteNamespacedConfigMap({ namespace: "default", name: "a" });
      await waitFor("delete of a", () => has(seen, "delete", "a"));
      assert.deepEqual(errors, []);
    }),
});

Deno.test({
  name: "makeInformer() resumes after the server closes all watches",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withInformer(async (api, core, seen, errors) => {
      await core.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: "before" } },
      });
      await waitFor("add of before", () => has(seen, "add", "before"));
      api.closeAllWatches();
      await core.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: "after" } },
      });
      await waitFor("add of after", () => has(seen, "add", "after"));
      assert.equal(
        seen.filter((s) => s.name === "before" && s.type === "add").length,
        1,
        "no duplicate add",
      );
      assert.deepEqual(errors, []);
    }),
});

Deno.test({
  name: "makeInformer() relists after a 410 on resume",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withInformer(async (api, core, seen, errors) => {
      await core.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: "gone" } },
      });
      await waitFor("add of gone", () => has(seen, "add", "gone"));
      // Record whether resumes are refused with 410.
      const hub = api.store.hub;
      const replay = hub.replay.bind(hub);
      let expiredResumes = 0;
      hub.replay = (sk, rv) => {
        try {
          return replay(sk, rv);
        } catch (err) {
          expiredResumes++;
          throw err;
        }
      };
      // While the watch is down: one object appears, one disappears; history is lost.
      api.closeAllWatches();
      const ns = api.cluster.registry.find("", "v1", "configmaps")!;
      api.cluster.create(ns, "default", { metadata: { name: "missed" } }, { manager: "test" });
      api.cluster.delete(ns, "default", "gone");
      api.expireHistory();
      const listsBefore = seen.length;
      await waitFor("relist sees missed", () => has(seen, "add", "missed"));
      await waitFor("relist drops gone", () => has(seen, "delete", "gone"));
      assert.ok(seen.length > listsBefore);
      assert.equal(expiredResumes, 1, "the resume got a 410 ERROR event");
      assert.deepEqual(errors, []);
    }),
});

Deno.test({
  name: "ListWatch with a field selector follows pods of one node",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const api = await startApiServer({ port: 0 });
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(api.kubeconfigPath);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const lw = new k8s.ListWatch<k8s.V1Pod>(
      "/api/v1/pods",
      new k8s.Watch(kc),
      () => core.listPodForAllNamespaces({ fieldSelector: "spec.nodeName=n1" }),
      true,
      undefined,
      "spec.nodeName=n1",
    );
    try {
      const pod = (name: string, nodeName: string): k8s.V1Pod => ({
        metadata: { name },
        spec: { nodeName, containers: [{ name: "c", image: "busybox" }] },
      });
      await core.createNamespacedPod({ namespace: "default", body: pod("on-n1", "n1") });
      await core.createNamespacedPod({ namespace: "default", body: pod("on-n2", "n2") });
      await waitFor("pod on n1 cached", () => lw.list().some((p) => p.metadata?.name === "on-n1"));
      assert.deepEqual(lw.list().map((p) => p.metadata?.name), ["on-n1"]);
      await core.deleteNamespacedPod({
        namespace: "default",
        name: "on-n1",
        gracePeriodSeconds: 0,
      });
      await waitFor("pod on n1 removed", () => lw.list().length === 0);
    } finally {
      await lw.stop();
      await api.stop();
    }
  },
});
