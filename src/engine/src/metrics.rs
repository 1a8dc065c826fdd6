//! Per-volume metrics: the Mountpoint libraries report through the `metrics` facade
//! (`metrics::counter!`, `histogram!`, `gauge!`; names in `mountpoint_s3_fs::metrics::defs` and
//! the client's `metrics` module). Without a recorder those calls go nowhere; this module installs
//! one that keeps every figure in memory and
//!
//! - serves them as Prometheus text on `http://<pod>:<MOUNT_S3_METRICS_PORT>/metrics` (0 or unset:
//!   off), each sample carrying the constant labels of `MOUNT_S3_METRICS_LABELS` (a JSON object,
//!   e.g. `{"volume":"pv-1","volume_id":"vol-1","mountpoint_pod":"mp-abc"}`, which the controller
//!   sets on the Mountpoint Pod and the mounter passes on);
//! - exports them over OTLP/HTTP when `--otlp-endpoint` is given, as upstream's `mount-s3` does
//!   (the library's own exporter, `mountpoint_s3_fs::metrics_otel`; the same names, units and
//!   attribute filter, plus the constant labels as attributes);
//! - logs a summary every 5 s with `--log-metrics` (log target `mountpoint_s3_fs::metrics`, the
//!   library's names): what each counter and histogram gathered in the period, each gauge's value.
//!
//! The library's own sink (`mountpoint_s3_fs::metrics::install`) is not used: a process has one
//! global recorder, and this one serves all three.
//!
//! Names: the library's dotted names become `mountpoint_<name>` with `_` for `.` (counters end in
//! `_total`, microsecond histograms are converted to `_seconds`); the figures an operator looks at
//! first have names of their own ([FAMILIES]). Served beside them: `process_resident_memory_bytes`
//! and `process_cpu_seconds_total` of the engine, and `mountpoint_info`.
//!
//! The HTTP endpoint answers one request at a time, with short socket timeouts, and only
//! `GET`/`HEAD /metrics`: it is a scrape target, not a web server. A port that cannot be bound
//! (another process has it) is logged as a warning; the mount goes on without the endpoint.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use mountpoint_s3_fs::metrics::defs::{MetricStability, lookup_config};
use mountpoint_s3_fs::metrics_otel::{OtlpConfig, OtlpMetricsExporter};
use opentelemetry::KeyValue;
use tracing::{info, warn};

use crate::exit::Failure;
use crate::panic_hook::TEST_PANIC_VAR;
use crate::version;

/// Period of the `--log-metrics` summary, as upstream's.
const LOG_PERIOD: Duration = Duration::from_secs(5);
/// Log target of the summary (the library's, so that `MOUNTPOINT_LOG` filters work as upstream).
const LOG_TARGET: &str = "mountpoint_s3_fs::metrics";

/// Port of the Prometheus endpoint (0 or unset: off).
pub const PORT_VAR: &str = "MOUNT_S3_METRICS_PORT";
/// Constant labels of every sample, a JSON object of strings.
pub const LABELS_VAR: &str = "MOUNT_S3_METRICS_LABELS";

/// At most this many constant labels, each value at most [MAX_LABEL_VALUE] bytes.
const MAX_LABELS: usize = 16;
const MAX_LABEL_VALUE: usize = 1024;
/// Largest request head the endpoint reads.
const MAX_REQUEST: usize = 8 * 1024;
/// Read and write timeout of a scrape connection.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);

/// What to collect and where to send it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Port of the Prometheus endpoint.
    pub port: Option<u16>,
    /// Constant labels, sorted by name.
    pub labels: Vec<(String, String)>,
    /// OTLP/HTTP endpoint and export interval in seconds.
    pub otlp: Option<(String, u64)>,
    /// Log a summary every [LOG_PERIOD] (`--log-metrics`).
    pub log: bool,
    /// Test-only: panic on the first scrape.
    pub panic_on_scrape: bool,
}

impl Settings {
    /// Whether anything collects: without a consumer no recorder is installed (zero cost).
    pub fn enabled(&self) -> bool {
        self.port.is_some() || self.otlp.is_some() || self.log
    }
}

