//! One mount: check the settings, build the S3 client, check the bucket, start the FUSE session
//! on the mount point (a directory or an already-mounted `/dev/fd/N`) and serve it until it is
//! unmounted or SIGINT/SIGTERM arrives.

use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mountpoint_s3_client::config::{
    AddressingStyle, Allocator, EndpointConfig, S3ClientAuthConfig, S3ClientConfig, TlsConfig, Uri,
};
use mountpoint_s3_client::error::{ListObjectsError, ObjectClientError};
use mountpoint_s3_client::error_metadata::ProvideErrorMetadata;
use mountpoint_s3_client::user_agent::UserAgent;
use mountpoint_s3_client::{NewClientError, ObjectClient, S3CrtClient, S3RequestError};
use mountpoint_s3_fs::content_type::ContentTypeDetection;
use mountpoint_s3_fs::data_cache::{CacheLimit, DiskDataCache, DiskDataCacheConfig, ManagedCacheDir};
use mountpoint_s3_fs::fs::{CacheConfig, TimeToLive, UploadChecksumAlgorithm};
use fuser::{MountOption, SessionACL};
use mountpoint_s3_fs::fuse::config::MountPoint;
use mountpoint_s3_fs::fuse::session::FuseSession;
use mountpoint_s3_fs::prefetch::Prefetcher;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::Signals;
use mountpoint_s3_fs::memory::{CandidateSize, MINIMUM_MEM_LIMIT, PagedPool, effective_total_memory};
use mountpoint_s3_fs::s3::config::{MemoryLimitSetting, PartConfig};
use mountpoint_s3_fs::s3::{Bucket, Prefix, S3Path, S3Personality};
use mountpoint_s3_fs::{Runtime, S3Filesystem, S3FilesystemConfig, ServerSideEncryption, Superblock, SuperblockConfig};
use tracing::{info, warn};

use crate::cli::{MountArgs, Ttl, UploadChecksums};
use crate::exit::{self, Failure, chain};
use crate::fuse_adapter::{Adapter, Gate};
use crate::fuse_fd;
use crate::session_table::Table;
use crate::proxy;
use crate::settings::{self, S3Settings};
use crate::start_attempts;
use crate::start_deadline::{self, StartDeadline};
use crate::version;

/// Attempts of the bucket check at start (at most; `start_attempts.rs`).
const CHECK_ATTEMPTS: u32 = 3;

/// How long a handover waits for the requests already running to finish.
const HANDOVER_DRAIN: Duration = Duration::from_secs(30);

/// Size of a disk-cache block (as upstream's default).
const CACHE_BLOCK_SIZE: u64 = 1024 * 1024;

