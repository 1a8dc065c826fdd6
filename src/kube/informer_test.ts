import assert from "node:assert/strict";
import { FakeKubeClient } from "./fake_client.ts";
import { Informer } from "./informer.ts";
import { GoneError } from "./errors.ts";
import { PODS } from "./resources.ts";
import type { KubeObject } from "./client.ts";

const pod = (name: string, node = "n1"): KubeObject => ({
  metadata: { name, namespace: "default" },
  spec: { nodeName: node },
});

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

Deno.test("Informer syncs, then follows adds, updates and deletes", async () => {
  const client = new FakeKubeClient();
  await client.create(PODS, pod("a"));
  const seen: string[] = [];
  const informer = new Informer<KubeObject>(client, PODS).on({
    add: (o) => seen.push(`add ${o.metadata?.name}`),
    update: (_, o) => seen.push(`update ${o.metadata?.name}`),
    delete: (o) => seen.push(`delete ${o.metadata?.name}`),
  });
  const ctl = new AbortController();
  const running = informer.run(ctl.signal);
  await informer.waitForSync(1000);
  assert.deepEqual(seen, ["add a"]);
  await client.create(PODS, pod("b"));
  await client.patch(PODS, "a", "default", { metadata: { labels: { x: "1" } } });
  await client.delete(PODS, "b", "default");
  await until(() => seen.length === 4, "events");
  assert.deepEqual(seen, ["add a", "add b", "update a", "delete b"]);
  assert.equal(informer.get("default/a")?.metadata?.labels?.x, "1");
  assert.equal(informer.get("default/b"), undefined);
  ctl.abort();
  await running;
});

Deno.test("Informer filters by field selector and maintains indexes", async () => {
  const client = new FakeKubeClient();
  const informer = new Informer<KubeObject>(client, PODS, { fieldSelector: "spec.nodeName=n1" })
    .addIndex("node", (o) => [String((o.spec as { nodeName?: string })?.nodeName)]);
  const ctl = new AbortController();
  const running = informer.run(ctl.signal);
  await informer.waitForSync(1000);
  await client.create(PODS, pod("a", "n1"));
  await client.create(PODS, pod("b", "n2"));
  await until(() => informer.list().length === 1, "one pod");
  assert.deepEqual(informer.byIndex("node", "n1").map((o) => o.metadata?.name), ["a"]);
  assert.deepEqual(informer.byIndex("node", "n2"), []);
  ctl.abort();
  await running;
});

Deno.test("Informer re-lists after a watch restart and after 410 Gone, reporting what changed meanwhile", async () => {
  const client = new FakeKubeClient();
  await client.create(PODS, pod("a"));
  const deleted: string[] = [];
  const informer = new Informer<KubeObject>(client, PODS).on({
    delete: (o) => deleted.push(o.metadata!.name!),
  });
  const ctl = new AbortController();
  const running = informer.run(ctl.signal);
  await informer.waitForSync(1000);
  // The next watch fails with 410: the informer must re-list and notice "a" vanished.
  let failed = false;
  const watch = client.watch.bind(client);
  client.watch = (r, o, f) => {
    if (!failed) {
      failed = true;
      return Promise.reject(new GoneError(410, "Expired", "too old"));
    }
    return watch(r, o, f);
  };
  await client.delete(PODS, "a", "default");
  client.closeWatches();
  await until(() => deleted.includes("a"), "delete after relist");
  await until(() => informer.lists >= 2, "a re-list");
  await client.create(PODS, pod("c"));
  await until(() => informer.get("default/c") !== undefined, "watch resumed after relist");
  ctl.abort();
  await running;
});

Deno.test("Informer.waitForSync() times out with a clear error", async () => {
  const client = new FakeKubeClient();
  const informer = new Informer<KubeObject>(client, PODS);
  await assert.rejects(
    informer.waitForSync(20),
    /Timed out after 20 ms waiting for the pods cache to sync/,
  );
});
