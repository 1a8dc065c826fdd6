//! The session's inode table: which inode number the kernel knows for which name, kept on disk so
//! that a restarted engine can serve the same FUSE connection (see `fuse_adapter.rs`).
//!
//! The kernel names files by the inode numbers ("node ids") we handed out in entry replies, and
//! keeps them — with a lookup count — until it sends FORGET. A restarted engine gets no new INIT
//! and no new LOOKUPs for what the kernel already knows: it must map every number still in use
//! to the same object. So every number this engine hands out is recorded with its parent number,
//! name and kind, and the kernel's lookup count is followed, in an append-only log in the session
//! directory (the Mountpoint Pod's own `work` volume). The record of an entry reply is written
//! before the reply is sent: a crash between the two leaves a count too high (an entry kept
//! longer than needed), never too low. A new engine replays the log before it serves the first
//! request; when the log has grown to several times what is live, it is rewritten (compacted).
//!
//! Kernel numbers ("K") are this table's; the library's file system numbers its inodes ("I")
//! afresh in every process. The mapping K → I is rebuilt lazily by the adapter (a LOOKUP of the
//! recorded name under the parent), so the table itself only stores K, parent K, name and kind.
//!
//! The log is the engine's own file in the untrusted pod; nothing else reads it (the node plugin
//! never does). Records are length-checked; a torn or unknown tail ends the replay and is cut off.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The root directory's number (FUSE's `FUSE_ROOT_ID`), the same for the kernel and the library.
pub const ROOT: u64 = 1;

/// Name of the log in the session directory.
pub const TABLE_FILE: &str = "inodes.log";
const MAGIC: &[u8; 8] = b"S3CSIIT1";
/// Longest session id accepted (the node plugin's ids are 32 hex characters).
const MAX_ID: usize = 128;
/// Longest name in a record (FUSE names are at most 1024 bytes; S3 keys 1024).
const MAX_NAME: usize = 4096;
/// Compaction starts when the log is at least this big ...
const COMPACT_MIN_BYTES: u64 = 4 << 20;
/// ... and this many times the size of a fresh snapshot.
const COMPACT_FACTOR: u64 = 4;
/// After a check that found the log not yet worth compacting, the next check waits until it has
/// grown by this fraction (1/N): a check walks every entry, so checking at every FORGET of a large
/// table would cost O(entries) per FORGET, under the adapter's lock.
const COMPACT_RECHECK_DIVISOR: u64 = 8;

const REC_NEW: u8 = 1;
const REC_LOOKUP: u8 = 2;
const REC_FORGET: u8 = 3;
const REC_MOVE: u8 = 4;
const REC_UNLINK: u8 = 5;
const REC_GENERATION: u8 = 6;

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::File => 0,
            Kind::Directory => 1,
        }
    }
    fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(Kind::File),
            1 => Some(Kind::Directory),
            _ => None,
        }
    }
}

/// One number the kernel knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub parent: u64,
    pub name: OsString,
    pub kind: Kind,
    /// The kernel's lookup count (entry replies minus forgets).
    pub count: u64,
    /// Still reachable by its name (false after unlink, or when a newer inode took the name).
    pub linked: bool,
}

/// Why a session table could not be used.
#[derive(Debug)]
pub enum TableError {
    Io(io::Error),
    /// The log belongs to another session (another FUSE connection).
    OtherSession { found: String },
    /// Not a table of ours, or a version we do not read.
    NotATable,
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableError::Io(e) => write!(f, "{e}"),
            TableError::OtherSession { found } => {
                write!(f, "the session table belongs to session '{found}', not this one")
            }
            TableError::NotATable => f.write_str("the session table is not a table of this engine"),
        }
    }
}

impl std::error::Error for TableError {}

impl From<io::Error> for TableError {
    fn from(e: io::Error) -> Self {
        TableError::Io(e)
    }
}

/// The inode table, in memory, with its log (none when the engine runs without a session dir).
#[derive(Debug)]
pub struct Table {
    entries: HashMap<u64, Entry>,
    children: HashMap<(u64, OsString), u64>,
    next: u64,
    generation: u16,
    log: Option<Log>,
    /// How often [Table::maybe_compact] walked the entries (tests).
    #[cfg(test)]
    compaction_checks: u32,
}

#[derive(Debug)]
struct Log {
    dir: PathBuf,
    id: String,
    file: File,
    bytes: u64,
    /// Size the log must reach before [Table::maybe_compact] looks at the entries again.
    next_check: u64,
}

