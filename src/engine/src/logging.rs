//! Logs go to stdout, one line per event, no colours:
//! `2026-05-01T12:00:00.123456Z  INFO mountpoint_s3_fs::fuse::session: message key=value`.
//!
//! Verbosity as upstream Mountpoint: warnings plus the engine's own information by default,
//! `--debug` for the file system, `--debug-crt` for the AWS Common Runtime, `--log-metrics` for the
//! library's metrics summary, `--no-log` for nothing;
//! the `MOUNTPOINT_LOG` environment variable (an `EnvFilter` directive) overrides all of them.

use anyhow::Context as _;
use mountpoint_s3_client::config::{AWSCRT_LOG_TARGET, RustLogAdapter};
use mountpoint_s3_fs::metrics::metrics_tracing_span_layer;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Log target prefix of the Mountpoint libraries (`mountpoint_s3_fs`, `mountpoint_s3_client`).
const LIBRARY_TARGET: &str = "mountpoint_s3";
/// Log target of this crate.
const ENGINE_TARGET: &str = "mount_s3";
/// Per-metric log lines of the file-system library.
const METRICS_TARGET: &str = "mountpoint_s3_fs::metrics";

/// The filter directives for the logging flags.
pub fn directives(debug: bool, debug_crt: bool, no_log: bool, log_metrics: bool) -> String {
    if no_log {
        return "off".to_string();
    }
    let metrics = if log_metrics { "info" } else { "off" };
    let base = if debug {
        "debug".to_string()
    } else {
        format!("warn,{LIBRARY_TARGET}=info,{ENGINE_TARGET}=info,{METRICS_TARGET}={metrics}")
    };
    let crt = if debug_crt { "debug" } else { "off" };
    format!("{base},{AWSCRT_LOG_TARGET}={crt}")
}

/// Install the stdout subscriber (and route the CRT's logs through it). With `metrics_spans`, the
/// library's span layer also times FUSE requests (`fuse.request_latency`, see `metrics.rs`), even
/// when no log is written.
pub fn init(directives: &str, metrics_spans: bool) -> anyhow::Result<()> {
    let filter = match std::env::var("MOUNTPOINT_LOG") {
        Ok(custom) if !custom.trim().is_empty() => EnvFilter::try_new(&custom)
            .map_err(|e| anyhow::anyhow!("MOUNTPOINT_LOG='{custom}' is not a valid log filter: {e}"))?,
        _ => EnvFilter::new(directives),
    };
    let logs = filter.max_level_hint() != Some(tracing::level_filters::LevelFilter::OFF);
    if !logs && !metrics_spans {
        return Ok(());
    }
    let stdout = logs.then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_target(true)
            .with_writer(std::io::stdout)
            .with_filter(filter)
    });
    tracing_subscriber::registry()
        .with(stdout)
        .with(metrics_spans.then(metrics_tracing_span_layer))
        .try_init()
        .context("cannot install the log subscriber")?;
    if logs {
        RustLogAdapter::try_init().map_err(|e| anyhow::anyhow!("cannot route CRT logs: {e:?}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_quiet_but_keeps_our_info() {
        assert_eq!(
            directives(false, false, false, false),
            "warn,mountpoint_s3=info,mount_s3=info,mountpoint_s3_fs::metrics=off,awscrt=off"
        );
    }

    #[test]
    fn debug_flags() {
        assert_eq!(directives(true, false, false, false), "debug,awscrt=off");
        assert_eq!(directives(true, true, false, false), "debug,awscrt=debug");
        assert!(directives(false, true, false, false).ends_with(",awscrt=debug"));
        assert_eq!(directives(false, false, true, false), "off");
        assert!(directives(false, false, false, true).contains("mountpoint_s3_fs::metrics=info"));
    }

    #[test]
    fn directives_parse() {
        for d in [directives(false, false, false, false), directives(true, true, false, false)] {
            EnvFilter::try_new(&d).expect(&d);
        }
    }
}
