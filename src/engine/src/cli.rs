//! The command line of `mount-s3`: `mount-s3 <BUCKET> <MOUNT_POINT> [OPTIONS]`.
//!
//! Hand-written rather than derived so that every mistake is reported in exactly one line that
//! names the option and what is expected. Accepted forms: `--name=value`, `--name value`, `--flag`,
//! and the short flags `-f`, `-d`, `-h`, `-V`. Options of upstream Mountpoint that this engine does
//! not implement are refused by name (never silently ignored).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::upstream_options;

/// Smallest and largest S3 part size (the CRT client refuses anything else).
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// See [MIN_PART_SIZE].
pub const MAX_PART_SIZE: u64 = 5 * 1024 * 1024 * 1024;
/// Default number of FUSE worker threads (as upstream).
pub const DEFAULT_MAX_THREADS: usize = 16;

/// A metadata time-to-live as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Re-validate with S3 on (almost) every lookup.
    Minimal,
    /// Never expire.
    Indefinite,
    /// A number of seconds.
    Seconds(u64),
}

/// Checksum of uploads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadChecksums {
    Crc32c,
    Crc64nvme,
    Off,
}

/// Everything a mount needs from the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct MountArgs {
    pub bucket: String,
    /// A directory, or `/dev/fd/N` for a FUSE fd that the caller already mounted.
    pub mount_point: PathBuf,
    pub prefix: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
    pub force_path_style: bool,
    pub read_only: bool,
    pub allow_delete: bool,
    pub allow_overwrite: bool,
    pub allow_other: bool,
    pub allow_root: bool,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub dir_mode: Option<u16>,
    pub file_mode: Option<u16>,
    pub cache: Option<PathBuf>,
    /// MiB.
    pub max_cache_size: Option<u64>,
    pub metadata_ttl: Option<Ttl>,
    pub negative_metadata_ttl: Option<Ttl>,
    pub storage_class: Option<String>,
    pub sse: Option<String>,
    pub sse_kms_key_id: Option<String>,
    /// Bytes.
    pub part_size: Option<u64>,
    pub read_part_size: Option<u64>,
    pub write_part_size: Option<u64>,
    pub upload_checksums: Option<UploadChecksums>,
    pub max_threads: usize,
    pub maximum_throughput_gbps: Option<f64>,
    pub aws_max_attempts: Option<u32>,
    pub user_agent_prefix: Option<String>,
    pub debug: bool,
    pub debug_crt: bool,
    pub no_log: bool,
    /// Where the session's inode table is kept, so that a restarted engine can resume it.
    pub session_dir: Option<PathBuf>,
    /// The session's id (the node plugin's, one per FUSE connection).
    pub session_id: Option<String>,
    /// Serve a connection that an earlier engine of the session initialized.
    pub resume: bool,
    /// `x-amz-request-payer: requester` on every request.
    pub requester_pays: bool,
    /// `x-amz-expected-bucket-owner` on every request.
    pub expected_bucket_owner: Option<String>,
    /// Unsigned requests; no credentials are loaded.
    pub no_sign_request: bool,
    /// MiB.
    pub memory_target: Option<u64>,
    /// Log a summary of the metrics every 5 s (metrics.rs).
    pub log_metrics: bool,
    /// OTLP/HTTP metrics endpoint (metrics.rs).
    pub otlp_endpoint: Option<String>,
    /// Seconds.
    pub otlp_export_interval: Option<u64>,
    /// Content-Type of uploads from the file extension.
    pub infer_content_type: bool,
    /// CA bundle that replaces the trusted CAs (else `AWS_CA_BUNDLE`).
    pub ca_bundle: Option<PathBuf>,
}

impl MountArgs {
    fn new(bucket: String, mount_point: PathBuf) -> Self {
        Self {
            bucket,
            mount_point,
            prefix: None,
            region: None,
            endpoint_url: None,
            force_path_style: false,
            read_only: false,
            allow_delete: false,
            allow_overwrite: false,
            allow_other: false,
            allow_root: false,
            uid: None,
            gid: None,
            dir_mode: None,
            file_mode: None,
            cache: None,
            max_cache_size: None,
            metadata_ttl: None,
            negative_metadata_ttl: None,
            storage_class: None,
            sse: None,
            sse_kms_key_id: None,
            part_size: None,
            read_part_size: None,
            write_part_size: None,
            upload_checksums: None,
            max_threads: DEFAULT_MAX_THREADS,
            maximum_throughput_gbps: None,
            aws_max_attempts: None,
            user_agent_prefix: None,
            debug: false,
            debug_crt: false,
            no_log: false,
            session_dir: None,
            session_id: None,
            resume: false,
            requester_pays: false,
            expected_bucket_owner: None,
            no_sign_request: false,
            memory_target: None,
            log_metrics: false,
            otlp_endpoint: None,
            otlp_export_interval: None,
            infer_content_type: false,
            ca_bundle: None,
        }
    }

    /// Part size for GET: `--read-part-size`, else `--part-size`, else 8 MiB.
    pub fn effective_read_part_size(&self) -> u64 {
        self.read_part_size.or(self.part_size).unwrap_or(8 * 1024 * 1024)
    }

