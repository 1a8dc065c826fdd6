//! The library's metrics, when asked for: a summary logged every 5 s (`--log-metrics`, log target
//! `mountpoint_s3_fs::metrics`) and/or exported to an OTLP endpoint over HTTP (`--otlp-endpoint`,
//! `--otlp-export-interval`), as upstream Mountpoint does. Without either, no sink is installed and
//! the library's `metrics!` calls cost next to nothing.

use mountpoint_s3_fs::metrics::{self, MetricsConfig, MetricsSinkHandle, OtlpConfig};

use crate::cli::MountArgs;
use crate::exit::{Failure, chain};

/// Install the sink the options ask for; keep the handle until the end (dropping it publishes the
/// last figures and stops the sink).
pub fn install(args: &MountArgs) -> Result<Option<MetricsSinkHandle>, Failure> {
    if !args.log_metrics && args.otlp_endpoint.is_none() {
        return Ok(None);
    }
    let config = args.otlp_endpoint.as_deref().map(|endpoint| {
        let mut otlp = OtlpConfig::new(endpoint);
        if let Some(secs) = args.otlp_export_interval {
            otlp = otlp.with_interval_secs(secs);
        }
        MetricsConfig::Otlp(otlp)
    });
    metrics::install(config)
        .map(Some)
        .map_err(|e| Failure::usage(format!("metrics: {}", chain(e.as_ref()))))
}