impl Table {
    /// A table kept only in memory (no session dir: a restart cannot resume).
    pub fn in_memory() -> Self {
        Self {
            entries: HashMap::new(),
            children: HashMap::new(),
            next: ROOT + 1,
            generation: 1,
            log: None,
            #[cfg(test)]
            compaction_checks: 0,
        }
    }

    /// A new session in `dir`: whatever an earlier session left there is replaced.
    pub fn create(dir: &Path, id: &str) -> Result<Self, TableError> {
        check_id(id)?;
        let mut t = Self::in_memory();
        t.log = Some(Log::rewrite(dir, id, &t)?);
        Ok(t)
    }

    /// The session `id` recorded in `dir`, replayed, with the next generation started.
    pub fn resume(dir: &Path, id: &str) -> Result<Self, TableError> {
        check_id(id)?;
        let path = dir.join(TABLE_FILE);
        let mut bytes = Vec::new();
        File::open(&path)?.read_to_end(&mut bytes)?;
        let mut r = Reader { b: &bytes, at: 0 };
        if r.take(8) != Some(&MAGIC[..]) {
            return Err(TableError::NotATable);
        }
        let found = r
            .u16()
            .and_then(|n| r.take(n as usize))
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or(TableError::NotATable)?
            .to_string();
        if found != id {
            return Err(TableError::OtherSession { found });
        }
        let mut t = Self::in_memory();
        let mut good = r.at;
        while r.at < bytes.len() {
            match t.replay_one(&mut r) {
                Some(()) => good = r.at,
                None => break,
            }
        }
        t.generation = t.generation.wrapping_add(1).max(1);
        let file = OpenOptions::new().append(true).open(&path)?;
        // A torn or unknown tail (the engine died while writing) is cut off before appending.
        file.set_len(good as u64)?;
        let mut log = Log {
            dir: dir.to_path_buf(),
            id: id.to_string(),
            file,
            bytes: good as u64,
            next_check: COMPACT_MIN_BYTES,
        };
        log.append(&rec_generation(t.generation))?;
        t.log = Some(log);
        Ok(t)
    }

    fn replay_one(&mut self, r: &mut Reader<'_>) -> Option<()> {
        let kind = r.u8()?;
        match kind {
            REC_GENERATION => {
                self.generation = r.u16()?;
            }
            REC_NEW => {
                let k = r.u64()?;
                let parent = r.u64()?;
                let kind = Kind::from_code(r.u8()?)?;
                let name = r.name()?;
                if k <= ROOT {
                    return None;
                }
                self.insert(k, parent, name, kind);
            }
            REC_LOOKUP => {
                let k = r.u64()?;
                let n = r.u64()?;
                if let Some(e) = self.entries.get_mut(&k) {
                    e.count = e.count.saturating_add(n);
                }
            }
            REC_FORGET => {
                let k = r.u64()?;
                let n = r.u64()?;
                self.apply_forget(k, n);
            }
            REC_MOVE => {
                let k = r.u64()?;
                let parent = r.u64()?;
                let name = r.name()?;
                self.apply_move(k, parent, name);
            }
            REC_UNLINK => {
                let k = r.u64()?;
                self.apply_unlink(k);
            }
            _ => return None,
        }
        Some(())
    }

    /// This engine's generation (1, 2, …: one per start of the session), part of its file handles.
    pub fn generation(&self) -> u16 {
        self.generation
    }

    /// Whether the table is kept on disk.
    pub fn persistent(&self) -> bool {
        self.log.is_some()
    }

    /// The entry of number `k`.
    pub fn get(&self, k: u64) -> Option<&Entry> {
        self.entries.get(&k)
    }