/// Read the settings from the environment and the OTLP options.
pub fn settings(
    otlp_endpoint: Option<&str>,
    otlp_interval: Option<u64>,
    log: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, Failure> {
    let port = match env(PORT_VAR).map(|v| v.trim().to_string()).filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => match v.parse::<u16>() {
            Ok(0) => None,
            Ok(p) => Some(p),
            Err(_) => {
                return Err(Failure::usage(format!(
                    "{PORT_VAR}='{v}' must be a TCP port from 1 to 65535, or 0 for no metrics endpoint"
                )));
            }
        },
    };
    let labels = match env(LABELS_VAR).filter(|v| !v.trim().is_empty()) {
        None => Vec::new(),
        Some(v) => parse_labels(&v).map_err(|what| Failure::usage(format!("{LABELS_VAR}: {what}")))?,
    };
    Ok(Settings {
        port,
        labels,
        otlp: otlp_endpoint.map(|e| (e.to_string(), otlp_interval.unwrap_or(60))),
        log,
        panic_on_scrape: env(TEST_PANIC_VAR).as_deref() == Some("serving"),
    })
}

/// `{"name":"value",...}` → sorted pairs, each name a Prometheus label name.
fn parse_labels(text: &str) -> Result<Vec<(String, String)>, String> {
    let map: BTreeMap<String, String> = serde_json::from_str(text)
        .map_err(|e| format!("must be a JSON object of string values such as {{\"volume\":\"pv-1\"}} ({e})"))?;
    if map.len() > MAX_LABELS {
        return Err(format!("has {} labels, at most {MAX_LABELS} are allowed", map.len()));
    }
    for (name, value) in &map {
        let valid_name = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with("__")
            && name != "le";
        if !valid_name {
            return Err(format!(
                "label name '{name}' must match [a-zA-Z_][a-zA-Z0-9_]*, not start with '__' and not be 'le'"
            ));
        }
        if value.len() > MAX_LABEL_VALUE || value.chars().any(char::is_control) {
            return Err(format!(
                "label '{name}' must be at most {MAX_LABEL_VALUE} bytes without control characters"
            ));
        }
    }
    Ok(map.into_iter().collect())
}

/// Install the recorder (when anything collects) and start the endpoint (its thread ends with the
/// process).
pub fn install(settings: &Settings) -> Result<(), Failure> {
    if !settings.enabled() {
        return Ok(());
    }
    let otlp = match &settings.otlp {
        Some((endpoint, interval)) => {
            let config = OtlpConfig::new(endpoint).with_interval_secs(*interval);
            let exporter = OtlpMetricsExporter::new(&config)
                .map_err(|e| Failure::usage(format!("--otlp-endpoint={endpoint}: cannot export metrics: {e}")))?;
            info!(endpoint, interval_secs = interval, "metrics: OTLP export");
            Some(exporter)
        }
        None => None,
    };
    let registry = Arc::new(Registry {
        metrics: DashMap::with_capacity(128),
        labels: settings.labels.clone(),
        otlp,
    });
    metrics::set_global_recorder(Recorders(registry.clone()))
        .map_err(|e| Failure::new(crate::exit::RUNTIME, format!("internal error: {e}")))?;
    if settings.log {
        let logged = registry.clone();
        let spawned = std::thread::Builder::new().name("metrics-log".into()).spawn(move || {
            let mut previous = HashMap::new();
            loop {
                std::thread::sleep(LOG_PERIOD);
                for line in logged.summary(&mut previous) {
                    info!(target: LOG_TARGET, "{line}");
                }
            }
        });
        if let Err(e) = spawned {
            warn!("metrics: cannot start the summary's thread: {e}");
        }
    }
    let Some(port) = settings.port else {
        return Ok(());
    };
    match bind(port) {
        Ok(listener) => {
            let address = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
            let panic_on_scrape = settings.panic_on_scrape;
            let spawned = std::thread::Builder::new()
                .name("metrics-http".into())
                .spawn(move || serve(listener, &registry, panic_on_scrape));
            match spawned {
                Ok(_) => info!(%address, "metrics: Prometheus endpoint on /metrics"),
                Err(e) => warn!(port, "metrics: cannot start the endpoint's thread: {e}"),
            }
        }
        Err(e) => warn!(port, "metrics: cannot listen on port {port}: {e}; this volume's metrics are not served"),
    }
    Ok(())
}

