//! HTTP(S) proxy support for the S3 client.
//!
//! `mountpoint-s3-client` builds the AWS Common Runtime's S3 client itself and exposes no proxy
//! option. The CRT can read `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` (either case) by itself, but only
//! when the client config's `proxy_ev_settings` asks it to. So the link step wraps the C function
//! `aws_s3_client_new` (`-Wl,--wrap=aws_s3_client_new`, see build.rs): our
//! [`__wrap_aws_s3_client_new`] copies the config, points `proxy_ev_settings` at an
//! "enable environment variables" setting and calls the real function. The CRT copies the settings
//! during the call, so they need not outlive it. Connections to https endpoints tunnel through the
//! proxy with CONNECT; http endpoints use it as a forward proxy.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use mountpoint_s3_crt_sys::{
    aws_allocator, aws_http_proxy_connection_type, aws_http_proxy_env_var_type, aws_s3_client, aws_s3_client_config,
    proxy_env_var_settings,
};

static ENV_PROXY: AtomicBool = AtomicBool::new(false);
static CLIENTS_WITH_ENV_PROXY: AtomicUsize = AtomicUsize::new(0);

/// Let S3 clients created from now on read the proxy from the environment.
pub fn enable_env_proxy() {
    ENV_PROXY.store(true, Ordering::SeqCst);
}

/// How many S3 clients were created with environment proxy settings (proves the wrapper is linked).
pub fn clients_with_env_proxy() -> usize {
    CLIENTS_WITH_ENV_PROXY.load(Ordering::SeqCst)
}

unsafe extern "C" {
    /// The CRT's `aws_s3_client_new` (the linker resolves `__real_` to it under `--wrap`).
    fn __real_aws_s3_client_new(
        allocator: *mut aws_allocator,
        client_config: *const aws_s3_client_config,
    ) -> *mut aws_s3_client;
}

/// Called instead of `aws_s3_client_new` (see the module docs).
///
/// # Safety
/// Same contract as `aws_s3_client_new`: `allocator` and `client_config` are valid for the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_aws_s3_client_new(
    allocator: *mut aws_allocator,
    client_config: *const aws_s3_client_config,
) -> *mut aws_s3_client {
    // SAFETY: the caller guarantees `client_config` is valid or null; we only read it.
    let config = unsafe { client_config.as_ref() };
    let Some(config) = config else {
        // SAFETY: forwarded unchanged.
        return unsafe { __real_aws_s3_client_new(allocator, client_config) };
    };
    if !ENV_PROXY.load(Ordering::SeqCst) || !config.proxy_options.is_null() || !config.proxy_ev_settings.is_null() {
        // SAFETY: forwarded unchanged.
        return unsafe { __real_aws_s3_client_new(allocator, client_config) };
    }
    let settings = proxy_env_var_settings {
        env_var_type: aws_http_proxy_env_var_type::AWS_HPEV_ENABLE,
        // Legacy = tunnel for TLS connections, forward for plain ones.
        connection_type: aws_http_proxy_connection_type::AWS_HPCT_HTTP_LEGACY,
        tls_options: std::ptr::null(),
    };
    // SAFETY: a bitwise copy of a valid config; every pointer in it stays owned by the caller and
    // valid for the duration of this call.
    let mut with_proxy: aws_s3_client_config = unsafe { std::ptr::read(config) };
    with_proxy.proxy_ev_settings = &settings;
    // SAFETY: `with_proxy` and `settings` live until the call returns; aws_s3_client_new copies
    // the proxy settings it keeps.
    let client = unsafe { __real_aws_s3_client_new(allocator, &with_proxy) };
    if !client.is_null() {
        CLIENTS_WITH_ENV_PROXY.fetch_add(1, Ordering::SeqCst);
    }
    client
}
