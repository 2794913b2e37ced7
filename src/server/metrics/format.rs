//! The two text formats `/metrics` speaks, and the choice between them by the request's
//! `Accept`, as Prometheus's own servers choose (client_golang's `expfmt.Negotiate`).
//!
//! The registry writes OpenMetrics 1.0.0 (`prometheus-client` has no other text encoder).
//! Prometheus asks for it first, and gets it; a scraper that asks for nothing, or for the
//! Prometheus text format 0.0.4, gets that format, written from the same text. The two differ
//! where a parser of one reads the other wrongly: an OpenMetrics counter family `x` has
//! samples `x_total`, where in 0.0.4 the family is named as its samples (`# TYPE x_total
//! counter`); OpenMetrics has `# UNIT` lines and ends with `# EOF`, 0.0.4 has neither. A
//! 0.0.4 parser given OpenMetrics reads each counter's samples as an untyped family of their
//! own.

use std::fmt::Write as _;

/// A text format of the exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// OpenMetrics 1.0.0.
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Text,
}

impl Format {
    /// The `content-type` that names the format.
    pub(super) fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format for a request whose `Accept` is `accept` (none: the 0.0.4 format). The
    /// media ranges are taken by quality, highest first (in their order on a tie); the first
    /// that names one of the two formats (OpenMetrics at version 1.0.0 or unversioned, plain
    /// text at 0.0.4 or unversioned) decides. A range of quality 0 refuses, and wildcards
    /// name neither: what is left is the 0.0.4 format, which every Prometheus reads.
    pub(super) fn negotiate(accept: Option<&str>) -> Self {
        let mut ranges: Vec<(u16, Option<Self>)> = accept
            .unwrap_or_default()
            .split(',')
            .map(range)
            .filter(|(q, _)| *q > 0)
            .collect();
        // Stable: equal qualities keep the client's order.
        ranges.sort_by_key(|(quality, _)| std::cmp::Reverse(*quality));
        ranges
            .into_iter()
            .find_map(|(_, format)| format)
            .unwrap_or(Self::Text)
    }

    /// `openmetrics`, the registry's text, in this format.
    pub(super) fn write(self, openmetrics: &str) -> String {
        match self {
            Self::OpenMetrics => openmetrics.to_owned(),
            Self::Text => text_0_0_4(openmetrics),
        }
    }
}

/// One media range of an `Accept`: its quality in thousandths, and the format it names.
fn range(text: &str) -> (u16, Option<Format>) {
    let mut parts = text.split(';');
    let media = parts.next().unwrap_or_default().trim();
    let mut quality = 1000;
    let mut version = None;
    for param in parts {
        let Some((name, value)) = param.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        match name.trim().to_ascii_lowercase().as_str() {
            "q" => quality = thousandths(value),
            "version" => version = Some(value),
            _ => {}
        }
    }
    let format = if media.eq_ignore_ascii_case("application/openmetrics-text") {
        matches!(version, None | Some("1.0.0")).then_some(Format::OpenMetrics)
    } else if media.eq_ignore_ascii_case("text/plain") {
        matches!(version, None | Some("0.0.4")).then_some(Format::Text)
    } else {
        None
    };
    (quality, format)
}

/// A quality value (`0` to `1`, at most three decimals) in thousandths; one that does not
/// read as such counts as 0, as if the range were not there.
fn thousandths(q: &str) -> u16 {
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    let fraction = format!("{fraction:0<3}").parse::<u16>().unwrap_or(0);
    match whole {
        "0" => fraction,
        "1" if fraction == 0 => 1000,
        _ => 0,
    }
}

/// The registry's OpenMetrics text in the 0.0.4 format: each counter family renamed as its
/// samples are (`_total`), `# UNIT` lines and the `# EOF` dropped, `unknown` typed as
/// `untyped`. Samples are written the same way in both.
fn text_0_0_4(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len() + openmetrics.len() / 16);
    // A family's HELP comes before its TYPE, which decides its name.
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let (suffix, kind) = match kind {
                "counter" => ("_total", "counter"),
                "gauge" | "histogram" | "summary" => ("", kind),
                _ => ("", "untyped"),
            };
            // Writing to a String cannot fail.
            if let Some((_, text)) = help.take().filter(|(of, _)| *of == name) {
                let _ = writeln!(out, "# HELP {name}{suffix} {text}");
            }
            let _ = writeln!(out, "# TYPE {name}{suffix} {kind}");
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
