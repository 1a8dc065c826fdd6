//! The command line of `mount-s3`: `mount-s3 <BUCKET> <MOUNT_POINT> [OPTIONS]`.
//!
//! Hand-written rather than derived so that every mistake is reported in exactly one line that
//! names the option and what is expected. Accepted forms: `--name=value`, `--name value`, `--flag`,
//! and the short flags `-f`, `-d`, `-h`, `-V`. Options of upstream Mountpoint that this engine does
//! not implement are refused by name (never silently ignored).

use std::ffi::OsString;
use std::path::PathBuf;

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
    /// OTLP/HTTP metrics endpoint and export interval in seconds (metrics.rs).
    pub otlp_endpoint: Option<String>,
    pub otlp_export_interval: Option<u64>,
    pub debug: bool,
    pub debug_crt: bool,
    pub no_log: bool,
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
            otlp_endpoint: None,
            otlp_export_interval: None,
            debug: false,
            debug_crt: false,
            no_log: false,
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
enum Kind {
    Flag,
    Value,
}

/// Options this engine implements, with their kind.
const OPTIONS: &[(&str, Kind)] = &[
    ("allow-delete", Kind::Flag),
    ("allow-other", Kind::Flag),
    ("allow-overwrite", Kind::Flag),
    ("allow-root", Kind::Flag),
    ("aws-max-attempts", Kind::Value),
    ("cache", Kind::Value),
    ("debug", Kind::Flag),
    ("debug-crt", Kind::Flag),
    ("dir-mode", Kind::Value),
    ("endpoint-url", Kind::Value),
    ("file-mode", Kind::Value),
    ("force-path-style", Kind::Flag),
    ("foreground", Kind::Flag),
    ("gid", Kind::Value),
    ("help", Kind::Flag),
    ("max-cache-size", Kind::Value),
    ("max-threads", Kind::Value),
    ("maximum-throughput-gbps", Kind::Value),
    ("metadata-ttl", Kind::Value),
    ("negative-metadata-ttl", Kind::Value),
    ("no-log", Kind::Flag),
    ("otlp-endpoint", Kind::Value),
    ("otlp-export-interval", Kind::Value),
    ("part-size", Kind::Value),
    ("prefix", Kind::Value),
    ("read-only", Kind::Flag),
    ("read-part-size", Kind::Value),
    ("region", Kind::Value),
    ("sse", Kind::Value),
    ("sse-kms-key-id", Kind::Value),
    ("storage-class", Kind::Value),
    ("uid", Kind::Value),
    ("upload-checksums", Kind::Value),
    ("user-agent-prefix", Kind::Value),
    ("version", Kind::Flag),
    ("write-part-size", Kind::Value),
];

/// Options of upstream Mountpoint that this engine refuses, with the reason.
const REFUSED: &[(&str, &str)] = &[
    ("auto-unmount", "the caller manages unmounting"),
    ("bind", "binding to network interfaces is not supported"),
    ("bucket-type", "the bucket type is always inferred"),
    ("cache-block-size", "the cache block size is fixed at 1 MiB"),
    ("cache-xz", "S3 Express One Zone shared caches are not supported"),
    (
        "dual-stack",
        "dual-stack endpoints are not supported; use --endpoint-url",
    ),
    (
        "expected-bucket-owner",
        "expected bucket owner checks are not supported",
    ),
    (
        "incremental-upload",
        "incremental upload (S3 Express append) is not supported",
    ),
    ("log-directory", "logs always go to stdout"),
    ("log-metrics", "metrics logging is not supported"),
    ("max-memory-target", "the memory target follows the cgroup limit"),
    ("no-sign-request", "unsigned requests are not supported"),
    ("profile", "select a profile with the AWS_PROFILE environment variable"),
    ("requester-pays", "requester-pays buckets are not supported"),
    ("transfer-acceleration", "S3 Transfer Acceleration is not supported"),
];

fn kind_of(name: &str) -> Option<Kind> {
    OPTIONS.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
}

fn refused_reason(name: &str) -> Option<&'static str> {
    REFUSED.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
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
        "uid" => m.uid = Some(parse_id(&v).ok_or_else(|| bad("must be a user id from 0 to 4294967294"))?),
        "gid" => m.gid = Some(parse_id(&v).ok_or_else(|| bad("must be a group id from 0 to 4294967294"))?),
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
                "off" => UploadChecksums::Off,
                _ => return Err(bad("must be crc32c or off")),
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
                v.parse::<f64>()
                    .ok()
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
            if v.len() > 512 || !v.bytes().all(|c| c == b' ' || c.is_ascii_graphic()) {
                return Err(bad("must be printable ASCII of at most 512 characters"));
            }
            m.user_agent_prefix = Some(v);
        }
        // Metrics export (metrics.rs).
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
        _ => unreachable!("option table and apply() disagree on --{name}"),
    }
    Ok(())
}

