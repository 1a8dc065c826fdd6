//! The start (S3 client creation and the bucket check) has one overall deadline,
//! `MOUNT_S3_START_TIMEOUT` seconds (default 20), below the node plugin's 30 s wait for a mount:
//! a server that accepts connections and never answers would otherwise hold the start for about a
//! minute and a half (three attempts of the AWS Common Runtime's own timeouts), and the user would
//! see the node's timeout instead of the reason. When it passes, the start fails with exit code 6
//! and a line naming the endpoint.

use std::future::Future;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::future::{Either, select};

use crate::exit::Failure;

/// The variable that sets the deadline, in seconds.
pub const VAR: &str = "MOUNT_S3_START_TIMEOUT";
/// Default deadline: below the node plugin's 30 s mount timeout, with room for the FUSE session.
pub const DEFAULT: Duration = Duration::from_secs(20);
/// Longest accepted deadline.
const MAX_SECONDS: u64 = 3600;

/// When the start must be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartDeadline {
    started: Instant,
    limit: Duration,
}

impl StartDeadline {
    /// From `MOUNT_S3_START_TIMEOUT` (seconds, 1 to 3600), counted from now.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, Failure> {
        let limit = match env(VAR).map(|v| v.trim().to_string()).filter(|v| !v.is_empty()) {
            None => DEFAULT,
            Some(v) => Duration::from_secs(
                v.parse::<u64>()
                    .ok()
                    .filter(|s| (1..=MAX_SECONDS).contains(s))
                    .ok_or_else(|| {
                        Failure::usage(format!("{VAR}='{v}' must be a number of seconds from 1 to {MAX_SECONDS}"))
                    })?,
            ),
        };
        Ok(Self {
            started: Instant::now(),
            limit,
        })
    }

    /// The configured limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Run `future` to its end, or until the deadline (`None`; the future is dropped, which
    /// cancels an S3 request).
    pub fn block_on<F: Future>(&self, future: F) -> Option<F::Output> {
        let left = self.limit.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return None;
        }
        let (tx, rx) = oneshot::channel::<()>();
        // The timer thread ends on its own; when the future wins, its send fails harmlessly.
        let timer = std::thread::Builder::new().name("start-deadline".into()).spawn(move || {
            std::thread::sleep(left);
            let _ = tx.send(());
        });
        if timer.is_err() {
            return Some(futures::executor::block_on(future));
        }
        match futures::executor::block_on(select(Box::pin(future), rx)) {
            Either::Left((output, _)) => Some(output),
            Either::Right(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadline(value: Option<&str>) -> Result<StartDeadline, Failure> {
        let value = value.map(str::to_string);
        StartDeadline::from_env(&|name| if name == VAR { value.clone() } else { None })
    }

    #[test]
    fn defaults_to_twenty_seconds_and_checks_the_variable() {
        assert_eq!(deadline(None).unwrap().limit(), Duration::from_secs(20));
        assert_eq!(deadline(Some("5")).unwrap().limit(), Duration::from_secs(5));
        for bad in ["0", "x", "-1", "3601"] {
            let e = deadline(Some(bad)).unwrap_err();
            assert_eq!(e.code, crate::exit::USAGE);
            assert!(e.message.starts_with(&format!("MOUNT_S3_START_TIMEOUT='{bad}' must be")), "{}", e.message);
        }
    }

    #[test]
    fn a_future_that_ends_in_time_gives_its_output() {
        assert_eq!(deadline(Some("5")).unwrap().block_on(async { 7 }), Some(7));
    }

    #[test]
    fn a_future_that_never_ends_is_cut_at_the_deadline() {
        let d = deadline(Some("1")).unwrap();
        let t = Instant::now();
        assert_eq!(d.block_on(futures::future::pending::<()>()), None);
        assert!(t.elapsed() >= Duration::from_millis(900) && t.elapsed() < Duration::from_secs(5));
        // Once passed, nothing more is started.
        assert_eq!(d.block_on(async { 1 }), None);
    }
}
