//! The layer order of the library, held against the code: every `crate::` path in `src/`
//! (outside the binary's own modules) must name a module in a lower layer than the file's
//! own, per the list under "# Layers" in `src/lib.rs`, which is written there once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The binary's root and module folders: they use the library by its name, never `crate::`.
const BINARY: [&str; 3] = ["main.rs", "cli", "bench"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Module -> layer number, from the numbered list under `# Layers` in lib.rs.
fn layers(lib: &str) -> BTreeMap<String, usize> {
    let mut layers = BTreeMap::new();
    let mut in_section = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim();
        if doc.starts_with('#') {
            in_section = doc == "# Layers";
            continue;
        }
        if !in_section {
            continue;
        }
        let Some((number, modules)) = doc.split_once(". ") else {
            continue;
        };
        let Ok(number) = number.parse::<usize>() else {
            continue;
        };
        for module in modules.split(',') {
            layers.insert(module.trim().trim_matches('`').to_owned(), number);
        }
    }
    layers
}

/// Names lib.rs re-exports at the root (`pub use module::{A, B}`), with their module.
fn root_names(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            names.insert(item.trim().to_owned(), module.to_owned());
        }
    }
    names
}

/// The code of a line: without its `//` comment, outside string literals.
fn code(line: &str) -> &str {
    let mut in_string = false;
    let mut escaped = false;
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// The identifiers that follow `crate::` on a line of code.
fn crate_paths(code: &str) -> Vec<&str> {
    code.match_indices("crate::")
        .filter(|(i, _)| {
            // `$crate::` in a macro is the crate too; a longer name ending in `crate` is not.
            let before = code[..*i].chars().next_back();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|(i, m)| {
            let rest = &code[i + m.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|ident| !ident.is_empty())
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn imports_never_point_up_or_across_a_layer() {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let layers = layers(&lib);
    assert!(
        layers.len() >= 5,
        "the layer list in lib.rs was not found: {layers:?}"
    );
    let roots = root_names(&lib);

    // Every module lib.rs declares has a layer, and every layer names a module.
    let declared: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_owned())
        .collect();
    for module in &declared {
        assert!(
            layers.contains_key(module),
            "module `{module}` has no layer in lib.rs"
        );
    }
    for module in layers.keys() {
        assert!(
            declared.contains(module),
            "layer list names `{module}`, which lib.rs does not declare"
        );
    }

    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut violations = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src()).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let first = first.to_str().unwrap();
        let module = first.trim_end_matches(".rs");
        if first == "lib.rs" || first == "main.rs" || BINARY.contains(&module) {
            continue;
        }
        let own = *layers
            .get(module)
            .unwrap_or_else(|| panic!("{} is in no module with a layer", relative.display()));
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for ident in crate_paths(code(line)) {
                let target = match layers.get(ident) {
                    Some(_) => ident,
                    None => match roots.get(ident) {
                        Some(module) => module.as_str(),
                        // A macro exported at the root, or `crate::` in a string.
                        None => continue,
                    },
                };
                if target == module {
                    continue;
                }
                let theirs = layers[target];
                if theirs >= own {
                    violations.push(format!(
                        "src/{}:{}: `{module}` (layer {own}) uses `crate::{ident}` (`{target}`, layer {theirs})",
                        relative.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the layer order of lib.rs:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_binary_modules_use_the_library_by_name_only() {
    for part in &BINARY[1..] {
        let mut files = Vec::new();
        rust_files(&src().join(part), &mut files);
        files.push(src().join(format!("{part}.rs")));
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                for ident in crate_paths(code(line)) {
                    assert!(
                        BINARY.iter().any(|b| b.trim_end_matches(".rs") == ident),
                        "{}:{}: the binary reaches `crate::{ident}`; use `model_runtime::` instead",
                        file.display(),
                        n + 1
                    );
                }
            }
        }
    }
}

#[test]
fn the_checker_finds_what_it_must() {
    assert_eq!(crate_paths("use crate::store::{A, B};"), ["store"]);
    assert_eq!(
        crate_paths("x: crate::execution::Outcome, $crate::store::f()"),
        ["execution", "store"]
    );
    assert_eq!(
        crate_paths("use model_runtime::pb; let notcrate::x;"),
        [] as [&str; 0]
    );
    assert_eq!(code("let a = \"//\"; // use crate::x"), "let a = \"//\"; ");
    let lib = "//! # Layers\n//! 1. `a`\n//! 2. `b`, `c`\n//! # Next\n//! 3. `d`\n";
    let layers = layers(lib);
    assert_eq!(
        layers.into_iter().collect::<Vec<_>>(),
        [
            ("a".to_owned(), 1),
            ("b".to_owned(), 2),
            ("c".to_owned(), 2)
        ]
    );
}
