//! When the supervisor restarts the engine, and when it gives up.

use std::time::{Duration, Instant};

/// How an engine process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// `exit(code)`.
    Code(i32),
    /// Killed by a signal (SIGKILL of the OOM killer or an operator, SIGSEGV, SIGABRT …).
    Signal(i32),
}

/// `mount-s3`'s exit codes that the supervisor tells apart (src/engine/src/exit.rs).
pub mod engine_exit {
    /// Unmounted, or stopped cleanly (SIGINT/SIGTERM).
    pub const OK: i32 = 0;
    /// The FUSE session failed while serving.
    pub const RUNTIME: i32 = 1;
    /// Local setup failed (mount point, FUSE fd, cache, CA bundle, session table).
    pub const SETUP: i32 = 3;
    /// A panic (our hook's code).
    pub const PANIC: i32 = 7;
    /// Handed over at a request boundary (SIGUSR1).
    pub const HANDED_OVER: i32 = 8;
    /// A panic without our hook (Rust's default).
    pub const RUST_PANIC: i32 = 101;
}

/// An engine that served this long before it died is not in a crash loop.
pub const STABLE: Duration = Duration::from_secs(1);

/// What to do after the engine ended without an unmount request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start it again (resuming the session) after this pause.
    Restart { after: Duration, attempt: u32 },
    /// The session ended (the connection is gone): exit so the container restarts and waits for a
    /// new mount.
    SessionEnded,
    /// It failed in a way a restart does not fix (a bad configuration at the first start), or it
    /// cannot resume: report it and exit.
    Fail,
    /// It keeps failing: report it and answer EIO until the volume is mounted again.
    GiveUp { restarts: u32 },
}

/// Restart budget: at most `max` restarts within `window`. An engine that had served for at least
/// [STABLE] is started again at once (it crashed, it is not a crash loop); one that died sooner
/// waits 250 ms, 500 ms, 1 s … (capped) — the first restart in the window is always immediate.
#[derive(Debug, Clone)]
pub struct Policy {
    pub resumable: bool,
    pub max: u32,
    pub window: Duration,
    pub max_pause: Duration,
    restarts: Vec<Instant>,
}

impl Policy {
    pub fn new(resumable: bool, max: u32, window: Duration) -> Self {
        Self {
            resumable,
            max,
            window,
            max_pause: Duration::from_secs(5),
            restarts: Vec::new(),
        }
    }

    /// Decide after an engine ended at `now`; `resumed_start` says whether that engine was itself a
    /// resumed one (its setup failures mean the session cannot be resumed).
    pub fn decide(&mut self, ended: Ended, resumed_start: bool, lived: Duration, now: Instant) -> Decision {
        let crashed = match ended {
            Ended::Signal(_) => true,
            Ended::Code(engine_exit::OK) => return Decision::SessionEnded,
            Ended::Code(engine_exit::HANDED_OVER) if self.resumable => {
                // Planned: no pause, and it does not count against the budget.
                return Decision::Restart {
                    after: Duration::ZERO,
                    attempt: self.recent(now),
                };
            }
            Ended::Code(engine_exit::RUNTIME | engine_exit::PANIC | engine_exit::RUST_PANIC) => true,
            Ended::Code(engine_exit::SETUP) if resumed_start => {
                return if self.resumable { Decision::GiveUp { restarts: self.recent(now) } } else { Decision::Fail };
            }
            Ended::Code(_) if resumed_start && self.resumable => true,
            Ended::Code(_) => false,
        };
        if !crashed || !self.resumable {
            return Decision::Fail;
        }
        let recent = self.recent(now);
        if recent >= self.max {
            return Decision::GiveUp { restarts: recent };
        }
        self.restarts.push(now);
        let after = if recent == 0 || lived >= STABLE {
            Duration::ZERO
        } else {
            (Duration::from_millis(250) * 2u32.saturating_pow(recent - 1)).min(self.max_pause)
        };
        Decision::Restart {
            after,
            attempt: recent + 1,
        }
    }

