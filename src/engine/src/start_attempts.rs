//! Fewer attempts for the bucket check at start, on the mount's own S3 client.
//!
//! The check at start (mount.rs) must fail within seconds when the endpoint, CA, proxy or network
//! is wrong, so it gets at most 3 attempts where the mount's requests get `AWS_MAX_ATTEMPTS` (10).
//! The AWS Common Runtime fixes a client's attempts when the client is made, and making a second
//! client for the check costs about 10 ms of CPU at every start (its event loops and two TLS
//! contexts that each parse the system's CA store): the start was ~8 ms slower than upstream's
//! `mount-s3`, which checks the bucket on its one client (docs/benchmarks.md, "experiments").
//!
//! So the link step wraps the CRT's `aws_retry_strategy_schedule_retry` (`-Wl,--wrap=...`, see
//! build.rs), the one function through which every retry of the CRT is scheduled. While a
//! [`Limit`] is alive, a retry token that already had `attempts - 1` retries is refused another
//! one, the way the standard retry strategy refuses past its own maximum
//! (`AWS_IO_MAX_RETRIES_EXCEEDED`): the CRT then ends the request with the error of its last
//! attempt, which the check reports. Without a limit the call goes through unchanged, at the cost
//! of one atomic load per retry.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use mountpoint_s3_crt_sys::{
    aws_io_errors, aws_raise_error_private, aws_retry_error_type, aws_retry_strategy_on_retry_ready_fn, aws_retry_token,
};

/// Attempts per retry token while a [`Limit`] is alive; 0: no limit.
static ATTEMPTS: AtomicU32 = AtomicU32::new(0);
/// Retries scheduled per token (by address) while a [`Limit`] is alive.
static RETRIES: Mutex<Option<Retries>> = Mutex::new(None);

/// At most `attempts` attempts per CRT request until this value is dropped (one at a time).
#[derive(Debug)]
#[must_use = "the limit ends when this value is dropped"]
pub struct Limit(());

impl Limit {
    pub fn new(attempts: u32) -> Self {
        *lock() = Some(Retries::new(attempts.max(1)));
        ATTEMPTS.store(attempts.max(1), Ordering::SeqCst);
        Limit(())
    }
}

impl Drop for Limit {
    fn drop(&mut self) {
        ATTEMPTS.store(0, Ordering::SeqCst);
        *lock() = None;
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<Retries>> {
    RETRIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The retry count of each token seen while limited. A token's address may be reused after it is
/// freed (a request that ended); a reused address only ever gets fewer attempts, never more.
#[derive(Debug)]
struct Retries {
    attempts: u32,
    by_token: HashMap<usize, u32>,
}

impl Retries {
    fn new(attempts: u32) -> Self {
        Self {
            attempts,
            by_token: HashMap::new(),
        }
    }

    /// Whether `token` may be retried once more (and count it).
    fn allow(&mut self, token: usize) -> bool {
        let retries = self.by_token.entry(token).or_insert(0);
        if *retries + 1 >= self.attempts {
            return false;
        }
        *retries += 1;
        true
    }
}

unsafe extern "C" {
    /// The CRT's own `aws_retry_strategy_schedule_retry` (`__real_` under `--wrap`).
    fn __real_aws_retry_strategy_schedule_retry(
        token: *mut aws_retry_token,
        error_type: aws_retry_error_type,
        retry_ready: aws_retry_strategy_on_retry_ready_fn,
        user_data: *mut c_void,
    ) -> c_int;
}

/// Called instead of `aws_retry_strategy_schedule_retry` (see the module docs).
///
/// # Safety
/// Same contract as `aws_retry_strategy_schedule_retry`: a valid token, callback and user data.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_aws_retry_strategy_schedule_retry(
    token: *mut aws_retry_token,
    error_type: aws_retry_error_type,
    retry_ready: aws_retry_strategy_on_retry_ready_fn,
    user_data: *mut c_void,
) -> c_int {
    if ATTEMPTS.load(Ordering::SeqCst) != 0 {
        let allowed = match lock().as_mut() {
            Some(retries) => retries.allow(token as usize),
            None => true,
        };
        if !allowed {
            // SAFETY: sets the calling thread's CRT error code; AWS_OP_ERR (-1) says it is set.
            unsafe { aws_raise_error_private(aws_io_errors::AWS_IO_MAX_RETRIES_EXCEEDED as c_int) };
            return -1;
        }
    }
    // SAFETY: forwarded unchanged.
    unsafe { __real_aws_retry_strategy_schedule_retry(token, error_type, retry_ready, user_data) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gets_attempts_minus_one_retries() {
        let mut r = Retries::new(3);
        assert!(r.allow(1));
        assert!(r.allow(2));
        assert!(r.allow(1));
        assert!(!r.allow(1), "a third retry is a fourth attempt");
        assert!(!r.allow(1));
        assert!(r.allow(2));
        assert!(!r.allow(2));
        let mut one = Retries::new(1);
        assert!(!one.allow(7), "one attempt: no retry");
    }

    #[test]
    fn the_limit_ends_with_its_value() {
        {
            let _limit = Limit::new(3);
            assert_eq!(ATTEMPTS.load(Ordering::SeqCst), 3);
            assert!(lock().is_some());
        }
        assert_eq!(ATTEMPTS.load(Ordering::SeqCst), 0);
        assert!(lock().is_none());
    }
}
