/**
 * Admission-time validation of volumes (no webhook server: ValidatingAdmissionPolicies, CEL, GA
 * since Kubernetes 1.30). A PersistentVolume of this driver, or a StorageClass that provisions with
 * it, is refused at `kubectl apply` with the message the node plugin (NodePublishVolume) or the
 * provisioner (CreateVolume) would give minutes later — the same rules, read from the same lists:
 *
 * - mount options: `src/mppod/mount_option_spec.ts` (names, short forms, value rules, reasons);
 * - volume attributes: `src/csi/volume_context.ts`, `src/mppod/cache_volume.ts`;
 * - StorageClass parameters: `src/options/storage_class_parameters.ts`;
 * - the words: `src/mppod/volume_messages.ts`, `PARAMETER_MESSAGES`.
 *
 * Each policy computes the node's (or provisioner's) *first* problem, step by step in the node's
 * order, into `variables.problem` and refuses with it. What only the node can know is left to it:
 * the pod (fsGroup, its access mode beyond the PV's first), the secrets, the node's default engine
 * when the deployment changes it per node.
 *
 * A PersistentVolume is checked on CREATE, and on UPDATE only when its CSI source or mount options
 * change (so an old, invalid PV can still be bound, released and deleted). A StorageClass is
 * immutable: CREATE only.
 *
 * @module
 */
import { DEFAULT_ENGINE, ENGINES } from "../mppod/mount_message.ts";
import {
  INTERNAL_OPTIONS,
  INTERNAL_REASON,
  MAX_MOUNT_OPTIONS,
  MOUNT_OPTION_SPECS,
  REFUSED_FORMS,
  SHORT_OPTION_NAMES,
  VOLUME_OPTION_NAMES,
} from "../mppod/mount_option_spec.ts";
import { RCLONE_OPTIONS } from "../mppod/engine_support.ts";
import {
  CACHE_ATTRIBUTES,
  CACHE_TYPES,
  MIN_CACHE_LIMIT_BYTES,
  STORAGE_CLASS_NAME_PATTERN,
} from "../mppod/cache_volume.ts";
import {
  ATTRIBUTE_MESSAGES,
  CACHE_MESSAGES,
  COMBINATION_MESSAGES,
  OPTION_MESSAGES,
  RCLONE_MESSAGES,
} from "../mppod/volume_messages.ts";
import {
  AUTHENTICATION_SOURCES,
  VOLUME_BUCKET_PATTERN,
  VOLUME_CONTEXT,
} from "../csi/volume_context.ts";
import { fill } from "../util/message_template.ts";
import { QUANTITY_PATTERN } from "../kube/quantity.ts";
import {
  BASE_PREFIX_RULES,
  BUCKET_NAME_PREFIX_RULES,
  BUCKET_NAME_RULES,
  DELETE_POLICIES,
  KNOWN_PARAMETERS,
  MODES,
  PARAM,
  PARAMETER_AUTH_SOURCES,
  PARAMETER_MESSAGES,
  REGION_PATTERN,
} from "../options/storage_class_parameters.ts";
import { DRIVER_NAME } from "../util/version.ts";
import {
  celFill,
  celFirst,
  celMap,
  celRuleProblem,
  celRules,
  celString,
  celStringMap,
  celStrings,
  celStringValues,
} from "./cel.ts";
import { admissionPolicy, resourceRule } from "./admission_policy.ts";
import type { Manifest } from "./k8s_objects.ts";
import { commonLabels, STORAGE_CLASS_POLICY, VOLUME_POLICY } from "./names.ts";
import type { DeployValues } from "./values.ts";

/** A policy variable. */
interface Variable {
  readonly name: string;
  readonly expression: string;
}

const v = (name: string) => `variables.${name}`;
const Q = celString;

/** CEL: `x in list` of string literals. */
function inList(x: string, items: readonly string[]): string {
  return `${x} in ${celStrings(items)}`;
}

// ---------------------------------------------------------------------------------------------
// Mount options (both policies): the steps of mountOptionsProblem() in src/node/mount_options.ts.

