//! What a run found, as a table for people or one JSON object for scripts.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use serde_json::{Value, json};

use super::cpu::CpuTime;
use super::histogram::Summary;
use super::load::Tally;

/// The outcome of one benchmark run.
#[derive(Debug, Clone)]
pub struct Report {
    /// `server`, `baseline` or `embedded`.
    pub mode: &'static str,
    /// What was driven (URI, or `in-process`).
    pub target: String,
    /// `execute` or `submit`.
    pub rpc: &'static str,
    /// Workers.
    pub concurrency: usize,
    /// HTTP/2 connections (0 when embedded).
    pub connections: usize,
    /// Open-loop rate, if any.
    pub rate: Option<f64>,
    /// Text deltas per execution in the request's reply, when known (baseline).
    pub deltas: Option<usize>,
    /// Wall time.
    pub elapsed: Duration,
    /// Calls that ended.
    pub executions: u64,
    /// Calls that ended with a completed execution (or an accepted submit).
    pub succeeded: u64,
    /// Events received.
    pub events: u64,
    /// Failures by key.
    pub errors: BTreeMap<String, u64>,
    /// Time to first output, microseconds.
    pub ttfo: Summary,
    /// Time to completion, microseconds.
    pub ttc: Summary,
    /// Open loop: start lag against the schedule, microseconds.
    pub start_lag: Option<Summary>,
    /// CPU this process used during the load, when known.
    pub cpu: Option<CpuTime>,
}

