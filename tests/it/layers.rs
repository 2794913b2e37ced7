//! The layer order of the library, held against the code: every path to the crate root in
//! `src/` (`crate::x`, `crate::{x, y}`, `super::` chains that climb to the root, root
//! re-exports such as `crate::Config`, exported macros) must name a module in a lower layer
//! than the file's own, per the list under "# Layers" in `src/lib.rs`, written there once.
//! The binary's own modules (`main.rs`, `cli`, `bench`) use the library by its name instead.
//! Within a folder, no modules reach each other in a circle (`circles.rs`). The maps of the
//! code (lib.rs's module map and rule table, the README's Layout) name what is there (`map.rs`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

mod circles;
mod map;

/// The binary's root and module folders.
const BINARY: [&str; 3] = ["main", "cli", "bench"];

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
        let Some((number, modules)) = doc.split_once(". ").filter(|_| in_section) else {
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

/// `text` with comments removed and the contents of string and character literals blanked,
/// so neither a comment nor a string can look like a path. Lines are kept.
fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('#') || next == Some('"')) && !ident_before(&chars, i) {
            // A raw string: r"..." or r#"..."#, as many hashes to close as opened it.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|h| chars.get(j + h) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some('\n') => out.push('\n'),
                    Some(_) => {}
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                } else if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (chars.get(i + 2) == Some(&'\'') || next == Some('\\')) {
            // A character literal ('x' or '\n'); a lifetime has no closing quote.
            // '\'' and '\u{..}' included: the quote that closes comes after the escaped char.
            i += if next == Some('\\') {
                let rest = chars.get(i + 3..).unwrap_or_default();
                rest.iter()
                    .position(|&q| q == '\'')
                    .map_or(chars.len(), |p| p + 4)
            } else {
                3
            };
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && is_ident(chars[i - 1])
}

/// The first segment of every path in a use-tree starting at `rest`: `x::..` gives `x`,
/// `{x::a, y::{b, c}}` gives `x` and `y`.
fn heads(rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut items = Vec::new();
        let mut item = String::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(std::mem::take(&mut item));
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        items.push(item);
        items
            .iter()
            .flat_map(|item| heads(item))
            .filter(|head| head != "self")
            .collect()
    } else {
        let head: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if head.is_empty() { vec![] } else { vec![head] }
    }
}

/// Where a path in code starts from: the crate root, or `super::` climbed `climbs` times from
/// within `inline` inline modules (`mod tests { .. }`) of the file.
#[derive(Debug, Clone, Copy)]
enum Start {
    Root,
    Up { climbs: usize, inline: usize },
}

/// Every path in `code` that begins with `crate::` or `super::`: its line, where it starts
/// from, and the text after the prefix. Comments and strings are the caller's to strip.
fn reaches(code: &str) -> Vec<(usize, Start, &str)> {
    let bytes = code.as_bytes();
    // Any byte of a multi-byte character counts as part of an identifier.
    let ident_at =
        |i: usize| bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80;
    let mut found = Vec::new();
    // Inline modules open here (`mod tests { .. }`): the brace depth each opened at.
    let mut inline: Vec<usize> = Vec::new();
    let mut braces = 0;
    let mut line = 1;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line += 1,
            b'{' => braces += 1,
            b'}' => {
                braces -= 1;
                if inline.last() == Some(&braces) {
                    inline.pop();
                }
            }
            _ => {}
        }
        if i > 0 && ident_at(i - 1) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        if let Some(after) = rest.strip_prefix("crate::") {
            found.push((line, Start::Root, after));
            i += "crate::".len();
            continue;
        }
        if rest.starts_with("super::") {
            let mut climbs = 0;
            let mut after = rest;
            while let Some(next) = after.strip_prefix("super::") {
                climbs += 1;
                after = next;
            }
            let up = Start::Up {
                climbs,
                inline: inline.len(),
            };
            found.push((line, up, after));
            i += "super::".len() * climbs;
            continue;
        }
        if let Some(after) = rest.strip_prefix("mod ") {
            let name_len = after
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            if after[name_len..].trim_start().starts_with('{') {
                inline.push(braces);
            }
        }
        i += 1;
    }
    found
}