    /// Part size for multipart PUT: `--write-part-size`, else `--part-size`, else 8 MiB.
    pub fn effective_write_part_size(&self) -> u64 {
        self.write_part_size.or(self.part_size).unwrap_or(8 * 1024 * 1024)
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Mount(Box<MountArgs>),
    Help,
    Version,
}

/// A bad command line, in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(message: impl Into<String>) -> UsageError {
    UsageError(message.into())
}

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Flag,
    Value,
}

/// Options of this engine that upstream Mountpoint does not have (the driver's internal flags).
/// Upstream's options, those implemented and those refused with their reason, are generated from
/// the driver's list (`upstream_options.rs`, from src/mppod/mount_option_spec.ts).
const ENGINE_ONLY: &[(&str, Kind)] = &[
    ("resume", Kind::Flag),
    ("session-dir", Kind::Value),
    ("session-id", Kind::Value),
];

fn kind_of(name: &str) -> Option<Kind> {
    upstream_options::IMPLEMENTED
        .iter()
        .chain(ENGINE_ONLY)
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
}

fn refused_reason(name: &str) -> Option<&'static str> {
    upstream_options::REFUSED.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

/// Parse the arguments after the program name.
pub fn parse<I, S>(args: I) -> Result<Command, UsageError>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let mut strings = Vec::new();
    for a in args {
        let os: OsString = a.into();
        match os.into_string() {
            Ok(s) => strings.push(s),
            Err(bad) => return Err(usage(format!("argument {bad:?} is not valid UTF-8"))),
        }
    }

    let mut positional: Vec<String> = Vec::new();
    let mut options: Vec<(String, Option<String>)> = Vec::new();
    let mut iter = strings.into_iter();
    let mut only_positional = false;
    while let Some(arg) = iter.next() {
        if only_positional || arg == "-" || !arg.starts_with('-') {
            positional.push(arg);
            continue;
        }
        if arg == "--" {
            only_positional = true;
            continue;
        }
        let (name, inline_value) = if let Some(body) = arg.strip_prefix("--") {
            match body.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (body.to_string(), None),
            }
        } else {
            let long = match arg.as_str() {
                "-f" => "foreground",
                "-d" => "debug",
                "-h" => "help",
                "-V" => "version",
                "-l" => "log-directory",
                "-o" => {
                    return Err(usage(
                        "option '-o' (fstab-style options) is not supported; pass each option as --name=value",
                    ));
                }
                _ => return Err(usage(format!("unknown option '{arg}'"))),
            };
            (long.to_string(), None)
        };
        if name.is_empty() {
            return Err(usage(format!("malformed option '{arg}'")));
        }
        let Some(kind) = kind_of(&name) else {
            if let Some(reason) = refused_reason(&name) {
                return Err(usage(format!("option '--{name}' is not supported: {reason}")));
            }
            return Err(usage(format!("unknown option '--{name}'")));
        };
        let value = match (kind, inline_value) {
            (Kind::Flag, Some(v)) => {
                return Err(usage(format!("option '--{name}' takes no value, got '{v}'")));
            }
            (Kind::Flag, None) => None,
            (Kind::Value, Some(v)) => Some(v),
            (Kind::Value, None) => match iter.next() {
                Some(v) if !v.starts_with("--") => Some(v),
                _ => return Err(usage(format!("option '--{name}' needs a value, e.g. '--{name}=...'"))),
            },
        };
        if name == "help" {
            return Ok(Command::Help);
        }
        if name == "version" {
            return Ok(Command::Version);
        }
        if options.iter().any(|(n, _)| *n == name) {
            return Err(usage(format!("option '--{name}' is given more than once")));
        }
        options.push((name, value));
    }

    let (bucket, mount_point) = match positional.as_slice() {
        [b, m] => (b.clone(), m.clone()),
        [] => return Err(usage("missing <BUCKET> and <MOUNT_POINT> arguments")),
        [_] => return Err(usage("missing the <MOUNT_POINT> argument (a directory or /dev/fd/N)")),
        [_, _, extra, ..] => {
            return Err(usage(format!(
                "unexpected argument '{extra}': expected only <BUCKET> <MOUNT_POINT>"
            )));
        }
    };
    check_bucket(&bucket)?;
    if mount_point.is_empty() {
        return Err(usage("the <MOUNT_POINT> argument is empty"));
    }

    let mut m = MountArgs::new(bucket, PathBuf::from(mount_point));
    for (name, value) in options {
        apply(&mut m, &name, value)?;
    }
    check_combinations(&m)?;
    Ok(Command::Mount(Box::new(m)))
}

fn check_bucket(bucket: &str) -> Result<(), UsageError> {
    if bucket.starts_with("s3://") {
        return Err(usage(format!(
            "bucket '{bucket}': give a bucket name, not an S3 URI (use --prefix for a key prefix)"
        )));
    }
    let valid_chars = bucket
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-' || c == b'_' || c == b':' || c == b'/');
    if !(3..=255).contains(&bucket.len()) || !valid_chars {
        return Err(usage(format!(
            "bucket '{bucket}' is not a valid bucket name (3-255 characters: letters, digits, '.', '-')"
        )));
    }
    Ok(())
}

