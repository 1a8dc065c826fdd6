import assert from "node:assert/strict";
import { type NodeLogReader, tailLines } from "./pod_logs.ts";
import { withRouter } from "./_test_fixtures.ts";

type Call = (path: string, init?: RequestInit) => Promise<Response>;
const POD = "/api/v1/namespaces/default/pods";

async function post(call: Call, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await call(path, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  assert.equal(res.status, 201, await res.clone().text());
  return await res.json();
}

async function setStatus(call: Call, name: string, status: unknown): Promise<void> {
  const res = await call(`${POD}/${name}/status`, {
    method: "PATCH",
    body: JSON.stringify({ status }),
    headers: { "content-type": "application/merge-patch+json" },
  });
  assert.equal(res.status, 200, await res.clone().text());
}

/** A kubelet whose logs live in memory: uid/container/(previous|current) → text. */
function memoryKubelet(logs: Map<string, string>): NodeLogReader {
  return {
    readContainerLog: (uid, container, previous, offset) => {
      const text = logs.get(`${uid}/${container}/${previous ? "previous" : "current"}`);
      return Promise.resolve(
        text === undefined ? undefined : new TextEncoder().encode(text).slice(offset),
      );
    },
  };
}

const running = (name: string, restartCount = 0) => ({
  name,
  restartCount,
  state: { running: { startedAt: "2026-01-01T00:00:00Z" } },
  ...(restartCount ? { lastState: { terminated: { exitCode: 1 } } } : {}),
});

async function status(res: Response): Promise<[number, string]> {
  const body = await res.json();
  return [res.status, body.message];
}

Deno.test("pods/log answers the container's log from the node's kubelet; tailLines, limitBytes, previous", () =>
  withRouter(async (call, _c, _stop, podLogs) => {
    const pod = await post(call, POD, {
      metadata: { name: "w" },
      spec: { nodeName: "node-1", containers: [{ name: "main", image: "busybox" }] },
    });
    const uid = (pod.metadata as { uid: string }).uid;
    await setStatus(call, "w", { phase: "Running", containerStatuses: [running("main", 1)] });
    const logs = new Map([
      [`${uid}/main/current`, "one\ntwo\nthree\n"],
      [`${uid}/main/previous`, "crashed\n"],
    ]);
    podLogs.register("node-1", memoryKubelet(logs));
    const all = await call(`${POD}/w/log?container=main`);
    assert.equal(all.status, 200);
    assert.equal(all.headers.get("content-type"), "text/plain");
    assert.equal(await all.text(), "one\ntwo\nthree\n");
    assert.equal(await (await call(`${POD}/w/log`)).text(), "one\ntwo\nthree\n", "one container");
    assert.equal(await (await call(`${POD}/w/log?tailLines=2`)).text(), "two\nthree\n");
    assert.equal(await (await call(`${POD}/w/log?limitBytes=5`)).text(), "one\nt");
    assert.equal(await (await call(`${POD}/w/log?previous=true`)).text(), "crashed\n");
  }));

Deno.test("pods/log errors are the API server's and kubelet's", () =>
  withRouter(async (call, _c, _stop, podLogs) => {
    assert.deepEqual(await status(await call(`${POD}/nope/log`)), [404, 'pods "nope" not found']);
    await post(call, POD, {
      metadata: { name: "two" },
      spec: {
        containers: [{ name: "a", image: "busybox" }, { name: "b", image: "busybox" }],
      },
    });
    assert.deepEqual(await status(await call(`${POD}/two/log`)), [
      400,
      "a container name must be specified for pod two, choose one of: [a b]",
    ]);
    assert.deepEqual(await status(await call(`${POD}/two/log?container=c`)), [
      400,
      "container c is not valid for pod two",
    ]);
    assert.deepEqual(await status(await call(`${POD}/two/log?container=a`)), [
      400,
      "pod two does not have a host assigned",
    ]);
    await post(call, POD, {
      metadata: { name: "waiting" },
      spec: { nodeName: "node-9", containers: [{ name: "main", image: "busybox" }] },
    });
    await setStatus(call, "waiting", {
      phase: "Pending",
      containerStatuses: [{
        name: "main",
        restartCount: 0,
        state: { waiting: { reason: "ContainerCreating" } },
      }],
    });
    assert.deepEqual(await status(await call(`${POD}/waiting/log`)), [
      400,
      'container "main" in pod "waiting" is waiting to start: ContainerCreating',
    ]);
    assert.deepEqual(await status(await call(`${POD}/waiting/log?previous=true`)), [
      400,
      'previous terminated container "main" in pod "waiting" not found',
    ]);
    await setStatus(call, "waiting", { phase: "Running", containerStatuses: [running("main")] });
    const [code, message] = await status(await call(`${POD}/waiting/log`));
    assert.equal(code, 500);
    assert.match(message, /no kubelet serves the container logs of node "node-9"/);
    podLogs.register("node-9", memoryKubelet(new Map()));
    assert.deepEqual(await status(await call(`${POD}/waiting/log`)), [
      400,
      'container "main" in pod "waiting" has no log on node "node-9"',
    ]);
    assert.deepEqual(await status(await call(`${POD}/waiting/log?timestamps=true`)), [
      400,
      "timestamps is not supported by the kubelet emulator: its container logs carry no timestamps",
    ]);
    assert.equal((await call(`${POD}/waiting/log`, { method: "POST", body: "{}" })).status, 405);
  }));

Deno.test("pods/log?follow=true streams what the container appends until it ends", () =>
  withRouter(async (call, _c, _stop, podLogs) => {
    const pod = await post(call, POD, {
      metadata: { name: "f" },
      spec: { nodeName: "node-1", containers: [{ name: "main", image: "busybox" }] },
    });
    const uid = (pod.metadata as { uid: string }).uid;
    await setStatus(call, "f", { phase: "Running", containerStatuses: [running("main")] });
    const logs = new Map([[`${uid}/main/current`, "a\n"]]);
    podLogs.register("node-1", memoryKubelet(logs));
    const res = await call(`${POD}/f/log?follow=true`);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    assert.equal((await reader.read()).value, "a\n");
    logs.set(`${uid}/main/current`, "a\nb\n");
    assert.equal((await reader.read()).value, "b\n");
    await setStatus(call, "f", {
      phase: "Succeeded",
      containerStatuses: [{
        name: "main",
        restartCount: 0,
        state: { terminated: { exitCode: 0 } },
      }],
    });
    assert.equal((await reader.read()).done, true, "the stream ends with the container");
  }));

Deno.test("tailLines() keeps the last n lines and the final newline", () => {
  assert.equal(tailLines("a\nb\nc\n", 2), "b\nc\n");
  assert.equal(tailLines("a\nb\nc", 2), "b\nc");
  assert.equal(tailLines("a\n", 5), "a\n");
  assert.equal(tailLines("a\nb\n", 0), "");
});