/** Constant tables of the option list, as variables. */
function optionTables(): Variable[] {
  const specs = MOUNT_OPTION_SPECS;
  return [
    { name: "shorts", expression: celStringMap(Object.fromEntries(SHORT_OPTION_NAMES)) },
    { name: "forms", expression: celStringMap(REFUSED_FORMS) },
    { name: "internal", expression: celStrings(INTERNAL_OPTIONS) },
    {
      name: "status",
      expression: celStringMap(Object.fromEntries(specs.map((s) => [s.name, s.status]))),
    },
    {
      name: "reasons",
      expression: celStringMap(Object.fromEntries(specs.map((s) => [s.name, s.reason ?? ""]))),
    },
    { name: "valued", expression: celStrings(specs.filter((s) => s.value).map((s) => s.name)) },
    {
      name: "rules",
      expression: celMap(
        specs.filter((s) => s.status === "volume" && (s.value?.rules.length ?? 0) > 0)
          .map((s) => [s.name, celRules(s.value!.rules)]),
      ),
    },
  ];
}

/**
 * CEL: the problem of one parsed entry `x` (a map with `e` the entry, `t` trimmed, `n` name, `v`
 * value), '' when none; `duplicate` tells whether an earlier entry has its name.
 */
function entryProblem(x: string, duplicate: string): string {
  const M = OPTION_MESSAGES;
  const stripped = `${x}.e.findAll('[^\\\\x00-\\\\x1f\\\\x7f]+').join('').trim()`;
  const shown = `(${stripped}.size() > 100 ? ${stripped}.substring(0, 100) : ${stripped})`;
  const status = `${v("status")}[${x}.n]`;
  return [
    `${x}.t == '' ? ''`,
    `${x}.e.matches('[\\\\x00-\\\\x1f\\\\x7f]') ? ${celFill(M.control, { shown })}`,
    `${x}.n in ${v("forms")} ? ${
      celFill(M.notAllowed, { entry: `${x}.t`, reason: `${v("forms")}[${x}.n]` })
    }`,
    `${x}.n in ${v("internal")} ? ${
      celFill(M.notAllowed, { entry: `${x}.t`, reason: Q(INTERNAL_REASON) })
    }`,
    `!(${x}.n in ${v("status")}) ? ${
      celFill(M.unsupported, { entry: `${x}.t`, supported: Q(VOLUME_OPTION_NAMES.join(", ")) })
    }`,
    `${status} == 'refused' || ${status} == 'driver' ? ${
      celFill(M.notAllowed, { entry: `${x}.t`, reason: `${v("reasons")}[${x}.n]` })
    }`,
    `${duplicate} ? ${celFill(M.duplicate, { name: `${x}.n` })}`,
    `!(${x}.n in ${v("valued")}) ? (${x}.v == '' ? '' : ${
      celFill(M.takesNoValue, { name: `${x}.n`, value: `${x}.v` })
    })`,
    `${x}.v == '' ? ${celFill(M.needsValue, { name: `${x}.n` })}`,
    `!(${x}.n in ${v("rules")}) ? ''`,
    `${celRuleProblem(`${v("rules")}[${x}.n]`, `${x}.v`)} != '' ? ${
      celFill(M.invalid, {
        name: `${x}.n`,
        value: `${x}.v`,
        problem: celRuleProblem(`${v("rules")}[${x}.n]`, `${x}.v`),
      })
    }`,
  ].join(" : ") + " : ''";
}

/** CEL: a parsed entry map of the string `e` (a single entry, e.g. `'prefix=' + value`). */
function entryOf(e: string): string {
  const t = `(${e}).trim()`;
  const r = `${t}.find('^[^= ]*')`;
  const b = `${r}.substring(${r}.find('^-{0,2}').size())`;
  return celStringValues([
    ["i", "'0'"],
    ["e", `(${e})`],
    ["t", t],
    ["n", `(${b} in ${v("shorts")} ? ${v("shorts")}[${b}] : ${b})`],
    ["v", `(${t}.size() > ${r}.size() ? ${t}.substring(${r}.size() + 1).trim() : '')`],
  ]);
}

/**
 * Variables that parse the option list `options` (a CEL list of strings) into `entries` and
 * compute `optionProblem`: the node's first problem with them, or ''.
 */
