//! Command-line subcommands: each file turns parsed arguments into library calls and
//! prints for people (tables) or machines (`--json`); `exit.rs` is the one exit-status policy
//! (a subcommand's `Result<(), Failure>` → 0, 1, 2 or 78).

pub mod bench;
pub mod capture;
pub mod detect;
pub mod devices;
pub mod exit;
pub mod run;