/// Mount and serve until unmounted; `Ok` is a clean end.
pub fn run(args: &MountArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let deadline = StartDeadline::from_env(&|name| std::env::var(name).ok())?; // start_deadline.rs
    let s3 = settings::resolve(args, &|name| std::env::var(name).ok())?;
    info!("{}", version::version_line());
    info!(
        region = %s3.region,
        endpoint = %s3.endpoint_description(),
        ca_bundle = ?s3.ca_bundle,
        proxy = ?s3.proxy.as_ref().map(|p| format!("{}={}", p.variable, p.redacted_url())),
        no_proxy = ?s3.proxy.as_ref().and_then(|p| p.no_proxy.clone()),
        max_attempts = s3.max_attempts,
        "S3 settings"
    );
    if s3.proxy.is_some() {
        proxy::enable_env_proxy();
    }
    // The client prefers AWS_MAX_ATTEMPTS over its own setting; the settings hold the resolved
    // value, so take the variable away and pass the attempts explicitly (the start check uses
    // fewer attempts than the mount).
    // SAFETY: no other thread has been started yet (the CRT and FUSE threads come later).
    unsafe { std::env::remove_var("AWS_MAX_ATTEMPTS") };
    if s3.max_attempts < 2 {
        warn!("1 attempt per request is served as 2: the AWS Common Runtime cannot turn retries off");
    }

    let bucket =
        Bucket::new(args.bucket.clone()).map_err(|e| Failure::usage(format!("bucket '{}': {e}", args.bucket)))?;
    let prefix =
        Prefix::new(args.prefix.as_deref().unwrap_or("")).map_err(|e| Failure::usage(format!("--prefix: {e}")))?;
    let s3_path = S3Path::new(bucket, prefix);
    let description = s3_path.bucket_description();

    // Local checks first: they are cheap and do not depend on the network.
    let cache_dir = match &args.cache {
        Some(dir) if args.max_cache_size != Some(0) => Some(check_cache_dir(dir)?),
        Some(_) => {
            warn!("--max-cache-size=0: caching of object content is off");
            None
        }
        None => None,
    };
    let mount_point = fuse_fd::mount_point(&args.mount_point).map_err(|e| {
        Failure::setup(format!(
            "mount point {}: {}",
            args.mount_point.display(),
            chain(e.as_ref())
        ))
    })?;
    let mount_point_text = mount_point.to_string();

    let memory = memory_target(args);
    let mem_limit = memory.bytes();
    info!(memory_target_mib = mem_limit >> 20, from_option = memory.is_user_specified(), "memory target");
    let parts = PartConfig::with_read_write_sizes(
        args.effective_read_part_size() as usize,
        args.effective_write_part_size() as usize,
    )
    .validate(memory)
    .map_err(|e| Failure::usage(chain(e.as_ref())))?;
    let mut sizes = vec![
        CandidateSize::prunable(parts.read_size_bytes),
        CandidateSize::new(parts.write_size_bytes),
    ];
    if cache_dir.is_some() {
        sizes.push(CandidateSize::new(CACHE_BLOCK_SIZE as usize));
    }
    let pool = PagedPool::config()
        .with_candidate_sizes(sizes)
        .with_memory_limit(mem_limit)
        .build();

    let client = create_client(args, &s3, &parts, pool.clone(), s3.max_attempts)?;
    check_proxy_linked(&s3)?;
    // The start check gets few attempts: a wrong endpoint, CA or proxy is reported in seconds,
    // not after the minute of backoff that the mount's attempts allow. It runs on the mount's own
    // client (a second client would cost ~10 ms at every start): the limit holds for the check
    // only (start_attempts.rs), and the check's connection and credentials serve the mount. A
    // resumed session was proven at its first start, and its workloads are waiting: no check.
    if !args.resume {
        let limit = start_attempts::Limit::new(CHECK_ATTEMPTS);
        check_bucket(&client, &s3_path, &s3, &deadline)?;
        drop(limit);
    }
    let personality = S3Personality::infer_from_bucket(s3_path.bucket.as_str(), &client.endpoint_config());
    let runtime = Runtime::new(client.event_loop_group());

    let fs_config = filesystem_config(args, personality);
    let superblock = Superblock::new(
        client.clone(),
        s3_path,
        SuperblockConfig {
            cache_config: fs_config.cache_config.clone(),
            s3_personality: personality,
        },
    );

    let managed_cache = match &cache_dir {
        Some(dir) => Some(
            ManagedCacheDir::new_from_parent_with_cache_key(dir, None, true)
                .map_err(|e| Failure::setup(format!("cache directory {}: {}", dir.display(), chain(&e))))?,
        ),
        None => None,
    };
    let disk_cache_config = managed_cache.as_ref().map(|managed| DiskDataCacheConfig {
        cache_directory: managed.as_path_buf(),
        block_size: CACHE_BLOCK_SIZE,
        limit: match args.max_cache_size {
            Some(mib) => CacheLimit::TotalSize {
                max_size: (mib * 1024 * 1024) as usize,
            },
            None => CacheLimit::default(),
        },
    });
    let prefetcher = match disk_cache_config {
        Some(config) => Prefetcher::caching_builder(DiskDataCache::new(config, pool.clone()), client.clone()),
        None => Prefetcher::default_builder(client.clone()),
    };
    let table = session_table(args)?;
    let generation = table.generation();
    let (known, persistent) = (table.len(), table.persistent());
    let fs = S3Filesystem::new(client, prefetcher, pool, runtime, superblock, fs_config);
    let gate = Arc::new(Gate::default());
    let adapter = Adapter::new(fs, table, gate.clone());
    let options = fuse_mount_options(args);
    let acl = if args.allow_root {
        SessionACL::RootAndOwner
    } else if args.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    let session = match mount_point {
        MountPoint::Directory(path) => fuser::Session::new(adapter, &path, &options)
            .map_err(|e| Failure::setup(format!("cannot mount at {mount_point_text}: {e}")))?,
        MountPoint::FileDescriptor(fd) if args.resume => {
            // The dead engine's unanswered requests go back to the queue before anyone reads.
            resend_unanswered(&fd).map_err(|e| Failure::setup(format!("cannot resume the session on {mount_point_text}: {e}")))?;
            fuser::Session::from_fd_initialized(adapter, fd, acl)
        }
        MountPoint::FileDescriptor(fd) => fuser::Session::from_fd(adapter, fd, acl),
    };
    let mut session = FuseSession::from_session(session, args.max_threads, false).map_err(|e| {
        Failure::setup(format!(
            "cannot start the FUSE session on {mount_point_text}: {}",
            chain(e.as_ref())
        ))
    })?;
    if let Some(managed) = managed_cache {
        session.run_on_close(Box::new(move || drop(managed)));
    }
    handle_signals(session.shutdown_fn(), gate)?;

    if args.resume {
        info!(
            generation,
            inodes = known,
            ms = started.elapsed().as_millis() as u64,
            "{description} at {mount_point_text}: session resumed"
        );
        println!("mount-s3: {description} is mounted at {mount_point_text} (session resumed, generation {generation})");
    } else {
        info!(persistent, "{description} is mounted at {mount_point_text}");
        println!("mount-s3: {description} is mounted at {mount_point_text}");
    }
    session
        .join()
        .map_err(|e| Failure::new(exit::RUNTIME, format!("the FUSE session failed: {}", chain(e.as_ref()))))?;
    info!("{description} at {mount_point_text}: session ended");
    Ok(())
}

