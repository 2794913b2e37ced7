//! Lines and their totals, as a table or as JSON. Totals are kept per value of one label
//! (a tenant, say) and overall; unpriced facts are counted apart, with their quantities per
//! unit, and never add to an amount. Each line says who measured its fact, and each total is
//! split by it too: what a provider reported and what the runtime estimated (an attempt cut
//! before the provider said) are not the same kind of money.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::{Amount, Line};

/// What one group of facts comes to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Total {
    /// The sum of the priced lines.
    pub amount: Amount,
    /// How many facts were priced.
    pub priced: u64,
    /// How many were not.
    pub unpriced: u64,
    /// The unpriced quantities, by unit.
    pub unpriced_quantities: BTreeMap<String, u64>,
    /// The priced lines again, by their facts' source (`provider_reported`,
    /// `runtime_measured`, `runtime_estimated`): `amount` and `priced` split by who measured.
    pub by_source: BTreeMap<String, SourceTotal>,
}

/// What the priced facts of one source come to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SourceTotal {
    /// The sum of their lines.
    pub amount: Amount,
    /// How many facts.
    pub priced: u64,
}

/// Why a report cannot be made: a total beyond what its type holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// A sum of priced amounts (a total's, or one source's part of it) is beyond what an
    /// [`Amount`] holds.
    #[error("a total {} is out of range (beyond 10^20)", group_text(.group.as_deref()))]
    AmountOutOfRange {
        /// The value of the `by` label whose total it is (`(none)` for the facts without the
        /// label); `None` for the total over every line.
        group: Option<String>,
    },
    /// A sum of the unpriced quantities of `unit` is beyond `u64`.
    #[error(
        "the unpriced quantity of {unit} {} is out of range (beyond 2^64 - 1)",
        group_text(.group.as_deref())
    )]
    QuantityOutOfRange {
        /// The unit.
        unit: String,
        /// The value of the `by` label whose total it is (`(none)` for the facts without the
        /// label); `None` for the total over every line.
        group: Option<String>,
    },
}

/// Which total a [`ReportError`] is in, in words.
fn group_text(group: Option<&str>) -> String {
    match group {
        Some(value) => format!("for the label value `{value}`"),
        None => "over every line".to_owned(),
    }
}

impl Total {
    /// Counts `line` in; `group`: the label value this is the total of, for the error.
    fn add(&mut self, line: &Line, group: Option<&str>) -> Result<(), ReportError> {
        match line {
            Line::Priced { fact, amount, .. } => {
                let out_of_range = || ReportError::AmountOutOfRange {
                    group: group.map(str::to_owned),
                };
                self.amount = self.amount.checked_add(*amount).ok_or_else(out_of_range)?;
                self.priced += 1;
                let source = self.by_source.entry(fact.source.clone()).or_default();
                source.amount = source
                    .amount
                    .checked_add(*amount)
                    .ok_or_else(out_of_range)?;
                source.priced += 1;
            }
            Line::Unpriced { fact, .. } => {
                self.unpriced += 1;
                let quantity = self
                    .unpriced_quantities
                    .entry(fact.unit.clone())
                    .or_default();
                *quantity = quantity.checked_add(fact.quantity).ok_or_else(|| {
                    ReportError::QuantityOutOfRange {
                        unit: fact.unit.clone(),
                        group: group.map(str::to_owned),
                    }
                })?;
            }
        }
        Ok(())
    }
}

/// Every line, and the totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The table's currency.
    pub currency: String,
    /// The label totals are grouped by, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// In the order the facts came.
    pub lines: Vec<Line>,
    /// By the label's value (`(none)` for facts without the label).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub totals: BTreeMap<String, Total>,
    /// Over every line.
    pub total: Total,
    /// The cursor of the last fact read from a server: the report covers the facts up to it
    /// (resume after it for the next report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub through: Option<String>,
}

/// The group of facts without the label.
const NONE: &str = "(none)";

impl Report {
    /// A report of `lines` in `currency`, with totals by the label `by`; `through`: the
    /// cursor of the last fact read, if they came from a server. Fails if a total does not
    /// fit its type.
    pub fn new(
        currency: String,
        by: Option<String>,
        lines: Vec<Line>,
        through: Option<String>,
    ) -> Result<Self, ReportError> {
        let mut totals: BTreeMap<String, Total> = BTreeMap::new();
        let mut total = Total::default();
        for line in &lines {
            total.add(line, None)?;
            if let Some(label) = &by {
                let value = line.fact().labels.get(label).map_or(NONE, String::as_str);
                totals
                    .entry(value.to_owned())
                    .or_default()
                    .add(line, Some(value))?;
            }
        }
        Ok(Self {
            currency,
            by,
            lines,
            totals,
            total,
            through,
        })
    }

    /// As aligned text: the lines, then the totals.
    pub fn table(&self) -> String {
        let mut out = String::new();
        self.write_lines(&mut out);
        self.write_totals(&mut out);
        if let Some(cursor) = &self.through {
            let _ = writeln!(out, "through cursor {cursor}");
        }
        out
    }

    /// Each fact's line, in aligned columns.
    fn write_lines(&self, out: &mut String) {
        let mut rows = vec![[
            "execution".to_owned(),
            "attempt".into(),
            "provider/model".into(),
            "unit".into(),
            "source".into(),
            "quantity".into(),
            "unit price".into(),
            format!("amount ({})", self.currency),
        ]];
        for line in &self.lines {
            let fact = line.fact();
            let (price, amount) = match line {
                Line::Priced {
                    unit_price,
                    part_of,
                    amount,
                    ..
                } => (
                    match part_of {
                        Some(whole) => format!("{unit_price} (vs {whole})"),
                        None => unit_price.to_string(),
                    },
                    amount.to_string(),
                ),
                Line::Unpriced { missing, .. } => ("unpriced".to_owned(), missing.clone()),
            };
            rows.push([
                fact.execution_id.clone(),
                fact.attempt.to_string(),
                format!("{}/{}", fact.provider, fact.model),
                fact.unit.clone(),
                fact.source.clone(),
                fact.quantity.to_string(),
                price,
                amount,
            ]);
        }
        let widths: Vec<usize> = (0..8)
            .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
            .collect();
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        }
    }

    /// The totals, by label value and in all, each split by source.
    fn write_totals(&self, out: &mut String) {
        out.push('\n');
        let mut groups: Vec<(String, &Total)> = self
            .totals
            .iter()
            .map(|(value, total)| {
                let label = self.by.as_deref().unwrap_or_default();
                (format!("{label}={value}"), total)
            })
            .collect();
        groups.push(("total".to_owned(), &self.total));
        for (name, total) in groups {
            let _ = write!(
                out,
                "{name}: {} {} from {} priced facts",
                total.amount, self.currency, total.priced
            );
            if total.unpriced > 0 {
                let quantities: Vec<String> = total
                    .unpriced_quantities
                    .iter()
                    .map(|(unit, quantity)| format!("{quantity} {unit}"))
                    .collect();
                let _ = write!(
                    out,
                    "; {} unpriced facts ({}) not in the amount",
                    total.unpriced,
                    quantities.join(", ")
                );
            }
            out.push('\n');
            for (source, part) in &total.by_source {
                let _ = writeln!(
                    out,
                    "  {source}: {} {} from {} priced facts",
                    part.amount, self.currency, part.priced
                );
            }
        }
    }
}