    /// Restarts within the window before `now`.
    fn recent(&mut self, now: Instant) -> u32 {
        let window = self.window;
        self.restarts.retain(|t| now.saturating_duration_since(*t) < window);
        self.restarts.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that died soon after it started (a crash loop's).
    const SHORT: Duration = Duration::from_millis(100);

    fn policy() -> Policy {
        Policy::new(true, 3, Duration::from_secs(60))
    }

    #[test]
    fn an_engine_that_served_a_while_restarts_at_once() {
        let mut p = policy();
        let t0 = Instant::now();
        let kill = Ended::Signal(libc::SIGKILL);
        for i in 0..3 {
            assert_eq!(
                p.decide(kill, true, STABLE, t0 + Duration::from_secs(10 * i)),
                Decision::Restart { after: Duration::ZERO, attempt: i as u32 + 1 }
            );
        }
        assert_eq!(p.decide(kill, true, STABLE, t0 + Duration::from_secs(35)), Decision::GiveUp { restarts: 3 });
    }

    #[test]
    fn crashes_restart_with_growing_pauses_then_give_up() {
        let mut p = policy();
        let t0 = Instant::now();
        let kill = Ended::Signal(libc::SIGKILL);
        assert_eq!(p.decide(kill, false, SHORT, t0), Decision::Restart { after: Duration::ZERO, attempt: 1 });
        assert_eq!(
            p.decide(Ended::Code(engine_exit::PANIC), true, SHORT, t0 + Duration::from_secs(1)),
            Decision::Restart { after: Duration::from_millis(250), attempt: 2 }
        );
        assert_eq!(
            p.decide(Ended::Signal(libc::SIGSEGV), true, SHORT, t0 + Duration::from_secs(2)),
            Decision::Restart { after: Duration::from_millis(500), attempt: 3 }
        );
        assert_eq!(p.decide(kill, true, SHORT, t0 + Duration::from_secs(3)), Decision::GiveUp { restarts: 3 });
    }

    #[test]
    fn the_budget_is_per_window() {
        let mut p = policy();
        let t0 = Instant::now();
        let kill = Ended::Signal(libc::SIGKILL);
        for i in 0..3 {
            assert!(matches!(p.decide(kill, true, SHORT, t0 + Duration::from_secs(i)), Decision::Restart { .. }));
        }
        // A minute after the first three, the engine may crash again.
        assert_eq!(
            p.decide(kill, true, SHORT, t0 + Duration::from_secs(70)),
            Decision::Restart { after: Duration::ZERO, attempt: 1 }
        );
    }

    #[test]
    fn handover_is_free_and_immediate() {
        let mut p = policy();
        let t0 = Instant::now();
        for _ in 0..10 {
            assert!(matches!(
                p.decide(Ended::Code(engine_exit::HANDED_OVER), true, SHORT, t0),
                Decision::Restart { after, .. } if after.is_zero()
            ));
        }
    }

    #[test]
    fn configuration_errors_and_session_end_are_not_restarted() {
        let mut p = policy();
        let t0 = Instant::now();
        assert_eq!(p.decide(Ended::Code(engine_exit::OK), false, SHORT, t0), Decision::SessionEnded);
        // A first start that fails on its configuration (2-6) is reported, never retried.
        for code in [2, 3, 4, 5, 6] {
            assert_eq!(p.decide(Ended::Code(code), false, SHORT, t0), Decision::Fail, "code {code}");
        }
        // A resumed start that cannot set up (no table, another session) cannot be retried either.
        assert_eq!(p.decide(Ended::Code(engine_exit::SETUP), true, SHORT, t0), Decision::GiveUp { restarts: 0 });
        // S3 unreachable while resuming: retried (the workloads wait), within the budget.
        assert!(matches!(p.decide(Ended::Code(6), true, SHORT, t0), Decision::Restart { .. }));
    }

    #[test]
    fn an_engine_that_cannot_resume_is_never_restarted() {
        let mut p = Policy::new(false, 3, Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(p.decide(Ended::Signal(libc::SIGKILL), false, SHORT, t0), Decision::Fail);
        assert_eq!(p.decide(Ended::Code(engine_exit::HANDED_OVER), false, SHORT, t0), Decision::Fail);
    }
}