/// Every address (IPv6 and IPv4), else IPv4 only (a pod without IPv6).
fn bind(port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind(("::", port)).or_else(|_| TcpListener::bind(("0.0.0.0", port)))
}

fn serve(listener: TcpListener, registry: &Registry, panic_on_scrape: bool) {
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                if panic_on_scrape {
                    panic!("{TEST_PANIC_VAR}=serving: test panic while serving");
                }
                let _ = answer(stream, registry);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Answer one HTTP/1.x request and close.
fn answer(mut stream: TcpStream, registry: &Registry) -> std::io::Result<()> {
    stream.set_read_timeout(Some(SOCKET_TIMEOUT))?;
    stream.set_write_timeout(Some(SOCKET_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return respond(&mut stream, "431 Request Header Fields Too Large", "text/plain", b"", false);
        }
    }
    let line = String::from_utf8_lossy(head.split(|b| *b == b'\n').next().unwrap_or(&[]));
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = registry.render();
            respond(
                &mut stream,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                body.as_bytes(),
                method == "HEAD",
            )
        }
        ("GET" | "HEAD", _) => respond(&mut stream, "404 Not Found", "text/plain", b"see /metrics\n", false),
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", b"", false),
    }
}

fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &[u8], head_only: bool) -> std::io::Result<()> {
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()
}

/// What a library metric is called in Prometheus, and how its values are scaled.
#[derive(Debug, Clone, PartialEq)]
struct Family {
    /// Full name (with `_total` for counters).
    name: String,
    help: String,
    /// Factor applied to histogram values (1e-6: microseconds to seconds).
    scale: f64,
    buckets: &'static [f64],
}

/// The figures with names of their own: library name → (Prometheus name without `_total`, help).
const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "fuse.total_bytes",
        "mountpoint_fuse_bytes",
        "Bytes that applications read (type=read) and wrote (type=write) through the mount",
    ),
    (
        "fuse.request_latency",
        "mountpoint_fuse_request_duration_seconds",
        "Time to answer a FUSE request, by request (fuse_request)",
    ),
    (
        "fuse.request_errors",
        "mountpoint_fuse_request_errors",
        "FUSE requests answered with an error, by request (fuse_request)",
    ),
    (
        "fuse.io_size",
        "mountpoint_fuse_io_size_bytes",
        "Size of the reads and writes applications made, by request (fuse_request)",
    ),
    (
        "fuse.cache_hit",
        "mountpoint_fuse_cache_hits",
        "Reads served from the local data cache",
    ),
    (
        "s3.request_count",
        "mountpoint_s3_requests",
        "HTTP requests to S3 (every part and attempt), by operation (s3_request)",
    ),
    (
        "s3.request_errors",
        "mountpoint_s3_request_errors",
        "HTTP requests to S3 that failed, by operation (s3_request) and status (http_status, -1: no answer)",
    ),
    (
        "s3.request_canceled",
        "mountpoint_s3_requests_canceled",
        "HTTP requests to S3 canceled, by operation (s3_request)",
    ),
    (
        "s3.request_total_latency",
        "mountpoint_s3_request_duration_seconds",
        "Duration of HTTP requests to S3, by operation (s3_request)",
    ),
    (
        "s3.request_first_byte_latency",
        "mountpoint_s3_request_first_byte_seconds",
        "Time to the first byte of HTTP requests to S3, by operation (s3_request)",
    ),
    (
        "s3.client.total_bytes",
        "mountpoint_s3_bytes",
        "Object bytes received from S3 (type=read)",
    ),
    (
        "s3.meta_requests",
        "mountpoint_s3_operations",
        "S3 operations (one GET or PUT of an object may take many HTTP requests), by op",
    ),
    (
        "s3.meta_requests.failures",
        "mountpoint_s3_operation_failures",
        "S3 operations that failed, by op and status",
    ),
    (
        "s3.meta_requests.total_latency_us",
        "mountpoint_s3_operation_duration_seconds",
        "Duration of S3 operations, by op",
    ),
];

