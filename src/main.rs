//! The `ablate` command line. The commands and their arguments are `cli`'s:
//! each command's arguments are resolved into core options, then its pipeline
//! (ARCHITECTURE.md) runs and prints; here, the error printed and the exit
//! status `cli::error` decides.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    quiet_on_a_closed_stdout();
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

/// `ablate report RUN | head -1`: when what reads ablate's output goes away, the command ends
/// quietly with status 0, as ripgrep does, instead of a panic. SIGPIPE stays ignored (Rust's
/// default): the gateway and the harnesses write to sockets and pipes whose far end may close.
fn quiet_on_a_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if text.starts_with("failed printing to stdout") && text.contains("Broken pipe") {
            ablate::sandbox::scratch::remove();
            std::process::exit(0);
        }
        default(info)
    }));
}
