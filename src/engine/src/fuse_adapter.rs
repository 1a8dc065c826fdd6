//! Links the FUSE protocol (`fuser`) to the library's file system (`mountpoint_s3_fs::S3Filesystem`)
//! so that the session can outlive this process.
//!
//! The library's own adapter hands the kernel the library's inode and file handle numbers, which
//! start afresh in every process. This one gives the kernel numbers of its own, kept in the session
//! table (`session_table.rs`), and translates both ways:
//!
//! - **Inodes.** Every entry reply (LOOKUP, MKNOD, MKDIR, READDIRPLUS) gets a table number `K`,
//!   recorded (parent, name, kind, lookup count) before the reply goes out; FORGET follows the
//!   kernel's count and releases the library's inode when it reaches zero. After a restart a `K`
//!   the kernel still uses is mapped back to a library inode on first use by looking its name up
//!   under its (resolved) parent; a name that is gone answers ESTALE.
//! - **File handles** carry this engine's generation: `[generation:16][kind:2][library fh:46]`. A
//!   handle of an earlier generation (opened before a restart) is re-opened on demand when it was
//!   read-only (reads and directory listings go on); a handle that could write answers EIO (its
//!   unfinished upload died with the engine), on that handle only.
//! - **Handover.** [Gate] lets the engine stop at a request boundary: requests already running
//!   finish, requests read afterwards are left unanswered (the next engine asks the kernel to send
//!   them again, `FUSE_NOTIFY_RESEND`), FORGETs are still applied.
//!
//! The FUSE-level behaviour (errors, read-only, logging of failures) is the library's: every call
//! goes to `S3Filesystem` with the library's numbers. So are its FUSE metrics: bytes and I/O sizes
//! of reads and writes, errors per request, and each request's latency (a root span per request
//! with the library's target, timed by its span layer).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant, SystemTime};

use futures::executor::block_on;
use mountpoint_s3_fs::metrics::defs::{ATTR_FUSE_REQUEST, FUSE_IO_SIZE, FUSE_REQUEST_ERRORS};
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, ReplyAttr, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use mountpoint_s3_client::ObjectClient;
use mountpoint_s3_fs::fs::{DirectoryEntry, DirectoryReplier, Error, OpenFlags, ToErrno};
use mountpoint_s3_fs::S3Filesystem;
use time::OffsetDateTime;
use tracing::{debug, warn};

use crate::session_table::{Kind, ROOT, Table};

const GEN_SHIFT: u32 = 48;
const KIND_SHIFT: u32 = 46;
const INNER_MASK: u64 = (1 << KIND_SHIFT) - 1;

/// What a kernel file handle was opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandleKind {
    /// A file opened read-only: can be re-opened after a restart.
    Read = 0,
    /// A file opened for writing (or reading and writing): lost with its engine.
    Write = 1,
    /// A directory stream: can be re-opened after a restart.
    Dir = 2,
}

fn encode(generation: u16, kind: HandleKind, inner: u64) -> Result<u64, libc::c_int> {
    if inner > INNER_MASK {
        return Err(libc::EMFILE);
    }
    Ok(((generation as u64) << GEN_SHIFT) | ((kind as u64) << KIND_SHIFT) | inner)
}

fn decode(fh: u64) -> (u16, HandleKind, u64) {
    let kind = match (fh >> KIND_SHIFT) & 0b11 {
        0 => HandleKind::Read,
        2 => HandleKind::Dir,
        _ => HandleKind::Write,
    };
    ((fh >> GEN_SHIFT) as u16, kind, fh & INNER_MASK)
}

/// Lets the engine stop serving at a request boundary (planned handover).
///
/// Every request passes it, so passing takes two atomic operations and no lock; the lock and the
/// condition variable are only for [Gate::drain] (a request that ends while a drain waits takes
/// the lock to wake it).
#[derive(Debug, Default)]
pub struct Gate {
    running: AtomicUsize,
    draining: AtomicBool,
    lock: Mutex<()>,
    idle: Condvar,
}

