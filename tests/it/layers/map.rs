//! The maps of the code, held to the tree: the module map under "# Layout" in `src/lib.rs`
//! names every module of the library and, in that module's entry, every one of its parts; the
//! rule table there names only files that exist; the README's Layout names every top-level
//! module. A module added, moved or removed without its map fails here; so does a file in
//! `src/` over 500 lines.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use super::src;

/// The lines of `text` from the heading `start` to the next heading of its kind.
fn section<'t>(text: &'t str, start: &str, next: &str) -> Vec<&'t str> {
    text.lines()
        .skip_while(|line| *line != start)
        .skip(1)
        .take_while(|line| !line.starts_with(next))
        .collect()
}

/// The names between backticks in `text`.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Whether `name` is a Rust module name.
fn is_module_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Whether `name` is a file's name with its extension (`default.toml`).
fn is_file_name(name: &str) -> bool {
    name.split_once('.')
        .is_some_and(|(stem, extension)| is_module_name(stem) && is_module_name(extension))
}

/// The library's top-level modules: the `mod` lines of `lib.rs`.
fn top_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .map(str::trim_start)
        .filter_map(|line| {
            let rest = line.strip_prefix("pub ").unwrap_or(line);
            rest.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_owned)
        })
        .collect()
}

/// The parts of module `folder` (`src/NAME/`): each `.rs` file and folder, tests aside, and
/// any other file by its whole name (`default.toml`).
fn parts(folder: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut modules = BTreeSet::new();
    let mut files = BTreeSet::new();
    for entry in fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if let Some(stem) = name.strip_suffix(".rs") {
            modules.insert(stem.to_owned());
        } else if path.is_dir() {
            modules.insert(name);
        } else {
            files.insert(name);
        }
    }
    modules.remove("tests");
    (modules, files)
}

/// The features `Cargo.toml` declares.
fn features() -> BTreeSet<String> {
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    section(&manifest, "[features]", "[")
        .iter()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name.trim().to_owned()))
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect()
}

/// Each entry of the module map: the module it is for (its first quoted name) and its text.
fn entries(lib: &str) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in section(lib, "//! # Layout", "//! # ") {
        let doc = line.strip_prefix("//!").unwrap_or(line).trim_start();
        if let Some(entry) = doc.strip_prefix("- ") {
            let head = quoted(entry)
                .first()
                .copied()
                .unwrap_or_default()
                .to_owned();
            entries.push((head, entry.to_owned()));
        } else if let Some((_, text)) = entries.last_mut() {
            text.push(' ');
            text.push_str(doc);
        }
    }
    entries
}

#[test]
fn the_module_map_names_every_module_and_its_parts() {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let tops = top_modules(&lib);
    assert!(tops.len() >= 10, "lib.rs declares {tops:?}");
    let entries = entries(&lib);
    let named: BTreeSet<&str> = entries.iter().flat_map(|(_, text)| quoted(text)).collect();
    for top in &tops {
        assert!(
            named.contains(top.as_str()),
            "the module map in lib.rs does not name `{top}`"
        );
    }
    let features = features();
    let mut held = 0;
    for (module, text) in &entries {
        let folder = src().join(module);
        if !folder.is_dir() {
            continue;
        }
        let (modules, files) = parts(&folder);
        let said: BTreeSet<&str> = quoted(text).into_iter().collect();
        for part in &modules {
            assert!(
                said.contains(part.as_str()),
                "the module map's entry for `{module}` does not name its part `{part}`"
            );
            held += 1;
        }
        // And it names nothing that is not there: each module-like name is a part, a
        // top-level module or a feature.
        for name in said.iter().filter(|name| is_module_name(name)) {
            assert!(
                modules.contains(*name) || tops.contains(*name) || features.contains(*name),
                "the module map's entry for `{module}` names `{name}`, which is not one of its parts"
            );
        }
        for file in said.iter().filter(|name| is_file_name(name)) {
            assert!(
                files.contains(*file),
                "the module map's entry for `{module}` names `{file}`, which is not in src/{module}/"
            );
        }
    }
    assert!(held > 80, "only {held} parts were held to the map");
}

/// The README's Layout block names every top-level module of the library and the binary.
#[test]
fn the_readme_layout_names_every_top_level_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let layout = section(&readme, "## Layout", "## ").join("\n");
    let mut seen = 0;
    for entry in fs::read_dir(src()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap();
        let module = name.strip_suffix(".rs").unwrap_or(name);
        let forms = [
            format!("src/{module}"),
            format!(" {module}/"),
            format!(" {module}.rs"),
        ];
        assert!(
            forms.iter().any(|form| layout.contains(form.as_str())),
            "the README's Layout does not name src/{name}"
        );
        seen += 1;
    }
    assert!(seen >= 15, "src/ holds {seen} entries");
}

/// Every file the "rule -> file" table of `src/lib.rs` names exists: a rule's home cannot
/// move without the table.
#[test]
fn every_file_the_rule_table_names_exists() {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut named = 0;
    for line in lib.lines().filter_map(|l| l.strip_prefix("//! |")) {
        let Some((_rule, files)) = line.split_once(" | ") else {
            continue;
        };
        for file in quoted(files) {
            let Some(file) = file
                .split_whitespace()
                .next()
                .filter(|f| f.ends_with(".rs"))
            else {
                continue;
            };
            let path = if file.starts_with("crates/") {
                root.join(file)
            } else {
                src().join(file)
            };
            assert!(
                path.is_file(),
                "the rule table names {file}, which does not exist"
            );
            named += 1;
        }
    }
    assert!(named > 20, "only {named} files found in the rule table");
}

/// No file in `src/` is over 500 lines: one past that holds more than one idea, and is split
/// by them before it grows further.
#[test]
fn no_file_in_src_is_over_500_lines() {
    let mut files = Vec::new();
    super::rust_files(&src(), &mut files);
    assert!(files.len() > 100, "src/ holds {} files", files.len());
    for file in files {
        let lines = fs::read_to_string(&file).unwrap().lines().count();
        assert!(
            lines <= 500,
            "{} is {lines} lines: split it by what it holds",
            file.display()
        );
    }
}
