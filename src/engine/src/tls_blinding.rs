//! Fast failure of TLS handshakes.
//!
//! The CRT's TLS library (s2n-tls) "blinds" every TLS error: the connection is closed only after a
//! random 10-30 s delay (`s2n_connection_get_delay`, which the CRT's channel handler waits for).
//! That delay protects decrypted application data against timing attacks (Lucky13-style padding
//! oracles), but it also applies to a handshake that fails because the server's certificate is
//! untrusted. With 10 attempts per request a mount with a wrong CA bundle would hang for minutes
//! before saying why. The link step wraps `s2n_connection_get_delay` (see build.rs): while the
//! handshake is incomplete there is no application data to protect and the delay is 0; once
//! application data flowed, s2n's delay is kept.

use std::ffi::{CStr, c_char, c_void};

unsafe extern "C" {
    /// s2n's own `s2n_connection_get_delay` (the linker resolves `__real_` to it under `--wrap`).
    fn __real_s2n_connection_get_delay(conn: *mut c_void) -> u64;
    /// Name of the last TLS message handled; `APPLICATION_DATA` once the handshake is complete.
    fn s2n_connection_get_last_message_name(conn: *mut c_void) -> *const c_char;
}

/// Called instead of `s2n_connection_get_delay`.
///
/// # Safety
/// `conn` is a valid s2n connection, as for the wrapped function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_s2n_connection_get_delay(conn: *mut c_void) -> u64 {
    // SAFETY: forwarded unchanged.
    let delay = unsafe { __real_s2n_connection_get_delay(conn) };
    if delay == 0 || conn.is_null() {
        return delay;
    }
    // SAFETY: `conn` is valid; s2n returns a static string or null.
    let name = unsafe { s2n_connection_get_last_message_name(conn) };
    // SAFETY: a non-null result is a NUL-terminated static string.
    let handshake_done = !name.is_null() && unsafe { CStr::from_ptr(name) }.to_bytes() == b"APPLICATION_DATA";
    if handshake_done {
        delay
    } else {
        tracing::debug!(
            delay_ns = delay,
            "TLS handshake failed: closing without s2n's blinding delay"
        );
        0
    }
}