fn apply(m: &mut MountArgs, name: &str, value: Option<String>) -> Result<(), UsageError> {
    let flag = value.is_none();
    let v = value.unwrap_or_default();
    let bad = |what: &str| usage(format!("option '--{name}={v}' is invalid: {what}"));
    match name {
        "foreground" => {} // always in the foreground
        "read-only" => m.read_only = flag,
        "allow-delete" => m.allow_delete = flag,
        "allow-overwrite" => m.allow_overwrite = flag,
        "allow-other" => m.allow_other = flag,
        "allow-root" => m.allow_root = flag,
        "force-path-style" => m.force_path_style = flag,
        "debug" => m.debug = flag,
        "debug-crt" => m.debug_crt = flag,
        "no-log" => m.no_log = flag,
        "resume" => m.resume = flag,
        "session-dir" => {
            if !v.starts_with('/') {
                return Err(bad("must be an absolute directory path"));
            }
            m.session_dir = Some(PathBuf::from(v));
        }
        "session-id" => {
            if v.is_empty() || v.len() > 128 || !v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
                return Err(bad("must be 1-128 letters, digits or '-'"));
            }
            m.session_id = Some(v);
        }
        "uid" => m.uid = Some(parse_id(&v).ok_or_else(|| bad(ID_EXPECTED))?),
        "gid" => m.gid = Some(parse_id(&v).ok_or_else(|| bad(ID_EXPECTED))?),
        "dir-mode" => m.dir_mode = Some(parse_mode(&v).ok_or_else(|| bad("must be an octal mode such as 0755"))?),
        "file-mode" => m.file_mode = Some(parse_mode(&v).ok_or_else(|| bad("must be an octal mode such as 0644"))?),
        "prefix" => {
            if v.is_empty() || !v.ends_with('/') || v.starts_with('/') {
                return Err(bad(
                    "must be a key prefix that ends with '/' and does not start with '/', e.g. 'data/'",
                ));
            }
            if v.chars().any(|c| c.is_control()) {
                return Err(bad("must not contain control characters"));
            }
            if v.split('/').any(|s| s == "." || s == "..") {
                return Err(bad("must not contain '.' or '..'"));
            }
            m.prefix = Some(v);
        }
        "region" => {
            if v.is_empty() || v.len() > 64 || !v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
                return Err(bad("must be a region name such as us-east-1"));
            }
            m.region = Some(v);
        }
        "endpoint-url" => {
            check_url(&v).map_err(|what| bad(&what))?;
            m.endpoint_url = Some(v);
        }
        "cache" => {
            if v.is_empty() {
                return Err(bad("must be a directory"));
            }
            m.cache = Some(PathBuf::from(v));
        }
        "max-cache-size" => {
            m.max_cache_size = Some(
                v.parse::<u64>()
                    .ok()
                    .filter(|n| *n <= 1 << 40)
                    .ok_or_else(|| bad("must be a size in MiB"))?,
            )
        }
        "metadata-ttl" => m.metadata_ttl = Some(parse_ttl(&v).ok_or_else(|| bad(TTL_EXPECTED))?),
        "negative-metadata-ttl" => m.negative_metadata_ttl = Some(parse_ttl(&v).ok_or_else(|| bad(TTL_EXPECTED))?),
        "storage-class" => {
            if v.is_empty() || v.len() > 64 || !v.bytes().all(|c| c.is_ascii_uppercase() || c == b'_') {
                return Err(bad("must be a storage class such as STANDARD or INTELLIGENT_TIERING"));
            }
            m.storage_class = Some(v);
        }
        "sse" => {
            if !matches!(v.as_str(), "aws:kms" | "aws:kms:dsse" | "AES256") {
                return Err(bad("must be aws:kms, aws:kms:dsse or AES256"));
            }
            m.sse = Some(v);
        }
        "sse-kms-key-id" => {
            if v.is_empty() || v.len() > 2048 || !v.bytes().all(|c| c.is_ascii_graphic()) {
                return Err(bad("must be a KMS key id or ARN"));
            }
            m.sse_kms_key_id = Some(v);
        }
        "part-size" => m.part_size = Some(parse_part_size(&v).ok_or_else(|| bad(PART_EXPECTED))?),
        "read-part-size" => m.read_part_size = Some(parse_part_size(&v).ok_or_else(|| bad(PART_EXPECTED))?),
        "write-part-size" => m.write_part_size = Some(parse_part_size(&v).ok_or_else(|| bad(PART_EXPECTED))?),
        "upload-checksums" => {
            m.upload_checksums = Some(match v.as_str() {
                "crc32c" => UploadChecksums::Crc32c,
                "crc64nvme" => UploadChecksums::Crc64nvme,
                "off" => UploadChecksums::Off,
                _ => return Err(bad("must be crc32c, crc64nvme or off")),
            })
        }
        "max-threads" => {
            m.max_threads = v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=4096).contains(n))
                .ok_or_else(|| bad("must be a number of threads from 1 to 4096"))?
        }
        "maximum-throughput-gbps" => {
            m.maximum_throughput_gbps = Some(
                Some(v.as_str())
                    .filter(|v| is_decimal(v, 4, 3))
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|g| g.is_finite() && *g > 0.0 && *g <= 10_000.0)
                    .ok_or_else(|| bad("must be a positive number of Gbit/s such as 10"))?,
            )
        }
        "aws-max-attempts" => {
            m.aws_max_attempts = Some(
                v.parse::<u32>()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| bad("must be a number of attempts from 1 to 100"))?,
            )
        }
        "user-agent-prefix" => {
            if v.is_empty() || v.len() > 512 || !v.bytes().all(|c| c == b' ' || c.is_ascii_graphic()) {
                return Err(bad("must be printable ASCII of at most 512 characters"));
            }
            m.user_agent_prefix = Some(v);
        }
        "requester-pays" => m.requester_pays = flag,
        "no-sign-request" => m.no_sign_request = flag,
        "log-metrics" => m.log_metrics = flag,
        "infer-content-type" => m.infer_content_type = flag,
        "expected-bucket-owner" => {
            let valid = v.len() <= 128
                && v.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && v.bytes().all(|c| c.is_ascii_alphanumeric() || b"._:@$+=-".contains(&c));
            if !valid {
                return Err(bad("must be the account id of the bucket's owner (on AWS 12 digits)"));
            }
            m.expected_bucket_owner = Some(v);
        }
        "memory-target" => {
            m.memory_target = Some(
                v.parse::<u64>()
                    .ok()
                    .filter(|n| (512..=i32::MAX as u64).contains(n))
                    .ok_or_else(|| bad("must be a number of MiB of at least 512"))?,
            )
        }
        "otlp-endpoint" => {
            check_url(&v).map_err(|what| bad(&what))?;
            m.otlp_endpoint = Some(v);
        }
        "otlp-export-interval" => {
            m.otlp_export_interval = Some(
                v.parse::<u64>()
                    .ok()
                    .filter(|n| (1..=86_400).contains(n))
                    .ok_or_else(|| bad("must be a number of seconds from 1 to 86400"))?,
            )
        }
        "ca-bundle" => {
            if v.is_empty() {
                return Err(bad("must be the path of a PEM file"));
            }
            m.ca_bundle = Some(PathBuf::from(v));
        }
        _ => unreachable!("option table and apply() disagree on --{name}"),
    }
    Ok(())
}

