/**
 * Accounting of the request bytes a server holds for its peers, and the HTTP/2 flow control that
 * keeps them bounded (RFC 9113 §5.2, §6.9):
 *
 * - {@link ReceiveBudget}: the bytes the whole server holds (request header lists and bodies, from
 *   their arrival until their handler ends), shared by its connections, with a limit.
 * - {@link ReceiveFlow}: one connection's side. The peer may send DATA only within the window we
 *   granted; a frame beyond it is a `FLOW_CONTROL_ERROR` ({@link ReceiveFlow.receive} is false).
 *   The window is reopened ({@link ReceiveFlow.grant}) only while the bytes the connection holds
 *   plus its open window stay within the connection's limit and the server's budget has room, so
 *   a peer that keeps streams open without finishing them stalls instead of growing the process.
 *
 * Bounds: a connection holds at most its limit; the server at most its budget plus one window per
 * connection (windows are granted against the budget's room, not reserved from it).
 *
 * @module
 */
import { checkLimit } from "./limits.ts";

/** The smallest window reopening worth a WINDOW_UPDATE frame, unless it reopens it completely. */
const MIN_GRANT = 1024;

/** The request bytes held by a whole server. */
export class ReceiveBudget {
  readonly limit: number;
  #used = 0;
  readonly #waiters = new Set<() => void>();

  /** A budget of `limit` bytes. */
  constructor(limit: number) {
    this.limit = checkLimit("ReceiveBudget", "limit", limit, 1);
  }

  /** Bytes held now (may exceed the limit by the windows granted before, see the module doc). */
  get used(): number {
    return this.#used;
  }

  /** Bytes that may still be granted or held (0 when full). */
  get room(): number {
    return Math.max(0, this.limit - this.#used);
  }

  /** Count `n` bytes as held. */
  take(n: number): void {
    this.#used += n;
  }

  /** Give `n` held bytes back, and wake every waiter (each checks again, and waits again). */
  give(n: number): void {
    this.#used -= n;
    if (this.#waiters.size === 0) return;
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) w();
  }

  /** Call `wake` once, the next time bytes are given back; the result cancels it. */
  onRelease(wake: () => void): () => void {
    this.#waiters.add(wake);
    return () => this.#waiters.delete(wake);
  }

  /** Waiters registered (for tests). */
  get waiting(): number {
    return this.#waiters.size;
  }
}

/** The receive side of one connection: its window and the bytes it holds. */
export class ReceiveFlow {
  readonly #budget: ReceiveBudget;
  readonly #limit: number;
  readonly #target: number;
  #window: number;
  #held = 0;

  /**
   * `initialWindow` is what the peer may send before any WINDOW_UPDATE (the protocol's 65,535 for
   * a connection); `target` the window reopened to; `limit` bounds held bytes plus the window.
   */
  constructor(
    budget: ReceiveBudget,
    options: { readonly limit: number; readonly initialWindow: number; readonly target: number },
  ) {
    this.#budget = budget;
    this.#limit = checkLimit("ReceiveFlow", "limit", options.limit, options.initialWindow);
    this.#window = checkLimit("ReceiveFlow", "initialWindow", options.initialWindow);
    this.#target = checkLimit("ReceiveFlow", "target", options.target, 1);
  }

  /** What the peer may still send. */
  get window(): number {
    return this.#window;
  }

  /** Bytes held for this connection's streams. */
  get held(): number {
    return this.#held;
  }

  /** The peer sent `length` flow-controlled bytes; false when they exceed the window. */
  receive(length: number): boolean {
    if (!(length <= this.#window)) return false;
    this.#window -= length;
    return true;
  }

  /**
   * Hold `n` bytes that no window protects (a header list) if they fit in the connection's limit
   * and the server's budget; false otherwise (the stream is refused).
   */
  tryHold(n: number): boolean {
    if (!(this.#held + this.#window + n <= this.#limit) || !(n <= this.#budget.room)) return false;
    this.hold(n);
    return true;
  }

  /** Hold `n` bytes received within the window (they fit: the window was granted for them). */
  hold(n: number): void {
    this.#held += n;
    this.#budget.take(n);
  }

  /** Give back `n` held bytes (their stream ended and its handler returned). */
  release(n: number): void {
    this.#held -= n;
    this.#budget.give(n);
  }

  /**
   * The increment to announce now in a connection WINDOW_UPDATE (0: none), reopening the window
   * towards its target as far as the connection's limit and the server's room allow.
   */
  grant(): number {
    const want = this.#target - this.#window;
    if (!(want > 0)) return 0;
    const fits = Math.min(want, this.#limit - this.#held - this.#window, this.#budget.room);
    if (!(fits >= Math.min(want, MIN_GRANT))) return 0;
    this.#window += fits;
    return fits;
  }

  /** The window is below its target (a grant is due once bytes are released). */
  get wantsGrant(): boolean {
    return this.#window < this.#target;
  }
}
