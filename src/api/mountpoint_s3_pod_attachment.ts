/**
 * `MountpointS3PodAttachment` (short name `s3pa`): a cluster-scoped record of which workload Pods
 * use which Mountpoint Pod for one sharing key (node, PV, volume ID, mount options, fsGroup,
 * authentication source). The controller writes it; the node plugin reads it to find the
 * Mountpoint Pod assigned to a workload during NodePublishVolume.
 *
 * This file is the single source of truth for the CRD: `scripts/gen_crd.ts` renders
 * `k8s/crds/` from {@link s3paCrd}.
 *
 * @module
 */
import type { KubeObject, ObjectMeta } from "../kube/client.ts";
import type { Resource } from "../kube/resources.ts";
import { API_VERSION, GROUP, VERSION } from "./group_version.ts";

/** Kind name. */
export const S3PA_KIND = "MountpointS3PodAttachment";
/** List kind name. */
export const S3PA_LIST_KIND = "MountpointS3PodAttachmentList";
/** Plural resource name (URL path segment). */
export const S3PA_PLURAL = "mountpoints3podattachments";

/** The REST resource of MountpointS3PodAttachments. */
export const S3PAS: Resource = {
  group: GROUP,
  version: VERSION,
  plural: S3PA_PLURAL,
  kind: S3PA_KIND,
  namespaced: false,
};
/** Singular resource name. */
export const S3PA_SINGULAR = "mountpoints3podattachment";
/** Short name for kubectl. */
export const S3PA_SHORT_NAME = "s3pa";
/** Full CRD name. */
export const S3PA_CRD_NAME = `${S3PA_PLURAL}.${GROUP}`;

/**
 * How the Mountpoint Pod authenticates to S3: the driver's keys, the volume's Secret, or the
 * workload's ServiceAccount (`pod`: STS AssumeRoleWithWebIdentity with its projected token).
 */
export type AuthenticationSource = "driver" | "secret" | "pod";
/** The authentication sources accepted in `spec.authenticationSource`. */
export const AUTHENTICATION_SOURCES: readonly AuthenticationSource[] = ["driver", "secret", "pod"];

/** One workload Pod using a Mountpoint Pod. */
export interface WorkloadAttachment {
  /** `metadata.uid` of the workload Pod. */
  workloadPodUID: string;
  /** RFC 3339 UTC time the controller attached it; the stale cleaner's grace period starts here. */
  attachmentTime: string;
}

/** `spec` of a MountpointS3PodAttachment: the sharing key plus the assignments. */
export interface S3paSpec {
  /** Node of the workload Pods (`spec.nodeName`). */
  nodeName: string;
  /** PersistentVolume name. */
  persistentVolumeName: string;
  /** `spec.csi.volumeHandle` of the PV. */
  volumeID: string;
  /** PV `spec.mountOptions` joined with `,` (raw, as written on the PV). */
  mountOptions: string;
  /** Workload `securityContext.fsGroup` as a decimal string, or `""`. */
  workloadFSGroup: string;
  /** Authentication source of the volume (`driver` unless the PV says otherwise). */
  authenticationSource: AuthenticationSource;
  /** With `pod` authentication: the workloads' namespace. */
  workloadNamespace?: string;
  /** With `pod` authentication: the workloads' ServiceAccount. */
  workloadServiceAccountName?: string;
  /**
   * With `pod` authentication: the role the Mountpoint Pod assumes (the volume's `roleArn`
   * attribute, else the ServiceAccount's `s3.csi.scality.com/role-arn` annotation).
   */
  workloadServiceAccountIAMRoleARN?: string;
  /**
   * Namespace of the PV's `nodePublishSecretRef`, when it has one (always with `secret`
   * authentication; with `driver`, a Secret holding only the volume's endpoint and region).
   */
  secretNamespace?: string;
  /** Name of the PV's `nodePublishSecretRef`, when it has one. */
  secretName?: string;
  /**
   * The volume's local cache when it has one (canonical, e.g. `emptyDir;sizeLimit=2Gi`): volumes
   * with different caches never share a Mountpoint Pod.
   */
  cache?: string;
  /** Mountpoint Pod name → workloads assigned to it. */
  mountpointS3PodAttachments: Record<string, WorkloadAttachment[]>;
}

/** A MountpointS3PodAttachment object. */
export interface MountpointS3PodAttachment extends KubeObject {
  apiVersion?: typeof API_VERSION | undefined;
  kind?: typeof S3PA_KIND | undefined;
  metadata: ObjectMeta;
  spec: S3paSpec;
}

