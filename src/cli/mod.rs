//! Command-line subcommands: each file turns parsed arguments into library calls and
//! prints for people (tables) or machines (`--json`); `exit.rs` is the one exit-status policy
//! (a subcommand's `Result<(), Failure>` → 0, 1, 2 or 78).

pub mod bench;
pub mod capture;
pub mod detect;
pub mod devices;
pub mod exit;
pub mod outlets;
pub mod run;

/// Writes `text` to stdout. A reader that went away (`lookout detect --json | head -c 1`)
/// ends the command quietly ([`exit::Failure::OutputClosed`], status 0) instead of a panic.
///
/// # Errors
/// [`exit::Failure::OutputClosed`] for a closed pipe, [`exit::Failure::Runtime`] for any
/// other write error.
pub fn out(text: &str) -> Result<(), exit::Failure> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(exit::Failure::OutputClosed),
        Err(e) => Err(anyhow::anyhow!("cannot write to stdout: {e}").into()),
    }
}