const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const BYTES_BUCKETS: &[f64] = &[
    512.0, 4096.0, 16384.0, 65536.0, 131072.0, 262144.0, 524288.0, 1048576.0, 4194304.0, 8388608.0, 16777216.0,
    67108864.0,
];
const COUNT_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}

/// The Prometheus family of a library metric.
fn family(name: &str, kind: Kind) -> Family {
    let unit = lookup_config(name).unit;
    let micros = unit == Unit::Microseconds || name.ends_with("_us");
    let (base, help) = match FAMILIES.iter().find(|(lib, _, _)| *lib == name) {
        Some((_, base, help)) => (base.to_string(), help.to_string()),
        None => {
            let mut base = format!("mountpoint_{}", sanitize(name.strip_suffix("_us").unwrap_or(name)));
            if kind == Kind::Histogram && micros && !base.ends_with("_seconds") {
                base.push_str("_seconds");
            } else if unit == Unit::Bytes && !base.contains("bytes") {
                base.push_str("_bytes");
            }
            (base, format!("Mountpoint library metric {name}"))
        }
    };
    let scale = if kind == Kind::Histogram && micros { 1e-6 } else { 1.0 };
    let buckets = if scale != 1.0 {
        SECONDS_BUCKETS
    } else if unit == Unit::Bytes || base.ends_with("_bytes") {
        BYTES_BUCKETS
    } else {
        COUNT_BUCKETS
    };
    let name = if kind == Kind::Counter { format!("{base}_total") } else { base };
    Family {
        name,
        help,
        scale,
        buckets,
    }
}

/// The library's OTLP attributes of a metric (its filter), plus the constant labels.
fn otlp_attributes(key: &Key, allowed: &[&str], labels: &[(String, String)]) -> Vec<KeyValue> {
    key.labels()
        .filter(|l| allowed.contains(&l.key()))
        .map(|l| KeyValue::new(l.key().to_string(), l.value().to_string()))
        .chain(labels.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())))
        .collect()
}

#[derive(Debug)]
struct CounterCell {
    value: AtomicU64,
    otlp: Option<(opentelemetry::metrics::Counter<u64>, Vec<KeyValue>)>,
}

impl metrics::CounterFn for CounterCell {
    fn increment(&self, value: u64) {
        self.value.fetch_add(value, Ordering::Relaxed);
        if let Some((counter, attributes)) = &self.otlp {
            counter.add(value, attributes);
        }
    }
    fn absolute(&self, value: u64) {
        self.value.fetch_max(value, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct GaugeCell {
    bits: AtomicU64,
    otlp: Option<(opentelemetry::metrics::Gauge<f64>, Vec<KeyValue>)>,
}

impl GaugeCell {
    fn update(&self, f: impl Fn(f64) -> f64) {
        let mut new = 0.0;
        let _ = self.bits.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            new = f(f64::from_bits(old));
            Some(new.to_bits())
        });
        if let Some((gauge, attributes)) = &self.otlp {
            gauge.record(new, attributes);
        }
    }
}

impl metrics::GaugeFn for GaugeCell {
    fn increment(&self, value: f64) {
        self.update(|old| old + value);
    }
    fn decrement(&self, value: f64) {
        self.update(|old| old - value);
    }
    fn set(&self, value: f64) {
        self.update(|_| value);
    }
}

#[derive(Debug)]
struct HistogramCell {
    scale: f64,
    bounds: &'static [f64],
    /// Per bucket (not cumulative); the last one is above every bound.
    counts: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_bits: AtomicU64,
    otlp: Option<(opentelemetry::metrics::Histogram<f64>, Vec<KeyValue>)>,
}

impl metrics::HistogramFn for HistogramCell {
    fn record(&self, value: f64) {
        let scaled = value * self.scale;
        let i = self.bounds.iter().position(|b| scaled <= *b).unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        let _ = self.sum_bits.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            Some((f64::from_bits(old) + scaled).to_bits())
        });
        if let Some((histogram, attributes)) = &self.otlp {
            histogram.record(value, attributes);
        }
    }
}

#[derive(Debug, Clone)]
enum Cell {
    Counter(Arc<CounterCell>),
    Gauge(Arc<GaugeCell>),
    Histogram(Arc<HistogramCell>),
}