/**
 * Spec fields that are selectable server-side (`--field-selector`) and indexed client-side.
 * The node plugin filters by a subset of them to find a workload's assignment.
 */
export const S3PA_FIELDS = {
  nodeName: "spec.nodeName",
  persistentVolumeName: "spec.persistentVolumeName",
  volumeID: "spec.volumeID",
  mountOptions: "spec.mountOptions",
  workloadFSGroup: "spec.workloadFSGroup",
  authenticationSource: "spec.authenticationSource",
} as const;

const str = { type: "string" } as const;

/** OpenAPI v3 schema of the `v2` version. */
export const S3PA_SCHEMA = {
  type: "object",
  description: "Assignment of workload Pods to Mountpoint Pods for one volume on one node.",
  required: ["spec"],
  properties: {
    apiVersion: str,
    kind: str,
    metadata: { type: "object" },
    spec: {
      type: "object",
      required: [
        "nodeName",
        "persistentVolumeName",
        "volumeID",
        "mountOptions",
        "workloadFSGroup",
        "authenticationSource",
        "mountpointS3PodAttachments",
      ],
      properties: {
        nodeName: { ...str, minLength: 1, description: "Node of the workload Pods." },
        persistentVolumeName: { ...str, minLength: 1, description: "PersistentVolume name." },
        volumeID: {
          ...str,
          minLength: 1,
          description: "CSI volume handle of the PersistentVolume.",
        },
        mountOptions: { ...str, description: "PersistentVolume mountOptions joined with commas." },
        workloadFSGroup: {
          ...str,
          pattern: "^[0-9]*$",
          description: "Workload fsGroup, or empty.",
        },
        authenticationSource: {
          ...str,
          enum: [...AUTHENTICATION_SOURCES],
          description:
            "Where S3 credentials come from: driver, secret (nodePublishSecretRef) or pod (the workload's ServiceAccount).",
        },
        workloadNamespace: { ...str, description: "Namespace of the workloads (pod auth)." },
        workloadServiceAccountName: {
          ...str,
          description: "ServiceAccount of the workloads (pod auth).",
        },
        workloadServiceAccountIAMRoleARN: {
          ...str,
          description: "Role assumed with the workloads' ServiceAccount token (pod auth).",
        },
        secretNamespace: {
          ...str,
          description:
            "Namespace of the nodePublishSecretRef, when the volume has one (credentials, endpoint).",
        },
        secretName: {
          ...str,
          description:
            "Name of the nodePublishSecretRef, when the volume has one (credentials, endpoint).",
        },
        cache: {
          ...str,
          description:
            "Local cache of the volume (canonical, e.g. emptyDir;sizeLimit=2Gi), or absent.",
        },
        mountpointS3PodAttachments: {
          type: "object",
          description: "Mountpoint Pod name to the workload Pods assigned to it.",
          additionalProperties: {
            type: "array",
            items: {
              type: "object",
              required: ["workloadPodUID", "attachmentTime"],
              properties: {
                workloadPodUID: { ...str, minLength: 1, description: "UID of the workload Pod." },
                attachmentTime: {
                  ...str,
                  format: "date-time",
                  description: "When it was attached (UTC).",
                },
              },
            },
          },
        },
      },
    },
  },
} as const;

/** The CustomResourceDefinition object, as applied to clusters and rendered to `k8s/crds/`. */
export function s3paCrd(): Record<string, unknown> {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: S3PA_CRD_NAME },
    spec: {
      group: GROUP,
      scope: "Cluster",
      names: {
        kind: S3PA_KIND,
        listKind: S3PA_LIST_KIND,
        plural: S3PA_PLURAL,
        singular: S3PA_SINGULAR,
        shortNames: [S3PA_SHORT_NAME],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: S3PA_SCHEMA },
          additionalPrinterColumns: [
            {
              name: "Node",
              type: "string",
              jsonPath: ".spec.nodeName",
              description: "Node of the workloads",
            },
            {
              name: "PV Name",
              type: "string",
              jsonPath: ".spec.persistentVolumeName",
              description: "PersistentVolume",
            },
            {
              name: "Mount Options",
              type: "string",
              jsonPath: ".spec.mountOptions",
              description: "Mount options",
            },
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
          selectableFields: Object.values(S3PA_FIELDS).map((f) => ({ jsonPath: `.${f}` })),
        },
      ],
    },
  };
}
