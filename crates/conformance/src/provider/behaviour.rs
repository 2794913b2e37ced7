//! The named behaviours of the fault-injecting provider: a provider model's name is the
//! behaviour its requests get, so a policy's targets script an execution's attempts.

use std::time::Duration;

/// Words of an answer, one delta each.
pub const WORDS: [&str; 3] = ["one ", "two ", "three"];
/// The whole text of an answer.
pub const ANSWER: &str = "one two three";
/// The usage the provider reports for a request: input, output tokens.
pub const USAGE: (u64, u64) = (7, 3);
/// Deltas of a slow answer, and the time between them.
pub const SLOW_WORDS: usize = 12;
pub const SLOW_INTERVAL: Duration = Duration::from_millis(150);
/// How long `fail-slow` takes to fail.
pub const FAIL_SLOW: Duration = Duration::from_millis(300);
/// How long a silent or stalled reply stays open (the implementation's timeouts end it first).
pub const HOLD: Duration = Duration::from_secs(10);

/// One behaviour of the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Streams [`WORDS`], a finish reason, a usage chunk and `[DONE]`.
    Answer,
    /// Streams [`SLOW_WORDS`] words [`SLOW_INTERVAL`] apart, then ends as `Answer` does.
    AnswerSlow,
    /// `Answer` without the usage chunk: the provider reports no usage.
    AnswerQuiet,
    /// Answers with this HTTP status before any byte of a reply (`Retry-After: 0` on 429).
    Status(u16),
    /// Answers 500 after [`FAIL_SLOW`].
    FailSlow,
    /// Sends nothing: no status, no byte, for [`HOLD`].
    Silent,
    /// Streams two words, then breaks the connection.
    CutText,
    /// Streams the start of a tool call and one argument delta, then breaks the connection.
    CutTool,
    /// Streams reasoning only, then breaks the connection.
    CutReasoning,
    /// Streams a usage chunk only, then breaks the connection.
    CutUsage,
    /// Streams two words, then goes silent for [`HOLD`].
    StallText,
}

impl Behaviour {
    /// Every behaviour, as the provider models the kit's configuration declares.
    pub const ALL: [Self; 14] = [
        Self::Answer,
        Self::AnswerSlow,
        Self::AnswerQuiet,
        Self::Status(404),
        Self::Status(429),
        Self::Status(500),
        Self::Status(503),
        Self::FailSlow,
        Self::Silent,
        Self::CutText,
        Self::CutTool,
        Self::CutReasoning,
        Self::CutUsage,
        Self::StallText,
    ];

    /// The provider model name that selects it.
    pub fn name(self) -> String {
        match self {
            Self::Answer => "answer".into(),
            Self::AnswerSlow => "answer-slow".into(),
            Self::AnswerQuiet => "answer-quiet".into(),
            Self::Status(code) => format!("fail-{code}"),
            Self::FailSlow => "fail-slow".into(),
            Self::Silent => "silent".into(),
            Self::CutText => "cut-text".into(),
            Self::CutTool => "cut-tool".into(),
            Self::CutReasoning => "cut-reasoning".into(),
            Self::CutUsage => "cut-usage".into(),
            Self::StallText => "stall-text".into(),
        }
    }

    /// The behaviour a model name selects.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}