/// The inode table of this start: a new one in `--session-dir`, the recorded one with `--resume`,
/// or one in memory only.
fn session_table(args: &MountArgs) -> Result<Table, Failure> {
    let id = args.session_id.as_deref().unwrap_or("local");
    match (&args.session_dir, args.resume) {
        (Some(dir), false) => Table::create(dir, id)
            .map_err(|e| Failure::setup(format!("session directory {}: {e}", dir.display()))),
        (Some(dir), true) => Table::resume(dir, id).map_err(|e| {
            Failure::setup(format!(
                "cannot resume the session from {}: {e}",
                dir.display()
            ))
        }),
        (None, _) => Ok(Table::in_memory()),
    }
}

/// `FUSE_NOTIFY_RESEND` (Linux 6.9): the requests an earlier engine read and never answered go
/// back to the connection's queue, to be read and answered by this one.
fn resend_unanswered(fd: &OwnedFd) -> std::io::Result<()> {
    const FUSE_NOTIFY_RESEND: i32 = 7;
    let mut header = [0u8; 16];
    header[0..4].copy_from_slice(&16u32.to_ne_bytes());
    header[4..8].copy_from_slice(&FUSE_NOTIFY_RESEND.to_ne_bytes());
    // SAFETY: writes 16 bytes from a live buffer to an open fd we own.
    let n = unsafe { libc::write(fd.as_raw_fd(), header.as_ptr().cast(), header.len()) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("FUSE_NOTIFY_RESEND: {e} (the kernel must be Linux 6.9 or newer)"),
        ));
    }
    Ok(())
}

fn fuse_mount_options(args: &MountArgs) -> Vec<MountOption> {
    let mut options = vec![
        MountOption::DefaultPermissions,
        MountOption::FSName("mountpoint-s3".into()),
        MountOption::NoAtime,
    ];
    if args.read_only {
        options.push(MountOption::RO);
    }
    if args.allow_root {
        options.push(MountOption::AllowRoot);
    }
    if args.allow_other {
        options.push(MountOption::AllowOther);
    }
    options
}

/// SIGINT/SIGTERM end the session cleanly; SIGUSR1 hands it over: requests already running finish,
/// later ones stay unanswered for the next engine, and the process exits with [exit::HANDED_OVER].
fn handle_signals(shutdown: impl Fn() + Send + 'static, gate: Arc<Gate>) -> Result<(), Failure> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGUSR1])
        .map_err(|e| Failure::setup(format!("cannot install signal handlers: {e}")))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGUSR1 {
                    let still = gate.drain(HANDOVER_DRAIN);
                    info!(still_running = still, "handing the session over: exiting without answering new requests");
                    // SAFETY: ends the process at once; the session table is already on disk.
                    unsafe { libc::_exit(exit::HANDED_OVER as i32) };
                }
                shutdown();
            }
        })
        .map_err(|e| Failure::setup(format!("cannot start the signal thread: {e}")))?;
    Ok(())
}

/// With a proxy, the clients must have been made by our wrapper of `aws_s3_client_new`.
fn check_proxy_linked(s3: &S3Settings) -> Result<(), Failure> {
    if s3.proxy.is_some() && proxy::clients_with_env_proxy() == 0 {
        return Err(Failure::new(
            exit::RUNTIME,
            "internal error: the proxy wrapper of aws_s3_client_new is not linked",
        ));
    }
    Ok(())
}

