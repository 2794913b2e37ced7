//! `model-runtime exec`: submit one prompt and stream its events as they arrive. Readable
//! mode writes the reply text to stdout and a status line per event to stderr; `--json`
//! writes one JSON object per event to stdout.

use std::io::Write;
use std::process::ExitCode;

use futures_util::StreamExt;
use tonic_types::StatusExt;

use super::address::Address;
use super::{exit, render};
use model_runtime::pb;
use model_runtime::pb::execution_event::Payload;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;

/// `exec`'s arguments: what to run, and where.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecArgs {
    /// The ability to run.
    #[arg(long)]
    ability: String,
    /// Server address: host:port, http://host:port or unix:/path/to.sock (a sidecar's
    /// socket).
    #[arg(long, default_value = "127.0.0.1:50051")]
    addr: Address,
    /// The routing policy, one the ability allows (default: the ability's own).
    #[arg(long)]
    policy: Option<String>,
    /// A label copied onto the execution's usage facts, as KEY=VALUE (e.g. tenant=acme);
    /// repeat it for more.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    labels: Vec<(String, String)>,
    /// The deadline, this long from now (e.g. 30s; default: the server's
    /// `server.default_deadline`).
    #[arg(long, value_parser = humantime::parse_duration)]
    deadline: Option<std::time::Duration>,
    /// Hold each attempt's reply until it completes (delivery BUFFERED): a reply cut
    /// mid-way can still fall back, and the text arrives whole. Default: the policy's
    /// delivery, streamed unless it says otherwise.
    #[arg(long)]
    buffered: bool,
    /// The admission class: interactive, standard (the default) or batch.
    #[arg(long, value_parser = priority)]
    priority: Option<pb::Priority>,
    /// Print one JSON object per event.
    #[arg(long)]
    json: bool,
    /// The user prompt.
    prompt: String,
}

/// A `--label`: `KEY=VALUE`, split at the first `=`.
fn label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE, like tenant=acme".to_owned()),
    }
}

/// A `--priority`: one of the classes, by its lowercase name.
fn priority(text: &str) -> Result<pb::Priority, String> {
    match text {
        "interactive" => Ok(pb::Priority::Interactive),
        "standard" => Ok(pb::Priority::Standard),
        "batch" => Ok(pb::Priority::Batch),
        _ => Err("expected interactive, standard or batch".to_owned()),
    }
}

/// Why `exec` could not run the execution.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// `--deadline` is past what the clock holds.
    #[error("--deadline: too far in the future")]
    Deadline,
    /// No connection.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: Address,
        /// Why.
        source: tonic::transport::Error,
    },
    /// The server refused the call.
    #[error("{}", describe(.0))]
    Status(#[from] tonic::Status),
    /// Writing to the terminal failed.
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

fn describe(status: &tonic::Status) -> String {
    let details = status.get_error_details();
    match details.bad_request() {
        Some(bad) if !bad.field_violations.is_empty() => {
            let mut text = format!("{:?}: invalid request", status.code());
            for v in &bad.field_violations {
                text.push_str(&format!("\n  {}: {}", v.field, v.description));
            }
            text
        }
        _ => format!("{:?}: {}", status.code(), status.message()),
    }
}

/// Runs one execution; exits 0 when it succeeded and 1 when it failed or was cancelled, 2
/// when it could not run it. A reader that goes away (`exec ... | head`) ends it quietly.
pub async fn exec(args: ExecArgs) -> ExitCode {
    match run(args).await {
        Ok(code) => code,
        Err(ExecError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            exit::invalid()
        }
    }
}

async fn run(args: ExecArgs) -> Result<ExitCode, ExecError> {
    let json = args.json;
    let address = args.addr.clone();
    let request = request(args)?;
    let channel = address
        .connect()
        .await
        .map_err(|source| ExecError::Connect {
            addr: address,
            source,
        })?;
    let mut client = ModelRuntimeClient::new(channel);
    let events = client.execute(request).await?.into_inner();
    Ok(if print(events, json).await? {
        ExitCode::SUCCESS
    } else {
        exit::failed()
    })
}

/// The request `args` describe.
fn request(args: ExecArgs) -> Result<pb::ExecuteRequest, ExecError> {
    let deadline = match args.deadline {
        Some(after) => Some(
            std::time::SystemTime::now()
                .checked_add(after)
                .map(prost_types::Timestamp::from)
                .ok_or(ExecError::Deadline)?,
        ),
        None => None,
    };
    Ok(pb::ExecuteRequest {
        ability: args.ability,
        policy: args.policy.unwrap_or_default(),
        labels: args.labels.into_iter().collect(),
        deadline,
        delivery: if args.buffered {
            pb::Delivery::Buffered.into()
        } else {
            pb::Delivery::Unspecified.into()
        },
        priority: args.priority.unwrap_or(pb::Priority::Unspecified).into(),
        input: Some(pb::ExecutionInput {
            messages: vec![pb::Message {
                role: pb::Role::User.into(),
                content: vec![pb::ContentPart {
                    part: Some(pb::content_part::Part::Text(args.prompt)),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Writes each event as it comes: the reply's text to stdout and a status line per event to
/// stderr, or one JSON object per event with `json`. Whether the execution succeeded.
async fn print(
    mut events: tonic::Streaming<pb::ExecutionEvent>,
    json: bool,
) -> Result<bool, ExecError> {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut succeeded = false;
    // Whether reply text on stdout awaits its line end: a status line on the same terminal
    // first ends the reply's line.
    let mut mid_line = false;
    while let Some(event) = events.next().await {
        let event = event?;
        succeeded = matches!(event.payload, Some(Payload::Completed(_)));
        let mut out = stdout.lock();
        if json {
            writeln!(out, "{}", render::json(&event))?;
            out.flush()?;
            continue;
        }
        if let Some(Payload::TextDelta(delta)) = &event.payload {
            out.write_all(delta.text.as_bytes())?;
            out.flush()?;
            mid_line = !delta.text.ends_with('\n');
        }
        if let Some(Payload::Completed(done)) = &event.payload {
            let output = done
                .result
                .clone()
                .unwrap_or_default()
                .output
                .unwrap_or_default();
            for call in output.tool_calls {
                if mid_line {
                    writeln!(out)?;
                    mid_line = false;
                }
                writeln!(out, "tool call {}({})", call.name, call.arguments_json)?;
            }
        }
        if let Some(line) = render::line(&event) {
            if mid_line {
                writeln!(out)?;
                mid_line = false;
            }
            out.flush()?;
            writeln!(stderr.lock(), "{line}")?;
        }
    }
    if mid_line {
        writeln!(stdout.lock())?;
    }
    Ok(succeeded)
}
