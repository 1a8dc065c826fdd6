//! `s3-csi-supervisor`: the part of the Mountpoint Pod's mounter that stays resident. The mounter
//! (`s3-csi-mounter`, Deno) receives and checks the mount message, then replaces itself with this
//! small program (`execve`, same PID), which:
//!
//! - keeps the FUSE fd (`--fuse-fd`) open for as long as it runs, so the kernel's FUSE connection
//!   never depends on the engine alone (custody);
//! - runs the engine (`-- <program> <args>`, its whole environment inherited), its output in the
//!   pod log, and when the engine dies (a crash, a signal, the OOM killer) or hands over, starts it
//!   again on the same fd with `--resume` (`--resumable` engines only: our `mount-s3`), at once the
//!   first time and with growing pauses after, at most `--max-restarts` within `--restart-window`;
//! - when it keeps dying, gives up on purpose: reports it in `mount.error` and answers every FUSE
//!   request with EIO (workloads get a clear error, never a hang) until the volume is unmounted;
//! - on SIGTERM, keeps serving up to `--drain-grace` for the workloads still using the volume
//!   (until the node plugin writes `mount.exit`), then stops the engine;
//! - with a session (`--session-id`), hands the fd back on `custody.sock` to a root peer (the node
//!   plugin, restarted, taking custody of the connection again);
//! - exits with the mounter's codes (`src/mppod/exit_codes.ts`): 0 when `mount.exit` was asked,
//!   1 when the session ended without it, 2 bad arguments, 4 engine failure (`mount.error` says why).
//!
//! It never opens anything on the mounted volume (a FLUSH on a connection nobody serves would block
//! it) and holds no credentials of its own.

mod custody;
mod eio;
mod policy;

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::RawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use policy::{Decision, Ended, Policy};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Mounter exit codes (src/mppod/exit_codes.ts).
const EXIT_OK: u8 = 0;
const EXIT_RESTART: u8 = 1;
const EXIT_CONFIG: u8 = 2;
const EXIT_ENGINE_FAILED: u8 = 4;

const MOUNT_ERROR: &str = "mount.error";
const CUSTODY_SOCK: &str = "custody.sock";
const MOUNT_EXIT: &str = "mount.exit";
/// How much of the engine's last output goes into `mount.error`.
const TAIL_BYTES: usize = 4000;
/// How often `mount.exit` is looked for while draining.
const DRAIN_POLL: Duration = Duration::from_millis(250);

#[derive(Debug)]
struct Args {
    comm_dir: PathBuf,
    fuse_fd: RawFd,
    drain_grace: Duration,
    resumable: bool,
    resume: bool,
    /// The session (protocol 2), told to the node plugin with the fd on `custody.sock`.
    session: Option<String>,
    max_restarts: u32,
    restart_window: Duration,
    program: Vec<OsString>,
}

fn usage(message: impl std::fmt::Display) -> String {
    format!("{message}; usage: s3-csi-supervisor --comm-dir=DIR --fuse-fd=N [--drain-grace-ms=MS] [--resumable [--resume] [--session-id=ID]] [--max-restarts=N] [--restart-window-ms=MS] -- PROGRAM [ARGS...]")
}

fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Args, String> {
    let mut a = Args {
        comm_dir: PathBuf::new(),
        fuse_fd: -1,
        drain_grace: Duration::ZERO,
        resumable: false,
        resume: false,
        session: None,
        max_restarts: 5,
        restart_window: Duration::from_secs(60),
        program: Vec::new(),
    };
    let mut it = args.into_iter();
    for arg in it.by_ref() {
        let s = arg.to_str().ok_or_else(|| usage(format!("argument {arg:?} is not UTF-8")))?.to_string();
        if s == "--" {
            break;
        }
        let (name, value) = s.split_once('=').unwrap_or((s.as_str(), ""));
        let number = |what: &str| value.parse::<u64>().map_err(|_| usage(format!("{name} needs {what}, got '{value}'")));
        match name {
            "--comm-dir" => a.comm_dir = PathBuf::from(value),
            "--fuse-fd" => a.fuse_fd = number("an fd number")? as RawFd,
            "--drain-grace-ms" => a.drain_grace = Duration::from_millis(number("milliseconds")?),
            "--resumable" => a.resumable = true,
            "--resume" => a.resume = true,
            "--session-id" => {
                if value.is_empty() || value.len() > 128 || !value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                    return Err(usage(format!("--session-id must be letters, digits or '-', got '{value}'")));
                }
                a.session = Some(value.to_string());
            }
            "--max-restarts" => a.max_restarts = number("a count")? as u32,
            "--restart-window-ms" => a.restart_window = Duration::from_millis(number("milliseconds")?),
            _ => return Err(usage(format!("unknown option '{s}'"))),
        }
    }
    a.program = it.collect();
    if a.program.is_empty() {
        return Err(usage("no engine program after '--'"));
    }
    if !a.comm_dir.is_absolute() {
        return Err(usage("--comm-dir must be an absolute path"));
    }
    if a.fuse_fd < 3 {
        return Err(usage("--fuse-fd must be the FUSE fd (3 or more)"));
    }
    if a.resume && !a.resumable {
        return Err(usage("--resume needs --resumable"));
    }
    if a.session.is_some() && !a.resumable {
        return Err(usage("--session-id needs --resumable"));
    }
    Ok(a)
}

