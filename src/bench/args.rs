//! The `bench` command line, and its check into a [`Plan`]: what to drive, how hard, for how
//! long. Every run is bounded: by `--duration` (10 s when neither bound is given), by
//! `--executions`, or by both, whichever comes first; and each call by `--timeout`.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::address::Address;
use model_runtime::pb;

/// The reply the benchmarks use unless told otherwise: 16 words, so the echo model streams 16
/// text deltas, the figure the performance targets are stated for.
pub const DEFAULT_PROMPT: &str =
    "the quick brown fox jumps over the lazy dog while seven bold wizards quietly judge everything";

/// Calls to one connection before another is opened by default. One HTTP/2 connection is
/// one task (and so one core at a time) on each side; a gateway spreads its streams over a
/// small pool, and 64 streams each keep the default pool at one connection up to the
/// concurrency the main target is stated at.
const STREAMS_PER_CONNECTION: usize = 64;

/// `model-runtime bench`: drive a server (or a baseline) and report throughput and latency.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Server address: host:port, http://host:port or unix:/path/to.sock (loopback
    /// benchmarks: 127.0.0.1).
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub addr: String,
    /// Executions in flight at once (workers).
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// How long to send, e.g. `10s`, `500ms` (default 10s unless --executions is given).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// How many executions to run in total.
    #[arg(long)]
    pub executions: Option<u64>,
    /// Open loop: start executions at this fixed rate per second, whatever the latency;
    /// latency is measured from each one's intended start. Closed loop without it.
    #[arg(long)]
    pub rate: Option<f64>,
    /// The ability to run.
    #[arg(long, default_value = "chat")]
    pub ability: String,
    /// The user prompt (default: a 16-word sentence, or --deltas words).
    #[arg(long)]
    pub prompt: Option<String>,
    /// A label on every execution, as KEY=VALUE (repeatable), as a gateway sends its tenant
    /// and route: what the runtime keeps and copies per execution grows with them.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = crate::cli::request::label)]
    pub labels: Vec<(String, String)>,
    /// Drive a bare in-process tonic server streaming the same messages the runtime sends
    /// for this prompt, and nothing else: the floor of what gRPC costs here.
    #[arg(long, conflicts_with_all = ["addr", "embedded"])]
    pub baseline: bool,
    /// A generated prompt of this many words: as many text deltas from an echo model that
    /// streams a word at a time (the baseline streams exactly that many).
    #[arg(long, conflicts_with = "prompt")]
    pub deltas: Option<usize>,
    /// Drive a runtime in this process, without gRPC: runtime cost without transport.
    #[arg(long, conflicts_with = "addr")]
    pub embedded: bool,
    /// With --embedded: the runtime's config file (default: the embedded default).
    #[arg(long, requires = "embedded")]
    pub config: Option<PathBuf>,
    /// HTTP/2 connections shared round-robin by the workers (default: one per 64 workers).
    #[arg(long)]
    pub connections: Option<usize>,
    /// The RPC to call: `execute` (stream every event) or `submit` (return once accepted).
    #[arg(long, value_enum, default_value_t = Rpc::Execute)]
    pub rpc: Rpc,
    /// Give up on one call after this long (counted as a `client:timeout` error).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub timeout: Duration,
    /// Print one JSON object as the last line of stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Which RPC each call makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Rpc {
    /// `Execute`: submit and stream every event to the terminal one.
    Execute,
    /// `Submit`: returns once the execution is accepted (for queueing and memory runs).
    Submit,
}

impl Rpc {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Execute => "execute",
            Self::Submit => "submit",
        }
    }
}

/// What the load is sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A running server at this address.
    Server(Address),
    /// The bare tonic server, expecting this many text deltas when given.
    Baseline(Option<usize>),
    /// A runtime in this process with this config (the embedded default when `None`).
    Embedded(Option<PathBuf>),
}

/// When the run stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stop {
    /// Stop starting executions after this long.
    pub duration: Option<Duration>,
    /// Stop after this many executions.
    pub executions: Option<u64>,
}

/// A checked benchmark run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What to drive.
    pub target: Target,
    /// Workers.
    pub concurrency: usize,
    /// HTTP/2 connections.
    pub connections: usize,
    /// When to stop.
    pub stop: Stop,
    /// Open-loop arrival rate per second.
    pub rate: Option<f64>,
    /// The RPC.
    pub rpc: Rpc,
    /// Per-call limit.
    pub timeout: Duration,
    /// The request every call sends.
    pub request: pb::ExecuteRequest,
    /// JSON output.
    pub json: bool,
}

