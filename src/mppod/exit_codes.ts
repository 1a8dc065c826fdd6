/**
 * Exit codes of the mounter, the entrypoint of Mountpoint Pods. The Mountpoint Pod uses
 * `restartPolicy: OnFailure`, so 0 ends the pod (`Succeeded`, then deleted by the controller) and
 * anything else restarts the container, which waits for a new mount message.
 *
 * Writer: mounter. Readers: kubelet (restart policy), controller (pod phase), operators.
 *
 * @module
 */

/** The node plugin asked for the exit (`mount.exit` exists) and the engine stopped cleanly. */
export const MOUNTER_EXIT_OK = 0;
/** The engine stopped although no exit was asked for: restart and wait for a new mount. */
export const MOUNTER_EXIT_RESTART = 1;
/** Invalid flags or environment. */
export const MOUNTER_EXIT_CONFIG = 2;
/** No valid mount message arrived before the receive timeout. */
export const MOUNTER_EXIT_NO_MESSAGE = 3;
/** The engine failed to start or exited with an error; details are in `mount.error`. */
export const MOUNTER_EXIT_ENGINE_FAILED = 4;