function optionVariables(options: string): Variable[] {
  const indexes = `[${Array.from({ length: MAX_MOUNT_OPTIONS }, (_, i) => i).join(", ")}]`;
  const problems = `${v("optionProblems")}.filter(p, p != '')`;
  return [
    { name: "opts", expression: options },
    {
      name: "rawEntries",
      expression: `${indexes}.filter(i, i < size(${v("opts")})).map(i, ${
        celStringValues([
          ["i", "string(i)"],
          ["e", `${v("opts")}[i]`],
          ["t", `${v("opts")}[i].trim()`],
          ["r", `${v("opts")}[i].trim().find('^[^= ]*')`],
        ])
      })`,
    },
    {
      name: "bareEntries",
      expression: `${v("rawEntries")}.map(x, ${
        celStringValues([
          ["i", "x.i"],
          ["e", "x.e"],
          ["t", "x.t"],
          ["b", "x.r.substring(x.r.find('^-{0,2}').size())"],
          ["v", "(x.t.size() > x.r.size() ? x.t.substring(x.r.size() + 1).trim() : '')"],
        ])
      })`,
    },
    {
      name: "entries",
      expression: `${v("bareEntries")}.map(x, ${
        celStringValues([
          ["i", "x.i"],
          ["e", "x.e"],
          ["t", "x.t"],
          ["n", `(x.b in ${v("shorts")} ? ${v("shorts")}[x.b] : x.b)`],
          ["v", "x.v"],
        ])
      })`,
    },
    { name: "names", expression: `${v("entries")}.map(x, x.t == '' ? '' : x.n)` },
    {
      name: "optionProblems",
      expression: `${v("entries")}.map(x, ${
        entryProblem("x", `${v("names")}.indexOf(x.n) < int(x.i)`)
      })`,
    },
    {
      name: "optionProblem",
      expression: `size(${v("opts")}) > ${MAX_MOUNT_OPTIONS} ? ${
        celFill(OPTION_MESSAGES.tooMany, {
          max: Q(String(MAX_MOUNT_OPTIONS)),
          count: `string(size(${v("opts")}))`,
        })
      } : (size(${problems}) > 0 ? ${problems}[0] : '')`,
    },
  ];
}

/** CEL: whether the (valid) options have `name`. */
const hasOpt = (name: string) => `(${Q(name)} in ${v("names")})`;
/** CEL: the value of option `name` (only where it is present). */
const optValue = (name: string) => `${v("entries")}.filter(x, x.n == ${Q(name)})[0].v`;

// ---------------------------------------------------------------------------------------------
// The local cache (both policies): parseCacheConfig() and maxCacheSizeMiB() of cache_volume.ts.

/** CEL: whether the quantity string `q` is a positive size (`positiveBytes()`). */
function positiveSize(q: string): string {
  return `(${q}.matches(${Q(QUANTITY_PATTERN)}) && isQuantity(${q}) && ` +
    `quantity(${q}).compareTo(quantity('1')) >= 0)`;
}

/** Variables holding the cache attributes ('' when absent), read with `get`. */
function cacheAttributeVariables(get: (attr: string) => string): Variable[] {
  const a = CACHE_ATTRIBUTES;
  return [
    { name: "cacheType", expression: get(a.cache) },
    { name: "cacheLimit", expression: get(a.emptyDirSizeLimit) },
    { name: "cacheMedium", expression: get(a.emptyDirMedium) },
    { name: "cacheClass", expression: get(a.ephemeralStorageClassName) },
    { name: "cacheRequest", expression: get(a.ephemeralStorageResourceRequest) },
  ];
}

/**
 * CEL: the cache problem ('' when none), from the {@link cacheAttributeVariables};
 * `cacheOption` tells whether the volume has the legacy `cache` mount option; with `maxCacheSize`
 * also the checks of `--max-cache-size` against the cache (volumes only), `defaultLimit` being the
 * size limit of a disk emptyDir cache without one of its own (`withDefaultSizeLimit()`).
 */