/// A bad combination of flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: {reason}")]
pub struct ArgsError {
    /// The flag at fault.
    pub flag: &'static str,
    /// Why.
    pub reason: String,
}

fn bad(flag: &'static str, reason: impl Into<String>) -> ArgsError {
    ArgsError {
        flag,
        reason: reason.into(),
    }
}

/// `n` words of [`DEFAULT_PROMPT`], repeated as needed.
pub fn prompt_of(n: usize) -> String {
    let words: Vec<&str> = DEFAULT_PROMPT.split(' ').collect();
    (0..n)
        .map(|i| words[i % words.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

impl BenchArgs {
    /// Checks the flags together.
    pub fn plan(&self) -> Result<Plan, ArgsError> {
        if self.concurrency == 0 || self.concurrency > 100_000 {
            return Err(bad("concurrency", "must be between 1 and 100000"));
        }
        if self.executions == Some(0) {
            return Err(bad("executions", "must be at least 1"));
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err(bad("duration", "must be longer than zero"));
        }
        if let Some(rate) = self.rate
            && !(rate.is_finite() && rate > 0.0)
        {
            return Err(bad(
                "rate",
                "must be a positive number of executions per second",
            ));
        }
        if self.timeout.is_zero() {
            return Err(bad("timeout", "must be longer than zero"));
        }
        let connections = self
            .connections
            .unwrap_or_else(|| self.concurrency.div_ceil(STREAMS_PER_CONNECTION));
        if connections == 0 || connections > self.concurrency {
            return Err(bad("connections", "must be between 1 and --concurrency"));
        }
        if self.deltas == Some(0) {
            return Err(bad("deltas", "must be at least 1"));
        }
        let target = if self.baseline {
            if self.rpc == Rpc::Submit {
                return Err(bad("rpc", "the baseline answers `execute` only"));
            }
            Target::Baseline(self.deltas)
        } else if self.embedded {
            Target::Embedded(self.config.clone())
        } else {
            let address: Address = self.addr.parse().map_err(|e: String| bad("addr", e))?;
            Target::Server(address)
        };
        let prompt = match (&self.prompt, self.deltas) {
            (Some(prompt), _) => prompt.clone(),
            (None, Some(n)) => prompt_of(n),
            (None, None) => DEFAULT_PROMPT.to_owned(),
        };
        let stop = Stop {
            duration: match (self.duration, self.executions) {
                (None, None) => Some(Duration::from_secs(10)),
                (duration, _) => duration,
            },
            executions: self.executions,
        };
        Ok(Plan {
            target,
            concurrency: self.concurrency,
            connections,
            stop,
            rate: self.rate,
            rpc: self.rpc,
            timeout: self.timeout,
            // The prompt as one user message and the labels, everything else default.
            request: model_runtime_client::pb::ExecuteRequest {
                labels: self.labels.iter().cloned().collect(),
                ..model_runtime_client::text_request(&self.ability, &prompt)
            },
            json: self.json,
        })
    }
}

#[cfg(test)]
mod tests {

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn plan(args: &[&str]) -> Result<Plan, String> {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
            .map_err(|e| e.kind().to_string())?;
        cli.bench.plan().map_err(|e| e.to_string())
    }

    fn text(p: &Plan) -> String {
        let input = p.request.input.as_ref().unwrap();
        match &input.messages[0].content[0].part {
            Some(pb::content_part::Part::Text(t)) => t.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_are_a_ten_second_closed_loop_on_the_local_server() {
        let p = plan(&[]).unwrap();
        assert_eq!(
            p.target,
            Target::Server(Address::Tcp("127.0.0.1:50051".into()))
        );
        assert_eq!(p.concurrency, 16);
        assert_eq!(p.connections, 1);
        assert_eq!(p.stop.duration, Some(Duration::from_secs(10)));
        assert_eq!(p.stop.executions, None);
        assert_eq!(p.rate, None);
        assert_eq!(p.rpc, Rpc::Execute);
        assert_eq!(p.request.ability, "chat");
        assert_eq!(text(&p).split(' ').count(), 16);
    }

    #[test]
    fn labels_go_on_every_request() {
        assert!(plan(&[]).unwrap().request.labels.is_empty());
        let p = plan(&["--label", "tenant=acme", "--label", "route=a=b"]).unwrap();
        let mut labels: Vec<_> = p.request.labels.iter().map(|(k, v)| (&**k, &**v)).collect();
        labels.sort_unstable();
        assert_eq!(labels, [("route", "a=b"), ("tenant", "acme")]);
        assert!(plan(&["--label", "tenant"]).is_err());
    }

    #[test]
    fn durations_are_humantime_and_bounds_combine() {
        let p = plan(&["--duration", "1m 30s", "--executions", "500"]).unwrap();
        assert_eq!(p.stop.duration, Some(Duration::from_secs(90)));
        assert_eq!(p.stop.executions, Some(500));
        let p = plan(&["--executions", "50"]).unwrap();
        assert_eq!(p.stop.duration, None, "a count alone is the bound");
        assert_eq!(
            plan(&["--timeout", "250ms"]).unwrap().timeout.as_millis(),
            250
        );
        assert!(plan(&["--duration", "ten"]).is_err());
        assert!(plan(&["--duration", "0s"]).is_err());
    }

    #[test]
    fn connections_follow_concurrency_unless_given() {
        let c = |args: &[&str]| plan(args).map(|p| p.connections);
        assert_eq!(c(&["--concurrency", "1"]), Ok(1));
        assert_eq!(c(&["--concurrency", "64"]), Ok(1));
        assert_eq!(c(&["--concurrency", "65"]), Ok(2));
        assert_eq!(c(&["--concurrency", "256"]), Ok(4));
        assert_eq!(c(&["--concurrency", "8", "--connections", "3"]), Ok(3));
        assert!(c(&["--concurrency", "2", "--connections", "3"]).is_err());
        assert!(c(&["--concurrency", "0"]).is_err());
    }

    #[test]
    fn addresses_go_through_the_one_grammar() {
        let p = plan(&["--addr", "localhost:7"]).unwrap();
        assert_eq!(p.target, Target::Server(Address::Tcp("localhost:7".into())));
        let p = plan(&["--addr", "http://127.0.0.1:9"]).unwrap();
        assert_eq!(p.target, Target::Server(Address::Tcp("127.0.0.1:9".into())));
        assert!(plan(&["--addr", "nowhere"]).unwrap_err().contains("--addr"));
    }

    #[test]
    fn rates_must_be_positive() {
        assert_eq!(plan(&["--rate", "2500.5"]).unwrap().rate, Some(2500.5));
        for bad in ["0", "-3", "NaN", "inf"] {
            assert!(plan(&["--rate", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn baseline_takes_deltas_and_makes_that_many_words() {
        let p = plan(&["--baseline", "--deltas", "20", "--executions", "5"]).unwrap();
        assert_eq!(p.target, Target::Baseline(Some(20)));
        assert_eq!(text(&p).split(' ').count(), 20);
        let p = plan(&["--baseline", "--prompt", "hello there"]).unwrap();
        assert_eq!(p.target, Target::Baseline(None));
        assert_eq!(text(&p), "hello there");
        assert!(plan(&["--baseline", "--deltas", "0"]).is_err());
        assert!(plan(&["--baseline", "--rpc", "submit"]).is_err());
    }

    #[test]
    fn deltas_make_the_prompt_for_any_target() {
        let p = plan(&["--deltas", "4", "--embedded"]).unwrap();
        assert_eq!(text(&p).split(' ').count(), 4);
        assert!(plan(&["--deltas", "0"]).is_err());
        assert!(plan(&["--deltas", "4", "--prompt", "hi"]).is_err());
    }

    #[test]
    fn modes_exclude_each_other() {
        assert!(plan(&["--baseline", "--embedded"]).is_err());
        assert!(plan(&["--baseline", "--addr", "127.0.0.1:1"]).is_err());
        assert!(plan(&["--embedded", "--addr", "127.0.0.1:1"]).is_err());
        assert!(
            plan(&["--config", "x.toml"]).is_err(),
            "--config needs --embedded"
        );
        let p = plan(&["--embedded", "--config", "x.toml", "--rpc", "submit"]).unwrap();
        assert_eq!(p.target, Target::Embedded(Some("x.toml".into())));
        assert_eq!(p.rpc, Rpc::Submit);
    }
}
