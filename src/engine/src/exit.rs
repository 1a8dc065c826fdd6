//! Exit codes of `mount-s3` and the one-line failure that goes with each.
//!
//! The mounter (src/mounter/ of the driver) reports a failing engine's last stderr line in
//! `mount.error`; these codes let it tell the user *what kind* of problem it was.

use std::fmt;

/// The file system was unmounted, or SIGINT/SIGTERM stopped it cleanly.
pub const OK: u8 = 0;
/// The FUSE session failed while serving (or an unexpected internal error).
pub const RUNTIME: u8 = 1;
/// Bad command line or environment value (usage error).
pub const USAGE: u8 = 2;
/// Local setup failed: mount point or FUSE fd, cache directory, CA bundle, credential files.
pub const SETUP: u8 = 3;
/// The bucket does not exist.
pub const BUCKET_NOT_FOUND: u8 = 4;
/// Access denied, or no usable credentials.
pub const ACCESS_DENIED: u8 = 5;
/// The S3 endpoint is unreachable (DNS, connection, TLS, proxy) or answered with an error.
pub const S3_UNAVAILABLE: u8 = 6;
/// A panic (an internal error) on any thread: see `panic_hook.rs`.
pub const PANIC: u8 = 7;
/// SIGUSR1: the session was handed over at a request boundary; the next engine resumes it.
pub const HANDED_OVER: u8 = 8;

/// A fatal problem: its exit code and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        // One line, whatever the source text holds.
        let message: String = message.into();
        let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
        Self { code, message }
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }
    pub fn setup(message: impl Into<String>) -> Self {
        Self::new(SETUP, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// An error chain (`anyhow` style) as one line: "outer: inner: root".
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let f = Failure::setup("cache dir\n  /x is not writable\t(EACCES)");
        assert_eq!(f.message, "cache dir /x is not writable (EACCES)");
        assert_eq!(f.code, SETUP);
    }

    #[test]
    fn chains_join_sources_without_repeats() {
        let inner = std::io::Error::other("disk full");
        let outer = anyhow::Error::new(inner).context("writing block");
        assert_eq!(chain(outer.as_ref()), "writing block: disk full");
    }
}