    /// The number the kernel knows for `name` in directory `parent`, if any.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.children.get(&(parent, name.to_os_string())).copied()
    }

    /// Numbers the kernel holds (entries with a lookup count), for tests and logs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The number the kernel gets in an entry reply for `name` in `parent` with the given kind.
    /// `reuse` says whether an existing number for that name still names the same object (the
    /// adapter knows: same library inode, or not yet resolved after a restart). With `counted`,
    /// the reply counts one lookup (LOOKUP, MKNOD, MKDIR); without, the caller calls
    /// [Table::count] once the entry is really in the reply (READDIRPLUS). Recorded before it
    /// returns.
    pub fn entry_reply(
        &mut self,
        parent: u64,
        name: &OsStr,
        kind: Kind,
        counted: bool,
        reuse: impl FnOnce(u64) -> bool,
    ) -> u64 {
        let mut rec = Vec::new();
        let existing = self
            .child(parent, name)
            .filter(|k| self.entries.get(k).is_some_and(|e| e.kind == kind && e.linked))
            .filter(|k| reuse(*k));
        let k = match existing {
            Some(k) => k,
            None => {
                let k = self.next;
                self.insert(k, parent, name.to_os_string(), kind);
                rec.extend(rec_new(k, parent, kind, name));
                k
            }
        };
        if counted {
            rec.extend(rec_count(REC_LOOKUP, k, 1));
            if let Some(e) = self.entries.get_mut(&k) {
                e.count += 1;
            }
        }
        self.append(&rec);
        k
    }

    /// One more lookup of `k` (an entry that made it into a READDIRPLUS reply).
    pub fn count(&mut self, k: u64) {
        if let Some(e) = self.entries.get_mut(&k) {
            e.count += 1;
            self.append(&rec_count(REC_LOOKUP, k, 1));
        }
    }

    /// The kernel forgot `n` lookups of `k`: true when `k` is gone (count reached zero).
    pub fn forget(&mut self, k: u64, n: u64) -> bool {
        if !self.entries.contains_key(&k) {
            return false;
        }
        self.append(&rec_count(REC_FORGET, k, n));
        self.apply_forget(k, n)
    }

    /// `name` in `parent` was renamed to `new_name` in `new_parent`.
    pub fn rename(&mut self, parent: u64, name: &OsStr, new_parent: u64, new_name: &OsStr) {
        let Some(k) = self.child(parent, name) else {
            // Not known to the kernel: only a name that it replaces may be.
            if let Some(old) = self.child(new_parent, new_name) {
                self.append(&rec_unlink(old));
                self.apply_unlink(old);
            }
            return;
        };
        self.append(&rec_move(k, new_parent, new_name));
        self.apply_move(k, new_parent, new_name.to_os_string());
    }

    /// `name` in `parent` was removed.
    pub fn unlink(&mut self, parent: u64, name: &OsStr) {
        if let Some(k) = self.child(parent, name) {
            self.append(&rec_unlink(k));
            self.apply_unlink(k);
        }
    }

    /// Rewrite the log when it has grown far beyond what is live (entries the kernel no longer
    /// counts are left out). Cheap when called often: it looks at the entries only when the log
    /// reached [COMPACT_MIN_BYTES], and again only after it grew by 1/[COMPACT_RECHECK_DIVISOR].
    pub fn maybe_compact(&mut self) {
        let Some(log) = &self.log else { return };
        if log.bytes < log.next_check.max(COMPACT_MIN_BYTES) {
            return;
        }
        let bytes = log.bytes;
        #[cfg(test)]
        {
            self.compaction_checks += 1;
        }
        if bytes < self.snapshot_size().saturating_mul(COMPACT_FACTOR) {
            if let Some(log) = &mut self.log {
                log.next_check = bytes + bytes / COMPACT_RECHECK_DIVISOR;
            }
            return;
        }
        let Some(log) = &self.log else { return };
        let (dir, id) = (log.dir.clone(), log.id.clone());
        self.entries.retain(|_, e| e.count > 0);
        let entries = &self.entries;
        self.children.retain(|_, k| entries.contains_key(k));
        match Log::rewrite(&dir, &id, self) {
            Ok(fresh) => self.log = Some(fresh),
            Err(e) => self.give_up_log(&e.to_string()),
        }
    }

    fn snapshot_size(&self) -> u64 {
        self.entries
            .values()
            .map(|e| 1 + 8 + 8 + 1 + 2 + e.name.len() as u64 + 17 + if e.linked { 0 } else { 9 })
            .sum::<u64>()
            + 64
    }

    /// Record `rec`. A log that cannot be written (the work volume is full) is given up: the mount
    /// goes on serving, and a later restart cannot resume (its table is removed, so the restarted
    /// engine says so instead of serving wrong numbers).
    fn append(&mut self, rec: &[u8]) {
        if rec.is_empty() {
            return;
        }
        if let Some(log) = &mut self.log
            && let Err(e) = log.append(rec)
        {
            self.give_up_log(&e.to_string());
        }
    }

    fn give_up_log(&mut self, why: &str) {
        if let Some(log) = self.log.take() {
            let _ = fs::remove_file(log.dir.join(TABLE_FILE));
            tracing::error!(
                "cannot write the session table in {}: {why}; serving on without it, so a restart of this engine cannot resume the session",
                log.dir.display()
            );
        }
    }

    fn insert(&mut self, k: u64, parent: u64, name: OsString, kind: Kind) {
        if let Some(old) = self.children.insert((parent, name.clone()), k)
            && old != k
            && let Some(e) = self.entries.get_mut(&old)
        {
            e.linked = false;
        }
        self.entries.insert(
            k,
            Entry {
                parent,
                name,
                kind,
                count: 0,
                linked: true,
            },
        );
        self.next = self.next.max(k + 1);
    }

    fn apply_forget(&mut self, k: u64, n: u64) -> bool {
        let Some(e) = self.entries.get_mut(&k) else { return false };
        e.count = e.count.saturating_sub(n);
        if e.count > 0 {
            return false;
        }
        let e = self.entries.remove(&k).expect("present");
        let key = (e.parent, e.name);
        if self.children.get(&key) == Some(&k) {
            self.children.remove(&key);
        }
        true
    }

    fn apply_move(&mut self, k: u64, parent: u64, name: OsString) {
        let Some(e) = self.entries.get(&k) else { return };
        let old_key = (e.parent, e.name.clone());
        if self.children.get(&old_key) == Some(&k) {
            self.children.remove(&old_key);
        }
        if let Some(replaced) = self.children.insert((parent, name.clone()), k)
            && replaced != k
            && let Some(r) = self.entries.get_mut(&replaced)
        {
            r.linked = false;
        }
        if let Some(e) = self.entries.get_mut(&k) {
            e.parent = parent;
            e.name = name;
            e.linked = true;
        }
    }

    fn apply_unlink(&mut self, k: u64) {
        let Some(e) = self.entries.get_mut(&k) else { return };
        e.linked = false;
        let key = (e.parent, e.name.clone());
        if self.children.get(&key) == Some(&k) {
            self.children.remove(&key);
        }
    }
}