const TTL_EXPECTED: &str = "must be a number of seconds, 'indefinite' or 'minimal'";
const ID_EXPECTED: &str = "must be an id from 1 to 2147483647 (0, root, is refused as by upstream Mountpoint)";
const PART_EXPECTED: &str = "must be a size in bytes from 5242880 (5 MiB) to 5368709120 (5 GiB)";

fn check_combinations(m: &MountArgs) -> Result<(), UsageError> {
    if m.allow_other && m.allow_root {
        return Err(usage(
            "options '--allow-other' and '--allow-root' cannot be used together (--allow-other already admits root)",
        ));
    }
    if m.max_cache_size.is_some() && m.cache.is_none() {
        return Err(usage("option '--max-cache-size' needs '--cache=<DIRECTORY>'"));
    }
    if let Some(key) = &m.sse_kms_key_id {
        match m.sse.as_deref() {
            Some("aws:kms") | Some("aws:kms:dsse") => {}
            _ => {
                return Err(usage(format!(
                    "option '--sse-kms-key-id={key}' needs '--sse=aws:kms' or '--sse=aws:kms:dsse'"
                )));
            }
        }
    }
    if m.resume && (m.session_dir.is_none() || !m.mount_point.starts_with("/dev/fd/")) {
        return Err(usage(
            "option '--resume' needs '--session-dir=<DIRECTORY>' and a /dev/fd/N mount point",
        ));
    }
    if m.session_id.is_some() && m.session_dir.is_none() {
        return Err(usage("option '--session-id' needs '--session-dir=<DIRECTORY>'"));
    }
    if m.no_log && (m.debug || m.debug_crt || m.log_metrics) {
        return Err(usage(
            "option '--no-log' cannot be used with '--debug', '--debug-crt' or '--log-metrics'",
        ));
    }
    if m.otlp_export_interval.is_some() && m.otlp_endpoint.is_none() {
        return Err(usage("option '--otlp-export-interval' needs '--otlp-endpoint=<URL>'"));
    }
    Ok(())
}

/// A user or group id as upstream takes it (not 0), within the ids Kubernetes gives pods.
fn parse_id(v: &str) -> Option<u32> {
    if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    v.parse::<u32>().ok().filter(|n| (1..=i32::MAX as u32).contains(n))
}

/// `digits{1,int}(.digits{1,frac})?`: a plain decimal (no sign, exponent or special value).
fn is_decimal(v: &str, int: usize, frac: usize) -> bool {
    let (i, f) = match v.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (v, None),
    };
    let digits = |s: &str, max: usize| (1..=max).contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit());
    digits(i, int) && f.is_none_or(|f| digits(f, frac))
}

fn parse_mode(v: &str) -> Option<u16> {
    if v.is_empty() || v.len() > 4 {
        return None;
    }
    u16::from_str_radix(v, 8).ok().filter(|m| *m <= 0o777)
}

fn parse_part_size(v: &str) -> Option<u64> {
    v.parse::<u64>()
        .ok()
        .filter(|n| (MIN_PART_SIZE..=MAX_PART_SIZE).contains(n))
}

/// Longest accepted TTL in seconds (100 years, as the library).
const MAX_TTL_SECONDS: u64 = 100 * 365 * 24 * 60 * 60;