/// The fd must be the FUSE device (character device 10:229), as the mounter checked.
fn check_fuse_fd(fd: RawFd) -> Result<(), String> {
    let meta = std::fs::metadata(format!("/proc/self/fd/{fd}")).map_err(|e| format!("--fuse-fd={fd} is not open: {e}"))?;
    let dev = meta.rdev();
    let (major, minor) = (((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000), (dev & 0xff) | ((dev >> 12) & 0xffff_ff00));
    if !meta.file_type().is_char_device() || (major, minor) != (10, 229) {
        return Err(format!("--fuse-fd={fd} is not the FUSE device"));
    }
    Ok(())
}

/// One JSON log line on stderr, as the mounter's own (`s3csi.mounter`).
pub(crate) fn log(level: &str, message: &str) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let line = format!(
        "{{\"@timestamp\":\"{}\",\"level\":\"{level}\",\"message\":{},\"logger\":\"s3csi.mounter.supervisor\"}}\n",
        rfc3339(now),
        json_string(message)
    );
    let _ = io::stderr().write_all(line.as_bytes());
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `2026-05-01T12:00:00.123Z` from a time since the epoch.
fn rfc3339(t: Duration) -> String {
    let secs = t.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        t.subsec_millis()
    )
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGUSR1 => "SIGUSR1",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

fn how(ended: Ended) -> String {
    match ended {
        Ended::Code(c) => format!("exited with code {c}"),
        Ended::Signal(s) => format!("was killed by {}", signal_name(s)),
    }
}

/// The engine's last output (stderr), kept for `mount.error`.
#[derive(Default)]
struct Tail(VecDeque<u8>);

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.0.extend(bytes);
        let extra = self.0.len().saturating_sub(TAIL_BYTES);
        self.0.drain(..extra);
    }
    fn text(&self) -> String {
        let (a, b) = self.0.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).trim().to_string()
    }
}

enum Event {
    Exited(u32, Ended),
    Signal,
}

struct Supervisor {
    a: Args,
    engine: String,
    tx: Sender<Event>,
    tail: Arc<Mutex<Tail>>,
}

impl Supervisor {
    fn path(&self, name: &str) -> PathBuf {
        self.a.comm_dir.join(name)
    }

    fn exit_requested(&self) -> bool {
        std::fs::symlink_metadata(self.path(MOUNT_EXIT)).is_ok()
    }

    /// Write `mount.error` (a new file renamed in place) and log it.
    fn report(&self, text: &str) {
        log("ERROR", text);
        let tmp = self.path(".mount.error.tmp");
        let written = std::fs::write(&tmp, format!("{text}\n")).and_then(|()| std::fs::rename(&tmp, self.path(MOUNT_ERROR)));
        if let Err(e) = written {
            log("ERROR", &format!("Could not write {MOUNT_ERROR}: {e}"));
        }
    }

