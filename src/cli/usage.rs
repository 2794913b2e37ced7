//! `usage` and `price`: the usage export read from a server (`StreamUsage`) or a file, as
//! JSON lines, or priced with a price table (the `pricing` crate, `crates/pricing`).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use pricing::{Fact, PriceTable, Report, resolve};

use super::address::Address;
use super::exit;

/// Where `usage` and `price` read facts.
#[derive(Debug, Clone, clap::Args)]
pub struct Source {
    /// A server to read `StreamUsage` from: host:port, http://host:port or unix:/path.
    #[arg(long, conflicts_with = "from_file")]
    addr: Option<Address>,
    /// Resume after this cursor (a usage record's `cursor`).
    #[arg(long, default_value = "", requires = "addr")]
    after: String,
    /// Stop once no fact has come for this long (caught up).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    idle: Duration,
    /// Facts from a file, one JSON object per line (as `usage` prints them).
    #[arg(long)]
    from_file: Option<PathBuf>,
}

impl Source {
    /// Exit 2, saying so, when no source is given.
    fn missing(&self) -> Option<ExitCode> {
        (self.addr.is_none() && self.from_file.is_none()).then(|| {
            eprintln!("give --addr (a server) or --from-file (JSON lines)");
            exit::invalid()
        })
    }
}

/// `usage`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct UsageArgs {
    #[command(flatten)]
    source: Source,
    /// Keep following live facts instead of stopping once caught up.
    #[arg(long)]
    follow: bool,
}

/// `price`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct PriceArgs {
    /// The price table: a TOML table, or LiteLLM's model_prices_and_context_window.json.
    #[arg(long)]
    prices: PathBuf,
    #[command(flatten)]
    source: Source,
    /// Total by this label's value too (e.g. tenant).
    #[arg(long)]
    by: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `usage`: prints each fact as one JSON object per line, with its cursor.
pub async fn usage(args: UsageArgs) -> ExitCode {
    let source = args.source;
    if let Some(code) = source.missing() {
        return code;
    }
    let idle = (!args.follow).then_some(source.idle);
    let mut out = std::io::stdout().lock();
    let printed = read(&source, idle, |fact| {
        serde_json::to_writer(&mut out, &fact)
            .map_err(|e| e.to_string())
            .and_then(|()| writeln!(out).map_err(|e| e.to_string()))
    })
    .await;
    exit(printed)
}

/// `price`: resolves each fact with the table in `prices`; prints the lines and the totals
/// (by the label `by`), as a table or as JSON.
pub async fn price(args: PriceArgs) -> ExitCode {
    let PriceArgs {
        prices,
        source,
        by,
        json,
    } = args;
    let table = match PriceTable::load(&prices) {
        Ok(table) => table,
        Err(e) => {
            eprintln!("--prices: {e}");
            return exit::invalid();
        }
    };
    if let Some(code) = source.missing() {
        return code;
    }
    let mut lines = Vec::new();
    let mut through = None;
    let read = read(&source, Some(source.idle), |fact| {
        if !fact.cursor.is_empty() {
            through = Some(fact.cursor.clone());
        }
        lines.push(resolve(&table, fact));
        Ok(())
    })
    .await;
    let report = read.and_then(|()| {
        Report::new(table.currency.clone(), by, lines, through).map_err(|e| e.to_string())
    });
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            eprintln!("{e}");
            return exit::failed();
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("{e}");
                return exit::failed();
            }
        }
    } else {
        print!("{}", report.table());
    }
    ExitCode::SUCCESS
}

fn exit(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            exit::failed()
        }
    }
}

/// Hands every fact of `source` to `each`, in order; from a server, until none has come for
/// `idle` (`None`: for ever).
async fn read(
    source: &Source,
    idle: Option<Duration>,
    mut each: impl FnMut(Fact) -> Result<(), String>,
) -> Result<(), String> {
    match (&source.addr, &source.from_file) {
        (_, Some(path)) => {
            let file = std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
                let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
                if line.trim().is_empty() {
                    continue;
                }
                let fact: Fact = serde_json::from_str(&line)
                    .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
                each(fact)?;
            }
            Ok(())
        }
        (Some(addr), None) => {
            let channel = addr
                .connect()
                .await
                .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
            let mut stream = ModelRuntimeClient::new(channel)
                .stream_usage(pb::StreamUsageRequest {
                    after_cursor: source.after.clone(),
                })
                .await
                .map_err(|s| format!("{}: {}", s.code(), s.message()))?
                .into_inner();
            loop {
                let next = match idle {
                    Some(idle) => match tokio::time::timeout(idle, stream.message()).await {
                        Ok(next) => next,
                        // Caught up: nothing more for the idle time.
                        Err(_) => return Ok(()),
                    },
                    None => stream.message().await,
                };
                match next.map_err(|s| format!("{}: {}", s.code(), s.message()))? {
                    Some(record) => each(fact(record))?,
                    None => return Ok(()),
                }
            }
        }
        (None, None) => Err("no source of facts".into()),
    }
}

/// A usage record as a pricing fact.
fn fact(record: pb::UsageRecord) -> Fact {
    let fact = record.fact.unwrap_or_default();
    let source = match fact.source() {
        pb::UsageSource::ProviderReported => "provider_reported",
        pb::UsageSource::RuntimeMeasured => "runtime_measured",
        pb::UsageSource::RuntimeEstimated => "runtime_estimated",
        pb::UsageSource::Unspecified => "unspecified",
    };
    let time = record
        .time
        .as_ref()
        .and_then(|t| std::time::SystemTime::try_from(*t).ok())
        .map(|t| humantime::format_rfc3339_nanos(t).to_string())
        .unwrap_or_default();
    Fact {
        cursor: record.cursor,
        execution_id: record.execution_id,
        attempt: fact.attempt,
        provider: fact.provider,
        model: fact.model,
        source: source.to_owned(),
        unit: fact.unit,
        quantity: fact.quantity,
        labels: fact.labels.into_iter().collect(),
        time,
    }
}