/// A request being served; dropping it ends it.
struct Pass<'a>(&'a Gate);

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl Gate {
    fn enter(&self) -> Option<Pass<'_>> {
        // Counted first, then checked (both SeqCst): a drain that set `draining` after this count
        // sees it, and one set before is seen here (the request then leaves at once).
        self.running.fetch_add(1, Ordering::SeqCst);
        if self.draining.load(Ordering::SeqCst) {
            self.leave();
            return None;
        }
        Some(Pass(self))
    }

    fn leave(&self) {
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 && self.draining.load(Ordering::SeqCst) {
            // Under the lock: a drain between its check and its wait holds it, so this wakes it.
            let _g = self.lock.lock().expect("gate lock");
            self.idle.notify_all();
        }
    }

    /// Stop taking requests and wait, at most `timeout`, for the running ones to end. Returns how
    /// many still run.
    pub fn drain(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        self.draining.store(true, Ordering::SeqCst);
        let mut g = self.lock.lock().expect("gate lock");
        loop {
            let running = self.running.load(Ordering::SeqCst);
            let left = deadline.saturating_duration_since(Instant::now());
            if running == 0 || left.is_zero() {
                return running;
            }
            g = self.idle.wait_timeout(g, left).expect("gate lock").0;
        }
    }
}

/// A request that arrived after the handover began: it is never answered here (the reply object
/// is leaked, since dropping it would answer EIO) and the thread waits for the process to end.
fn hold<T>(reply: T) {
    std::mem::forget(reply);
    loop {
        std::thread::park();
    }
}

/// Enter the gate for request `$op`, within a root span named after it with the library's FUSE
/// target: the library's span layer times it (`fuse.request_latency`, as for its own adapter).
macro_rules! enter {
    ($self:ident, $reply:ident, $op:literal) => {{
        let span = tracing::span!(target: FUSE_TARGET, tracing::Level::WARN, $op).entered();
        match $self.gate.enter() {
            Some(pass) => (pass, span),
            None => return hold($reply),
        }
    }};
}

/// The target of the library's FUSE spans and events (`mountpoint_s3_fs::fuse`).
const FUSE_TARGET: &str = "mountpoint_s3_fs::fuse";

struct State {
    table: Table,
    /// Kernel number → library inode, for the numbers resolved in this process.
    k2i: HashMap<u64, u64>,
    /// Library inode → the kernel number it was last given.
    i2k: HashMap<u64, u64>,
    /// Library lookups taken per kernel number, given back when the kernel forgets it.
    icount: HashMap<u64, u64>,
    /// Handles of earlier generations re-opened here: kernel fh → library fh.
    reopened: HashMap<u64, u64>,
}

/// The FUSE file system of a resumable session.
pub struct Adapter<Client>
where
    Client: ObjectClient + Clone + Send + Sync + 'static,
{
    fs: S3Filesystem<Client>,
    /// Read-locked by the lookups of every request (READ, WRITE, GETATTR …: a known number and
    /// this engine's handle), write-locked only to change it (entry replies, FORGET, re-opens).
    state: RwLock<State>,
    generation: u16,
    gate: Arc<Gate>,
}

fn kind_of(t: FileType) -> Kind {
    if t == FileType::Directory { Kind::Directory } else { Kind::File }
}

fn log_error(op: &'static str, err: &Error) -> libc::c_int {
    let errno = err.to_errno();
    ::metrics::counter!(FUSE_REQUEST_ERRORS, ATTR_FUSE_REQUEST => op).increment(1);
    if errno == libc::ENOENT {
        debug!("{op} failed with errno {errno}: {err:#}");
    } else {
        warn!("{op} failed with errno {errno}: {err:#}");
    }
    errno
}

