//! `cudaleak`: run CUDA programs under the shim, report what leaked and from where, gate CI.
//!
//! This file only dispatches: parse the command line, run the subcommand, return its exit
//! status. It must never print a report or decide a verdict itself.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use cudaleak_cli::{args, commands};

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; usage errors exit 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                commands::EXIT_ERROR
            } else {
                0
            });
        }
    };
    if let Err(e) = cli.check() {
        let _ = e.print();
        return ExitCode::from(commands::EXIT_ERROR);
    }
    ExitCode::from(match &cli.command {
        args::Command::Run(a) => commands::run(a),
        args::Command::Report(a) => commands::report(a),
        args::Command::Diff(a) => commands::diff(a),
        args::Command::Symbolize(a) => commands::symbolize(a),
        args::Command::Attach(a) => cudaleak_cli::attach::command(a),
        args::Command::Env(a) => commands::env(a),
    })
}