    fn spawn(&self, resume: bool) -> io::Result<u32> {
        let mut cmd = Command::new(&self.a.program[0]);
        cmd.args(&self.a.program[1..]);
        if resume {
            cmd.arg("--resume");
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::inherit()).stderr(Stdio::piped()).spawn()?;
        let pid = child.id();
        if let Some(mut err) = child.stderr.take() {
            let tail = self.tail.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let _ = io::stderr().write_all(&buf[..n]);
                    tail.lock().expect("tail lock").push(&buf[..n]);
                }
            });
        }
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            let ended = match child.wait() {
                Ok(s) => match (s.code(), s.signal()) {
                    (Some(c), _) => Ended::Code(c),
                    (None, Some(sig)) => Ended::Signal(sig),
                    (None, None) => Ended::Code(-1),
                },
                Err(_) => Ended::Code(-1),
            };
            let _ = tx.send(Event::Exited(pid, ended));
        });
        Ok(pid)
    }

    fn run(&self, rx: &mpsc::Receiver<Event>) -> u8 {
        let mut policy = Policy::new(self.a.resumable, self.a.max_restarts, self.a.restart_window);
        let mut resume = self.a.resume;
        let mut stop_by: Option<Instant> = None;
        loop {
            self.tail.lock().expect("tail lock").0.clear();
            let pid = match self.spawn(resume) {
                Ok(pid) => pid,
                Err(e) => {
                    self.report(&format!("Could not start {}: {e}", self.engine));
                    return EXIT_ENGINE_FAILED;
                }
            };
            let started = Instant::now();
            log("INFO", &format!("Started {} (pid {pid}){}", self.engine, if resume { ", resuming the session" } else { "" }));
            let mut term_sent = false;
            let ended = loop {
                let wait = if stop_by.is_some() { DRAIN_POLL } else { Duration::from_secs(3600) };
                match rx.recv_timeout(wait) {
                    Ok(Event::Exited(p, e)) if p == pid => break e,
                    Ok(Event::Exited(..)) | Err(RecvTimeoutError::Timeout) => {}
                    Ok(Event::Signal) => {
                        if stop_by.is_none() {
                            if !self.a.drain_grace.is_zero() && !self.exit_requested() {
                                log("INFO", &format!("Termination requested: serving the mount for up to {} ms until the node plugin unmounts it", self.a.drain_grace.as_millis()));
                            }
                            stop_by = Some(Instant::now() + self.a.drain_grace);
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return EXIT_ENGINE_FAILED,
                }
                if let Some(by) = stop_by
                    && !term_sent
                    && (Instant::now() >= by || self.exit_requested())
                {
                    // SAFETY: signals our own child.
                    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
                    term_sent = true;
                }
            };
            if self.exit_requested() {
                log("INFO", &format!("{} {} after an unmount request; exiting 0", self.engine, how(ended)));
                return EXIT_OK;
            }
            let tail = self.tail.lock().expect("tail lock").text();
            if stop_by.is_some() {
                self.report(&format!("{} {} without an unmount request: {tail}", self.engine, how(ended)));
                return if ended == Ended::Code(0) { EXIT_RESTART } else { EXIT_ENGINE_FAILED };
            }
            match policy.decide(ended, resume, started.elapsed(), Instant::now()) {
                Decision::Restart { after, attempt } => {
                    log(
                        "WARNING",
                        &format!(
                            "{} {}; starting it again on the same FUSE connection in {} ms (restart {attempt} of at most {} within {} s){}",
                            self.engine,
                            how(ended),
                            after.as_millis(),
                            self.a.max_restarts,
                            self.a.restart_window.as_secs(),
                            if tail.is_empty() { String::new() } else { format!(": {}", last_line(&tail)) }
                        ),
                    );
                    // The pause ends early on SIGTERM: then the stop above applies to the new one.
                    if !after.is_zero()
                        && let Ok(Event::Signal) = rx.recv_timeout(after)
                    {
                        stop_by = Some(Instant::now() + self.a.drain_grace);
                    }
                    resume = true;
                }
                Decision::SessionEnded => {
                    self.report(&format!("{} {} without an unmount request: {tail}", self.engine, how(ended)));
                    return EXIT_RESTART;
                }
                Decision::Fail => {
                    self.report(&format!("{} {} without an unmount request: {tail}", self.engine, how(ended)));
                    return EXIT_ENGINE_FAILED;
                }
                Decision::GiveUp { restarts } => return self.give_up(ended, restarts, &tail, rx),
            }
        }
    }

    /// Answer EIO until the volume is unmounted (or the pod is stopped), then exit 4.
    fn give_up(&self, ended: Ended, restarts: u32, tail: &str, rx: &mpsc::Receiver<Event>) -> u8 {
        self.report(&format!(
            "{} {} and was not started again: it failed {} times within {} s (last: {}); the volume answers EIO until it is mounted again",
            self.engine,
            how(ended),
            restarts + 1,
            self.a.restart_window.as_secs(),
            if tail.is_empty() { "no output".to_string() } else { last_line(tail) }
        ));
        let fd = self.a.fuse_fd;
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            match eio::serve(fd) {
                Ok(n) => log("INFO", &format!("The FUSE connection ended after {n} requests answered with EIO")),
                Err(e) => log("ERROR", &format!("Answering EIO failed: {e}")),
            }
            let _ = tx.send(Event::Exited(0, Ended::Code(0)));
        });
        let _ = rx.recv();
        if self.exit_requested() { EXIT_OK } else { EXIT_ENGINE_FAILED }
    }
}

