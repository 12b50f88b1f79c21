//! The one exit-status policy of the `lookout` command: every subcommand ends in
//! `Result<(), Failure>`, and [`finish`] turns that into the process's exit status, telling the
//! failure once.
//!
//! | status | meaning | [`Failure`] |
//! |---|---|---|
//! | 0 | done, or a clean stop | — |
//! | 1 | a runtime failure (source, model, I/O, …) | [`Failure::Runtime`], [`Failure::Reported`] |
//! | 2 | `lookout bench`: the golden self-check failed | [`Failure::SelfCheckFailed`] |
//! | 64 | a command line lookout refuses (sysexits.h `EX_USAGE`) | [`Failure::Usage`] |
//! | 78 | a bad configuration (sysexits.h `EX_CONFIG`) | [`Failure::Config`] |
//!
//! 78 lets the unit's `RestartPreventExitStatus=78` stop systemd from restart-looping on a typo.

use std::process::ExitCode;

use crate::bench::BenchError;
use crate::cli::bench::{BenchOutcome, EXIT_SELF_CHECK_FAILED};
use crate::config::ConfigErrors;

/// Exit status for a bad configuration (sysexits.h `EX_CONFIG`).
pub const EX_CONFIG: u8 = 78;
/// Exit status for a command line clap refuses (sysexits.h EX_USAGE): clap's own 2 would read
/// as `lookout bench`'s "self-check failed".
pub const EX_USAGE: u8 = 64;

/// Exit status for a runtime failure.
pub const EXIT_FAILURE: u8 = 1;

/// How a subcommand failed; each variant is one exit status (see the module's table).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The configuration is invalid: exit status 78. Each problem names its key and, when the
    /// file says it, its line.
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    /// `lookout bench` measured, but its golden self-check failed: exit status 2. The bench
    /// command has already said so under its report.
    #[error("the golden self-check failed")]
    SelfCheckFailed,
    /// Failures already told one by one as they happened (`lookout detect`'s unreadable
    /// images, the others still processed): exit status 1, nothing more to say.
    #[error("some inputs failed (reported above)")]
    Reported,
    /// A command line lookout refuses beyond what clap checks (a value out of range, a file
    /// that can never work there): exit status 64, like clap's own refusals.
    #[error("{0}")]
    Usage(String),
    /// Whoever read the output closed it (`lookout detect --json | head -1`): the command
    /// ends quietly, exit status 0.
    #[error("stdout closed by its reader")]
    OutputClosed,
    /// Anything else: exit status 1.
    #[error(transparent)]
    Runtime(#[from] anyhow::Error),
}

impl Failure {
    /// The process exit status of this failure.
    pub fn exit_status(&self) -> u8 {
        match self {
            Failure::Config(_) => EX_CONFIG,
            Failure::Usage(_) => EX_USAGE,
            Failure::OutputClosed => 0,
            Failure::SelfCheckFailed => EXIT_SELF_CHECK_FAILED,
            Failure::Reported | Failure::Runtime(_) => EXIT_FAILURE,
        }
    }
}

impl From<BenchError> for Failure {
    fn from(e: BenchError) -> Failure {
        match e {
            BenchError::Config(errs) => Failure::Config(errs),
            e @ (BenchError::Truth(_) | BenchError::CommandLine(_)) => {
                Failure::Usage(e.to_string())
            }
            // Its text already includes what caused it; as an error chain the causes would be
            // printed twice.
            other => Failure::Runtime(anyhow::anyhow!("{other:#}")),
        }
    }
}

/// `lookout bench`'s result in the common form: a failed self-check is a failure (status 2).
pub fn bench_result(r: Result<BenchOutcome, BenchError>) -> Result<(), Failure> {
    match r? {
        BenchOutcome::Ok => Ok(()),
        BenchOutcome::SelfCheckFailed => Err(Failure::SelfCheckFailed),
    }
}

/// Where a subcommand tells its failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// Through the logger (the daemon, `lookout run`: journal entries with
    /// `LOOKOUT_EVENT=config_error` and `CONFIG_KEY`, or `fatal`).
    Log,
    /// As `lookout: …` lines on stderr (the interactive commands).
    Stderr,
}

