//! Anthropic's server tools (web search, web fetch, code execution, MCP) as this adapter keeps
//! them: notes quoting a bounded part of their input, and usage facts of their request counts.

use crate::execution::UsageUnit;
use crate::provider::tally::UsageTally;

use super::Usage;

/// The longest server-tool input a progress note quotes.
pub(super) const NOTE_INPUT_BYTES: usize = 256;
/// Server tool usage units kept from one reply, and the longest name of one.
const MAX_SERVER_TOOL_UNITS: usize = 8;
pub(super) const MAX_UNIT_BYTES: usize = 64;

/// `usage.server_tool_use`'s counts, each a usage fact in the unit its key names
/// (`web_search_requests`, ...). Cumulative, like the rest of `message_delta`'s usage. Only
/// plain lowercase names and whole numbers are kept, and only a few: they name units, which
/// metrics and pricing key on.
pub(super) fn report_server_tools(reported: &Usage, usage: &mut UsageTally) {
    let Some(counts) = &reported.server_tool_use else {
        return;
    };
    let counts = counts.iter().filter_map(|(name, value)| {
        let plain = !name.is_empty()
            && name.len() <= MAX_UNIT_BYTES
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        Some((name, value.as_u64().filter(|_| plain)?))
    });
    for (name, count) in counts.take(MAX_SERVER_TOOL_UNITS) {
        usage.report(UsageUnit::new(name.clone()), count);
    }
}
