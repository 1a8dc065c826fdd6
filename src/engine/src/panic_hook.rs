//! A panic, on any thread, ends the engine with one line on stderr and a known exit code:
//!
//! `mount-s3: error: internal error (panic): <message> at <file>:<line>:<column>`, exit 7.
//!
//! Rust's default hook prints several lines (and a backtrace hint) and the process exits 101 only
//! when the main thread panics; a panic on a FUSE worker or S3 client thread would leave the engine
//! running without that thread. The mounter forwards the last stderr line to `mount.error`, so the
//! user sees what happened and the pod restarts the engine.
//!
//! Test-only trigger: `MOUNT_S3_TEST_PANIC=start` panics on the main thread before anything
//! starts; `MOUNT_S3_TEST_PANIC=serving` panics on the metrics endpoint's thread at its first
//! connection (`metrics.rs`), i.e. on another thread while the file system serves. The variable
//! cannot reach the engine through the driver: the node plugin builds the engine's whole
//! environment (credential files, region, endpoint, attempts, proxy) and the mounter adds only
//! fixed names.

use std::io::Write as _;
use std::panic::PanicHookInfo;

use crate::exit;

/// Test-only trigger (see the module's documentation).
pub const TEST_PANIC_VAR: &str = "MOUNT_S3_TEST_PANIC";

/// Install the hook (first thing in `main`).
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let line = format!("mount-s3: error: {}", message(info));
        // One write of the whole line; the lock is re-entrant if this thread held it.
        let _ = writeln!(std::io::stderr().lock(), "{line}");
        std::process::exit(i32::from(exit::PANIC));
    }));
}

/// `internal error (panic): <message> at <location>`, on one line.
fn message(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    let at = info.location().map(|l| l.to_string()).unwrap_or_else(|| "an unknown location".into());
    exit::Failure::new(exit::PANIC, format!("internal error (panic): {text} at {at}")).message
}

/// `MOUNT_S3_TEST_PANIC=start`: panic now (tests only, see the module's documentation).
pub fn test_trigger_at_start(env: &dyn Fn(&str) -> Option<String>) {
    if env(TEST_PANIC_VAR).as_deref() == Some("start") {
        panic!("{}=start: test panic at start", TEST_PANIC_VAR);
    }
}