#[derive(Debug, Clone)]
struct Entry {
    family: Arc<Family>,
    cell: Cell,
}

/// Every metric the libraries registered, by key (name and labels).
struct Registry {
    metrics: DashMap<Key, Entry>,
    labels: Vec<(String, String)>,
    otlp: Option<OtlpMetricsExporter>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("metrics", &self.metrics.len()).finish()
    }
}

impl Registry {
    fn entry(&self, key: &Key, kind: Kind) -> Entry {
        if let Some(e) = self.metrics.get(key) {
            return e.clone();
        }
        self.metrics
            .entry(key.clone())
            .or_insert_with(|| self.new_entry(key, kind))
            .clone()
    }

    fn new_entry(&self, key: &Key, kind: Kind) -> Entry {
        let family = Arc::new(family(key.name(), kind));
        let config = lookup_config(key.name());
        let otlp = self
            .otlp
            .as_ref()
            .filter(|_| config.stability != MetricStability::Internal)
            .map(|exporter| (exporter, otlp_attributes(key, config.otlp_attributes, &self.labels)));
        let cell = match kind {
            Kind::Counter => Cell::Counter(Arc::new(CounterCell {
                value: AtomicU64::new(0),
                otlp: otlp.map(|(x, a)| (x.create_counter_instrument(key.name(), config.unit, config.stability), a)),
            })),
            Kind::Gauge => Cell::Gauge(Arc::new(GaugeCell {
                bits: AtomicU64::new(0f64.to_bits()),
                otlp: otlp.map(|(x, a)| (x.create_gauge_instrument(key.name(), config.unit, config.stability), a)),
            })),
            Kind::Histogram => Cell::Histogram(Arc::new(HistogramCell {
                scale: family.scale,
                bounds: family.buckets,
                counts: (0..=family.buckets.len()).map(|_| AtomicU64::new(0)).collect(),
                count: AtomicU64::new(0),
                sum_bits: AtomicU64::new(0f64.to_bits()),
                otlp: otlp.map(|(x, a)| (x.create_histogram_instrument(key.name(), config.unit, config.stability), a)),
            })),
        };
        Entry { family, cell }
    }

    /// One line per metric that moved since `previous` (updated): a counter's increase, a
    /// histogram's count and mean in the period, a gauge's value; sorted by name.
    fn summary(&self, previous: &mut HashMap<Key, (u64, f64)>) -> Vec<String> {
        let mut lines = Vec::new();
        for item in self.metrics.iter() {
            let (key, entry) = item.pair();
            let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
            let name = if labels.is_empty() {
                key.name().to_string()
            } else {
                format!("{}[{}]", key.name(), labels.join(","))
            };
            match &entry.cell {
                Cell::Counter(c) => {
                    let now = c.value.load(Ordering::Relaxed);
                    let before = previous.insert(key.clone(), (now, 0.0)).map_or(0, |p| p.0);
                    if now > before {
                        lines.push(format!("{name}: {}", now - before));
                    }
                }
                Cell::Gauge(g) => lines.push(format!("{name}: {}", number(f64::from_bits(g.bits.load(Ordering::Relaxed))))),
                Cell::Histogram(h) => {
                    let (count, sum) = (h.count.load(Ordering::Relaxed), f64::from_bits(h.sum_bits.load(Ordering::Relaxed)));
                    let (c0, s0) = previous.insert(key.clone(), (count, sum)).unwrap_or((0, 0.0));
                    if count > c0 {
                        let n = count - c0;
                        lines.push(format!("{name}: n={n}: avg={:.1}", (sum - s0) / n as f64 / h.scale));
                    }
                }
            }
        }
        lines.sort();
        lines
    }

