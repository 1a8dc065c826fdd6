/**
 * Render every object of the deployment from validated values, in apply order, and check that the
 * node and controller containers' args and env are accepted by the binaries' own option parser.
 *
 * @module
 */
import { CONTROLLER_OPTIONS } from "../options/controller_options.ts";
import { NODE_OPTIONS } from "../options/node_options.ts";
import { LOG_OPTIONS } from "../util/log.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { stringify } from "yaml";
import type { Container, Manifest } from "./k8s_objects.ts";
import { inApplyOrder } from "./kinds.ts";
import {
  renderCaConfigMaps,
  renderCrd,
  renderCsiDriver,
  renderMountpointDisruptionBudget,
  renderNamespaces,
  renderPriorityClasses,
} from "./render_cluster.ts";
import { CONTROLLER_CONTAINERS, renderControllerDeployment } from "./render_controller.ts";
import { NODE_CONTAINERS, renderNodeDaemonSet } from "./render_node.ts";
import { renderNodePolicy } from "./render_node_policy.ts";
import { renderMountpointPolicies } from "./render_mountpoint_policies.ts";
import { renderVolumePolicies } from "./render_volume_policy.ts";
import { renderControllerPolicy } from "./render_controller_policy.ts";
import { PROVISIONER_CONTAINERS, renderProvisionerDeployment } from "./render_provisioner.ts";
import { renderRbac } from "./render_rbac.ts";
import { renderMountpointMetricsService } from "./render_mountpoint_metrics.ts";
import { checkContainerConfig } from "./settings.ts";
import type { DeployValues } from "./values.ts";

/** A rendered container the binary would refuse (a bug in the renderer or an invalid setting). */
export class RenderError extends Error {
  /** Build with the container and the binary's complaint. */
  constructor(container: string, problem: string) {
    super(`container ${container} would not start: ${problem}`);
    this.name = "RenderError";
  }
}

/** The containers of a rendered workload. */
export function containersOf(obj: Manifest): Container[] {
  const spec = obj.spec as { template?: { spec?: { containers?: Container[] } } } | undefined;
  return spec?.template?.spec?.containers ?? [];
}

function check(obj: Manifest, name: string, specs: Parameters<typeof checkContainerConfig>[0]) {
  const c = containersOf(obj).find((x) => x.name === name);
  if (!c) throw new RenderError(name, "missing from the rendered workload");
  const problem = checkContainerConfig(specs, c.args ?? [], c.env ?? []);
  if (problem) throw new RenderError(name, problem);
}

/** Every object, in apply order. @throws {RenderError} */
export function renderManifests(v: DeployValues): Manifest[] {
  const daemonSet = renderNodeDaemonSet(v);
  const deployment = renderControllerDeployment(v);
  const provisioner = renderProvisionerDeployment(v);
  check(daemonSet, NODE_CONTAINERS.plugin, { ...NODE_OPTIONS, ...LOG_OPTIONS });
  check(deployment, CONTROLLER_CONTAINERS.controller, { ...CONTROLLER_OPTIONS, ...LOG_OPTIONS });
  for (const p of provisioner) {
    check(p, PROVISIONER_CONTAINERS.service, { ...CONTROLLER_OPTIONS, ...LOG_OPTIONS });
  }
  return inApplyOrder([
    ...renderNamespaces(v),
    renderCrd(v),
    ...renderPriorityClasses(v),
    renderCsiDriver(v),
    ...renderRbac(v),
    ...renderNodePolicy(v),
    ...renderMountpointPolicies(v),
    ...renderVolumePolicies(v),
    ...renderControllerPolicy(v),
    ...renderCaConfigMaps(v),
    ...renderMountpointMetricsService(v),
    ...renderMountpointDisruptionBudget(v),
    deployment,
    ...provisioner,
    daemonSet,
  ]);
}

/** Multi-document YAML of `objects`, with a header saying where it came from. */
export function toYaml(objects: readonly Manifest[], header?: string): string {
  const version = objects[0]?.metadata?.labels?.["app.kubernetes.io/version"] ?? DRIVER_VERSION;
  const head = header ??
    `# s3.csi.scality.com ${version}: rendered by \`deno task render\` (src/deploy/).\n`;
  return head +
    objects.map((o) => `---\n${stringify(o, { lineWidth: 0, aliasDuplicateObjects: false })}`).join(
      "",
    );
}