fn last_line(text: &str) -> String {
    text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string()
}

fn main() -> ExitCode {
    let a = match parse(std::env::args_os().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("s3-csi-supervisor: error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if let Err(e) = check_fuse_fd(a.fuse_fd) {
        eprintln!("s3-csi-supervisor: error: {e}");
        return ExitCode::from(EXIT_CONFIG);
    }
    let (tx, rx) = mpsc::channel();
    match Signals::new([SIGTERM, SIGINT]) {
        Ok(mut signals) => {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for _ in signals.forever() {
                    let _ = tx.send(Event::Signal);
                }
            });
        }
        Err(e) => {
            eprintln!("s3-csi-supervisor: error: cannot install signal handlers: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    let engine = Path::new(&a.program[0])
        .file_name()
        .map_or_else(|| a.program[0].to_string_lossy().into_owned(), |n| n.to_string_lossy().into_owned());
    // Removed when main returns (dropped after the run below).
    let _custody = a.session.as_ref().and_then(|session| {
        custody::serve(&a.comm_dir, CUSTODY_SOCK, a.fuse_fd, session.clone())
            .inspect_err(|e| {
                // Not fatal: only a node plugin restarted meanwhile needs it.
                log("WARNING", &format!("Cannot serve {CUSTODY_SOCK}: {e}"));
            })
            .ok()
    });
    let s = Supervisor {
        a,
        engine,
        tx,
        tail: Arc::default(),
    };
    ExitCode::from(s.run(&rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, String> {
        parse(list.iter().map(OsString::from))
    }

    #[test]
    fn the_mounter_command_line_parses() {
        let a = args(&[
            "--comm-dir=/comm",
            "--fuse-fd=5",
            "--drain-grace-ms=30000",
            "--resumable",
            "--resume",
            "--session-id=0123abcd",
            "--max-restarts=4",
            "--restart-window-ms=120000",
            "--",
            "/usr/bin/mount-s3",
            "bucket",
            "/dev/fd/5",
            "--resume-is-an-engine-arg-here",
        ])
        .unwrap();
        assert_eq!(a.comm_dir, PathBuf::from("/comm"));
        assert_eq!((a.fuse_fd, a.max_restarts), (5, 4));
        assert_eq!(a.drain_grace, Duration::from_secs(30));
        assert_eq!(a.restart_window, Duration::from_secs(120));
        assert!(a.resumable && a.resume);
        assert_eq!(a.session.as_deref(), Some("0123abcd"));
        assert_eq!(a.program.len(), 4);
    }

    #[test]
    fn bad_command_lines_say_why() {
        for (list, why) in [
            (&["--comm-dir=/c", "--fuse-fd=5"][..], "no engine program"),
            (&["--comm-dir=c", "--fuse-fd=5", "--", "x"][..], "absolute"),
            (&["--comm-dir=/c", "--fuse-fd=1", "--", "x"][..], "3 or more"),
            (&["--comm-dir=/c", "--fuse-fd=x", "--", "x"][..], "an fd number"),
            (&["--comm-dir=/c", "--fuse-fd=5", "--resume", "--", "x"][..], "needs --resumable"),
            (&["--comm-dir=/c", "--fuse-fd=5", "--what", "--", "x"][..], "unknown option '--what'"),
            (&["--comm-dir=/c", "--fuse-fd=5", "--session-id=a", "--", "x"][..], "needs --resumable"),
            (&["--comm-dir=/c", "--fuse-fd=5", "--resumable", "--session-id=a/b", "--", "x"][..], "letters"),
        ] {
            let e = args(list).expect_err("refused");
            assert!(e.contains(why), "{list:?}: {e}");
        }
    }

    #[test]
    fn timestamps_and_json() {
        assert_eq!(rfc3339(Duration::from_millis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(Duration::from_millis(1_777_636_800_123)), "2026-05-01T12:00:00.123Z");
        assert_eq!(json_string("a\"b\\c\nd"), "\"a\\\"b\\\\c\\u000ad\"");
    }

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let mut t = Tail::default();
        t.push(&vec![b'a'; TAIL_BYTES]);
        t.push(b"\nlast line\n");
        assert_eq!(t.0.len(), TAIL_BYTES);
        assert!(t.text().ends_with("last line"));
        assert_eq!(last_line("one\ntwo\n\n"), "two");
    }
}
