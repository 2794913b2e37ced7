//! `check-config`: a config file validated as `serve` would load it, and every value in
//! effect printed (defaults filled in; secrets named by where they are read from, never
//! shown), itself a config that passes.

use std::path::PathBuf;
use std::process::ExitCode;

use model_runtime::Config;

use super::exit;

/// `check-config`'s argument.
#[derive(Debug, clap::Args)]
pub struct CheckConfigArgs {
    /// Config file (TOML).
    file: PathBuf,
}

/// Exits 0 with what is in effect, or 2 with the key and the reason.
pub fn main(args: CheckConfigArgs) -> ExitCode {
    let file = args.file;
    match Config::load_effective(&file) {
        Ok((config, effective)) => {
            println!(
                "{}: ok ({} providers, {} policies, {} abilities); in effect:",
                file.display(),
                config.providers.len(),
                config.policies.len(),
                config.abilities.len()
            );
            print!("{effective}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: {e}", file.display());
            exit::invalid()
        }
    }
}