impl<Client> Adapter<Client>
where
    Client: ObjectClient + Clone + Send + Sync + 'static,
{
    /// Serve `fs` with the numbers of `table`.
    pub fn new(fs: S3Filesystem<Client>, table: Table, gate: Arc<Gate>) -> Self {
        let generation = table.generation();
        Self {
            fs,
            state: RwLock::new(State {
                table,
                k2i: HashMap::from([(ROOT, ROOT)]),
                i2k: HashMap::from([(ROOT, ROOT)]),
                icount: HashMap::new(),
                reopened: HashMap::new(),
            }),
            generation,
            gate,
        }
    }

    fn lock(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().expect("adapter state lock")
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().expect("adapter state lock")
    }

    /// The library inode of kernel number `k`: known, or looked up by name under its resolved
    /// parent (a number of an earlier engine). ESTALE when its name is gone or names another kind.
    fn resolve(&self, k: u64) -> Result<u64, libc::c_int> {
        let entry = {
            let s = self.read();
            if let Some(i) = s.k2i.get(&k) {
                return Ok(*i);
            }
            s.table.get(k).cloned()
        };
        let Some(entry) = entry.filter(|e| e.linked) else {
            debug!(ino = k, "unknown or unlinked inode number: ESTALE");
            return Err(libc::ESTALE);
        };
        let parent = self.resolve(entry.parent)?;
        let found = block_on(self.fs.lookup(parent, &entry.name)).map_err(|e| {
            debug!(ino = k, name = ?entry.name, "restored inode not found again: {e:#}");
            libc::ESTALE
        })?;
        let i = found.attr.ino;
        let mut s = self.lock();
        let bound = s.k2i.get(&k).copied();
        let taken = s.i2k.get(&i).is_some_and(|other| *other != k && s.k2i.get(other) == Some(&i));
        if kind_of(found.attr.kind) != entry.kind || taken || bound.is_some_and(|b| b != i) {
            drop(s);
            block_on(self.fs.forget(i, 1));
            return bound.ok_or(libc::ESTALE);
        }
        s.k2i.insert(k, i);
        s.i2k.insert(i, k);
        *s.icount.entry(k).or_default() += 1;
        debug!(ino = k, inner = i, "restored inode resolved");
        Ok(i)
    }

    /// The kernel number for library inode `i` found as `name` in kernel directory `parent`.
    /// `counted`: this reply makes the kernel count one lookup (see [Table::entry_reply]).
    fn number(&self, parent: u64, name: &OsStr, i: u64, kind: Kind, counted: bool) -> u64 {
        let mut s = self.lock();
        let reuse = s.table.child(parent, name).map(|k| match s.k2i.get(&k) {
            Some(bound) => *bound == i,
            None => !s.i2k.contains_key(&i),
        });
        let k = s.table.entry_reply(parent, name, kind, counted, |_| reuse.unwrap_or(false));
        s.k2i.insert(k, i);
        s.i2k.insert(i, k);
        if counted {
            *s.icount.entry(k).or_default() += 1;
        }
        k
    }

    /// Forget `n` lookups of kernel number `k`; the library's inode goes when the count is zero.
    fn forget_number(&self, k: u64, n: u64) {
        if k == ROOT {
            return;
        }
        let release = {
            let mut s = self.lock();
            if !s.table.forget(k, n) {
                return;
            }
            s.table.maybe_compact();
            let i = s.k2i.remove(&k);
            if let Some(i) = i
                && s.i2k.get(&i) == Some(&k)
            {
                s.i2k.remove(&i);
            }
            let c = s.icount.remove(&k).unwrap_or(0);
            i.filter(|_| c > 0).map(|i| (i, c))
        };
        if let Some((i, c)) = release {
            block_on(self.fs.forget(i, c));
        }
    }

    fn attr_as(&self, mut attr: FileAttr, k: u64) -> FileAttr {
        attr.ino = k;
        attr
    }

    fn entry_reply(&self, parent: u64, name: &OsStr, result: Result<mountpoint_s3_fs::fs::Entry, Error>, op: &'static str, reply: ReplyEntry) {
        match result {
            Ok(e) => {
                let k = self.number(parent, name, e.attr.ino, kind_of(e.attr.kind), true);
                reply.entry(&e.ttl, &self.attr_as(e.attr, k), e.generation);
            }
            Err(e) => reply.error(log_error(op, &e)),
        }
    }

    /// The library handle behind kernel handle `fh`: this generation's, or an earlier one's
    /// re-opened when it only reads. `Err(EIO)` for an earlier handle that could write.
    fn handle(&self, k: u64, i: u64, fh: u64, pid: u32) -> Result<u64, libc::c_int> {
        let (generation, kind, inner) = decode(fh);
        if generation == self.generation {
            return Ok(inner);
        }
        if let Some(h) = self.read().reopened.get(&fh) {
            return Ok(*h);
        }
        self.stale_writer(k, fh)?;
        let opened = match kind {
            HandleKind::Write => return Err(libc::EIO),
            HandleKind::Read => block_on(self.fs.open(i, OpenFlags::from(libc::O_RDONLY), pid)),
            HandleKind::Dir => block_on(self.fs.opendir(i, 0)),
        }
        .map_err(|e| log_error("reopen", &e))?;
        let mut s = self.lock();
        if let Some(h) = s.reopened.get(&fh) {
            // Another thread re-opened it meanwhile: keep theirs.
            let h = *h;
            drop(s);
            let _ = match kind {
                HandleKind::Dir => block_on(self.fs.releasedir(i, opened.fh, 0)),
                _ => block_on(self.fs.release(i, opened.fh, 0, None, false)),
            };
            return Ok(h);
        }
        s.reopened.insert(fh, opened.fh);
        debug!(ino = k, fh, inner = opened.fh, "re-opened a handle of an earlier engine");
        Ok(opened.fh)
    }

    /// `Err(EIO)` for a handle of an earlier engine that could write (its upload died with it).
    fn stale_writer(&self, k: u64, fh: u64) -> Result<(), libc::c_int> {
        let (generation, kind, _) = decode(fh);
        if generation != self.generation && kind == HandleKind::Write {
            warn!(ino = k, fh, "a file handle open for writing when the engine stopped: EIO (its upload is lost)");
            return Err(libc::EIO);
        }
        Ok(())
    }

    /// For release/flush/fsync of a handle: `None` when it is an earlier engine's that was never
    /// re-opened here (nothing to do), `Err(EIO)` when it could write.
    fn handle_if_open(&self, fh: u64, take: bool) -> Result<Option<u64>, libc::c_int> {
        let (generation, kind, inner) = decode(fh);
        if generation == self.generation {
            return Ok(Some(inner));
        }
        if kind == HandleKind::Write {
            return Err(libc::EIO);
        }
        Ok(if take { self.lock().reopened.remove(&fh) } else { self.read().reopened.get(&fh).copied() })
    }

    /// Skip a re-opened directory stream to `offset` (the entries before it were already
    /// listed by the earlier engine).
    fn skip_to(&self, i: u64, inner: u64, offset: i64) -> Result<(), libc::c_int> {
        struct Skip<'a> {
            to: i64,
            at: &'a mut i64,
        }
        impl DirectoryReplier for Skip<'_> {
            fn add(&mut self, entry: DirectoryEntry) -> bool {
                if entry.offset > self.to {
                    return true; // "full": the library keeps this entry for the next call
                }
                *self.at = entry.offset;
                false
            }
        }
        let mut at = 0;
        while at < offset {
            let mut reached = at;
            let skip = Skip { to: offset, at: &mut reached };
            block_on(self.fs.readdir(i, inner, at, skip)).map_err(|e| log_error("readdir", &e))?;
            if reached == at {
                break; // the directory ended before `offset`
            }
            at = reached;
        }
        Ok(())
    }

    fn dir_stream(&self, k: u64, fh: u64, offset: i64) -> Result<(u64, u64), libc::c_int> {
        let i = self.resolve(k)?;
        let fresh = decode(fh).0 != self.generation && !self.read().reopened.contains_key(&fh);
        let inner = self.handle(k, i, fh, 0)?;
        if fresh && offset > 0 {
            self.skip_to(i, inner, offset)?;
        }
        Ok((i, inner))
    }

    /// The kernel number of a directory's parent (for "..").
    fn parent_of(&self, k: u64) -> u64 {
        self.read().table.get(k).map_or(ROOT, |e| e.parent)
    }
}