fn parse_ttl(v: &str) -> Option<Ttl> {
    match v {
        "minimal" => Some(Ttl::Minimal),
        "indefinite" => Some(Ttl::Indefinite),
        _ if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => v
            .parse::<u64>()
            .ok()
            .filter(|s| *s <= MAX_TTL_SECONDS)
            .map(Ttl::Seconds),
        _ => None,
    }
}

/// Check an S3 endpoint or proxy URL: `http(s)://host[:port][/path]`.
pub fn check_url(v: &str) -> Result<(), String> {
    let rest = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"))
        .ok_or_else(|| "must be an http:// or https:// URL".to_string())?;
    let host_port = rest.split('/').next().unwrap_or("");
    if host_port.is_empty() || host_port.contains('@') {
        return Err("must name a host (and no user info), e.g. https://s3.example.com:8443".into());
    }
    if v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters".into());
    }
    let (host, port) = match host_port.strip_prefix('[') {
        // [v6]:port
        Some(v6) => match v6.split_once(']') {
            Some((h, rest)) => (h, rest.strip_prefix(':')),
            None => return Err("has an unterminated IPv6 address".into()),
        },
        None => match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Err("must name a host, e.g. https://s3.example.com:8443".into());
    }
    if let Some(port) = port
        && (port.is_empty() || port.parse::<u16>().is_err())
    {
        return Err(format!("has an invalid port '{port}'"));
    }
    Ok(())
}