    /// The Prometheus text exposition of every metric.
    fn render(&self) -> String {
        // name → (type, help, sample lines)
        let mut families: BTreeMap<String, (Kind, String, Vec<String>)> = BTreeMap::new();
        for item in self.metrics.iter() {
            let (key, entry) = item.pair();
            let kind = match entry.cell {
                Cell::Counter(_) => Kind::Counter,
                Cell::Gauge(_) => Kind::Gauge,
                Cell::Histogram(_) => Kind::Histogram,
            };
            let name = &entry.family.name;
            let lines = &mut families
                .entry(name.clone())
                .or_insert_with(|| (kind, entry.family.help.clone(), Vec::new()))
                .2;
            let labels: Vec<(&str, &str)> = self
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .chain(key.labels().map(|l| (l.key(), l.value())))
                .collect();
            match &entry.cell {
                Cell::Counter(c) => lines.push(sample(name, &labels, &c.value.load(Ordering::Relaxed).to_string())),
                Cell::Gauge(g) => lines.push(sample(name, &labels, &number(f64::from_bits(g.bits.load(Ordering::Relaxed))))),
                Cell::Histogram(h) => {
                    let mut cumulative = 0;
                    for (i, bound) in h.bounds.iter().enumerate() {
                        cumulative += h.counts[i].load(Ordering::Relaxed);
                        let le = number(*bound);
                        let mut with_le = labels.clone();
                        with_le.push(("le", &le));
                        lines.push(sample(&format!("{name}_bucket"), &with_le, &cumulative.to_string()));
                    }
                    cumulative += h.counts[h.bounds.len()].load(Ordering::Relaxed);
                    let mut with_le = labels.clone();
                    with_le.push(("le", "+Inf"));
                    lines.push(sample(&format!("{name}_bucket"), &with_le, &cumulative.to_string()));
                    let sum = number(f64::from_bits(h.sum_bits.load(Ordering::Relaxed)));
                    lines.push(sample(&format!("{name}_sum"), &labels, &sum));
                    lines.push(sample(&format!("{name}_count"), &labels, &cumulative.to_string()));
                }
            }
        }
        let constant: Vec<(&str, &str)> = self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut info_labels = constant.clone();
        info_labels.push(("version", version::VERSION));
        info_labels.push(("fs_version", version::FS_VERSION));
        families.insert(
            "mountpoint_info".into(),
            (Kind::Gauge, "Versions of this engine".into(), vec![sample("mountpoint_info", &info_labels, "1")]),
        );
        if let Some((rss, cpu)) = process_figures() {
            families.insert(
                "process_resident_memory_bytes".into(),
                (
                    Kind::Gauge,
                    "Resident memory of the engine process".into(),
                    vec![sample("process_resident_memory_bytes", &constant, &rss.to_string())],
                ),
            );
            families.insert(
                "process_cpu_seconds_total".into(),
                (
                    Kind::Counter,
                    "CPU time (user and system) of the engine process".into(),
                    vec![sample("process_cpu_seconds_total", &constant, &number(cpu))],
                ),
            );
        }
        let mut out = String::with_capacity(16 * 1024);
        for (name, (kind, help, mut lines)) in families {
            lines.sort();
            let _ = writeln!(out, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
            let _ = writeln!(out, "# TYPE {name} {}", kind.as_str());
            for line in lines {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }
}

/// A float as Prometheus writes it.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{v}")
    }
}

/// One sample line: `name{k="v",...} value`.
fn sample(name: &str, labels: &[(&str, &str)], value: &str) -> String {
    if labels.is_empty() {
        return format!("{name} {value}");
    }
    let body: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let escaped = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            format!("{k}=\"{escaped}\"")
        })
        .collect();
    format!("{name}{{{}}} {value}", body.join(","))
}

/// Resident bytes and CPU seconds of this process (Linux `/proc/self`).
fn process_figures() -> Option<(u64, f64)> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let (page, ticks) = unsafe { (libc::sysconf(libc::_SC_PAGESIZE), libc::sysconf(libc::_SC_CLK_TCK)) };
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command (which may hold spaces) start at ") ": utime and stime are the
    // 14th and 15th fields of the line, the 12th and 13th after the command.
    let rest = &stat[stat.rfind(") ")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((pages * page.max(1) as u64, (utime + stime) as f64 / ticks.max(1) as f64))
}

/// The global recorder: a thin wrapper so the registry can be shared with the endpoint.
struct Recorders(Arc<Registry>);

