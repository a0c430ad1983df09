// @ts-check
// The target clock and the conversions to it. The clock is the main
// thread's performance.now() in ns (monotonic, since the adapter started):
// the thread that serves the protocol. The SDK runs in a worker thread (its
// own event loop: a wide fan-out keeps the SDK's loop busy for seconds, and
// the protocol's answers and clock must not wait behind it); the worker
// stamps times as absolute ms (performance.timeOrigin + performance.now(),
// 0.25 µs resolution), which the main thread converts to its clock.

/**
 * now is the target clock: monotonic ns since the adapter started.
 * @returns {number}
 */
export const now = () => Math.round(performance.now() * 1e6);

/**
 * abs is a performance.now() of this thread as absolute ms.
 * @param {number} t
 * @returns {number}
 */
export const abs = (t) => performance.timeOrigin + t;

/**
 * toClock converts absolute ms (from either thread) to the target clock,
 * never after now.
 * @param {number} ms
 * @returns {number}
 */
export const toClock = (ms) => Math.min(Math.round((ms - performance.timeOrigin) * 1e6), now());

/**
 * fromWall is an event-log Date (wall clock, ms) as absolute ms: the middle
 * of its millisecond.
 * @param {Date | string | number} d
 * @returns {number}
 */
export const fromWall = (d) => new Date(d).getTime() + 0.5;
