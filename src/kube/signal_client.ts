/**
 * A {@link KubeClient} whose every call also ends when one signal aborts.
 *
 * @module
 */
import type { CallOptions, KubeClient } from "./client.ts";

/**
 * `client` with `signal` added to every call: when it aborts, every call in flight or to come fails
 * at once (a leader's work ends with its term, not at each request's deadline).
 */
export function withSignal(client: KubeClient, signal: AbortSignal): KubeClient {
  const s = (opts?: CallOptions) => opts?.signal ? AbortSignal.any([opts.signal, signal]) : signal;
  return {
    get: (r, name, namespace, opts) => client.get(r, name, namespace, { ...opts, signal: s(opts) }),
    list: (r, opts) => client.list(r, { ...opts, signal: s(opts) }),
    create: (r, obj, opts) => client.create(r, obj, { ...opts, signal: s(opts) }),
    update: (r, obj, opts) => client.update(r, obj, { ...opts, signal: s(opts) }),
    patch: (r, name, namespace, patch, opts) =>
      client.patch(r, name, namespace, patch, { ...opts, signal: s(opts) }),
    delete: (r, name, namespace, opts) =>
      client.delete(r, name, namespace, { ...opts, signal: s(opts) }),
    watch: (r, opts, onEvent) => client.watch(r, { ...opts, signal: s(opts) }, onEvent),
  };
}
