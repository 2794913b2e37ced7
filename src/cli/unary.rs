//! The calls that answer with one message: `submit` (start an execution and return at once),
//! `get`, `cancel` and `metadata`. Each prints the answer readable, or with `--json` in
//! protobuf's canonical JSON mapping, as `buf curl` would print the same call.

use std::process::ExitCode;

use super::client::{CallError, Server};
use super::render;
use super::request::RequestArgs;
use model_runtime::pb;

/// How an answer is printed.
#[derive(Debug, Clone, clap::Args)]
pub struct Output {
    /// Print the answer in protobuf's canonical JSON mapping (as `buf curl` does).
    #[arg(long)]
    json: bool,
}

/// `submit`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    request: RequestArgs,
    #[command(flatten)]
    server: Server,
    #[command(flatten)]
    output: Output,
}

/// `get`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct GetArgs {
    /// The execution (its id, `ex_...`).
    execution_id: String,
    #[command(flatten)]
    server: Server,
    #[command(flatten)]
    output: Output,
}

/// `cancel`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct CancelArgs {
    /// The execution (its id, `ex_...`).
    execution_id: String,
    /// Why, recorded in its terminal event.
    #[arg(long, default_value = "")]
    reason: String,
    #[command(flatten)]
    server: Server,
    #[command(flatten)]
    output: Output,
}

/// `metadata`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct MetadataArgs {
    #[command(flatten)]
    server: Server,
    #[command(flatten)]
    output: Output,
}

/// Submits an execution and prints it as accepted (with how to follow it).
pub async fn submit(args: SubmitArgs) -> ExitCode {
    let call = async {
        let request = args.request.request()?;
        let execution = args.server.client().await?.submit(request).await?;
        let execution = execution.into_inner();
        if !args.output.json {
            eprintln!(
                "follow it with `model-runtime watch {}`",
                execution.execution_id
            );
        }
        Ok(execution)
    };
    show_execution(call.await, &args.output)
}

/// Prints one execution.
pub async fn get(args: GetArgs) -> ExitCode {
    let call = async {
        let request = pb::GetExecutionRequest {
            execution_id: args.execution_id,
        };
        Ok(args
            .server
            .client()
            .await?
            .get_execution(request)
            .await?
            .into_inner())
    };
    show_execution(call.await, &args.output)
}

/// Cancels one execution (a terminal one is left as it is) and prints it.
pub async fn cancel(args: CancelArgs) -> ExitCode {
    let call = async {
        let request = pb::CancelExecutionRequest {
            execution_id: args.execution_id,
            reason: args.reason,
        };
        let client = &mut args.server.client().await?;
        Ok(client.cancel_execution(request).await?.into_inner())
    };
    show_execution(call.await, &args.output)
}

/// Prints what the runtime is and can do now.
pub async fn metadata(args: MetadataArgs) -> ExitCode {
    let call = async {
        let request = pb::GetRuntimeMetadataRequest {};
        let client = &mut args.server.client().await?;
        Ok::<_, CallError>(client.get_runtime_metadata(request).await?.into_inner())
    };
    match call.await {
        Ok(m) => print(
            &args.output,
            &m,
            "model_runtime.v1.RuntimeMetadata",
            render::metadata,
        ),
        Err(e) => e.report(),
    }
}

fn show_execution(answer: Result<pb::Execution, CallError>, output: &Output) -> ExitCode {
    match answer {
        Ok(e) => print(output, &e, "model_runtime.v1.Execution", render::execution),
        Err(e) => e.report(),
    }
}

/// Prints `message` (of the full type `name`) as `output` says.
fn print<M: prost::Message>(
    output: &Output,
    message: &M,
    name: &str,
    readable: fn(&M) -> String,
) -> ExitCode {
    use std::io::Write;
    let text = if output.json {
        match model_runtime::pb::json::canonical_json(message, name, true) {
            Ok(json) => json + "\n",
            Err(e) => return CallError::Invalid(format!("rendering {name}: {e}")).report(),
        }
    } else {
        readable(message)
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => CallError::Io(e).report(),
    }
}
