//! The rules the kit holds an implementation to, and those no case can observe from outside
//! with why: both read from `docs/protocol.md`, the one place they are written.

/// MUST or SHOULD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Must,
    Should,
}

/// One rule of `docs/protocol.md`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub level: Level,
}

/// The protocol, as the kit was built with it.
pub const PROTOCOL: &str = include_str!("../../../docs/protocol.md");

/// Every rule, in the order the protocol states them: each line `- **ID** (MUST)` or
/// `(SHOULD)`.
pub fn all() -> Vec<Rule> {
    PROTOCOL
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("- **")?;
            let (id, rest) = rest.split_once("**")?;
            let rest = rest.trim_start();
            let level = if rest.starts_with("(MUST)") {
                Level::Must
            } else if rest.starts_with("(SHOULD)") {
                Level::Should
            } else {
                return None;
            };
            Some(Rule {
                id: id.to_owned(),
                level,
            })
        })
        .collect()
}

/// The heading under which the protocol lists the rules an address alone cannot show.
const UNOBSERVED: &str = "## What an address alone cannot show";

/// The rules no case observes from outside, each with why: `- ID: why` under
/// [`UNOBSERVED`]'s heading (a reason may continue on indented lines).
pub fn unobservable() -> Vec<(String, String)> {
    let mut rules: Vec<(String, String)> = Vec::new();
    let section = PROTOCOL
        .lines()
        .skip_while(|line| *line != UNOBSERVED)
        .skip(1)
        .take_while(|line| !line.starts_with("## "));
    for line in section {
        if let Some((id, why)) = line.strip_prefix("- ").and_then(|l| l.split_once(": ")) {
            rules.push((id.to_owned(), why.trim().to_owned()));
        } else if let (Some(last), true) = (rules.last_mut(), line.starts_with("  ")) {
            last.1.push(' ');
            last.1.push_str(line.trim());
        }
    }
    rules
}

/// Why `id` is not observed, if the protocol lists it as unobservable.
pub fn unobserved(id: &str) -> Option<String> {
    unobservable()
        .into_iter()
        .find(|(rule, _)| rule == id)
        .map(|(_, why)| why)
}