/// Every path to the crate root in `code` (of a file whose module path is `depth` long):
/// the line and the root item it names.
fn root_paths(code: &str, depth: usize) -> Vec<(usize, String)> {
    reaches(code)
        .into_iter()
        .filter(|(_, from, _)| match *from {
            Start::Root => true,
            Start::Up { climbs, inline } => climbs >= depth + inline,
        })
        .flat_map(|(line, _, after)| heads(after).into_iter().map(move |head| (line, head)))
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

/// A file's module path below the crate root: `store/memory/log.rs` -> 3 segments.
fn module_path(relative: &Path) -> Vec<String> {
    relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn imports_never_point_up_or_across_a_layer() {
    let lib_text = fs::read_to_string(src().join("lib.rs")).unwrap();
    let layers = layers(&lib_text);
    assert!(
        layers.len() >= 5,
        "the layer list in lib.rs was not found: {layers:?}"
    );
    let lib = code(&lib_text);

    // Every module lib.rs declares has a layer, and every layer names a module.
    let declared: Vec<String> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
                .or_else(|| l.strip_prefix("mod "))
        })
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
            "the layer list names `{module}`, which lib.rs does not declare"
        );
    }

    // What else the root names: its re-exports, and the macros exported from each module.
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(rest) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let (module, items) = rest.split_once("::").unwrap();
        for item in heads(items) {
            owner.insert(item, module.trim().to_owned());
        }
    }
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut sources = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src()).unwrap().to_owned();
        let path = module_path(&relative);
        if path[0] == "lib" || BINARY.contains(&path[0].as_str()) {
            continue;
        }
        let text = code(&fs::read_to_string(&file).unwrap());
        let mut exported = text.split("#[macro_export]").skip(1);
        for after in exported.by_ref() {
            let name = after.trim_start().strip_prefix("macro_rules!").unwrap();
            let name: String = name
                .trim_start()
                .chars()
                .take_while(|c| is_ident(*c))
                .collect();
            owner.insert(name, path[0].clone());
        }
        sources.push((relative, path, text));
    }

    let mut violations = Vec::new();
    for (relative, path, text) in &sources {
        let module = &path[0];
        let Some(&own) = layers.get(module) else {
            violations.push(format!(
                "src/{}: module `{module}` has no layer",
                relative.display()
            ));
            continue;
        };
        for (line, head) in root_paths(text, path.len()) {
            let Some(target) = layers
                .contains_key(&head)
                .then_some(&head)
                .or_else(|| owner.get(&head))
            else {
                violations.push(format!(
                    "src/{}:{line}: `crate::{head}` is neither a module, a root re-export nor an exported macro",
                    relative.display()
                ));
                continue;
            };
            let theirs = layers[target];
            if target != module && theirs >= own {
                violations.push(format!(
                    "src/{}:{line}: `{module}` (layer {own}) reaches `{head}` of `{target}` (layer {theirs})",
                    relative.display()
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "paths against the layer order of lib.rs:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_binary_modules_use_the_library_by_name_only() {
    let mut files = Vec::new();
    for part in &BINARY[1..] {
        rust_files(&src().join(part), &mut files);
        files.push(src().join(format!("{part}.rs")));
    }
    files.push(src().join("main.rs"));
    for file in files {
        let relative = file.strip_prefix(src()).unwrap();
        let depth = module_path(relative).len() - usize::from(relative == Path::new("main.rs"));
        let text = code(&fs::read_to_string(&file).unwrap());
        for (line, head) in root_paths(&text, depth) {
            assert!(
                BINARY.contains(&head.as_str()),
                "src/{}:{line}: the binary reaches `crate::{head}`; use `model_runtime::` instead",
                relative.display()
            );
        }
    }
}

#[test]
fn the_checker_finds_every_form_of_path() {
    let heads_of = |source: &str, depth| {
        root_paths(&code(source), depth)
            .into_iter()
            .map(|(_, head)| head)
            .collect::<Vec<_>>()
    };
    assert_eq!(heads_of("use crate::store::{A, B};", 1), ["store"]);
    assert_eq!(
        heads_of("use crate::{\n    runtime::X,\n    store::{a, b},\n};", 1),
        ["runtime", "store"]
    );
    assert_eq!(
        heads_of("x: crate::execution::Outcome, $crate::store::f()", 1),
        ["execution", "store"]
    );
    assert_eq!(
        heads_of("use model_runtime::pb; let notcrate::x;", 1),
        [] as [&str; 0]
    );
    // `super::` climbs one module; from `store/memory.rs` two climbs reach the root.
    assert_eq!(heads_of("use super::Changes;", 2), [] as [&str; 0]);
    assert_eq!(heads_of("use super::super::runtime::X;", 2), ["runtime"]);
    assert_eq!(heads_of("use super::runtime::X;", 1), ["runtime"]);
    // Inside an inline module one more climb is needed.
    assert_eq!(
        heads_of("mod tests {\n use super::super::x;\n}", 2),
        [] as [&str; 0]
    );
    assert_eq!(heads_of("mod tests {\n use super::super::x;\n}", 1), ["x"]);
    // Comments and strings are not code.
    assert_eq!(
        heads_of(
            "let a = \"crate::x\"; // crate::y\n/* crate::z */ r#\"crate::w\"#;",
            1
        ),
        [] as [&str; 0]
    );
    assert_eq!(heads_of("let c = '\"'; crate::q::f();", 1), ["q"]);
    assert_eq!(
        heads_of("let c = '\\''; let d = '\\u{22}'; crate::q::f();", 1),
        ["q"]
    );
    assert_eq!(
        heads_of("fn f<'a>(x: &'a str) -> &'static str { crate::q::f() }", 1),
        ["q"]
    );
    let lib = "//! # Layers\n//! 1. `a`\n//! 2. `b`, `c`\n//! # Next\n//! 3. `d`\n";
    assert_eq!(
        layers(lib).into_iter().collect::<Vec<_>>(),
        [
            ("a".to_owned(), 1),
            ("b".to_owned(), 2),
            ("c".to_owned(), 2)
        ]
    );
}

/// The crates beside the runtime (`crates/*`) stand alone: none depends on it, so none can
/// import its domain.
#[test]
fn the_crates_beside_the_runtime_import_nothing_of_it() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut seen = 0;
    for entry in fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let depends = manifest
            .lines()
            .map(str::trim_start)
            .any(|l| l.starts_with("model-runtime ") || l.starts_with("model-runtime="));
        assert!(!depends, "{} depends on the runtime", dir.display());
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            assert!(
                !code(&text).contains("model_runtime::"),
                "{} names the runtime",
                file.display()
            );
        }
        seen += 1;
    }
    assert!(seen >= 2, "crates/ holds {seen} crates");
}
