//! `mount-s3`: the FUSE engine of the s3.csi.scality.com CSI driver, on the Mountpoint libraries
//! (`mountpoint-s3-fs`, `mountpoint-s3-client`). See README.md beside Cargo.toml for the command
//! line, the environment, the exit codes and the log format.

mod cli;
mod exit;
mod fuse_adapter;
mod fuse_fd;
mod logging;
mod metrics_sink;
mod mount;
mod proxy;
mod session_table;
mod settings;
mod tls_blinding;
mod upstream_options;
mod version;

use std::process::ExitCode;

use cli::Command;

fn main() -> ExitCode {
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
    let directives = logging::directives(args.debug, args.debug_crt, args.no_log, args.log_metrics);
    if let Err(e) = logging::init(&directives) {
        return fail(&exit::Failure::usage(exit::chain(e.as_ref())));
    }
    let _metrics = match metrics_sink::install(&args) {
        Ok(handle) => handle,
        Err(f) => return fail(&f),
    };
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
