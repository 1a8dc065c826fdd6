//! Build script of `mount-s3`:
//! - records the versions of the Mountpoint libraries from Cargo.lock for `--version`;
//! - wraps the CRT's `aws_s3_client_new` so `src/proxy.rs` can turn on proxy settings from the
//!   environment (the libraries expose no proxy option; see that file);
//! - wraps s2n-tls's `s2n_connection_get_delay` so failed TLS handshakes fail at once
//!   (`src/tls_blinding.rs`);
//! - wraps the CRT's `aws_retry_strategy_schedule_retry` so the bucket check at start gets fewer
//!   attempts than the mount, on the same client (`src/start_attempts.rs`).

use std::{env, fs, path::Path};

const LIBRARIES: &[(&str, &str)] = &[
    ("mountpoint-s3-fs", "ENGINE_FS_VERSION"),
    ("mountpoint-s3-client", "ENGINE_CLIENT_VERSION"),
    ("mountpoint-s3-crt", "ENGINE_CRT_VERSION"),
];

fn main() {
    let dir = env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let lock_path = Path::new(&dir).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let lock = fs::read_to_string(&lock_path).expect("Cargo.lock must be committed beside Cargo.toml");
    for (package, var) in LIBRARIES {
        let version = locked_version(&lock, package).unwrap_or_else(|| panic!("{package} is not in Cargo.lock"));
        println!("cargo:rustc-env={var}={version}");
    }
    println!("cargo:rustc-link-arg=-Wl,--wrap=aws_s3_client_new");
    println!("cargo:rustc-link-arg=-Wl,--wrap=s2n_connection_get_delay");
    println!("cargo:rustc-link-arg=-Wl,--wrap=aws_retry_strategy_schedule_retry");
}

/// The version of `package` in a Cargo.lock (`name = "..."` followed by `version = "..."`).
fn locked_version(lock: &str, package: &str) -> Option<String> {
    let needle = format!("name = \"{package}\"\nversion = \"");
    let start = lock.find(&needle)? + needle.len();
    let end = lock[start..].find('"')? + start;
    Some(lock[start..end].to_string())
}