impl<Client> Filesystem for Adapter<Client>
where
    Client: ObjectClient + Clone + Send + Sync + 'static,
{
    fn init(&self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        block_on(self.fs.init(config))
    }

    fn lookup(&self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let _pass = enter!(self, reply, "lookup");
        let i = match self.resolve(parent) {
            Ok(i) => i,
            Err(e) => return reply.error(e),
        };
        self.entry_reply(parent, name, block_on(self.fs.lookup(i, name)), "lookup", reply);
    }

    fn forget(&self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        // Not gated: a FORGET has no reply, and applying it keeps the table small.
        self.forget_number(ino, nlookup);
    }

    fn getattr(&self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        let _pass = enter!(self, reply, "getattr");
        let result = self.resolve(ino).and_then(|i| block_on(self.fs.getattr(i)).map_err(|e| log_error("getattr", &e)));
        match result {
            Ok(a) => reply.attr(&a.ttl, &self.attr_as(a.attr, ino)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request<'_>,
        ino: u64,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let _pass = enter!(self, reply, "setattr");
        let time = |t: Option<TimeOrNow>| {
            t.map(|t| match t {
                TimeOrNow::SpecificTime(st) => OffsetDateTime::from(st),
                TimeOrNow::Now => OffsetDateTime::now_utc(),
            })
        };
        let result = self.resolve(ino).and_then(|i| {
            block_on(self.fs.setattr(i, time(atime), time(mtime), size, flags)).map_err(|e| log_error("setattr", &e))
        });
        match result {
            Ok(a) => reply.attr(&a.ttl, &self.attr_as(a.attr, ino)),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(&self, _req: &Request<'_>, parent: u64, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let _pass = enter!(self, reply, "mknod");
        match self.resolve(parent) {
            Ok(i) => {
                let r = block_on(self.fs.mknod(i, name, mode as libc::mode_t, umask, rdev));
                self.entry_reply(parent, name, r, "mknod", reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, _req: &Request<'_>, parent: u64, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let _pass = enter!(self, reply, "mkdir");
        match self.resolve(parent) {
            Ok(i) => {
                let r = block_on(self.fs.mkdir(i, name, mode as libc::mode_t, umask));
                self.entry_reply(parent, name, r, "mkdir", reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let _pass = enter!(self, reply, "unlink");
        let result = self.resolve(parent).and_then(|i| block_on(self.fs.unlink(i, name)).map_err(|e| log_error("unlink", &e)));
        match result {
            Ok(()) => {
                self.lock().table.unlink(parent, name);
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let _pass = enter!(self, reply, "rmdir");
        let result = self.resolve(parent).and_then(|i| block_on(self.fs.rmdir(i, name)).map_err(|e| log_error("rmdir", &e)));
        match result {
            Ok(()) => {
                self.lock().table.unlink(parent, name);
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn symlink(&self, _req: &Request<'_>, _parent: u64, _name: &OsStr, _link: &Path, reply: ReplyEntry) {
        reply.error(libc::EPERM);
    }

    fn link(&self, _req: &Request<'_>, _ino: u64, _newparent: u64, _newname: &OsStr, reply: ReplyEntry) {
        reply.error(libc::EPERM);
    }

    fn rename(&self, _req: &Request<'_>, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr, flags: u32, reply: ReplyEmpty) {
        let _pass = enter!(self, reply, "rename");
        let result = self.resolve(parent).and_then(|i| {
            let ni = self.resolve(newparent)?;
            block_on(self.fs.rename(i, name, ni, newname, flags.into())).map_err(|e| log_error("rename", &e))
        });
        match result {
            Ok(()) => {
                self.lock().table.rename(parent, name, newparent, newname);
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let _pass = enter!(self, reply, "open");
        let kind = if flags & libc::O_ACCMODE == libc::O_RDONLY { HandleKind::Read } else { HandleKind::Write };
        let result = self.resolve(ino).and_then(|i| {
            let opened = block_on(self.fs.open(i, flags.into(), req.pid())).map_err(|e| log_error("open", &e))?;
            Ok((encode(self.generation, kind, opened.fh)?, opened.flags))
        });
        match result {
            Ok((fh, flags)) => reply.opened(fh, flags),
            Err(e) => reply.error(e),
        }
    }

    fn read(&self, req: &Request<'_>, ino: u64, fh: u64, offset: i64, size: u32, flags: i32, lock: Option<u64>, reply: ReplyData) {
        let _pass = enter!(self, reply, "read");
        let result = self.resolve(ino).and_then(|i| {
            let inner = self.handle(ino, i, fh, req.pid())?;
            block_on(self.fs.read(i, inner, offset, size, flags, lock)).map_err(|e| log_error("read", &e))
        });
        match result {
            Ok(data) => {
                ::metrics::counter!("fuse.total_bytes", "type" => "read").increment(data.len() as u64);
                ::metrics::histogram!(FUSE_IO_SIZE, ATTR_FUSE_REQUEST => "read").record(data.len() as f64);
                reply.data(&data)
            }
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        write_flags: u32,
        flags: i32,
        lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let _pass = enter!(self, reply, "write");
        // A write handle of an earlier engine is lost whatever its file became: EIO at once.
        let result = self.stale_writer(ino, fh).and_then(|()| self.resolve(ino)).and_then(|i| {
            let inner = self.handle(ino, i, fh, req.pid())?;
            block_on(self.fs.write(i, inner, offset, data, write_flags, flags, lock_owner)).map_err(|e| log_error("write", &e))
        });
        match result {
            Ok(n) => {
                ::metrics::counter!("fuse.total_bytes", "type" => "write").increment(n as u64);
                ::metrics::histogram!(FUSE_IO_SIZE, ATTR_FUSE_REQUEST => "write").record(n as f64);
                reply.written(n)
            }
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, req: &Request<'_>, ino: u64, fh: u64, lock_owner: u64, reply: ReplyEmpty) {
        let _pass = enter!(self, reply, "flush");
        let result = self.handle_if_open(fh, false).and_then(|inner| match inner {
            None => Ok(()),
            Some(inner) => {
                let i = self.resolve(ino)?;
                block_on(self.fs.flush(i, inner, lock_owner, req.pid())).map_err(|e| log_error("flush", &e))
            }
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn release(&self, _req: &Request<'_>, ino: u64, fh: u64, flags: i32, lock_owner: Option<u64>, flush: bool, reply: ReplyEmpty) {
        let _pass = enter!(self, reply, "release");
        // An earlier engine's write handle: its upload is gone; releasing it is not an error.
        let result = match self.handle_if_open(fh, true) {
            Err(_) | Ok(None) => Ok(()),
            Ok(Some(inner)) => self.resolve(ino).and_then(|i| {
                block_on(self.fs.release(i, inner, flags, lock_owner, flush)).map_err(|e| log_error("release", &e))
            }),
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, _req: &Request<'_>, ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        let _pass = enter!(self, reply, "fsync");
        let result = self.handle_if_open(fh, false).and_then(|inner| match inner {
            None => Ok(()),
            Some(inner) => {
                let i = self.resolve(ino)?;
                block_on(self.fs.fsync(i, inner, datasync)).map_err(|e| log_error("fsync", &e))
            }
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let _pass = enter!(self, reply, "opendir");
        let result = self.resolve(ino).and_then(|i| {
            let opened = block_on(self.fs.opendir(i, flags)).map_err(|e| log_error("opendir", &e))?;
            Ok((encode(self.generation, HandleKind::Dir, opened.fh)?, opened.flags))
        });
        match result {
            Ok((fh, flags)) => reply.opened(fh, flags),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request<'_>, ino: u64, fh: u64, offset: i64, mut reply: ReplyDirectory) {
        let _pass = enter!(self, reply, "readdir");
        struct Out<'a, C: ObjectClient + Clone + Send + Sync + 'static> {
            adapter: &'a Adapter<C>,
            dir: u64,
            reply: &'a mut ReplyDirectory,
        }
        impl<C: ObjectClient + Clone + Send + Sync + 'static> DirectoryReplier for Out<'_, C> {
            fn add(&mut self, e: DirectoryEntry) -> bool {
                let k = match e.name.to_str() {
                    Some(".") => self.dir,
                    Some("..") => self.adapter.parent_of(self.dir),
                    _ => self.adapter.number(self.dir, &e.name, e.ino, kind_of(e.attr.kind), false),
                };
                self.reply.add(k, e.offset, e.attr.kind, &e.name)
            }
        }
        let result = self.dir_stream(ino, fh, offset).and_then(|(i, inner)| {
            let out = Out { adapter: self, dir: ino, reply: &mut reply };
            block_on(self.fs.readdir(i, inner, offset, out)).map_err(|e| log_error("readdir", &e))
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdirplus(&self, _req: &Request<'_>, ino: u64, fh: u64, offset: i64, mut reply: ReplyDirectoryPlus) {
        let _pass = enter!(self, reply, "readdirplus");
        struct Out<'a, C: ObjectClient + Clone + Send + Sync + 'static> {
            adapter: &'a Adapter<C>,
            dir: u64,
            reply: &'a mut ReplyDirectoryPlus,
        }
        impl<C: ObjectClient + Clone + Send + Sync + 'static> DirectoryReplier for Out<'_, C> {
            fn add(&mut self, e: DirectoryEntry) -> bool {
                let name: OsString = e.name;
                let dots = name == "." || name == "..";
                let k = match name.to_str() {
                    Some(".") => self.dir,
                    Some("..") => self.adapter.parent_of(self.dir),
                    _ => self.adapter.number(self.dir, &name, e.ino, kind_of(e.attr.kind), false),
                };
                let mut attr = e.attr;
                attr.ino = k;
                let full = self.reply.add(k, e.offset, &name, &e.ttl, &attr, e.generation);
                if !full && !dots {
                    // In the reply: the kernel counts it, and so did the library.
                    let mut s = self.adapter.lock();
                    s.table.count(k);
                    *s.icount.entry(k).or_default() += 1;
                }
                full
            }
        }
        let result = self.dir_stream(ino, fh, offset).and_then(|(i, inner)| {
            let out = Out { adapter: self, dir: ino, reply: &mut reply };
            block_on(self.fs.readdirplus(i, inner, offset, out)).map_err(|e| log_error("readdirplus", &e))
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(&self, _req: &Request<'_>, ino: u64, fh: u64, flags: i32, reply: ReplyEmpty) {
        let _pass = enter!(self, reply, "releasedir");
        let result = match self.handle_if_open(fh, true) {
            Err(_) | Ok(None) => Ok(()),
            Ok(Some(inner)) => self
                .resolve(ino)
                .and_then(|i| block_on(self.fs.releasedir(i, inner, flags)).map_err(|e| log_error("releasedir", &e))),
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn ioctl(
        &self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _flags: u32,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        // As the library: isatty() and friends ask this of every file; not worth a warning.
        reply.error(libc::ENOSYS);
    }

    fn statfs(&self, _req: &Request<'_>, ino: u64, reply: ReplyStatfs) {
        let _pass = enter!(self, reply, "statfs");
        match block_on(self.fs.statfs(ino)) {
            Ok(s) => reply.statfs(
                s.total_blocks,
                s.free_blocks,
                s.available_blocks,
                s.total_inodes,
                s.free_inodes,
                s.block_size,
                s.maximum_name_length,
                s.fragment_size,
            ),
            Err(e) => reply.error(log_error("statfs", &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_carry_generation_and_kind() {
        let fh = encode(3, HandleKind::Write, 42).unwrap();
        assert_eq!(decode(fh), (3, HandleKind::Write, 42));
        assert_eq!(decode(encode(u16::MAX, HandleKind::Dir, INNER_MASK).unwrap()), (u16::MAX, HandleKind::Dir, INNER_MASK));
        assert_eq!(decode(encode(1, HandleKind::Read, 1).unwrap()), (1, HandleKind::Read, 1));
        assert_eq!(encode(1, HandleKind::Read, INNER_MASK + 1), Err(libc::EMFILE));
    }

    #[test]
    fn the_gate_drains_running_requests_and_holds_new_ones() {
        let gate = Arc::new(Gate::default());
        let pass = gate.enter().expect("open");
        let g = gate.clone();
        let t = std::thread::spawn(move || g.drain(Duration::from_secs(5)));
        while !gate.draining.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        assert!(gate.enter().is_none(), "no new request once draining");
        drop(pass);
        assert_eq!(t.join().unwrap(), 0, "drained");
        let stuck = Gate::default();
        let _pass = stuck.enter().unwrap();
        assert_eq!(stuck.drain(Duration::from_millis(50)), 1, "bounded");
    }

    #[test]
    fn a_drain_under_load_waits_for_every_admitted_request() {
        // Threads pass the gate in a loop, each marking its requests as running; the drain must
        // return only once none runs, and nothing is admitted afterwards.
        let gate = Arc::new(Gate::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (gate, inside) = (gate.clone(), inside.clone());
                std::thread::spawn(move || {
                    let mut admitted = 0u64;
                    while let Some(pass) = gate.enter() {
                        inside.fetch_add(1, Ordering::SeqCst);
                        std::hint::spin_loop();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(pass);
                        admitted += 1;
                    }
                    admitted
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(gate.drain(Duration::from_secs(5)), 0);
        assert_eq!(inside.load(Ordering::SeqCst), 0, "no request runs once drained");
        assert!(gate.enter().is_none());
        let admitted: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(admitted > 0);
    }
}
