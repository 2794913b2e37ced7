//! The README and `docs/` are a contract: what they show and state, the real binary does.
//!
//! - Every ```toml block in `README.md` and `docs/*.md` passes `model-runtime check-config`.
//!   A block that is deliberately part of a file (a provider's table, say) begins with a line
//!   `# fragment: ...` saying so; the test completes it with a policy over every model the
//!   fragment's providers list and an ability on that policy, and checks the whole. Every
//!   variable a block names (`api_key_env`, `key_env`, `env` in `store.keys`; a `bedrock`
//!   provider's AWS keys) is set to a
//!   64-hex-digit value, a valid key of either kind.
//! - What the docs say of provider timeouts is what the exchange does: each is cut to the
//!   execution's deadline, never to the policy's retry budget.
//! - Each bound the README's "Limits" section states is the binary's: at the bound
//!   `check-config` passes, past it it fails naming the key.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::process::run_env;

const LIMIT: Duration = Duration::from_secs(20);
/// Marks a block that is part of a file.
const FRAGMENT: &str = "# fragment:";

/// `README.md` and every `docs/*.md`, with their text.
fn documents() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            (path, text)
        })
        .collect()
}

/// The ```toml blocks of `text`, each with the line it starts on.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (number, line) in text.lines().enumerate() {
        match &mut open {
            None if line.trim_start().starts_with("```toml") => {
                open = Some((number + 1, String::new()))
            }
            Some(_) if line.trim_start().starts_with("```") => blocks.push(open.take().unwrap()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    assert!(open.is_none(), "a ```toml block is never closed");
    blocks
}

/// A fragment completed into a file: a policy over each model its providers list, and an
/// ability on it.
fn completed(fragment: &str) -> String {
    let table: toml::Table = toml::from_str(fragment)
        .unwrap_or_else(|e| panic!("the fragment is not TOML: {e}\n{fragment}"));
    let mut targets = Vec::new();
    if let Some(providers) = table.get("providers").and_then(toml::Value::as_table) {
        for (name, provider) in providers {
            let models = provider.get("models").and_then(toml::Value::as_array);
            for model in models.into_iter().flatten() {
                targets.push(format!("\"{name}/{}\"", model["name"].as_str().unwrap()));
            }
        }
    }
    assert!(
        !targets.is_empty(),
        "a fragment lists a provider's models: {fragment}"
    );
    format!(
        "{fragment}\n[policies.docs_fragment]\ntargets = [{}]\nmax_attempts = {}\n\n\
         [abilities.docs_fragment]\npolicy = \"docs_fragment\"\n",
        targets.join(", "),
        targets.len().min(100)
    )
}

/// The variables `block` names, each with a key's value (a Redis URL for a limiter's).
fn variables(block: &str) -> Vec<(String, String)> {
    let key_value = "0".repeat(64);
    // A `bedrock` provider signs with the standard AWS variables, which no key names.
    let aws = block
        .contains(r#"adapter = "bedrock""#)
        .then(|| {
            ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
                .map(|v| (v.to_owned(), key_value.clone()))
        })
        .into_iter()
        .flatten();
    block
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split([',', '{', '}']))
        .filter_map(|part| {
            let (key, rest) = part.split_once('=')?;
            let key = key.trim();
            let value = match key {
                // The PostgreSQL store's or a limiter's Redis: a URL, never connected to by
                // `check-config`.
                "url_env" if rest.contains("POSTGRES") => {
                    "postgres://postgres@127.0.0.1:5432/postgres".to_owned()
                }
                "url_env" => "redis://127.0.0.1:6379".to_owned(),
                "env" => key_value.clone(),
                _ if key.ends_with("_env") => key_value.clone(),
                _ => return None,
            };
            Some((rest.split('"').nth(1)?.to_owned(), value))
        })
        .chain(aws)
        .collect()
}

/// `check-config` on `text`: its exit code and what it wrote to stderr.
fn check(dir: &Path, text: &str) -> (Option<i32>, String) {
    let file = dir.join("snippet.toml");
    std::fs::write(&file, text).unwrap();
    let env = variables(text);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = run_env(&["check-config", file.to_str().unwrap()], &env, LIMIT);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_toml_block_in_the_docs_passes_check_config() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (path, text) in documents() {
        for (line, block) in toml_blocks(&text) {
            let whole = if block.trim_start().starts_with(FRAGMENT) {
                completed(&block)
            } else {
                block.clone()
            };
            let (code, stderr) = check(dir.path(), &whole);
            assert_eq!(
                code,
                Some(0),
                "{}:{line}: check-config refuses it: {stderr}\n{whole}",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} blocks found");
}

/// Each sentence of `text` that mentions a timeout (line breaks and comment marks taken out).
fn sentences_on_timeouts(text: &str) -> Vec<String> {
    let flat: String = text
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ");
    flat.split(". ")
        .filter(|s| s.contains("timeout"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn provider_timeouts_are_said_to_be_cut_to_the_deadline_only() {
    for (path, text) in documents() {
        for sentence in sentences_on_timeouts(&text) {
            // What a timeout is cut to: the budget may follow only as what it is not.
            if let Some((_, cut_to)) = sentence.split_once("cut to") {
                let before_budget = cut_to.split("budget").next().unwrap_or_default();
                let budget_named = cut_to.len() > before_budget.len();
                let denied = before_budget.contains("never") || before_budget.contains(" not ");
                assert!(
                    !budget_named || denied,
                    "{}: the retry budget never cuts a provider timeout (the deadline does): \
                     \"{sentence}\"",
                    path.display()
                );
            }
        }
    }
}

/// The config whose `table` gets `line`: one scripted target, one ability.
fn with(table: &str, line: &str) -> String {
    let mut sections = [
        ("server", String::new()),
        ("store", String::new()),
        (
            "policies.default",
            "targets = [\"scripted/echo\"]\n".to_owned(),
        ),
    ];
    for (name, body) in &mut sections {
        if *name == table {
            body.push_str(line);
            body.push('\n');
        }
    }
    let mut text = String::new();
    for (name, body) in sections {
        text.push_str(&format!("[{name}]\n{body}\n"));
    }
    text.push_str(
        "[providers.scripted]\nadapter = \"scripted\"\n[[providers.scripted.models]]\n\
         name = \"echo\"\n\n[abilities.chat]\npolicy = \"default\"\n",
    );
    text
}

#[test]
fn each_bound_the_readme_states_is_the_binarys() {
    let readme = &documents()[0].1;
    let limits = readme
        .split("## Limits")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap();
    let flat = limits.split_whitespace().collect::<Vec<_>>().join(" ");
    let dir = tempfile::tempdir().unwrap();
    // (what the README says, the table, the key, a value at the bound, one past it)
    for (says, table, key, at, past) in [
        (
            "a deadline or retry budget of at most a day",
            "server",
            "max_deadline",
            "\"24h\"",
            "\"25h\"",
        ),
        (
            "a deadline or retry budget of at most a day",
            "policies.default",
            "retry_budget",
            "\"24h\"",
            "\"25h\"",
        ),
        (
            "a timeout, drain or backoff of at most an hour",
            "server",
            "drain_timeout",
            "\"1h\"",
            "\"61m\"",
        ),
        (
            "a timeout, drain or backoff of at most an hour",
            "server",
            "stream_idle_timeout",
            "\"1h\"",
            "\"61m\"",
        ),
        (
            "a timeout, drain or backoff of at most an hour",
            "policies.default",
            "backoff",
            "\"1h\"",
            "\"61m\"",
        ),
        (
            "`server.handshake_timeout`, at most a minute",
            "server",
            "handshake_timeout",
            "\"1m\"",
            "\"61s\"",
        ),
        (
            "a retention of at most seven days",
            "store",
            "retention",
            "\"7days\"",
            "\"8days\"",
        ),
        (
            "at most 100 attempts",
            "policies.default",
            "max_attempts",
            "100",
            "101",
        ),
    ] {
        assert!(
            flat.contains(says),
            "the README's Limits no longer say \"{says}\""
        );
        let (code, stderr) = check(dir.path(), &with(table, &format!("{key} = {at}")));
        assert_eq!(code, Some(0), "{table}.{key} = {at}: {stderr}");
        let (code, stderr) = check(dir.path(), &with(table, &format!("{key} = {past}")));
        assert_eq!(code, Some(2), "{table}.{key} = {past} passed");
        assert!(stderr.contains(&format!("{table}.{key}")), "{stderr}");
    }
}
