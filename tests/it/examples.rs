//! `examples/`: every config there passes `check-config --names-only` (its secrets named,
//! none set), and the index lists each one.

use crate::common;

use std::path::Path;
use std::time::Duration;

#[test]
fn every_example_config_passes_and_is_listed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let out = common::process::run(
            &["check-config", "--names-only", path.to_str().unwrap()],
            Duration::from_secs(20),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Each offers a `chat`, as the README's first `exec` asks for.
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("[abilities.chat]"),
            "{name}"
        );
        assert!(
            index.contains(&format!("| `{name}` |")),
            "{name} is not in examples/README.md"
        );
        checked.push(name);
    }
    checked.sort();
    for provider in [
        "openai",
        "azure-openai",
        "anthropic",
        "gemini",
        "vertex",
        "bedrock",
        "openai-compatible",
        "replicas",
        "sidecar",
    ] {
        assert!(checked.contains(&format!("{provider}.toml")), "{checked:?}");
    }
}