impl Recorder for Recorders {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        match self.0.entry(key, Kind::Counter).cell {
            Cell::Counter(c) => Counter::from_arc(c),
            _ => Counter::noop(),
        }
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        match self.0.entry(key, Kind::Gauge).cell {
            Cell::Gauge(g) => Gauge::from_arc(g),
            _ => Gauge::noop(),
        }
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        match self.0.entry(key, Kind::Histogram).cell {
            Cell::Histogram(h) => Histogram::from_arc(h),
            _ => Histogram::noop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn registry(labels: &[(&str, &str)]) -> Arc<Registry> {
        Arc::new(Registry {
            metrics: DashMap::new(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            otlp: None,
        })
    }

    fn settings_with(vars: &[(&str, &str)]) -> Result<Settings, Failure> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        settings(None, None, false, &|k| map.get(k).cloned())
    }

    #[test]
    fn off_unless_a_port_or_otlp_is_given() {
        assert!(!settings_with(&[]).unwrap().enabled());
        assert!(!settings_with(&[(PORT_VAR, "0")]).unwrap().enabled());
        let s = settings_with(&[
            (PORT_VAR, "9102"),
            (LABELS_VAR, r#"{"volume":"pv-1","mountpoint_pod":"mp-a","volume_id":"a,b=c \"q\""}"#),
        ])
        .unwrap();
        assert_eq!(s.port, Some(9102));
        assert_eq!(
            s.labels,
            vec![
                ("mountpoint_pod".to_string(), "mp-a".to_string()),
                ("volume".to_string(), "pv-1".to_string()),
                ("volume_id".to_string(), "a,b=c \"q\"".to_string()),
            ]
        );
        let otlp = settings(Some("http://collector:4318"), None, false, &|_| None).unwrap();
        assert_eq!(otlp.otlp, Some(("http://collector:4318".to_string(), 60)));
        assert!(otlp.enabled() && otlp.port.is_none());
        assert!(settings(None, None, true, &|_| None).unwrap().enabled(), "--log-metrics alone");
    }

    #[test]
    fn bad_settings_name_the_variable() {
        let e = settings_with(&[(PORT_VAR, "http")]).unwrap_err();
        assert_eq!(e.code, crate::exit::USAGE);
        assert!(e.message.starts_with("MOUNT_S3_METRICS_PORT='http' must be a TCP port"), "{}", e.message);
        for bad in [r#"["a"]"#, r#"{"a":1}"#, r#"{"__a":"x"}"#, r#"{"le":"x"}"#, r#"{"a-b":"x"}"#, r#"{"a":"x\ny"}"#] {
            let e = settings_with(&[(LABELS_VAR, bad)]).unwrap_err();
            assert!(e.message.starts_with("MOUNT_S3_METRICS_LABELS: "), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn library_names_become_prometheus_names() {
        assert_eq!(family("fuse.total_bytes", Kind::Counter).name, "mountpoint_fuse_bytes_total");
        assert_eq!(family("s3.request_count", Kind::Counter).name, "mountpoint_s3_requests_total");
        let latency = family("s3.request_total_latency", Kind::Histogram);
        assert_eq!(latency.name, "mountpoint_s3_request_duration_seconds");
        assert_eq!(latency.scale, 1e-6);
        let generic = family("cache.get_latency", Kind::Histogram);
        assert_eq!(generic.name, "mountpoint_cache_get_latency_seconds");
        assert_eq!(generic.scale, 1e-6);
        assert_eq!(
            family("prefetch.part_queue_starved_us", Kind::Histogram).name,
            "mountpoint_prefetch_part_queue_starved_seconds"
        );
        assert_eq!(family("cache.total_size", Kind::Gauge).name, "mountpoint_cache_total_size_bytes");
        assert_eq!(family("fs.current_handles", Kind::Gauge).name, "mountpoint_fs_current_handles");
        assert_eq!(family("cache.get_errors", Kind::Counter).name, "mountpoint_cache_get_errors_total");
    }

    #[test]
    fn renders_prometheus_text_with_the_constant_labels() {
        let r = registry(&[("volume", "pv-\"1\"")]);
        let recorder = Recorders(r.clone());
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!("fuse.total_bytes", "type" => "read").increment(100);
            metrics::counter!("fuse.total_bytes", "type" => "read").increment(28);
            metrics::counter!("s3.request_errors", "s3_request" => "GetObject", "http_status" => "404").increment(1);
            metrics::gauge!("fs.current_handles", "type" => "read").increment(2.0);
            metrics::gauge!("fs.current_handles", "type" => "read").decrement(1.0);
            metrics::histogram!("s3.request_total_latency", "s3_request" => "GetObject").record(1500.0);
            metrics::histogram!("s3.request_total_latency", "s3_request" => "GetObject").record(2_000_000.0);
        });
        let text = r.render();
        for line in [
            "# TYPE mountpoint_fuse_bytes_total counter",
            "mountpoint_fuse_bytes_total{volume=\"pv-\\\"1\\\"\",type=\"read\"} 128",
            "mountpoint_s3_request_errors_total{volume=\"pv-\\\"1\\\"\",s3_request=\"GetObject\",http_status=\"404\"} 1",
            "mountpoint_fs_current_handles{volume=\"pv-\\\"1\\\"\",type=\"read\"} 1",
            "# TYPE mountpoint_s3_request_duration_seconds histogram",
            "mountpoint_s3_request_duration_seconds_bucket{volume=\"pv-\\\"1\\\"\",s3_request=\"GetObject\",le=\"0.001\"} 0",
            "mountpoint_s3_request_duration_seconds_bucket{volume=\"pv-\\\"1\\\"\",s3_request=\"GetObject\",le=\"0.0025\"} 1",
            "mountpoint_s3_request_duration_seconds_bucket{volume=\"pv-\\\"1\\\"\",s3_request=\"GetObject\",le=\"+Inf\"} 2",
            "mountpoint_s3_request_duration_seconds_sum{volume=\"pv-\\\"1\\\"\",s3_request=\"GetObject\"} 2.0015",
            "mountpoint_s3_request_duration_seconds_count{volume=\"pv-\\\"1\\\"\",s3_request=\"GetObject\"} 2",
            "# TYPE process_resident_memory_bytes gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
        }
        assert!(text.contains("mountpoint_info{volume=\"pv-\\\"1\\\"\",version=\""), "{text}");
        // Each family once, HELP before TYPE before the samples.
        assert_eq!(text.matches("# TYPE mountpoint_fuse_bytes_total ").count(), 1);
    }

    #[test]
    fn the_log_summary_has_what_moved_in_the_period_in_the_library_s_names() {
        let r = registry(&[("volume", "pv-1")]);
        let recorder = Recorders(r.clone());
        let mut previous = HashMap::new();
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!("fuse.total_bytes", "type" => "read").increment(100);
            metrics::histogram!("s3.request_total_latency", "s3_request" => "GetObject").record(1000.0);
            metrics::histogram!("s3.request_total_latency", "s3_request" => "GetObject").record(3000.0);
            metrics::gauge!("fs.current_handles", "type" => "read").set(2.0);
        });
        assert_eq!(
            r.summary(&mut previous),
            vec![
                "fs.current_handles[type=read]: 2",
                "fuse.total_bytes[type=read]: 100",
                "s3.request_total_latency[s3_request=GetObject]: n=2: avg=2000.0",
            ]
        );
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!("fuse.total_bytes", "type" => "read").increment(5);
        });
        assert_eq!(
            r.summary(&mut previous),
            vec!["fs.current_handles[type=read]: 2", "fuse.total_bytes[type=read]: 5"],
            "only what moved since, and the gauges"
        );
    }

    #[test]
    fn the_endpoint_serves_metrics_only() {
        let r = registry(&[]);
        let recorder = Recorders(r.clone());
        metrics::with_local_recorder(&recorder, || metrics::counter!("s3.request_count").increment(3));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = r.clone();
        std::thread::spawn(move || serve(listener, &server, false));
        let get = |request: &str| {
            let mut s = TcpStream::connect(address).unwrap();
            s.write_all(request.as_bytes()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        };
        let ok = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("\r\n\r\n# HELP "), "{ok}");
        assert!(ok.contains("\nmountpoint_s3_requests_total 3\n"), "{ok}");
        assert!(get("GET /other HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 404 "));
        assert!(get("POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
        let head = get("HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"), "{head}");
    }
}