/// The cache directory must exist and be a writable directory.
fn check_cache_dir(dir: &Path) -> Result<std::path::PathBuf, Failure> {
    let meta = std::fs::metadata(dir).map_err(|e| Failure::setup(format!("cache directory {}: {e}", dir.display())))?;
    if !meta.is_dir() {
        return Err(Failure::setup(format!(
            "cache directory {} is not a directory",
            dir.display()
        )));
    }
    Ok(dir.to_path_buf())
}

/// `--memory-target` (MiB), else 95 % of the (cgroup-limited) memory, at least the library's minimum.
fn memory_target(args: &MountArgs) -> MemoryLimitSetting {
    match args.memory_target {
        Some(mib) => MemoryLimitSetting::User((mib as usize) << 20),
        None => MemoryLimitSetting::Default(MINIMUM_MEM_LIMIT.max((effective_total_memory() as f64 * 0.95) as usize)),
    }
}

fn ttl(t: Ttl) -> TimeToLive {
    match t {
        Ttl::Minimal | Ttl::Seconds(0) => TimeToLive::Minimal,
        Ttl::Indefinite => TimeToLive::Indefinite,
        Ttl::Seconds(s) => TimeToLive::Duration(Duration::from_secs(s)),
    }
}

/// The metadata cache settings: `--metadata-ttl`, else 60 s with `--cache` and minimal without.
pub fn cache_config(args: &MountArgs) -> CacheConfig {
    let metadata = args.metadata_ttl.unwrap_or(if args.cache.is_some() {
        Ttl::Seconds(60)
    } else {
        Ttl::Minimal
    });
    let mut config = CacheConfig::new(ttl(metadata));
    if let Some(negative) = args.negative_metadata_ttl {
        config = config.with_negative_metadata_ttl(ttl(negative));
    }
    config
}

fn filesystem_config(args: &MountArgs, personality: S3Personality) -> S3FilesystemConfig {
    let mut c = S3FilesystemConfig::default();
    if let Some(uid) = args.uid {
        c.uid = uid;
    }
    if let Some(gid) = args.gid {
        c.gid = gid;
    }
    if let Some(mode) = args.dir_mode {
        c.dir_mode = mode;
    }
    if let Some(mode) = args.file_mode {
        c.file_mode = mode;
    }
    c.read_only = args.read_only;
    c.allow_delete = args.allow_delete;
    c.allow_overwrite = args.allow_overwrite;
    c.storage_class = args.storage_class.clone();
    c.s3_personality = personality;
    c.server_side_encryption = ServerSideEncryption::new(args.sse.clone(), args.sse_kms_key_id.clone());
    c.cache_config = cache_config(args);
    c.upload_checksum_algorithm = match args.upload_checksums {
        Some(UploadChecksums::Crc32c) => Some(UploadChecksumAlgorithm::Crc32c),
        Some(UploadChecksums::Crc64nvme) => Some(UploadChecksumAlgorithm::Crc64nvme),
        Some(UploadChecksums::Off) => None,
        None if personality.supports_additional_checksums() => Some(UploadChecksumAlgorithm::Crc32c),
        None => None,
    };
    if args.infer_content_type {
        c.content_type_detection = ContentTypeDetection::Auto;
    }
    c
}

fn user_agent(args: &MountArgs) -> UserAgent {
    let ours = format!("mount-s3/{} mountpoint-s3-fs/{}", version::VERSION, version::FS_VERSION);
    let prefix = match &args.user_agent_prefix {
        Some(p) => format!("{p} {ours}"),
        None => ours,
    };
    let mut ua = UserAgent::new(Some(prefix));
    if args.read_only {
        ua.value("mp-readonly");
    }
    if args.cache.is_some() {
        ua.key_value("mp-cache", "local");
    }
    ua
}

