//! The mount point argument: a directory, or `/dev/fd/N`, an already-mounted FUSE fd that the
//! caller (the mounter, from the node plugin) hands over.
//!
//! An fd is accepted by what it is — the FUSE character device 10:229, open for reading and
//! writing — not by the path `/proc/self/fd/N` shows. That path depends on the reader's root: the
//! node plugin opens `/dev/fuse` in its own container, and where its root differs from the
//! mounter's (a chroot, another runtime) the same device shows as `<root>/dev/fuse`, which the
//! library's own check (`MountPoint::new`) refuses.

use std::fs;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use mountpoint_s3_fs::fuse::config::MountPoint;

/// The FUSE device's numbers (`crw------- 10, 229 /dev/fuse`, the misc device "fuse").
const FUSE_MAJOR: u64 = 10;
const FUSE_MINOR: u64 = 229;
/// `O_ACCMODE` and `O_RDWR` of the `flags:` line of `/proc/self/fdinfo/N` (octal).
const O_ACCMODE: u32 = 0o3;
const O_RDWR: u32 = 0o2;

/// The mount point of `arg`: `/dev/fd/N` checked here, anything else by the library.
pub fn mount_point(arg: &Path) -> anyhow::Result<MountPoint> {
    match fd_of(arg) {
        Some(fd) => {
            check_fuse_fd(fd)?;
            // SAFETY: `fd` is open (checked above) and, as documented for `/dev/fd/N`, handed
            // over to this process, which owns it from here on.
            Ok(MountPoint::FileDescriptor(unsafe { OwnedFd::from_raw_fd(fd) }))
        }
        None => MountPoint::new(arg),
    }
}

/// `N` of `/dev/fd/N`.
fn fd_of(arg: &Path) -> Option<RawFd> {
    let n = arg.to_str()?.strip_prefix("/dev/fd/")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// Linux `dev_t` → (major, minor), as glibc's `major()`/`minor()`.
fn major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major, minor)
}

/// The access mode of an fd's open flags, from the octal `flags:` line of its fdinfo.
fn access_mode(fdinfo: &str) -> Option<u32> {
    let flags = fdinfo.lines().find_map(|l| l.strip_prefix("flags:"))?.trim();
    u32::from_str_radix(flags, 8).ok().map(|f| f & O_ACCMODE)
}

fn check_fuse_fd(fd: RawFd) -> anyhow::Result<()> {
    let mount_point = format!("/dev/fd/{fd}");
    let proc_fd = format!("/proc/self/fd/{fd}");
    // stat() of the proc link reaches the open file itself, whatever its path.
    let meta = fs::metadata(&proc_fd)
        .map_err(|e| anyhow::anyhow!("mount point {mount_point} is not an open file descriptor: {e}"))?;
    let (major, minor) = major_minor(meta.rdev());
    if !meta.file_type().is_char_device() || (major, minor) != (FUSE_MAJOR, FUSE_MINOR) {
        let target = fs::read_link(&proc_fd)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        anyhow::bail!(
            "expected mount point {mount_point} to be the FUSE device (/dev/fuse, character device \
             {FUSE_MAJOR}:{FUSE_MINOR}) but it refers to {target:?}"
        );
    }
    let fdinfo = fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .map_err(|e| anyhow::anyhow!("mount point {mount_point}: cannot read its fdinfo: {e}"))?;
    if access_mode(&fdinfo) != Some(O_RDWR) {
        anyhow::bail!("expected mount point {mount_point} to be open for reading and writing");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn only_dev_fd_numbers_are_fds() {
        assert_eq!(fd_of(Path::new("/dev/fd/15")), Some(15));
        assert_eq!(fd_of(Path::new("/dev/fd/")), None);
        assert_eq!(fd_of(Path::new("/dev/fd/1x")), None);
        assert_eq!(fd_of(Path::new("/dev/fd/+1")), None);
        assert_eq!(fd_of(Path::new("/mnt/dev/fd/3")), None);
        assert_eq!(fd_of(Path::new("/mnt")), None);
    }

    #[test]
    fn device_numbers_decode_like_glibc() {
        assert_eq!(major_minor(0xae5), (10, 229)); // /dev/fuse
        assert_eq!(major_minor(0x103), (1, 3)); // /dev/null
        // Large numbers use the high bits: makedev(0x1234, 0x56789).
        let dev = (0x1234u64 & 0xfff) << 8 | (0x1234u64 & !0xfff) << 32 | (0x56789 & 0xff) | (0x56789 & !0xff) << 12;
        assert_eq!(major_minor(dev), (0x1234, 0x56789));
    }

    #[test]
    fn access_mode_from_fdinfo() {
        assert_eq!(access_mode("pos:\t0\nflags:\t02100002\nmnt_id:\t25\n"), Some(O_RDWR));
        assert_eq!(access_mode("pos:\t0\nflags:\t02100000\n"), Some(0));
        assert_eq!(access_mode("pos:\t0\n"), None);
    }

    #[test]
    fn refuses_what_is_not_the_fuse_device() {
        let fd = fs::File::open("/dev/null").expect("open /dev/null").into_raw_fd();
        let err = check_fuse_fd(fd).expect_err("/dev/null is not FUSE").to_string();
        assert!(
            err.contains("to be the FUSE device") && err.contains("/dev/null"),
            "{err}"
        );
        // SAFETY: our own fd, closed once.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        // A number no test opens (a just-closed one could be reused by a test running beside).
        let err = check_fuse_fd(999_999).expect_err("not open").to_string();
        assert!(err.contains("is not an open file descriptor"), "{err}");
    }
}
