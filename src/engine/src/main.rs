//! `mount-s3`: the FUSE engine of the s3.csi.scality.com CSI driver, on the Mountpoint libraries
//! (`mountpoint-s3-fs`, `mountpoint-s3-client`). See README.md beside Cargo.toml for the command
//! line, the environment, the exit codes and the log format.

mod cli;
mod exit;
mod fuse_adapter;
mod fuse_fd;
mod logging;
mod metrics;
mod mount;
mod panic_hook;
mod proxy;
mod session_table;
mod settings;
mod start_attempts;
mod start_deadline;
mod tls_blinding;
mod upstream_options;
mod version;

use std::process::ExitCode;

use cli::Command;

fn main() -> ExitCode {
    panic_hook::install(); // a panic: one line, exit 7 (panic_hook.rs)
    let command = match cli::parse(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => return fail(&exit::Failure::usage(format!("{e}; run 'mount-s3 --help' for usage"))),
    };
    let args = match command {
        Command::Help => {
            print!("{}", cli::help_text());
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            println!("{}", version::version_line());
            return ExitCode::SUCCESS;
        }
        Command::Mount(args) => args,
    };
    // Metrics (metrics.rs): Prometheus endpoint and OTLP export, set up before the mount starts.
    let env = |name: &str| std::env::var(name).ok();
    let metrics = match metrics::settings(args.otlp_endpoint.as_deref(), args.otlp_export_interval, args.log_metrics, &env) {
        Ok(m) => m,
        Err(f) => return fail(&f),
    };
    let directives = logging::directives(args.debug, args.debug_crt, args.no_log, args.log_metrics);
    if let Err(e) = logging::init(&directives, metrics.enabled()) {
        return fail(&exit::Failure::usage(exit::chain(e.as_ref())));
    }
    panic_hook::test_trigger_at_start(&env);
    if let Err(f) = metrics::install(&metrics) {
        return fail(&f);
    }
    match mount::run(&args) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(f) => {
            tracing::error!(code = f.code, "{}", f.message);
            fail(&f)
        }
    }
}

/// Print the one-line reason on stderr and return its exit code.
fn fail(f: &exit::Failure) -> ExitCode {
    eprintln!("mount-s3: error: {}", f.message);
    ExitCode::from(f.code)
}