impl Report {
    /// A report of `tally`.
    #[expect(
        clippy::too_many_arguments,
        reason = "every figure of a run's report, named where it is made"
    )]
    pub(super) fn new(
        mode: &'static str,
        target: String,
        rpc: &'static str,
        concurrency: usize,
        connections: usize,
        rate: Option<f64>,
        deltas: Option<usize>,
        tally: Tally,
    ) -> Self {
        Self {
            mode,
            target,
            rpc,
            concurrency,
            connections,
            rate,
            deltas,
            elapsed: tally.elapsed,
            executions: tally.executions,
            succeeded: tally.succeeded,
            events: tally.events,
            errors: tally.errors,
            ttfo: tally.ttfo.summary(),
            ttc: tally.ttc.summary(),
            start_lag: rate.map(|_| tally.start_lag.summary()),
            cpu: None,
        }
    }

    /// With the CPU this process used.
    pub(super) fn with_cpu(mut self, cpu: Option<CpuTime>) -> Self {
        self.cpu = cpu;
        self
    }

    /// CPU microseconds per ended call: (the load tool itself, the bare baseline's server
    /// threads). Outside baseline mode the second is zero; embedded, the first includes the
    /// runtime.
    pub fn cpu_us_per_execution(&self) -> Option<(f64, f64)> {
        let cpu = self.cpu?;
        let n = self.executions.max(1) as f64;
        let us = |d: std::time::Duration| d.as_secs_f64() * 1e6 / n;
        Some((us(cpu.process.saturating_sub(cpu.bare)), us(cpu.bare)))
    }

    fn per_sec(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Completed executions per second.
    pub fn executions_per_sec(&self) -> f64 {
        self.per_sec(self.succeeded)
    }

    /// Events received per second.
    pub fn events_per_sec(&self) -> f64 {
        self.per_sec(self.events)
    }

    /// One JSON object.
    pub fn json(&self) -> Value {
        let summary = |s: &Summary| {
            let r = |v: f64| (v * 10.0).round() / 10.0;
            json!({
                "count": s.count, "mean": r(s.mean), "p50": r(s.p50), "p90": r(s.p90),
                "p99": r(s.p99), "p999": r(s.p999), "max": r(s.max),
            })
        };
        json!({
            "mode": self.mode,
            "target": self.target,
            "rpc": self.rpc,
            "concurrency": self.concurrency,
            "connections": self.connections,
            "rate": self.rate,
            "deltas": self.deltas,
            "duration_s": self.elapsed.as_secs_f64(),
            "executions": self.executions,
            "succeeded": self.succeeded,
            "events": self.events,
            "executions_per_sec": self.executions_per_sec(),
            "events_per_sec": self.events_per_sec(),
            "errors": self.errors,
            "ttfo_us": summary(&self.ttfo),
            "ttc_us": summary(&self.ttc),
            "start_lag_us": self.start_lag.as_ref().map(summary),
            "cpu_us_per_execution": self.cpu_us_per_execution().map(|(client, bare)| json!({
                "client": (client * 10.0).round() / 10.0,
                "bare_server": (self.mode == "baseline").then_some((bare * 10.0).round() / 10.0),
            })),
        })
    }

    /// A readable table.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let shape = match self.rate {
            Some(rate) => format!("open loop at {rate}/s"),
            None => "closed loop".to_owned(),
        };
        let connections = if self.connections == 0 {
            String::new()
        } else {
            format!(" over {} connection(s)", self.connections)
        };
        let _ = writeln!(
            t,
            "{} {} ({}): {shape}, concurrency {}{connections}",
            self.mode, self.target, self.rpc, self.concurrency
        );
        let _ = writeln!(
            t,
            "  duration        {:>12.2} s",
            self.elapsed.as_secs_f64()
        );
        let _ = writeln!(
            t,
            "  executions      {:>12} ({} ok) {:>12.1} /s",
            self.executions,
            self.succeeded,
            self.executions_per_sec()
        );
        let _ = writeln!(
            t,
            "  events          {:>12} {:>17.1} /s",
            self.events,
            self.events_per_sec()
        );
        let _ = writeln!(
            t,
            "  latency (us)    {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "p50", "p90", "p99", "p99.9", "max", "mean"
        );
        let mut row = |name: &str, s: &Summary| {
            let _ = writeln!(
                t,
                "  {name:<15} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                s.p50, s.p90, s.p99, s.p999, s.max, s.mean
            );
        };
        row("first output", &self.ttfo);
        row("completion", &self.ttc);
        if let Some(lag) = &self.start_lag {
            row("start lag", lag);
        }
        if let Some((client, bare)) = self.cpu_us_per_execution() {
            let _ = write!(t, "  cpu/execution   {client:>9.1} us client");
            if self.mode == "baseline" {
                let _ = write!(t, ", {bare:.1} us bare server");
            }
            let _ = writeln!(t);
        }
        if self.errors.is_empty() {
            let _ = writeln!(t, "  errors          none");
        } else {
            let _ = writeln!(t, "  errors");
            for (key, n) in &self.errors {
                let _ = writeln!(t, "    {key:<40} {n:>10}");
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::histogram::Histogram;

    fn report() -> Report {
        let mut tally = Tally {
            executions: 10,
            succeeded: 9,
            events: 198,
            elapsed: Duration::from_secs(2),
            ..Tally::default()
        };
        tally.errors.insert("grpc:Unavailable".into(), 1);
        let mut h = Histogram::default();
        h.record(Duration::from_micros(500));
        tally.ttc = h;
        Report::new(
            "server",
            "http://127.0.0.1:1".into(),
            "execute",
            4,
            1,
            None,
            None,
            tally,
        )
    }

    #[test]
    fn json_has_the_documented_keys_and_units() {
        let v = report().json();
        assert_eq!(v["executions_per_sec"], 4.5);
        assert_eq!(v["events_per_sec"], 99.0);
        assert_eq!(v["errors"]["grpc:Unavailable"], 1);
        assert_eq!(v["ttc_us"]["p99"], 500.0);
        for key in ["p50", "p90", "p99", "p999"] {
            assert!(v["ttfo_us"][key].is_number(), "{key}");
        }
        assert!(v["start_lag_us"].is_null());
    }

    #[test]
    fn the_table_names_rates_latencies_and_errors() {
        let t = report().table();
        assert!(
            t.contains("closed loop, concurrency 4 over 1 connection(s)"),
            "{t}"
        );
        assert!(t.contains("4.5 /s"), "{t}");
        assert!(t.contains("completion"), "{t}");
        assert!(t.contains("grpc:Unavailable"), "{t}");
    }
}
