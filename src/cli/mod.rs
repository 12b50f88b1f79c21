//! Command-line subcommands: each file turns parsed arguments into library calls and
//! prints for people (tables) or machines (`--json`).

pub mod bench;
pub mod capture;
pub mod detect;
pub mod devices;
pub mod run;