/// The `--help` text.
pub fn help_text() -> String {
    format!(
        "\
mount-s3 {version}: mounts an S3 bucket as a FUSE file system, in the foreground

Usage: mount-s3 <BUCKET> <MOUNT_POINT> [OPTIONS]

  <BUCKET>                        bucket name
  <MOUNT_POINT>                   existing directory, or /dev/fd/N: an open /dev/fuse fd that the
                                  caller already mounted (the FUSE session is served on it)

Bucket and client:
  --prefix=<PREFIX/>              mount only keys under this prefix (must end with '/')
  --region=<REGION>               signing region [AWS_REGION, AWS_DEFAULT_REGION, us-east-1]
  --endpoint-url=<URL>            S3 endpoint [AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS]
  --force-path-style              path-style addressing (bucket in the path, not the host)
  --storage-class=<CLASS>         storage class of new objects
  --sse=<aws:kms|aws:kms:dsse|AES256>  server-side encryption of new objects
  --sse-kms-key-id=<KEY>          KMS key for --sse=aws:kms[:dsse]
  --part-size=<BYTES>             part size of GET and multipart PUT [8388608]
  --read-part-size=<BYTES>        part size of GET (overrides --part-size)
  --write-part-size=<BYTES>       part size of multipart PUT (overrides --part-size)
  --upload-checksums=<crc32c|crc64nvme|off>  checksum of uploads [crc32c]
  --infer-content-type            Content-Type of uploads from the file extension
  --requester-pays                send 'x-amz-request-payer: requester'
  --expected-bucket-owner=<ID>    send 'x-amz-expected-bucket-owner' (another owner: access denied)
  --no-sign-request               unsigned requests (public buckets); no credentials are loaded
  --ca-bundle=<PEM>               CAs that replace the trusted ones [AWS_CA_BUNDLE]
  --maximum-throughput-gbps=<N>   target throughput in Gbit/s [10]
  --memory-target=<MiB>           target of the memory used for buffers [95% of the memory, >= 512]
  --aws-max-attempts=<N>          attempts per S3 request [AWS_MAX_ATTEMPTS, 10]
  --user-agent-prefix=<TEXT>      prepended to the User-Agent header

File system:
  --read-only                     mount read-only (writes fail with EROFS)
  --allow-delete                  allow deleting files (else EPERM)
  --allow-overwrite               allow replacing existing files (else EPERM)
  --uid=<UID> --gid=<GID>         owner of files and directories [the caller's]
  --dir-mode=<OCTAL>              directory permissions [0755]
  --file-mode=<OCTAL>             file permissions [0644]
  --allow-other                   let other users (and root) use the mount
  --allow-root                    let root use the mount
  --max-threads=<N>               FUSE worker threads [16]

Session (a restarted engine resumes the FUSE connection of a /dev/fd/N mount point):
  --session-dir=<DIRECTORY>       keep the session's inode table there
  --session-id=<ID>               the session's id [local]
  --resume                        serve the connection an earlier engine of the session served:
                                  no INIT, no bucket check, the recorded inode numbers, the
                                  requests it left unanswered sent again (Linux >= 6.9)

Caching:
  --cache=<DIRECTORY>             cache object content in DIRECTORY/mountpoint-cache
  --max-cache-size=<MiB>          cache size limit [keep 5% of the disk free]; 0 disables the cache
  --metadata-ttl=<SECONDS|indefinite|minimal>   [minimal, or 60 with --cache]
  --negative-metadata-ttl=<SECONDS|indefinite|minimal>  [same as --metadata-ttl]

Logging (to stdout):
  --debug, -d                     debug logs of the file system
  --debug-crt                     debug logs of the AWS Common Runtime
  --no-log                        no logs
  --log-metrics                   log a summary of the metrics every 5 s
  --otlp-endpoint=<URL>           export the metrics to an OTLP (HTTP) endpoint
  --otlp-export-interval=<SECS>   OTLP export interval [60]
  --foreground, -f                accepted; mount-s3 always runs in the foreground

  --help, -h                      this help
  --version, -V                   versions of mount-s3 and its libraries

Upstream options this engine refuses (--profile, --cache-xz, --log-directory, ...) fail with the
reason and what to do instead.

Environment: credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN] or the
profile AWS_PROFILE in AWS_SHARED_CREDENTIALS_FILE/AWS_CONFIG_FILE; AWS_CA_BUNDLE replaces the
trusted CAs; HTTPS_PROXY/HTTP_PROXY/NO_PROXY (either case) route S3 requests through a proxy.
MOUNT_S3_METRICS_PORT serves Prometheus metrics on that port (/metrics), labelled with the JSON
object MOUNT_S3_METRICS_LABELS; MOUNT_S3_START_TIMEOUT bounds the start in seconds [20].

Exit codes: 0 unmounted or stopped by SIGINT/SIGTERM, 1 failure while serving, 2 bad arguments or
environment, 3 local setup failed (mount point, FUSE fd, cache dir, CA bundle, credential files),
4 bucket not found, 5 access denied or no credentials, 6 S3 endpoint unreachable, failing or not
answering within the start deadline, 7 internal error (panic), 8 handed over (SIGUSR1: stopped at
a request boundary for the next engine to resume).
",
        version = crate::version::VERSION
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(args: &[&str]) -> MountArgs {
        match parse(args.iter().copied()) {
            Ok(Command::Mount(m)) => *m,
            other => panic!("expected a mount for {args:?}, got {other:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        match parse(args.iter().copied()) {
            Err(UsageError(message)) => message,
            other => panic!("expected an error for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn the_mounter_command_line_parses() {
        // As src/mounter/engine_command.ts builds it: sorted --name[=value] after three fixed args.
        let m = mount(&[
            "my-bucket",
            "/dev/fd/5",
            "--foreground",
            "--allow-delete",
            "--allow-other",
            "--allow-overwrite",
            "--cache=/work/cache",
            "--debug",
            "--dir-mode=0750",
            "--file-mode=0640",
            "--force-path-style",
            "--gid=2000",
            "--max-cache-size=512",
            "--max-threads=32",
            "--maximum-throughput-gbps=12.5",
            "--metadata-ttl=300",
            "--negative-metadata-ttl=minimal",
            "--part-size=16777216",
            "--prefix=team/data/",
            "--region=eu-west-1",
            "--sse=aws:kms",
            "--sse-kms-key-id=arn:aws:kms:eu-west-1:111122223333:key/abcd",
            "--storage-class=STANDARD_IA",
            "--uid=1000",
            "--upload-checksums=off",
            "--user-agent-prefix=s3-csi-driver/0.1.0 credential-source#secret",
        ]);
        assert_eq!(m.bucket, "my-bucket");
        assert_eq!(m.mount_point, PathBuf::from("/dev/fd/5"));
        assert!(m.allow_delete && m.allow_overwrite && m.allow_other && m.debug && m.force_path_style);
        assert!(!m.read_only && !m.allow_root && !m.debug_crt && !m.no_log);
        assert_eq!(m.cache, Some(PathBuf::from("/work/cache")));
        assert_eq!(m.max_cache_size, Some(512));
        assert_eq!(m.dir_mode, Some(0o750));
        assert_eq!(m.file_mode, Some(0o640));
        assert_eq!((m.uid, m.gid), (Some(1000), Some(2000)));
        assert_eq!(m.max_threads, 32);
        assert_eq!(m.maximum_throughput_gbps, Some(12.5));
        assert_eq!(m.metadata_ttl, Some(Ttl::Seconds(300)));
        assert_eq!(m.negative_metadata_ttl, Some(Ttl::Minimal));
        assert_eq!(m.effective_read_part_size(), 16 * 1024 * 1024);
        assert_eq!(m.effective_write_part_size(), 16 * 1024 * 1024);
        assert_eq!(m.prefix.as_deref(), Some("team/data/"));
        assert_eq!(m.region.as_deref(), Some("eu-west-1"));
        assert_eq!(m.sse.as_deref(), Some("aws:kms"));
        assert_eq!(m.storage_class.as_deref(), Some("STANDARD_IA"));
        assert_eq!(m.upload_checksums, Some(UploadChecksums::Off));
        assert_eq!(
            m.user_agent_prefix.as_deref(),
            Some("s3-csi-driver/0.1.0 credential-source#secret")
        );
    }

    #[test]
    fn defaults_without_options() {
        let m = mount(&["bucket", "/mnt/x"]);
        assert_eq!(m, MountArgs::new("bucket".into(), PathBuf::from("/mnt/x")));
        assert_eq!(m.max_threads, 16);
        assert_eq!(m.effective_read_part_size(), 8 * 1024 * 1024);
        assert_eq!(m.metadata_ttl, None);
    }

    #[test]
    fn values_may_follow_as_the_next_argument_and_options_may_come_first() {
        let m = mount(&[
            "--region",
            "us-west-2",
            "-f",
            "-d",
            "bucket",
            "--uid",
            "1",
            "/mnt/x",
            "--read-only",
        ]);
        assert_eq!(m.region.as_deref(), Some("us-west-2"));
        for ok in [
            "http://[::1]:9000",
            "https://s3.example.com",
            "http://127.0.0.1:8080/base/",
        ] {
            assert_eq!(check_url(ok), Ok(()), "{ok}");
        }
        assert_eq!(m.uid, Some(1));
        assert!(m.debug && m.read_only);
    }

    #[test]
    fn specific_part_sizes_override_the_general_one() {
        let m = mount(&["b-1", "/m", "--part-size=5242880", "--write-part-size=10485760"]);
        assert_eq!(m.effective_read_part_size(), 5242880);
        assert_eq!(m.effective_write_part_size(), 10485760);
    }

    #[test]
    fn ttl_forms() {
        assert_eq!(
            mount(&["bbb", "/m", "--metadata-ttl=indefinite"]).metadata_ttl,
            Some(Ttl::Indefinite)
        );
        assert_eq!(
            mount(&["bbb", "/m", "--metadata-ttl=minimal"]).metadata_ttl,
            Some(Ttl::Minimal)
        );
        assert_eq!(
            mount(&["bbb", "/m", "--metadata-ttl=0"]).metadata_ttl,
            Some(Ttl::Seconds(0))
        );
        assert!(error(&["bbb", "/m", "--metadata-ttl=1h"]).contains("number of seconds"));
        assert!(error(&["bbb", "/m", "--negative-metadata-ttl=-1"]).contains("number of seconds"));
        assert!(error(&["bbb", "/m", "--metadata-ttl=99999999999999"]).contains("number of seconds"));
    }

    #[test]
    fn help_and_version_win() {
        assert_eq!(parse(["--help"]), Ok(Command::Help));
        assert_eq!(parse(["-h"]), Ok(Command::Help));
        assert_eq!(parse(["--version"]), Ok(Command::Version));
        assert_eq!(parse(["bucket", "/m", "-V"]), Ok(Command::Version));
    }

    #[test]
    fn unknown_and_refused_options_are_named() {
        assert_eq!(
            error(&["bucket", "/m", "--frobnicate"]),
            "unknown option '--frobnicate'"
        );
        assert_eq!(error(&["bucket", "/m", "-x"]), "unknown option '-x'");
        assert!(
            error(&["bucket", "/m", "--profile=dev"])
                .starts_with("option '--profile' is not supported: credentials come from the driver")
        );
        assert!(error(&["bucket", "/m", "--cache-xz=b"]).starts_with("option '--cache-xz' is not supported"));
        assert!(error(&["bucket", "/m", "-o", "ro"]).contains("'-o'"));
    }

    #[test]
    fn flag_and_value_mistakes() {
        assert_eq!(
            error(&["bucket", "/m", "--read-only=yes"]),
            "option '--read-only' takes no value, got 'yes'"
        );
        assert_eq!(
            error(&["bucket", "/m", "--uid"]),
            "option '--uid' needs a value, e.g. '--uid=...'"
        );
        assert_eq!(
            error(&["bucket", "/m", "--uid", "--gid=1"]),
            "option '--uid' needs a value, e.g. '--uid=...'"
        );
        assert_eq!(
            error(&["bucket", "/m", "--uid=1", "--uid=2"]),
            "option '--uid' is given more than once"
        );
    }

    #[test]
    fn positional_mistakes() {
        assert_eq!(error(&[]), "missing <BUCKET> and <MOUNT_POINT> arguments");
        assert!(error(&["bucket"]).starts_with("missing the <MOUNT_POINT>"));
        assert!(error(&["bucket", "/m", "/n"]).starts_with("unexpected argument '/n'"));
        assert!(error(&["s3://bucket/p/", "/m"]).contains("not an S3 URI"));
        assert!(error(&["b", "/m"]).contains("not a valid bucket name"));
        assert!(error(&["bad bucket", "/m"]).contains("not a valid bucket name"));
    }

    #[test]
    fn value_checks() {
        for (arg, expected) in [
            ("--uid=-1", "id from 1"),
            ("--uid=0", "id from 1"),
            ("--uid=2147483648", "id from 1"),
            ("--gid=x", "id from 1"),
            ("--gid=0", "id from 1"),
            ("--prefix=a/./b/", "'.' or '..'"),
            ("--maximum-throughput-gbps=1e3", "positive"),
            ("--memory-target=511", "at least 512"),
            ("--expected-bucket-owner=a b", "account id"),
            ("--otlp-export-interval=0", "1 to 86400"),
            ("--otlp-endpoint=collector:4318", "http:// or https://"),
            ("--dir-mode=0999", "octal mode"),
            ("--file-mode=1777", "octal mode"),
            ("--prefix=data", "ends with '/'"),
            ("--prefix=/data/", "ends with '/'"),
            ("--region=US East", "region name"),
            ("--endpoint-url=s3.example.com", "http:// or https://"),
            ("--endpoint-url=http://:9000", "name a host"),
            ("--endpoint-url=http://host:99999", "invalid port"),
            ("--endpoint-url=http://[::1", "IPv6"),
            ("--storage-class=standard", "storage class"),
            ("--sse=aes", "aws:kms"),
            ("--part-size=1024", "5242880"),
            ("--read-part-size=8MiB", "5242880"),
            ("--write-part-size=6000000000", "5242880"),
            ("--upload-checksums=sha256", "crc32c, crc64nvme or off"),
            ("--max-threads=0", "1 to 4096"),
            ("--maximum-throughput-gbps=0", "positive"),
            ("--maximum-throughput-gbps=NaN", "positive"),
            ("--aws-max-attempts=0", "1 to 100"),
            ("--max-cache-size=-5", "MiB"),
        ] {
            let message = error(&["bucket", "/m", arg]);
            assert!(message.contains(expected), "{arg}: {message}");
            assert!(message.starts_with("option '--"), "{arg}: {message}");
            assert!(!message.contains('\n'));
        }
    }

    #[test]
    fn combinations() {
        assert!(error(&["bucket", "/m", "--allow-other", "--allow-root"]).contains("cannot be used together"));
        assert_eq!(
            error(&["bucket", "/m", "--max-cache-size=10"]),
            "option '--max-cache-size' needs '--cache=<DIRECTORY>'"
        );
        assert!(error(&["bucket", "/m", "--sse-kms-key-id=k"]).contains("needs '--sse=aws:kms'"));
        assert!(error(&["bucket", "/m", "--sse=AES256", "--sse-kms-key-id=k"]).contains("needs '--sse=aws:kms'"));
        assert!(error(&["bucket", "/m", "--no-log", "--debug"]).contains("cannot be used with"));
        assert!(error(&["bucket", "/m", "--no-log", "--log-metrics"]).contains("cannot be used with"));
        assert_eq!(
            error(&["bucket", "/m", "--otlp-export-interval=5"]),
            "option '--otlp-export-interval' needs '--otlp-endpoint=<URL>'"
        );
        let m = mount(&["bucket", "/m", "--sse=aws:kms:dsse", "--sse-kms-key-id=k"]);
        assert_eq!(m.sse_kms_key_id.as_deref(), Some("k"));
    }

    #[test]
    fn session_options() {
        let m = mount(&["bkt", "/dev/fd/4", "--session-dir=/work/session", "--session-id=ab-12", "--resume"]);
        assert_eq!(m.session_dir.as_deref(), Some(std::path::Path::new("/work/session")));
        assert_eq!(m.session_id.as_deref(), Some("ab-12"));
        assert!(m.resume);
        assert!(error(&["bkt", "/dev/fd/4", "--resume"]).contains("needs '--session-dir"));
        assert!(error(&["bkt", "/mnt", "--session-dir=/s", "--resume"]).contains("/dev/fd/N"));
        assert!(error(&["bkt", "/dev/fd/4", "--session-id=x"]).contains("needs '--session-dir"));
        assert!(error(&["bkt", "/dev/fd/4", "--session-dir=rel"]).contains("absolute"));
        assert!(error(&["bkt", "/dev/fd/4", "--session-dir=/s", "--session-id=a/b"]).contains("letters"));
    }

    #[test]
    fn every_volume_option_of_the_driver_list_parses_with_its_examples() {
        // The examples and invalid values of src/mppod/mount_option_spec.ts, the node plugin's list.
        for (arg, needs) in upstream_options::EXAMPLES {
            let mut args = vec!["bucket", "/m", *arg];
            args.extend_from_slice(needs);
            assert!(
                matches!(parse(args.iter().copied()), Ok(Command::Mount(_))),
                "{args:?}: {:?}",
                parse(args.iter().copied())
            );
        }
        for arg in upstream_options::INVALID {
            let message = error(&["bucket", "/m", arg]);
            assert!(message.starts_with("option '--"), "{arg}: {message}");
        }
    }

    #[test]
    fn refused_upstream_options_name_their_reason() {
        for (name, reason) in upstream_options::REFUSED {
            assert_eq!(
                error(&["bucket", "/m", &format!("--{name}")]),
                format!("option '--{name}' is not supported: {reason}")
            );
        }
        assert!(error(&["bucket", "/m", "-l", "/var/log"]).contains("'--log-directory' is not supported"));
    }

    #[test]
    fn new_upstream_options_map() {
        let m = mount(&[
            "bucket",
            "/m",
            "--requester-pays",
            "--expected-bucket-owner=111122223333",
            "--no-sign-request",
            "--memory-target=1024",
            "--log-metrics",
            "--otlp-endpoint=http://127.0.0.1:4318",
            "--otlp-export-interval=5",
            "--infer-content-type",
            "--upload-checksums=crc64nvme",
            "--ca-bundle=/etc/ca.pem",
        ]);
        assert!(m.requester_pays && m.no_sign_request && m.log_metrics && m.infer_content_type);
        assert_eq!(m.expected_bucket_owner.as_deref(), Some("111122223333"));
        assert_eq!(m.memory_target, Some(1024));
        assert_eq!(m.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(m.otlp_export_interval, Some(5));
        assert_eq!(m.upload_checksums, Some(UploadChecksums::Crc64nvme));
        assert_eq!(m.ca_bundle, Some(PathBuf::from("/etc/ca.pem")));
    }

    #[test]
    fn help_mentions_every_option() {
        let help = help_text();
        for (name, _) in upstream_options::IMPLEMENTED.iter().chain(ENGINE_ONLY) {
            assert!(help.contains(&format!("--{name}")), "--help does not mention --{name}");
        }
    }
}
