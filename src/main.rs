//! The `ablate` command line. The commands and their arguments are `cli`'s:
//! each command's arguments are resolved into core options, then its pipeline
//! (ARCHITECTURE.md) runs and prints; here, the error printed and the exit
//! status `cli::error` decides.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::args::Cli::parse();
    // Temporary folders of ablate processes that were killed (their lock is free).
    ablate::sandbox::scratch::sweep();
    let code = cli::run(args).unwrap_or_else(|err| {
        eprintln!("{}", err.message());
        err.exit()
    });
    ablate::sandbox::scratch::remove();
    code.into()
}