function cacheProblem(
  label: "Volume attribute" | "parameter",
  cacheOption: string,
  maxCacheSize: boolean,
  defaultLimit = "",
): string {
  const a = CACHE_ATTRIBUTES;
  const M = CACHE_MESSAGES;
  const attribute = Q(label);
  const type = v("cacheType");
  const limit = v("cacheLimit");
  const medium = v("cacheMedium");
  const sc = v("cacheClass");
  const request = v("cacheRequest");
  const firstSet = (pairs: [string, string][]) =>
    pairs.reduceRight((rest, [value, name]) => `(${value} != '' ? ${Q(name)} : ${rest})`, "''");
  const emptyDirAttr = firstSet([[limit, a.emptyDirSizeLimit], [medium, a.emptyDirMedium]]);
  const ephemeralAttr = firstSet([
    [sc, a.ephemeralStorageClassName],
    [request, a.ephemeralStorageResourceRequest],
  ]);
  const stray = firstSet([
    [limit, a.emptyDirSizeLimit],
    [medium, a.emptyDirMedium],
    [sc, a.ephemeralStorageClassName],
    [request, a.ephemeralStorageResourceRequest],
  ]);
  const requested = optValue("max-cache-size");
  const noCache = maxCacheSize
    ? `${hasOpt("max-cache-size")} ? ${
      celFill(CACHE_MESSAGES.needsCache, { requested, cache: Q(a.cache) })
    } : ''`
    : "''";
  const overDefault = maxCacheSize && defaultLimit
    ? `${
      hasOpt("max-cache-size")
    } && ${requested}.matches('^[0-9]{1,10}$') && quantity(string(int(${requested}) * ${
      2 ** 20
    })).compareTo(quantity(${Q(defaultLimit)})) > 0 ? ${
      celFill(M.exceedsDefault, {
        requested: `string(int(${requested}))`,
        name: Q(a.emptyDirSizeLimit),
        value: Q(defaultLimit),
        limit: `string(int(quantity(${Q(defaultLimit)}).asApproximateFloat() / ${2 ** 20}.0))`,
      })
    } : ''`
    : "''";
  const limitChecks = maxCacheSize
    ? [
      `${limit} != '' && quantity(${limit}).compareTo(quantity('${MIN_CACHE_LIMIT_BYTES}')) < 0 ? ${
        celFill(M.tooSmall, { attribute, name: Q(a.emptyDirSizeLimit), value: limit })
      }`,
      `${limit} != '' && ${hasOpt("max-cache-size")} && quantity(string(int(${requested}) * ${
        2 ** 20
      })).compareTo(quantity(${limit})) > 0 ? ${
        celFill(M.exceeds, {
          requested: `string(int(${requested}))`,
          name: Q(a.emptyDirSizeLimit),
          value: limit,
          limit: `string(int(quantity(${limit}).asApproximateFloat() / ${2 ** 20}.0))`,
        })
      }`,
      `${limit} == '' && ${medium} == '' ? (${overDefault})`,
    ]
    : [];
  const emptyDir = [
    `${ephemeralAttr} != '' ? ${
      celFill(M.notForEmptyDir, { attribute, name: ephemeralAttr, cache: Q(a.cache) })
    }`,
    `${medium} != '' && ${medium} != 'Memory' ? ${
      celFill(M.medium, { attribute, name: Q(a.emptyDirMedium), value: medium })
    }`,
    `${limit} != '' && !${positiveSize(limit)} ? ${
      celFill(M.notPositive, { attribute, name: Q(a.emptyDirSizeLimit), value: limit })
    }`,
    ...limitChecks,
  ].join(" : ") + " : ''";
  const ephemeral = [
    `${emptyDirAttr} != '' ? ${
      celFill(M.notForEphemeral, { attribute, name: emptyDirAttr, cache: Q(a.cache) })
    }`,
    `${sc} == '' || ${request} == '' ? ${
      celFill(M.ephemeralNeeds, {
        cache: Q(a.cache),
        storageClass: Q(a.ephemeralStorageClassName),
        request: Q(a.ephemeralStorageResourceRequest),
      })
    }`,
    `!${sc}.matches(${Q(STORAGE_CLASS_NAME_PATTERN)}) ? ${
      celFill(M.storageClass, { attribute, name: Q(a.ephemeralStorageClassName), value: sc })
    }`,
    `!${positiveSize(request)} ? ${
      celFill(M.notPositive, {
        attribute,
        name: Q(a.ephemeralStorageResourceRequest),
        value: request,
      })
    }`,
  ].join(" : ") + " : ''";
  return [
    `${type} != '' && ${cacheOption} ? ${celFill(M.both, { cache: Q(a.cache), type })}`,
    `${type} == '' && ${stray} != '' ? ${
      celFill(M.stray, {
        attribute,
        name: stray,
        cache: Q(a.cache),
        type: `(${limit} != '' || ${medium} != '' ? 'emptyDir' : 'ephemeral')`,
      })
    }`,
    `${type} == '' ? (${cacheOption} ? (${overDefault}) : (${noCache}))`,
    `${type} == 'emptyDir' ? (${emptyDir})`,
    `${type} == 'ephemeral' ? (${ephemeral})`,
    celFill(M.type, {
      attribute,
      cache: Q(a.cache),
      value: type,
      types: Q(CACHE_TYPES.join(" or ")),
    }),
  ].join(" : ");
}

