/**
 * Contract cases for writes: patch types, server-side apply, finalizers, pod deletion, garbage
 * collection, Leases and the project's CRD. They run against the emulator and a real cluster.
 *
 * @module
 */
import assert from "node:assert/strict";
import { s3paCrd } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import {
  CM,
  cm,
  type ContractCase,
  createPod,
  pod,
  PODS,
  poll,
  statusOf,
  TABLE_ACCEPT,
} from "./_case_util.ts";

/** Write-side cases. */
export const WRITE_CASES: readonly ContractCase[] = [
  {
    name: "patch types: JSON patch, merge patch, strategic merge, and their errors",
    run: async (k, { ns }) => {
      await createPod(k, ns, {
        ...pod("pp"),
        spec: {
          automountServiceAccountToken: false,
          containers: [{ name: "main", image: "busybox:1.36" }, {
            name: "side",
            image: "busybox:1.36",
          }],
        },
      });
      const smp = await k.request("PATCH", PODS(ns, "pp"), {
        body: { spec: { containers: [{ name: "side", image: "busybox:1.37" }] } },
        contentType: "application/strategic-merge-patch+json",
      });
      assert.equal(smp.status, 200, smp.text);
      assert.deepEqual(smp.body.spec.containers.map((c: { image: string }) => c.image), [
        "busybox:1.36",
        "busybox:1.37",
      ]);
      const merge = await k.request("PATCH", PODS(ns, "pp"), {
        body: { spec: { containers: [{ name: "side", image: "busybox:1.37" }] } },
        contentType: "application/merge-patch+json",
      });
      statusOf(merge, 422, "Invalid");
      const jp = await k.request("PATCH", PODS(ns, "pp"), {
        body: [
          { op: "replace", path: "/spec/containers/1/image", value: "busybox:1.35" },
          { op: "add", path: "/metadata/labels", value: { x: "y" } },
        ],
        contentType: "application/json-patch+json",
      });
      assert.equal(jp.status, 200, jp.text);
      assert.equal(jp.body.spec.containers[1].image, "busybox:1.35");
      const test = await k.request("PATCH", PODS(ns, "pp"), {
        body: [{ op: "test", path: "/metadata/labels/x", value: "z" }],
        contentType: "application/json-patch+json",
      });
      statusOf(test, 422, "Invalid");
      const notArray = await k.request("PATCH", PODS(ns, "pp"), {
        body: { metadata: {} },
        contentType: "application/json-patch+json",
      });
      statusOf(notArray, 400, "BadRequest");
      const media = await k.request("PATCH", PODS(ns, "pp"), {
        body: {},
        contentType: "application/json",
      });
      statusOf(media, 415, "UnsupportedMediaType");
      await k.request("DELETE", `${PODS(ns, "pp")}?gracePeriodSeconds=0`);
    },
  },
  {
    name: "server-side apply: create, idempotent re-apply, conflict, force",
    run: async (k, { ns }) => {
      const apply = (manager: string, data: Record<string, string>, force = false) =>
        k.request(
          "PATCH",
          `${CM(ns, "ssa")}?fieldManager=${manager}${force ? "&force=true" : ""}`,
          {
            body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "ssa" }, data },
            contentType: "application/apply-patch+yaml",
          },
        );
      const created = await apply("deployer", { k1: "v1" });
      assert.equal(created.status, 201, created.text);
      const again = await apply("deployer", { k1: "v1" });
      assert.equal(again.status, 200);
      assert.equal(again.body.metadata.resourceVersion, created.body.metadata.resourceVersion);
      const conflict = await apply("other", { k1: "changed" });
      statusOf(conflict, 409, "Conflict");
      assert.equal(
        conflict.body.message,
        'Apply failed with 1 conflict: conflict with "deployer": .data.k1',
      );
      assert.equal(conflict.body.details.causes[0].reason, "FieldManagerConflict");
      const shared = await apply("other", { k1: "v1", k2: "x" });
      assert.equal(shared.status, 200);
      const forced = await apply("other", { k1: "forced", k2: "x" }, true);
      assert.equal(forced.body.data.k1, "forced");
      const dropped = await apply("deployer", { k3: "v3" });
      assert.deepEqual(dropped.body.data, { k1: "forced", k2: "x", k3: "v3" });
      const noManager = await k.request("PATCH", CM(ns, "ssa"), {
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "ssa" } },
        contentType: "application/apply-patch+yaml",
      });
      statusOf(noManager, 422, "Invalid");
    },
  },
  {
    name: "deletecollection deletes the selected objects and returns them as a list",
    run: async (k, { ns }) => {
      for (const n of ["dc1", "dc2"]) {
        await k.request("POST", CM(ns), { body: cm(n, { dc: "yes" }) });
      }
      await k.request("POST", CM(ns), { body: cm("dc3") });
      const r = await k.request("DELETE", `${CM(ns)}?labelSelector=dc%3Dyes`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.kind, "ConfigMapList");
      assert.deepEqual(
        r.body.items.map((i: { metadata: { name: string } }) => i.metadata.name).sort(),
        [
          "dc1",
          "dc2",
        ],
      );
      assert.equal((await k.request("GET", CM(ns, "dc1"))).status, 404);
      assert.equal((await k.request("GET", CM(ns, "dc3"))).status, 200);
    },
  },
  {
    name: "finalizers hold a deleted object until they are removed",
    run: async (k, { ns }) => {
      const body = { ...cm("fin"), metadata: { name: "fin", finalizers: ["example.com/hold"] } };
      await k.request("POST", CM(ns), { body });
      const del = await k.request("DELETE", CM(ns, "fin"));
      assert.equal(del.status, 200);
      assert.ok(del.body.metadata.deletionTimestamp);
      assert.equal(del.body.metadata.deletionGracePeriodSeconds, 0);
      const add = await k.request("PATCH", CM(ns, "fin"), {
        body: { metadata: { finalizers: ["example.com/hold", "x/y"] } },
        contentType: "application/merge-patch+json",
      });
      statusOf(add, 422, "Invalid");
      const release = await k.request("PATCH", CM(ns, "fin"), {
        body: { metadata: { finalizers: null } },
        contentType: "application/merge-patch+json",
      });
      assert.equal(release.status, 200);
      await poll(
        "object gone",
        async () => (await k.request("GET", CM(ns, "fin"))).status === 404 || undefined,
      );
    },
  },
  {
    name: "pod deletion: unbound pods go at once, bound pods stay Terminating until grace 0",
    run: async (k, { ns }) => {
      await createPod(k, ns, pod("unbound"));
      const del = await k.request("DELETE", PODS(ns, "unbound"));
      assert.equal(del.status, 200);
      assert.equal(del.body.kind, "Pod", "pods return the object");
      assert.equal((await k.request("GET", PODS(ns, "unbound"))).status, 404);
      await createPod(k, ns, pod("bound", "node-a"));
      const graceful = await k.request("DELETE", PODS(ns, "bound"));
      assert.equal(graceful.body.metadata.deletionGracePeriodSeconds, 30);
      assert.equal((await k.request("GET", PODS(ns, "bound"))).status, 200);
      const force = await k.request("DELETE", `${PODS(ns, "bound")}?gracePeriodSeconds=0`);
      assert.equal(force.status, 200);
      assert.equal((await k.request("GET", PODS(ns, "bound"))).status, 404);
    },
  },
  {
    name: "ownerReference garbage collection deletes dependents in the background",
    run: async (k, { ns }) => {
      const owner = (await k.request("POST", CM(ns), { body: cm("owner") })).body;
      const ref = { apiVersion: "v1", kind: "ConfigMap", name: "owner", uid: owner.metadata.uid };
      await k.request("POST", CM(ns), {
        body: { ...cm("dependent"), metadata: { name: "dependent", ownerReferences: [ref] } },
      });
      const del = await k.request("DELETE", CM(ns, "owner"), {
        body: { propagationPolicy: "Background" },
      });
      assert.equal(del.body.status, "Success");
      assert.deepEqual(del.body.details, {
        name: "owner",
        kind: "configmaps",
        uid: owner.metadata.uid,
      });
      await poll(
        "dependent collected",
        async () => (await k.request("GET", CM(ns, "dependent"))).status === 404 || undefined,
        30_000,
      );
    },
  },
  {
    name: "Secret stringData is folded into data and not stored",
    run: async (k, { ns }) => {
      const created = await k.request("POST", `/api/v1/namespaces/${ns}/secrets`, {
        body: {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "sd" },
          data: { keep: btoa("old"), over: btoa("old") },
          stringData: { over: "new", plain: "héllo" },
        },
      });
      assert.equal(created.status, 201, created.text);
      const got = await k.request("GET", `/api/v1/namespaces/${ns}/secrets/sd`);
      assert.equal(got.body.stringData, undefined);
      assert.deepEqual(got.body.data, {
        keep: btoa("old"),
        over: btoa("new"),
        plain: btoa(String.fromCharCode(...new TextEncoder().encode("héllo"))),
      });
    },
  },
  {
    name: "Priority admission: a pod naming a missing PriorityClass is forbidden",
    run: async (k, { ns, id }) => {
      const missing = await k.request("POST", PODS(ns), {
        body: {
          ...pod("prio"),
          spec: { ...(pod("prio").spec as object), priorityClassName: `absent-${id}` },
        },
      });
      statusOf(missing, 403, "Forbidden");
      assert.match(
        missing.body.message,
        new RegExp(`no PriorityClass with name absent-${id} was found`),
      );
      const pc = await k.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
        body: {
          apiVersion: "scheduling.k8s.io/v1",
          kind: "PriorityClass",
          metadata: { name: `present-${id}` },
          value: 1000,
        },
      });
      assert.equal(pc.status, 201, pc.text);
      try {
        const ok = await k.request("POST", PODS(ns), {
          body: {
            ...pod("prio2"),
            spec: { ...(pod("prio2").spec as object), priorityClassName: `present-${id}` },
          },
        });
        assert.equal(ok.status, 201, ok.text);
      } finally {
        await k.request("DELETE", `/apis/scheduling.k8s.io/v1/priorityclasses/present-${id}`);
      }
    },
  },
  {
    name: "Lease MicroTime needs six fractional digits; PUT creates leases",
    run: async (k, { ns }) => {
      const lease = (renewTime: string) => ({
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: "l" },
        spec: { holderIdentity: "me", leaseDurationSeconds: 15, renewTime },
      });
      const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
      const bad = await k.request("POST", path, { body: lease("2026-11-25T22:22:59.646Z") });
      statusOf(bad, 400, "BadRequest");
      assert.match(bad.body.message, /cannot parse "\.646Z" as "\.000000"/);
      const put = await k.request("PUT", `${path}/l`, {
        body: lease("2026-11-25T22:22:59.646000Z"),
      });
      assert.equal(put.status, 201, put.text);
    },
  },
  {
    name: "the s3pa CRD serves validated custom resources with selectable fields",
    run: async (k, { id }) => {
      const crd = s3paCrd();
      const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
      const name = (crd.metadata as { name: string }).name;
      const existing = await k.request("GET", `${crdPath}/${name}`);
      if (existing.status === 404) {
        const r = await k.request("POST", crdPath, { body: crd });
        assert.equal(r.status, 201, r.text);
      }
      const base = "/apis/s3.csi.scality.com/v2/mountpoints3podattachments";
      await poll(
        "CR endpoint",
        async () => (await k.request("GET", base)).status === 200 || undefined,
      );
      const spec = {
        nodeName: "node-a",
        persistentVolumeName: "pv",
        volumeID: "vol",
        mountOptions: "",
        workloadFSGroup: "",
        authenticationSource: "driver",
        mountpointS3PodAttachments: {},
      };
      const body = (n: string, s: Record<string, unknown>) => ({
        apiVersion: "s3.csi.scality.com/v2",
        kind: "MountpointS3PodAttachment",
        metadata: { name: n },
        spec: s,
      });
      const ok = await k.request("POST", base, { body: body(`ok-${id}`, spec) });
      assert.equal(ok.status, 201, ok.text);
      assert.equal(ok.body.metadata.generation, 1);
      const bad = await k.request("POST", base, {
        body: body(`bad-${id}`, { ...spec, nodeName: 5, authenticationSource: "x" }),
      });
      statusOf(bad, 422, "Invalid");
      const fields = bad.body.details.causes.map((c: { field: string }) => c.field).sort();
      assert.deepEqual(fields, ["spec.authenticationSource", "spec.nodeName"]);
      const sel = await k.request("GET", `${base}?fieldSelector=spec.nodeName%3Dnode-a`);
      assert.ok(
        sel.body.items.some((i: { metadata: { name: string } }) => i.metadata.name === `ok-${id}`),
      );
      assert.equal(sel.body.items[0].kind, "MountpointS3PodAttachment", "CR list items carry kind");
      const unsupported = await k.request("GET", `${base}?fieldSelector=spec.secretName%3Dx`);
      statusOf(unsupported, 400, "BadRequest");
      const smp = await k.request("PATCH", `${base}/ok-${id}`, {
        body: { spec: { nodeName: "node-b" } },
        contentType: "application/strategic-merge-patch+json",
      });
      statusOf(smp, 415, "UnsupportedMediaType");
      const merge = await k.request("PATCH", `${base}/ok-${id}`, {
        body: { spec: { nodeName: "node-b" } },
        contentType: "application/merge-patch+json",
      });
      assert.equal(merge.body.metadata.generation, 2);
      const table = await k.request("GET", base, { accept: TABLE_ACCEPT });
      assert.deepEqual(table.body.columnDefinitions.map((c: { name: string }) => c.name), [
        "Name",
        "Node",
        "PV Name",
        "Mount Options",
        "Age",
      ]);
      const del = await k.request("DELETE", `${base}/ok-${id}`);
      assert.equal(del.body.details.group, "s3.csi.scality.com");
    },
  },
];
