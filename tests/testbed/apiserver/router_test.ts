import assert from "node:assert/strict";
import { withRouter } from "./_test_fixtures.ts";

Deno.test("ApiRouter authenticates with the bearer token", () =>
  withRouter(async (call) => {
    const bad = await call("/api/v1/namespaces", { headers: { authorization: "Bearer nope" } });
    assert.equal(bad.status, 401);
    assert.deepEqual(await bad.json(), {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "Unauthorized",
      reason: "Unauthorized",
      code: 401,
    });
    const version = await call("/version", { headers: { authorization: "" } });
    assert.equal(version.status, 200);
    assert.match((await version.json()).gitVersion, /^v1\.32\./);
  }));

Deno.test("ApiRouter serves legacy and aggregated discovery and OpenAPI v3", () =>
  withRouter(async (call) => {
    const agg = await call("/api", {
      headers: {
        accept:
          "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
      },
    });
    assert.match(agg.headers.get("content-type")!, /as=APIGroupDiscoveryList/);
    const core = (await agg.json()).items[0];
    assert.equal(core.metadata.name, undefined);
    const pods = core.versions[0].resources.find((r: { resource: string }) =>
      r.resource === "pods"
    );
    assert.deepEqual(pods.responseKind, { group: "", version: "", kind: "Pod" });
    assert.deepEqual(pods.shortNames, ["po"]);
    const legacy = await (await call("/apis/apps/v1")).json();
    assert.equal(legacy.groupVersion, "apps/v1");
    const group = await (await call("/apis/coordination.k8s.io")).json();
    assert.equal(group.preferredVersion.version, "v1");
    const index = await (await call("/openapi/v3")).json();
    const gv = await (await call(index.paths["apis/apps/v1"].serverRelativeURL)).json();
    const op = gv.paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].patch;
    assert.equal(op["x-kubernetes-group-version-kind"].kind, "Deployment");
    assert.ok(op.parameters.some((p: { name: string }) => p.name === "fieldValidation"));
    assert.equal((await call("/openapi/v2")).status, 404);
    assert.equal((await call("/apis/nope/v1")).status, 404);
  }));

Deno.test("ApiRouter rejects protobuf bodies and unknown patch types with 415", () =>
  withRouter(async (call) => {
    const pb = await call("/api/v1/namespaces/default/configmaps", {
      method: "POST",
      headers: { "content-type": "application/vnd.kubernetes.protobuf" },
      body: "x",
    });
    assert.equal(pb.status, 415);
    await call("/api/v1/namespaces/default/configmaps", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: { name: "c" } }),
    });
    const patch = await call("/api/v1/namespaces/default/configmaps/c", {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(patch.status, 415);
    assert.equal((await patch.json()).message, "415: Unsupported Media Type");
  }));

Deno.test("ApiRouter answers Table requests and streams watch events as JSON lines", () =>
  withRouter(async (call, c, stop) => {
    const table = await (await call("/api/v1/namespaces", {
      headers: { accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" },
    })).json();
    assert.equal(table.kind, "Table");
    assert.deepEqual(table.rows[0].cells.slice(0, 2), ["default", "Active"]);
    const rv = c.store.resourceVersion;
    const res = await call(
      `/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${rv}`,
    );
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    await call("/api/v1/namespaces/default/configmaps", {
      method: "POST",
      body: JSON.stringify({ metadata: { name: "w" } }),
      headers: { "content-type": "application/json" },
    });
    const { value } = await reader.read();
    const ev = JSON.parse(value!.split("\n")[0]!);
    assert.equal(ev.type, "ADDED");
    assert.equal(ev.object.kind, "ConfigMap");
    stop.abort();
    assert.equal((await reader.read()).done, true, "stream ends when the server stops");
  }));

Deno.test("ApiRouter sends a 410 ERROR event for a resume from expired history", () =>
  withRouter(async (call, c) => {
    const old = c.store.resourceVersion;
    await call("/api/v1/namespaces/default/configmaps", {
      method: "POST",
      body: JSON.stringify({ metadata: { name: "x" } }),
      headers: { "content-type": "application/json" },
    });
    c.store.hub.compact(c.store.resourceVersion);
    const res = await call(`/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=${old}`);
    assert.equal(res.status, 200);
    const lines = (await res.text()).trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(lines.length, 1);
    assert.equal(lines[0].type, "ERROR");
    assert.equal(lines[0].object.code, 410);
    assert.equal(lines[0].object.reason, "Expired");
  }));

Deno.test("ApiRouter supports sendInitialEvents watches (WatchList)", () =>
  withRouter(async (call, _c, stop) => {
    const bad = await call("/api/v1/namespaces?watch=true&sendInitialEvents=true");
    assert.equal(bad.status, 422);
    await bad.body?.cancel();
    const res = await call(
      "/api/v1/namespaces?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=1&allowWatchBookmarks=true",
    );
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes("BOOKMARK")) text += (await reader.read()).value ?? "";
    const events = text.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(events.map((e) => e.type), ["ADDED", "ADDED", "ADDED", "ADDED", "BOOKMARK"]);
    assert.equal(events[4].object.metadata.annotations["k8s.io/initial-events-end"], "true");
    stop.abort();
    await reader.cancel();
  }));