fn create_client(
    args: &MountArgs,
    s3: &S3Settings,
    parts: &PartConfig,
    pool: PagedPool,
    attempts: u32,
) -> Result<S3CrtClient, Failure> {
    let mut endpoint = EndpointConfig::new(&s3.region).addressing_style(if args.force_path_style {
        AddressingStyle::Path
    } else {
        AddressingStyle::Automatic
    });
    if let Some(url) = &s3.endpoint {
        let uri = Uri::new_from_str(&Allocator::default(), url)
            .map_err(|e| Failure::usage(format!("endpoint URL '{url}' cannot be parsed: {e}")))?;
        endpoint = endpoint.endpoint(uri);
    }
    let mut config = S3ClientConfig::new()
        .auth_config(if args.no_sign_request {
            S3ClientAuthConfig::NoSigning
        } else {
            S3ClientAuthConfig::Default
        })
        .endpoint_config(endpoint)
        .throughput_target_gbps(args.maximum_throughput_gbps.unwrap_or(10.0))
        .read_part_size(parts.read_size_bytes)
        .write_part_size(parts.write_size_bytes)
        .read_backpressure(true)
        .initial_read_window(parts.read_size_bytes)
        .user_agent(user_agent(args))
        .memory_pool(pool)
        // The CRT reads 0 retries as "its default (3)": one attempt cannot be had, two is the least.
        .max_attempts(NonZeroUsize::new(attempts.max(2) as usize).unwrap_or(NonZeroUsize::MIN));
    if let Some(ca) = &s3.ca_bundle {
        config = config.tls_config(TlsConfig::new().with_trust_store_path(ca));
    }
    if args.requester_pays {
        config = config.request_payer("requester");
    }
    if let Some(owner) = &args.expected_bucket_owner {
        config = config.bucket_owner(owner);
    }
    S3CrtClient::new(config).map_err(|e| match &e {
        NewClientError::InvalidEndpoint(_) => Failure::usage(format!("S3 endpoint: {}", chain(&e))),
        NewClientError::InvalidConfiguration(_) => Failure::usage(chain(&e)),
        NewClientError::TlsConfigValidationError(_) | NewClientError::TlsConfigurationError(_) => {
            Failure::setup(format!("AWS_CA_BUNDLE: {}", chain(&e)))
        }
        NewClientError::ProviderFailure(_) => {
            Failure::new(exit::ACCESS_DENIED, format!("AWS credentials: {}", chain(&e)))
        }
        _ => Failure::new(
            exit::S3_UNAVAILABLE,
            format!("cannot create the S3 client: {}", chain(&e)),
        ),
    })
}