// ---------------------------------------------------------------------------------------------
// PersistentVolumes: validatePublish() of src/node/publish_request.ts, where the PV decides.

/**
 * Variables: the entry `<name>=<attribute>` and the problem of the volume attribute that is also
 * a mount option (`mergeContextOption()`).
 */
function contextOptionVariables(name: "prefix" | "region", attr: string): Variable[] {
  const entry = v(`${name}Entry`);
  return [
    { name: `${name}Entry`, expression: entryOf(`${Q(`${name}=`)} + ${attr}`) },
    {
      name: `${name}Problem`,
      expression: `${attr} == '' ? '' : ${hasOpt(name)} && ${optValue(name)} != ${attr} ? ${
        celFill(ATTRIBUTE_MESSAGES.conflict, { name: Q(name), value: attr, option: optValue(name) })
      } : (${entryProblem(entry, "false")})`,
    },
  ];
}

/** CEL: `combinationProblem()` of publish_request.ts. */
function combinationProblem(): string {
  const M = COMBINATION_MESSAGES;
  const sse = optValue("sse");
  return [
    `${hasOpt("sse-kms-key-id")} && !(${hasOpt("sse")} && ${
      inList(sse, ["aws:kms", "aws:kms:dsse"])
    }) ? ${
      celFill(M.kmsNeedsSse, {
        key: optValue("sse-kms-key-id"),
        hasSse: `${hasOpt("sse")} ? ${celFill(M.kmsHasSse, { sse })} : ''`,
      })
    }`,
    `${hasOpt("no-log")} && (${hasOpt("debug")} || ${hasOpt("debug-crt")} || ${
      hasOpt("log-metrics")
    }) ? ${Q(M.noLog)}`,
    `${hasOpt("allow-other")} && ${hasOpt("allow-root")} ? ${Q(M.allowOtherAndRoot)}`,
    `${hasOpt("otlp-export-interval")} && !${hasOpt("otlp-endpoint")} ? ${
      celFill(M.otlpInterval, { interval: optValue("otlp-export-interval") })
    }`,
    `${hasOpt("no-sign-request")} && ${v("auth")} == 'secret' ? ${Q(M.unsignedSecret)}`,
  ].join(" : ") + " : ''";
}

/** CEL: `engineOptionsProblem()` of engine_support.ts for the rclone engine. */
function rcloneProblem(): string {
  const M = RCLONE_MESSAGES;
  const offending = `${v("entries")}.filter(x, x.t != '' && ${v("status")}[x.n] == 'volume' && ` +
    `(!(x.n in ${v("rclone")}) || (x.n in ${v("rcloneValues")} && !(x.v in ${
      v("rcloneValues")
    }[x.n]))))`;
  const y = `${offending}[0]`;
  const option = celFill(M.option, {
    option: `${y}.n in ${v("valued")} ? ${y}.n + '=' + ${y}.v : ${y}.n`,
    why: `${y}.n in ${v("rcloneWhy")} ? ' (' + ${v("rcloneWhy")}[${y}.n] + ')' : ''`,
  });
  const value = celFill(M.value, {
    name: `${y}.n`,
    value: `${y}.v`,
    only: `${v("rcloneValues")}[${y}.n].map(o, '"' + o + '"').join(', ')`,
    first: `${v("rcloneValues")}[${y}.n][0]`,
  });
  const readOnly = v("readOnly");
  const del = hasOpt("allow-delete");
  const over = hasOpt("allow-overwrite");
  const writable = celFill(M.writable, {
    what: `!${del} && !${over} ? 'deletes or overwrites' : !${del} ? 'deletes' : 'overwrites'`,
    missing:
      `!${del} && !${over} ? 'allow-delete and allow-overwrite' : !${del} ? 'allow-delete' : 'allow-overwrite'`,
  });
  return `${v("engine")} != 'rclone' ? '' : size(${offending}) > 0 ? (!(${y}.n in ${
    v("rclone")
  }) ? ${option} : ${value}) : !${readOnly} && (!${del} || !${over}) ? ${writable} : ''`;
}

