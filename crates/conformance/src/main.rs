//! `model-runtime-conformance`: the kit's command line (`conformance::cli`).

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    conformance::cli::main(std::env::args_os(), &mut out, &mut err).await
}