impl Log {
    /// Write a snapshot of `t` as a new log (to a temporary file renamed over the old one).
    fn rewrite(dir: &Path, id: &str, t: &Table) -> Result<Self, TableError> {
        fs::create_dir_all(dir)?;
        let tmp = dir.join(format!("{TABLE_FILE}.tmp"));
        let mut out = header(id);
        out.extend(rec_generation(t.generation));
        let mut ks: Vec<_> = t.entries.keys().copied().collect();
        // Parents before children, so a replay never meets a child of an unknown parent first.
        ks.sort_unstable();
        for k in ks {
            let e = &t.entries[&k];
            out.extend(rec_new(k, e.parent, e.kind, &e.name));
            out.extend(rec_count(REC_LOOKUP, k, e.count));
            if !e.linked {
                out.extend(rec_unlink(k));
            }
        }
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&out)?;
        }
        fs::rename(&tmp, dir.join(TABLE_FILE))?;
        let file = OpenOptions::new().append(true).open(dir.join(TABLE_FILE))?;
        Ok(Log {
            dir: dir.to_path_buf(),
            id: id.to_string(),
            file,
            bytes: out.len() as u64,
            next_check: COMPACT_MIN_BYTES,
        })
    }

    /// One record in one write: a process killed meanwhile leaves a whole record or a torn tail.
    fn append(&mut self, rec: &[u8]) -> io::Result<()> {
        self.file.write_all(rec)?;
        self.bytes += rec.len() as u64;
        Ok(())
    }
}

fn check_id(id: &str) -> Result<(), TableError> {
    if id.is_empty() || id.len() > MAX_ID || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(TableError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("session id '{id}' must be 1-{MAX_ID} letters, digits or '-'"),
        )));
    }
    Ok(())
}

fn header(id: &str) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend((id.len() as u16).to_le_bytes());
    h.extend(id.as_bytes());
    h
}

fn rec_generation(g: u16) -> Vec<u8> {
    let mut r = vec![REC_GENERATION];
    r.extend(g.to_le_bytes());
    r
}

fn rec_new(k: u64, parent: u64, kind: Kind, name: &OsStr) -> Vec<u8> {
    let mut r = vec![REC_NEW];
    r.extend(k.to_le_bytes());
    r.extend(parent.to_le_bytes());
    r.push(kind.code());
    push_name(&mut r, name);
    r
}

