//! Versions printed by `--version` and logged at start.

/// Version of this engine (the `s3csi-engine` crate).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Version of `mountpoint-s3-fs` (from Cargo.lock, by build.rs).
pub const FS_VERSION: &str = env!("ENGINE_FS_VERSION");
/// Version of `mountpoint-s3-client`.
pub const CLIENT_VERSION: &str = env!("ENGINE_CLIENT_VERSION");
/// Version of `mountpoint-s3-crt` (the AWS Common Runtime bindings).
pub const CRT_VERSION: &str = env!("ENGINE_CRT_VERSION");

/// The `--version` line.
pub fn version_line() -> String {
    format!(
        "mount-s3 {VERSION} (s3.csi.scality.com engine) mountpoint-s3-fs {FS_VERSION} \
         mountpoint-s3-client {CLIENT_VERSION} mountpoint-s3-crt {CRT_VERSION}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_every_library() {
        let line = version_line();
        assert!(line.starts_with("mount-s3 "));
        for part in ["mountpoint-s3-fs 0.", "mountpoint-s3-client 0.", "mountpoint-s3-crt 0."] {
            assert!(line.contains(part), "{line}");
        }
        assert!(!line.contains('\n'));
    }
}
