//! After the supervisor gave up on the engine: answer every FUSE request with EIO, so that the
//! workloads get a clear error at once instead of waiting forever on a connection nobody serves.
//! Runs until the connection ends (the node plugin unmounts it: `ENODEV`).

use std::io;
use std::os::fd::RawFd;

/// FUSE opcodes that get no reply.
const FUSE_FORGET: u32 = 2;
const FUSE_INTERRUPT: u32 = 36;
const FUSE_BATCH_FORGET: u32 = 42;
const FUSE_DESTROY: u32 = 38;
/// `FUSE_NOTIFY_RESEND` (Linux 6.9): requests read but never answered go back to the queue.
pub const FUSE_NOTIFY_RESEND: i32 = 7;
/// Largest request: max_write (the library's 16 MiB at most) plus headers.
const BUFFER: usize = 16 * 1024 * 1024 + 4096;

/// Write one FUSE reply or notification header (no payload).
pub fn send_header(fd: RawFd, error: i32, unique: u64) -> io::Result<()> {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&16u32.to_ne_bytes());
    h[4..8].copy_from_slice(&error.to_ne_bytes());
    h[8..16].copy_from_slice(&unique.to_ne_bytes());
    // SAFETY: 16 bytes from a live buffer to an fd the caller owns.
    let n = unsafe { libc::write(fd, h.as_ptr().cast(), h.len()) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// What to answer to a request with `opcode`: `None` for none.
pub fn answer(opcode: u32) -> Option<i32> {
    match opcode {
        FUSE_FORGET | FUSE_BATCH_FORGET | FUSE_INTERRUPT => None,
        FUSE_DESTROY => Some(0),
        _ => Some(-libc::EIO),
    }
}

/// Serve EIO on `fd` until the connection ends. Returns the number of requests answered.
pub fn serve(fd: RawFd) -> io::Result<u64> {
    // Requests the dead engine read and never answered are answered too.
    if let Err(e) = send_header(fd, FUSE_NOTIFY_RESEND, 0) {
        eprintln!("s3-csi-supervisor: FUSE_NOTIFY_RESEND failed: {e}");
    }
    let mut buf = vec![0u8; BUFFER];
    let mut answered = 0;
    loop {
        // SAFETY: reads into a live buffer of BUFFER bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR | libc::EAGAIN | libc::ENOENT) => continue,
                Some(libc::ENODEV) => return Ok(answered),
                _ => return Err(e),
            }
        }
        if (n as usize) < 40 {
            continue;
        }
        let opcode = u32::from_ne_bytes(buf[4..8].try_into().expect("4 bytes"));
        let unique = u64::from_ne_bytes(buf[8..16].try_into().expect("8 bytes"));
        if let Some(error) = answer(opcode)
            && send_header(fd, error, unique).is_ok()
        {
            answered += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_but_forgets_and_interrupts_gets_eio() {
        assert_eq!(answer(1), Some(-libc::EIO)); // LOOKUP
        assert_eq!(answer(15), Some(-libc::EIO)); // READ
        assert_eq!(answer(FUSE_FORGET), None);
        assert_eq!(answer(FUSE_BATCH_FORGET), None);
        assert_eq!(answer(FUSE_INTERRUPT), None);
        assert_eq!(answer(FUSE_DESTROY), Some(0));
    }
}