fn rec_count(code: u8, k: u64, n: u64) -> Vec<u8> {
    let mut r = vec![code];
    r.extend(k.to_le_bytes());
    r.extend(n.to_le_bytes());
    r
}

fn rec_move(k: u64, parent: u64, name: &OsStr) -> Vec<u8> {
    let mut r = vec![REC_MOVE];
    r.extend(k.to_le_bytes());
    r.extend(parent.to_le_bytes());
    push_name(&mut r, name);
    r
}

fn rec_unlink(k: u64) -> Vec<u8> {
    let mut r = vec![REC_UNLINK];
    r.extend(k.to_le_bytes());
    r
}

fn push_name(r: &mut Vec<u8>, name: &OsStr) {
    let b = name.as_bytes();
    let b = &b[..b.len().min(MAX_NAME)];
    r.extend((b.len() as u16).to_le_bytes());
    r.extend(b);
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn name(&mut self) -> Option<OsString> {
        let n = self.u16()? as usize;
        if n > MAX_NAME {
            return None;
        }
        self.take(n).map(|b| OsString::from_vec(b.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().expect("temp dir")
    }

    fn name(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn numbers_survive_a_restart_with_their_counts() {
        let d = dir();
        let mut t = Table::create(d.path(), "s1").unwrap();
        assert_eq!(t.generation(), 1);
        let a = t.entry_reply(ROOT, name("a"), Kind::Directory, true, |_| true);
        let b = t.entry_reply(a, name("b.txt"), Kind::File, true, |_| true);
        assert_eq!(t.entry_reply(a, name("b.txt"), Kind::File, true, |_| true), b, "same name, same number");
        assert_eq!(t.get(b).unwrap().count, 2);
        drop(t); // as if killed: nothing is flushed at exit

        let mut r = Table::resume(d.path(), "s1").unwrap();
        assert_eq!(r.generation(), 2);
        assert_eq!(r.get(a).unwrap(), &Entry {
            parent: ROOT,
            name: "a".into(),
            kind: Kind::Directory,
            count: 1,
            linked: true
        });
        assert_eq!(r.get(b).unwrap().count, 2);
        assert_eq!(r.child(a, name("b.txt")), Some(b));
        let c = r.entry_reply(a, name("c"), Kind::File, true, |_| true);
        assert!(c > b, "new numbers never reuse old ones");
        assert!(!r.forget(b, 1));
        assert!(r.forget(b, 1), "count reached zero");
        drop(r);
        let r = Table::resume(d.path(), "s1").unwrap();
        assert_eq!(r.generation(), 3);
        assert!(r.get(b).is_none());
        assert_eq!(r.child(a, name("c")), Some(c));
    }

    #[test]
    fn a_torn_tail_is_cut_off_and_appends_continue() {
        let d = dir();
        let mut t = Table::create(d.path(), "s1").unwrap();
        let a = t.entry_reply(ROOT, name("a"), Kind::File, true, |_| true);
        drop(t);
        let path = d.path().join(TABLE_FILE);
        let mut bytes = fs::read(&path).unwrap();
        let whole = bytes.len();
        bytes.extend([REC_NEW, 9, 9, 9]); // a record cut short by a kill
        fs::write(&path, &bytes).unwrap();
        let mut r = Table::resume(d.path(), "s1").unwrap();
        assert_eq!(r.get(a).unwrap().count, 1);
        let b = r.entry_reply(ROOT, name("b"), Kind::File, true, |_| true);
        drop(r);
        assert!(fs::read(&path).unwrap().len() > whole);
        let r = Table::resume(d.path(), "s1").unwrap();
        assert_eq!(r.child(ROOT, name("b")), Some(b), "the append after the cut is readable");
    }

    #[test]
    fn another_session_or_garbage_is_refused() {
        let d = dir();
        drop(Table::create(d.path(), "s1").unwrap());
        assert!(matches!(
            Table::resume(d.path(), "s2"),
            Err(TableError::OtherSession { found }) if found == "s1"
        ));
        fs::write(d.path().join(TABLE_FILE), b"not a table").unwrap();
        assert!(matches!(Table::resume(d.path(), "s1"), Err(TableError::NotATable)));
        assert!(Table::create(d.path(), "bad/id").is_err());
        assert!(Table::resume(&d.path().join("missing"), "s1").is_err());
    }

    #[test]
    fn renames_and_unlinks_follow_the_name() {
        let d = dir();
        let mut t = Table::create(d.path(), "s").unwrap();
        let dir_a = t.entry_reply(ROOT, name("a"), Kind::Directory, true, |_| true);
        let f = t.entry_reply(ROOT, name("f"), Kind::File, true, |_| true);
        let g = t.entry_reply(dir_a, name("g"), Kind::File, true, |_| true);
        t.rename(ROOT, name("f"), dir_a, name("g"));
        assert_eq!(t.child(dir_a, name("g")), Some(f));
        assert!(!t.get(g).unwrap().linked, "the replaced file lost its name");
        assert_eq!(t.child(ROOT, name("f")), None);
        t.unlink(dir_a, name("g"));
        drop(t);
        let mut r = Table::resume(d.path(), "s").unwrap();
        assert_eq!(r.child(dir_a, name("g")), None);
        assert!(!r.get(f).unwrap().linked);
        assert_eq!(r.get(f).unwrap().parent, dir_a);
        // A new file of that name gets a new number; the old one stays until forgotten.
        let f2 = r.entry_reply(dir_a, name("g"), Kind::File, true, |_| true);
        assert!(f2 != f && f2 != g);
        assert!(r.get(f).is_some());
    }

    #[test]
    fn a_kind_change_or_a_refused_reuse_gets_a_new_number() {
        let mut t = Table::in_memory();
        let a = t.entry_reply(ROOT, name("a"), Kind::File, true, |_| true);
        let b = t.entry_reply(ROOT, name("a"), Kind::Directory, true, |_| true);
        assert_ne!(a, b);
        assert!(!t.get(a).unwrap().linked);
        let c = t.entry_reply(ROOT, name("a"), Kind::Directory, true, |_| false);
        assert_ne!(b, c);
        assert!(!t.persistent());
    }

    #[test]
    fn a_large_live_table_is_not_walked_at_every_forget() {
        let d = dir();
        let mut t = Table::create(d.path(), "s").unwrap();
        // Live entries only: the log is about the size of a snapshot, not worth compacting.
        let long = "y".repeat(200);
        let mut ks = Vec::new();
        while t.log.as_ref().unwrap().bytes < COMPACT_MIN_BYTES + 1 {
            ks.push(t.entry_reply(ROOT, OsStr::new(&format!("{long}{}", ks.len())), Kind::File, true, |_| true));
        }
        t.maybe_compact();
        assert_eq!(t.compaction_checks, 1, "checked once the log is big enough");
        let bytes = t.log.as_ref().unwrap().bytes;
        // A thousand FORGETs (each followed by a check, as the adapter does) walk the table no more.
        for k in ks.iter().take(1000) {
            assert!(t.forget(*k, 1));
            t.maybe_compact();
        }
        assert_eq!(t.compaction_checks, 1, "no walk before the log grew by 1/{COMPACT_RECHECK_DIVISOR}");
        // Once it has grown by that much, the next call looks again.
        while t.log.as_ref().unwrap().bytes < bytes + bytes / COMPACT_RECHECK_DIVISOR {
            let k = t.entry_reply(ROOT, name("again"), Kind::File, true, |_| true);
            t.forget(k, 1);
        }
        t.maybe_compact();
        assert_eq!(t.compaction_checks, 2);
        assert!(t.log.as_ref().unwrap().bytes > bytes, "not compacted: still mostly live");
    }

    #[test]
    fn compaction_keeps_what_is_live() {
        let d = dir();
        let mut t = Table::create(d.path(), "s").unwrap();
        let keep = t.entry_reply(ROOT, name("keep"), Kind::File, true, |_| true);
        // Grow the log past the compaction threshold with numbers that are forgotten again.
        let long = "x".repeat(200);
        let mut i = 0;
        while t.log.as_ref().unwrap().bytes < COMPACT_MIN_BYTES + 1 {
            let k = t.entry_reply(ROOT, OsStr::new(&format!("{long}{i}")), Kind::File, true, |_| true);
            t.forget(k, 1);
            i += 1;
        }
        t.maybe_compact();
        let size = fs::metadata(d.path().join(TABLE_FILE)).unwrap().len();
        assert!(size < 1024, "compacted to {size} bytes");
        let more = t.entry_reply(ROOT, name("more"), Kind::File, true, |_| true);
        drop(t);
        let r = Table::resume(d.path(), "s").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r.child(ROOT, name("keep")), Some(keep));
        assert_eq!(r.child(ROOT, name("more")), Some(more));
    }
}