function volumeVariables(defaultEngine: string, defaultCacheLimit: string): Variable[] {
  const attr = (key: string) => `(${Q(key)} in ${v("attrs")} ? ${v("attrs")}[${Q(key)}] : '')`;
  const M = ATTRIBUTE_MESSAGES;
  const bucket = v("bucket");
  return [
    ...optionTables(),
    {
      name: "rclone",
      expression: celStrings([...RCLONE_OPTIONS]),
    },
    {
      name: "rcloneValues",
      expression: celMap(
        MOUNT_OPTION_SPECS.filter((s) => s.rcloneValues).map((s) => [
          s.name,
          celStrings(s.rcloneValues!),
        ]),
      ),
    },
    {
      name: "rcloneWhy",
      expression: celStringMap(
        Object.fromEntries(
          MOUNT_OPTION_SPECS.filter((s) => typeof s.rclone === "string").map((s) => [
            s.name,
            s.rclone as string,
          ]),
        ),
      ),
    },
    {
      name: "attrs",
      expression: "has(object.spec.csi.volumeAttributes) ? object.spec.csi.volumeAttributes : {}",
    },
    { name: "bucket", expression: attr("bucketName") },
    { name: "authAttr", expression: attr("authenticationSource") },
    { name: "auth", expression: `${v("authAttr")} == '' ? 'driver' : ${v("authAttr")}` },
    {
      name: "engine",
      expression: `${attr("engine")} == '' ? ${Q(defaultEngine)} : ${attr("engine")}`,
    },
    ...optionVariables("has(object.spec.mountOptions) ? object.spec.mountOptions : []"),
    {
      name: "bucketProblem",
      expression: `${bucket} == '' ? ${Q(M.bucketMissing)} : !${bucket}.matches(${
        Q(VOLUME_BUCKET_PATTERN)
      }) || ${bucket}.contains('..') ? ${
        celFill(M.bucketInvalid, {
          bucket: `${bucket}.size() > 80 ? ${bucket}.substring(0, 80) : ${bucket}`,
        })
      } : ''`,
    },
    {
      name: "authProblem",
      expression: `!(${inList(v("auth"), AUTHENTICATION_SOURCES)}) ? ${
        celFill(M.authUnknown, { auth: v("auth") })
      } : ''`,
    },
    {
      name: "inlineOnlyProblem",
      expression: `${Q(VOLUME_CONTEXT.mountOptions)} in ${v("attrs")} ? ${
        Q(fill(M.mountOptionsAttribute, { name: VOLUME_CONTEXT.mountOptions }))
      } : ''`,
    },
    {
      name: "engineProblem",
      expression: `!(${inList(v("engine"), ENGINES)}) ? ${
        celFill(M.engineUnknown, { engine: v("engine"), engines: Q(ENGINES.join(", ")) })
      } : ''`,
    },
    ...contextOptionVariables("prefix", attr("prefix")),
    ...contextOptionVariables("region", attr("region")),
    {
      name: "readOnly",
      expression: `${hasOpt("read-only")} || (has(object.spec.accessModes) && ` +
        `size(object.spec.accessModes) > 0 && object.spec.accessModes[0] == 'ReadOnlyMany')`,
    },
    { name: "combinationProblem", expression: combinationProblem() },
    ...cacheAttributeVariables(attr),
    {
      name: "cacheProblem",
      expression: cacheProblem("Volume attribute", hasOpt("cache"), true, defaultCacheLimit),
    },
    { name: "rcloneProblem", expression: rcloneProblem() },
    {
      name: "podIdentityProblem",
      expression: `${v("auth")} == 'pod' && ${v("engine")} == 'rclone' ? ${
        Q(M.podNeedsMountS3)
      } : ''`,
    },
    {
      name: "problem",
      expression: celFirst([
        "bucketProblem",
        "authProblem",
        "inlineOnlyProblem",
        "engineProblem",
        "optionProblem",
        "prefixProblem",
        "regionProblem",
        "combinationProblem",
        "cacheProblem",
        "rcloneProblem",
        "podIdentityProblem",
      ].map(v)),
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// StorageClasses: parseParameters() of src/provisioning/parameters.ts, then the mount options.

function storageClassVariables(): Variable[] {
  const M = PARAMETER_MESSAGES;
  const param = (key: string) => `(${Q(key)} in ${v("params")} ? ${v("params")}[${Q(key)}] : '')`;
  const oneOf = (key: string, value: string, allowed: readonly string[]) =>
    `!(${inList(value, allowed)}) ? ${
      celFill(M.oneOf, { key: Q(key), value, allowed: Q(allowed.join(", ")) })
    } : ''`;
  const mode = v("mode");
  const bucketName = v("bucketNameParam");
  const bucketNamePrefix = v("bucketNamePrefixParam");
  const basePrefix = v("basePrefixParam");
  const region = param(PARAM.region);
  const auth = param(PARAM.authenticationSource);
  const engine = param(PARAM.engine);
  const unknown = `${v("params")}.filter(k, !(k in ${v("known")}))`;
  const bucketRules = v("bucketRules");
  const prefixRules = v("bucketNamePrefixRules");
  const baseRules = v("basePrefixRules");
  return [
    ...optionTables(),
    { name: "bucketRules", expression: celRules(BUCKET_NAME_RULES) },
    { name: "bucketNamePrefixRules", expression: celRules(BUCKET_NAME_PREFIX_RULES) },
    { name: "basePrefixRules", expression: celRules(BASE_PREFIX_RULES) },
    { name: "params", expression: "has(object.parameters) ? object.parameters : {}" },
    { name: "bucketNameParam", expression: param(PARAM.bucketName) },
    { name: "bucketNamePrefixParam", expression: param(PARAM.bucketNamePrefix) },
    { name: "basePrefixParam", expression: param(PARAM.basePrefix) },
    { name: "known", expression: celStrings(KNOWN_PARAMETERS) },
    {
      name: "unknownProblem",
      expression: `size(${unknown}) == 0 ? '' : ${
        celFill(M.unknown, {
          first: `${unknown}.min()`,
          more: `size(${unknown}) > 1 ? ${
            celFill(M.unknownMore, { count: `string(size(${unknown}) - 1)` })
          } : ''`,
          allowed: Q(Object.values(PARAM).join(", ")),
        })
      }`,
    },
    {
      name: "mode",
      expression: `${param(PARAM.mode)} == '' ? 'bucket' : ${param(PARAM.mode)}`,
    },
    {
      name: "deletePolicy",
      expression: `${param(PARAM.deletePolicy)} == '' ? 'delete-if-empty' : ${
        param(PARAM.deletePolicy)
      }`,
    },
    { name: "modeProblem", expression: oneOf(PARAM.mode, mode, MODES) },
    {
      name: "deletePolicyProblem",
      expression: oneOf(PARAM.deletePolicy, v("deletePolicy"), DELETE_POLICIES),
    },
    {
      name: "layoutProblem",
      expression: `${mode} == 'prefix' ? (${
        [
          `${bucketName} == '' ? ${Q(M.prefixNeedsBucket)}`,
          `${celRuleProblem(bucketRules, bucketName)} != '' ? ${
            celFill(M.bucketName, {
              value: bucketName,
              problem: celRuleProblem(bucketRules, bucketName),
            })
          }`,
          `${bucketNamePrefix} != '' ? ${Q(M.prefixNoBucketNamePrefix)}`,
          `${basePrefix} != '' && ${celRuleProblem(baseRules, basePrefix)} != '' ? ${
            celFill(M.basePrefix, {
              value: basePrefix,
              problem: celRuleProblem(baseRules, basePrefix),
            })
          }`,
        ].join(" : ")
      } : '') : (${
        [
          `${bucketName} != '' ? ${Q(M.bucketNoBucketName)}`,
          `${basePrefix} != '' ? ${Q(M.bucketNoBasePrefix)}`,
          `${bucketNamePrefix} != '' && ${celRuleProblem(prefixRules, bucketNamePrefix)} != '' ? ${
            celFill(M.bucketNamePrefix, {
              value: bucketNamePrefix,
              problem: celRuleProblem(prefixRules, bucketNamePrefix),
            })
          }`,
        ].join(" : ")
      } : '')`,
    },
    {
      name: "regionProblem",
      expression: `${region} != '' && !${region}.matches(${Q(REGION_PATTERN)}) ? ${
        celFill(M.region, { value: region })
      } : ''`,
    },
    {
      name: "authProblem",
      expression: `${auth} == '' ? '' : ${
        oneOf(PARAM.authenticationSource, auth, PARAMETER_AUTH_SOURCES)
      }`,
    },
    {
      name: "engineProblem",
      expression: `${engine} == '' ? '' : ${oneOf(PARAM.engine, engine, ENGINES)}`,
    },
    ...cacheAttributeVariables(param),
    { name: "cache", expression: cacheProblem("parameter", "false", false) },
    {
      name: "cacheProblem",
      expression: `${v("cache")} == '' ? '' : ${celFill(M.cache, { problem: v("cache") })}`,
    },
    ...optionVariables("has(object.mountOptions) ? object.mountOptions : []"),
    {
      name: "problem",
      expression: celFirst([
        "unknownProblem",
        "modeProblem",
        "deletePolicyProblem",
        "layoutProblem",
        "regionProblem",
        "authProblem",
        "engineProblem",
        "cacheProblem",
        "optionProblem",
      ].map(v)),
    },
  ];
}

function policy(
  v: DeployValues,
  name: string,
  resource: "persistentvolumes" | "storageclasses",
  operations: string[],
  match: string,
  variables: Variable[],
  what: string,
): Manifest[] {
  return admissionPolicy({
    name,
    labels: commonLabels(v, "admission"),
    bindingAnnotations: { [`${DRIVER_NAME}/validates`]: what },
    spec: {
      matchConstraints: {
        resourceRules: [
          resourceRule(
            resource === "persistentvolumes" ? "" : "storage.k8s.io",
            [resource],
            operations,
            ["v1"],
          ),
        ],
      },
      matchConditions: [{ name: `s3-csi-${resource}`, expression: match }],
      variables,
      validations: [{
        expression: "variables.problem == ''",
        messageExpression: "variables.problem",
        reason: "Invalid",
      }],
    },
  });
}

/** The rendered default engine of volumes without an `engine` attribute. */
function defaultEngineOf(v: DeployValues): string {
  return v.node.settings["default-engine"] ?? DEFAULT_ENGINE;
}

/** The policies and bindings, when `validateVolumes` is on. */
export function renderVolumePolicies(values: DeployValues): Manifest[] {
  if (!values.validateVolumes) return [];
  const csi = "has(object.spec.csi) && object.spec.csi.driver == " + Q(DRIVER_NAME);
  const changed = "request.operation == 'CREATE' || !has(oldObject.spec.csi) || " +
    "oldObject.spec.csi != object.spec.csi || " +
    "(has(object.spec.mountOptions) ? object.spec.mountOptions : []) != " +
    "(has(oldObject.spec.mountOptions) ? oldObject.spec.mountOptions : [])";
  return [
    ...policy(
      values,
      VOLUME_POLICY,
      "persistentvolumes",
      ["CREATE", "UPDATE"],
      `${csi} && (${changed})`,
      volumeVariables(defaultEngineOf(values), values.mountpointPod.cacheSizeLimit),
      "PersistentVolumes: mount options and volume attributes, as NodePublishVolume checks them",
    ),
    ...policy(
      values,
      STORAGE_CLASS_POLICY,
      "storageclasses",
      ["CREATE"],
      `object.provisioner == ${Q(DRIVER_NAME)}`,
      storageClassVariables(),
      "StorageClasses: parameters as CreateVolume checks them, and mount options",
    ),
  ];
}
