//! Command-line subcommands: each file turns parsed arguments into library calls and
//! prints for people (tables) or machines (`--json`).

pub mod bench;
pub mod detect;
pub mod run;
