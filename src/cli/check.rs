//! `check-config`: a config file validated as `serve` would load it, and every value in
//! effect printed (defaults filled in; secrets named by where they are read from, never
//! shown): itself a config that passes, its first line a comment saying what was checked.
//! `--names-only` checks every secret by its name alone, for CI, where none is set.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use model_runtime::Config;
use model_runtime::config::Checked;

use super::exit;

/// `check-config`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CheckConfigArgs {
    /// Config file (TOML).
    file: PathBuf,
    /// Check each secret by its name only: the environment variables and files that hold
    /// keys, tokens and connection strings need not be set or exist, and none is read.
    #[arg(long)]
    names_only: bool,
}

/// Exits 0 with what is in effect, or 2 with the key and the reason.
pub fn main(args: CheckConfigArgs) -> ExitCode {
    let file = args.file;
    let checked = if args.names_only {
        Config::check_names(&file)
    } else {
        Config::load_effective(&file).map(|(config, effective)| (Checked::of(&config), effective))
    };
    let (checked, effective) = match checked {
        Ok(checked) => checked,
        Err(e) => {
            eprintln!("{}: {e}", file.display());
            return exit::invalid();
        }
    };
    let secrets = if args.names_only {
        "secrets checked by name only"
    } else {
        "secrets read"
    };
    let text = format!(
        "# {}: ok ({} providers, {} policies, {} abilities; {secrets}); in effect:\n{effective}",
        file.display(),
        checked.providers,
        checked.policies,
        checked.abilities,
    );
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`check-config FILE | head`) ends it quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("writing output: {e}");
            exit::failed()
        }
    }
}
