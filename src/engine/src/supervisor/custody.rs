//! `custody.sock`: while the supervisor serves, a root peer (the node plugin, after a restart of
//! its own) can take the FUSE fd back, so that the connection again survives a restart of this
//! whole container. One message per connection: `{"session":"<id>"}` with the fd as `SCM_RIGHTS`.
//! Peers that are not root are closed unanswered.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// The socket being served: removed when dropped (the supervisor exits), if it is still the one
/// this supervisor bound — no socket is left behind that nothing listens on.
pub struct Served {
    dir: std::fs::File,
    name: String,
    ino: u64,
}

impl Served {
    fn path(&self) -> String {
        format!("/proc/self/fd/{}/{}", self.dir.as_raw_fd(), self.name)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let path = self.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Listen on `dir/name` (a stale socket there is replaced) and serve every root peer, in a thread.
pub fn serve(dir: &Path, name: &str, fuse_fd: RawFd, session: String) -> io::Result<Served> {
    let _ = std::fs::remove_file(dir.join(name));
    // The dir's host path can be longer than a socket address holds: bind through an fd of it.
    let dir = std::fs::File::open(dir)?;
    let mut served = Served { dir, name: name.to_string(), ino: 0 };
    let listener = UnixListener::bind(served.path())?;
    served.ino = std::fs::symlink_metadata(served.path())?.ino();
    std::thread::Builder::new().name("custody".into()).spawn(move || {
        for conn in listener.incoming().flatten() {
            if peer_uid(&conn).ok() != Some(0) {
                continue;
            }
            let payload = format!("{{\"session\":\"{session}\"}}");
            if let Err(e) = send_with_fd(&conn, payload.as_bytes(), fuse_fd) {
                crate::log("WARNING", &format!("Could not hand the FUSE fd back to the node plugin: {e}"));
            }
        }
    })?;
    Ok(served)
}

fn peer_uid(conn: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: u32::MAX };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// One `sendmsg` of `payload` with `fd` as `SCM_RIGHTS`.
fn send_with_fd(conn: &UnixStream, payload: &[u8], fd: RawFd) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain data; every pointer set below outlives the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: the control buffer is CMSG_SPACE(sizeof fd) bytes, room for one cmsg header and fd.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    // SAFETY: msg points at live buffers.
    let n = unsafe { libc::sendmsg(conn.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