/// The exit status of a subcommand's result, 0 when it succeeded.
pub fn exit_status(result: &Result<(), Failure>) -> u8 {
    result.as_ref().err().map_or(0, Failure::exit_status)
}

/// Tells a failure on `channel` (once; [`Failure::Reported`] and
/// [`Failure::SelfCheckFailed`] were told already) and returns the exit code.
pub fn finish(result: Result<(), Failure>, channel: Channel) -> ExitCode {
    let status = exit_status(&result);
    if let Err(e) = &result {
        tell(e, channel);
    }
    ExitCode::from(status)
}

fn tell(failure: &Failure, channel: Channel) {
    match (failure, channel) {
        (Failure::Reported | Failure::SelfCheckFailed | Failure::OutputClosed, _) => {}
        (Failure::Usage(msg), Channel::Log) => log::error!(LOOKOUT_EVENT = "fatal"; "{msg}"),
        (Failure::Usage(msg), Channel::Stderr) => eprintln!("lookout: {msg}"),
        (Failure::Config(errs), Channel::Log) => {
            for e in &errs.0 {
                log::error!(LOOKOUT_EVENT = "config_error", CONFIG_KEY = e.key.as_str(); "bad configuration: {e}");
            }
        }
        (Failure::Config(errs), Channel::Stderr) => {
            for e in &errs.0 {
                eprintln!("lookout: bad configuration: {e}");
            }
        }
        (Failure::Runtime(e), Channel::Log) => {
            log::error!(LOOKOUT_EVENT = "fatal"; "{}", chain_text(e))
        }
        (Failure::Runtime(e), Channel::Stderr) => eprintln!("lookout: {}", chain_text(e)),
    }
}

/// An error and its causes on one line, `: `-separated, leaving out a cause whose text the
/// line already holds: many errors quote their OS error in their own message and also give
/// it as their cause, which `{:#}` would print twice ("out of memory: out of memory").
pub fn chain_text(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Problem;

    fn config_errors() -> ConfigErrors {
        ConfigErrors::from_problems(
            "x.toml",
            Some("[source]\nspec = \"clip.avi\"\n"),
            vec![Problem::new("source.spec", "unsupported")],
        )
    }

    #[test]
    fn each_failure_has_its_exit_status() {
        assert_eq!(exit_status(&Ok(())), 0);
        assert_eq!(exit_status(&Err(Failure::Config(config_errors()))), 78);
        assert_eq!(exit_status(&Err(Failure::SelfCheckFailed)), 2);
        assert_eq!(exit_status(&Err(Failure::Reported)), 1);
        let runtime = Failure::from(anyhow::anyhow!("camera gone"));
        assert_eq!(exit_status(&Err(runtime)), 1);
    }

    #[test]
    fn a_cause_quoted_by_its_error_is_told_once() {
        let oom = std::io::Error::from(std::io::ErrorKind::OutOfMemory);
        let e = anyhow::Error::from(crate::source::SourceError::File {
            path: "clip.mjpeg".into(),
            source: oom,
        })
        .context("the source failed");
        let line = chain_text(&e);
        assert_eq!(line.matches("out of memory").count(), 1, "{line}");
        assert!(
            line.starts_with("the source failed: cannot read clip.mjpeg"),
            "{line}"
        );
    }

    #[test]
    fn bench_results_keep_their_statuses() {
        assert_eq!(exit_status(&bench_result(Ok(BenchOutcome::Ok))), 0);
        let failed = bench_result(Ok(BenchOutcome::SelfCheckFailed));
        assert_eq!(exit_status(&failed), 2);
        let config = bench_result(Err(BenchError::Config(config_errors())));
        let Err(Failure::Config(errs)) = config else {
            panic!("a bench configuration error stays a configuration error");
        };
        assert_eq!(errs.0[0].key, "source.spec");
        let usage = bench_result(Err(BenchError::Usage("--frames must be at least 1".into())));
        assert_eq!(exit_status(&usage), 1);
        let Err(Failure::Runtime(e)) = usage else {
            panic!("usage errors are runtime failures");
        };
        assert_eq!(format!("{e:#}"), "--frames must be at least 1");
    }
}