/// List (at most zero keys of) the bucket under the prefix: proves endpoint, TLS, proxy,
/// credentials and bucket before the mount appears.
fn check_bucket(client: &S3CrtClient, path: &S3Path, s3: &S3Settings, deadline: &StartDeadline) -> Result<(), Failure> {
    let bucket = path.bucket.as_str();
    let request = client.list_objects(bucket, None, "/", 0, path.prefix.as_str());
    let at = format!("(endpoint {}, region {})", s3.endpoint_description(), s3.region);
    let Some(result) = deadline.block_on(request) else {
        return Err(Failure::new(
            exit::S3_UNAVAILABLE,
            format!(
                "no answer from S3 within {} s at start: listing bucket '{bucket}' {at} did not finish; check that the endpoint is an S3 server that answers, and the network and proxy to it ({} sets this limit)",
                deadline.limit().as_secs(),
                start_deadline::VAR
            ),
        ));
    };
    let Err(err) = result else {
        return Ok(());
    };
    Err(match &err {
        ObjectClientError::ServiceError(ListObjectsError::NoSuchBucket) => {
            Failure::new(exit::BUCKET_NOT_FOUND, format!("bucket '{bucket}' does not exist {at}"))
        }
        ObjectClientError::ClientError(S3RequestError::Forbidden(message, meta)) => Failure::new(
            exit::ACCESS_DENIED,
            format!(
                "access to bucket '{bucket}' was denied {at}: {} ({message}); check the credentials and the bucket policy",
                meta.error_code.as_deref().unwrap_or("403")
            ),
        ),
        ObjectClientError::ClientError(S3RequestError::NoSigningCredentials) => Failure::new(
            exit::ACCESS_DENIED,
            "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with AWS_SHARED_CREDENTIALS_FILE",
        ),
        ObjectClientError::ClientError(S3RequestError::IncorrectRegion(region, _)) => Failure::new(
            exit::S3_UNAVAILABLE,
            format!(
                "bucket '{bucket}' is in region {region}, not {}: set --region={region}",
                s3.region
            ),
        ),
        ObjectClientError::ClientError(S3RequestError::CrtError(e)) => {
            let hint = if s3.uses_tls() && format!("{e:?}{e}").contains("TLS") {
                " (TLS: is the server's certificate signed by a CA in AWS_CA_BUNDLE or the system store?)"
            } else if s3.proxy.is_some() {
                " (check the proxy in the environment)"
            } else {
                ""
            };
            Failure::new(
                exit::S3_UNAVAILABLE,
                format!("cannot reach bucket '{bucket}' {at}: {e}{hint}"),
            )
        }
        _ => {
            let meta = err.meta();
            match meta.http_code {
                Some(403) => Failure::new(
                    exit::ACCESS_DENIED,
                    format!("access to bucket '{bucket}' was denied {at}: {}", chain(&err)),
                ),
                Some(404) => Failure::new(
                    exit::BUCKET_NOT_FOUND,
                    format!(
                        "bucket '{bucket}' not found {at}: {}",
                        meta.error_code.as_deref().unwrap_or("404")
                    ),
                ),
                Some(code) => Failure::new(
                    exit::S3_UNAVAILABLE,
                    format!(
                        "listing bucket '{bucket}' failed {at}: HTTP {code} {} {}",
                        meta.error_code.as_deref().unwrap_or(""),
                        meta.error_message.as_deref().unwrap_or("")
                    ),
                ),
                None => Failure::new(
                    exit::S3_UNAVAILABLE,
                    format!("listing bucket '{bucket}' failed {at}: {}", chain(&err)),
                ),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, parse};

    fn args(extra: &[&str]) -> MountArgs {
        let mut all = vec!["bucket", "/mnt"];
        all.extend_from_slice(extra);
        match parse(all) {
            Ok(Command::Mount(m)) => *m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn metadata_ttl_defaults_like_upstream() {
        let minimal = cache_config(&args(&[]));
        assert!(!minimal.serve_lookup_from_cache);
        let cached = cache_config(&args(&["--cache=/tmp"]));
        assert!(cached.serve_lookup_from_cache);
        assert_eq!(cached.file_ttl, Duration::from_secs(60));
        let explicit = cache_config(&args(&["--metadata-ttl=5", "--negative-metadata-ttl=minimal"]));
        assert_eq!(explicit.dir_ttl, Duration::from_secs(5));
        assert!(!explicit.use_negative_cache);
        let zero = cache_config(&args(&["--metadata-ttl=0"]));
        assert!(!zero.serve_lookup_from_cache);
    }

    #[test]
    fn filesystem_options_map() {
        let c = filesystem_config(
            &args(&[
                "--uid=1234",
                "--gid=4321",
                "--dir-mode=0700",
                "--file-mode=0600",
                "--allow-delete",
                "--read-only",
                "--storage-class=GLACIER_IR",
                "--upload-checksums=off",
            ]),
            S3Personality::Standard,
        );
        assert_eq!((c.uid, c.gid, c.dir_mode, c.file_mode), (1234, 4321, 0o700, 0o600));
        assert!(c.allow_delete && !c.allow_overwrite && c.read_only);
        assert_eq!(c.storage_class.as_deref(), Some("GLACIER_IR"));
        assert_eq!(c.upload_checksum_algorithm, None);
        let d = filesystem_config(&args(&[]), S3Personality::Standard);
        assert_eq!(d.upload_checksum_algorithm, Some(UploadChecksumAlgorithm::Crc32c));
        assert!(!d.allow_delete && !d.allow_overwrite && !d.read_only);
    }

    #[test]
    fn upstream_options_map_to_the_library() {
        let c = filesystem_config(
            &args(&["--upload-checksums=crc64nvme", "--infer-content-type"]),
            S3Personality::Standard,
        );
        assert_eq!(c.upload_checksum_algorithm, Some(UploadChecksumAlgorithm::Crc64nvme));
        assert_eq!(c.content_type_detection, ContentTypeDetection::Auto);
        let d = filesystem_config(&args(&[]), S3Personality::Standard);
        assert_eq!(d.content_type_detection, ContentTypeDetection::Disabled);
        let m = memory_target(&args(&["--memory-target=768"]));
        assert!(m.is_user_specified());
        assert_eq!(m.bytes(), 768 << 20);
        let default = memory_target(&args(&[]));
        assert!(!default.is_user_specified() && default.bytes() >= MINIMUM_MEM_LIMIT);
    }

    #[test]
    fn user_agent_keeps_the_callers_prefix_first() {
        let ua = user_agent(&args(&[
            "--user-agent-prefix=s3-csi-driver/1.2 credential-source#driver",
        ]))
        .build();
        assert!(
            ua.starts_with("s3-csi-driver/1.2 credential-source#driver mount-s3/"),
            "{ua}"
        );
    }
}
