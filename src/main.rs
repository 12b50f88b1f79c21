//! The `lookout` command: parses arguments, calls the subcommand and maps its result to an
//! exit status through the one policy of [`lookout::cli::exit`] (0 clean, 1 runtime failure,
//! 78 bad configuration — EX_CONFIG, so systemd's `RestartPreventExitStatus=78` does not
//! restart-loop on a typo; 64 a command line clap refuses — EX_USAGE, not clap's own 2;
//! `lookout bench` also exits 2 when the golden self-check failed).

// Nothing outside tests may panic on bad input (tests/tidy.rs checks this line is here).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lookout::cli::{self, exit, exit::Channel, exit::Failure};

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
    Bench(cli::bench::BenchArgs),
    /// List V4L2 capture devices with their formats, sizes and frame rates.
    Devices(cli::devices::DevicesArgs),
    /// Read frames from a source (camera or file) and report what came back.
    Capture(cli::capture::CaptureArgs),
    /// Validate a configuration file and print the effective configuration.
    CheckConfig {
        /// The TOML file.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    // Before any thread starts: the systemd unit's allocator settings also outside it.
    lookout::memory::limit_allocator();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0; refusals to stderr.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(exit::EX_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    lookout::logging::init();
    lookout::pipeline::install_panic_hook();
    let result = match &cli.command {
        Command::Detect(a) => cli::detect::run(a),
        Command::Run(a) => cli::run::run(a),
        Command::Bench(a) => exit::bench_result(cli::bench::run(a)),
        Command::Devices(a) => cli::devices::run_devices(a).map_err(Failure::from),
        Command::Capture(a) => cli::capture::run_capture(a).map_err(Failure::from),
        Command::CheckConfig { file } => check_config(file),
    };
    // The daemon tells its failures to the journal; the other commands to the terminal.
    let channel = match cli.command {
        Command::Run(_) => Channel::Log,
        _ => Channel::Stderr,
    };
    exit::finish(result, channel)
}

/// `lookout check-config FILE`: the effective configuration on stdout.
fn check_config(file: &Path) -> Result<(), Failure> {
    let cfg = lookout::config::Config::load(file)?;
    if let Ok(lookout::source::Spec::Camera(device)) =
        lookout::source::Spec::parse(&cfg.source.spec)
    {
        if !Path::new(&device).exists() {
            eprintln!(
                "lookout: note: {device} is not there now; `lookout run` will wait for it to appear (source.wait_for_camera = true)"
            );
        }
    }
    // A closed pipe (`check-config FILE | head`) is not worth a panic.
    let _ = writeln!(
        std::io::stdout().lock(),
        "# {}: valid; effective configuration:\n{}",
        file.display(),
        cfg.to_toml()
    );
    Ok(())
}