const TTL_EXPECTED: &str = "must be a number of seconds, 'indefinite' or 'minimal'";
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
    if m.otlp_export_interval.is_some() && m.otlp_endpoint.is_none() {
        return Err(usage("option '--otlp-export-interval' needs '--otlp-endpoint=<URL>'"));
    }
    if m.no_log && (m.debug || m.debug_crt) {
        return Err(usage(
            "option '--no-log' cannot be used with '--debug' or '--debug-crt'",
        ));
    }
    Ok(())
}

fn parse_id(v: &str) -> Option<u32> {
    if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    v.parse::<u32>().ok().filter(|n| *n != u32::MAX)
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
  --upload-checksums=<crc32c|off> checksum of uploads [crc32c]
  --maximum-throughput-gbps=<N>   target throughput in Gbit/s [10]
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

Caching:
  --cache=<DIRECTORY>             cache object content in DIRECTORY/mountpoint-cache
  --max-cache-size=<MiB>          cache size limit [keep 5% of the disk free]; 0 disables the cache
  --metadata-ttl=<SECONDS|indefinite|minimal>   [minimal, or 60 with --cache]
  --negative-metadata-ttl=<SECONDS|indefinite|minimal>  [same as --metadata-ttl]

Metrics:
  --otlp-endpoint=<URL>           export metrics over OTLP/HTTP to URL (/v1/metrics is appended)
  --otlp-export-interval=<SECONDS>  OTLP export interval [60]

Logging (to stdout):
  --debug, -d                     debug logs of the file system
  --debug-crt                     debug logs of the AWS Common Runtime
  --no-log                        no logs
  --foreground, -f                accepted; mount-s3 always runs in the foreground

  --help, -h                      this help
  --version, -V                   versions of mount-s3 and its libraries

Environment: credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN] or the
profile AWS_PROFILE in AWS_SHARED_CREDENTIALS_FILE/AWS_CONFIG_FILE; AWS_CA_BUNDLE replaces the
trusted CAs; HTTPS_PROXY/HTTP_PROXY/NO_PROXY (either case) route S3 requests through a proxy.
MOUNT_S3_METRICS_PORT serves Prometheus metrics on that port (/metrics), labelled with the JSON
object MOUNT_S3_METRICS_LABELS; MOUNT_S3_START_TIMEOUT bounds the start in seconds [20].

Exit codes: 0 unmounted or stopped by SIGINT/SIGTERM, 1 failure while serving, 2 bad arguments or
environment, 3 local setup failed (mount point, FUSE fd, cache dir, CA bundle, credential files),
4 bucket not found, 5 access denied or no credentials, 6 S3 endpoint unreachable, failing or not
answering within the start deadline, 7 internal error (panic).
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
            "0",
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
        assert_eq!(m.uid, Some(0));
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
        assert_eq!(
            error(&["bucket", "/m", "--profile=dev"]),
            "option '--profile' is not supported: select a profile with the AWS_PROFILE environment variable"
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
            ("--uid=-1", "user id"),
            ("--uid=4294967295", "user id"),
            ("--gid=x", "group id"),
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
            ("--upload-checksums=sha256", "crc32c or off"),
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
        let m = mount(&["bucket", "/m", "--sse=aws:kms:dsse", "--sse-kms-key-id=k"]);
        assert_eq!(m.sse_kms_key_id.as_deref(), Some("k"));
    }

    #[test]
    fn every_node_plugin_option_is_known() {
        // The allow-list of src/node/mount_options.ts (aws-max-attempts travels as a flag or as
        // AWS_MAX_ATTEMPTS) plus what the node plugin and mounter add.
        for name in [
            "read-only",
            "allow-delete",
            "allow-overwrite",
            "allow-other",
            "allow-root",
            "force-path-style",
            "debug",
            "debug-crt",
            "no-log",
            "uid",
            "gid",
            "dir-mode",
            "file-mode",
            "prefix",
            "region",
            "metadata-ttl",
            "negative-metadata-ttl",
            "cache",
            "max-cache-size",
            "storage-class",
            "sse",
            "sse-kms-key-id",
            "max-threads",
            "part-size",
            "read-part-size",
            "write-part-size",
            "upload-checksums",
            "maximum-throughput-gbps",
            "aws-max-attempts",
            "user-agent-prefix",
            "foreground",
            "endpoint-url",
        ] {
            assert!(kind_of(name).is_some(), "--{name} is not implemented");
        }
    }

    #[test]
    fn help_mentions_every_option() {
        let help = help_text();
        for (name, _) in OPTIONS {
            assert!(help.contains(&format!("--{name}")), "--help does not mention --{name}");
        }
    }
}
