//! The `lookout` command: parses arguments and maps results to exit codes
//! (0 clean, 1 runtime failure, 78 bad configuration — EX_CONFIG, so systemd's
//! `RestartPreventExitStatus=78` does not restart-loop on a typo; 64 a command line clap
//! refuses — EX_USAGE, not clap's own 2; `lookout bench` also exits 2 when the golden
//! self-check failed).

// Nothing outside tests may panic on bad input (tests/tidy.rs checks this line is here).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lookout::cli;

/// Exit status for a bad configuration (sysexits.h EX_CONFIG).
const EX_CONFIG: u8 = 78;
/// Exit status for a command line clap refuses (sysexits.h EX_USAGE): clap's own 2 would read
/// as `lookout bench`'s "self-check failed".
const EX_USAGE: u8 = 64;

/// Object detection for the Raspberry Pi: camera in, tracked objects out.
#[derive(Parser, Debug)]
#[command(name = "lookout", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the detection daemon (no config: the bundled demo clip with the embedded model).
    Run(cli::run::RunArgs),
    /// Detect objects in photos (one-shot).
    Detect(cli::detect::DetectArgs),
    /// Measure the pipeline on the camera or the bundled clip: per-stage times, fps, CPU per
    /// core, memory; optionally sweep threads, detection interval or model.
    Bench(lookout::cli::bench::BenchArgs),
    /// List V4L2 capture devices with their formats, sizes and frame rates.
    Devices(lookout::cli::devices::DevicesArgs),
    /// Read frames from a source (camera or file) and report what came back.
    Capture(lookout::cli::capture::CaptureArgs),
    /// Validate a configuration file and print the effective configuration.
    CheckConfig {
        /// The TOML file.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0; refusals to stderr.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EX_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    lookout::logging::init();
    match &cli.command {
        Command::Detect(a) => match cli::detect::run(a) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("lookout: {e:#}");
                ExitCode::from(1)
            }
        },
        Command::Run(a) => match cli::run::run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(cli::run::RunError::Config(errs)) => {
                for e in &errs.0 {
                    log::error!(LOOKOUT_EVENT = "config_error", CONFIG_KEY = e.key.as_str(); "bad configuration: {e}");
                }
                ExitCode::from(EX_CONFIG)
            }
            Err(e) => {
                log::error!(LOOKOUT_EVENT = "fatal"; "{e:#}");
                ExitCode::from(1)
            }
        },
        Command::Bench(a) => match lookout::cli::bench::run(a) {
            Ok(lookout::cli::bench::BenchOutcome::Ok) => ExitCode::SUCCESS,
            Ok(lookout::cli::bench::BenchOutcome::SelfCheckFailed) => {
                ExitCode::from(lookout::cli::bench::EXIT_SELF_CHECK_FAILED)
            }
            Err(lookout::bench::BenchError::Config(errs)) => {
                for e in &errs.0 {
                    eprintln!("lookout: bad configuration: {e}");
                }
                ExitCode::from(EX_CONFIG)
            }
            Err(e) => {
                eprintln!("lookout: {e:#}");
                ExitCode::from(1)
            }
        },
        Command::Devices(a) => exit_of(lookout::cli::devices::run_devices(a)),
        Command::Capture(a) => exit_of(lookout::cli::capture::run_capture(a)),
        Command::CheckConfig { file } => match lookout::config::Config::load(file) {
            Ok(cfg) => {
                // A closed pipe (`check-config FILE | head`) is not worth a panic.
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "# {}: valid; effective configuration:\n{}",
                    file.display(),
                    cfg.to_toml()
                );
                ExitCode::SUCCESS
            }
            Err(errs) => {
                for e in &errs.0 {
                    eprintln!("lookout: bad configuration: {e}");
                }
                ExitCode::from(EX_CONFIG)
            }
        },
    }
}

fn exit_of(r: anyhow::Result<()>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lookout: {e:#}");
            ExitCode::from(1)
        }
    }
}
