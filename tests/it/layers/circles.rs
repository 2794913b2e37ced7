//! No import circle inside a folder either: the layer order holds between the crate's
//! top-level modules, and within each folder the modules that are one module's parts
//! (`server/authority.rs`, `server/connection.rs`, ...) must not reach each other in a
//! circle. An edge is a path from a file to a sibling module of the folder: `super::x`,
//! `use super::{x, y}`, `crate::folder::x`, from the file or from a file below it. The folder's
//! own file (`server.rs`) owns its parts and is not one of them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::{Start, code, is_ident, module_path, reaches, rust_files, src};

/// Every path in a use-tree starting at `rest`, segment by segment: `a::b::{c, d::e}` gives
/// `[a, b, c]` and `[a, b, d, e]`.
fn paths(rest: &str) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut items = vec![String::new()];
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(String::new());
                    continue;
                }
                _ => {}
            }
            items.last_mut().unwrap().push(c);
        }
        return items.iter().flat_map(|item| paths(item)).collect();
    }
    let head: String = rest.chars().take_while(|c| is_ident(*c)).collect();
    if head.is_empty() || head == "self" {
        return vec![vec![]];
    }
    let after = &rest[head.len()..];
    match after.strip_prefix("::") {
        Some(tail) => paths(tail)
            .into_iter()
            .map(|mut path| {
                path.insert(0, head.clone());
                path
            })
            .collect(),
        None => vec![vec![head]],
    }
}

/// The absolute module paths (below the crate root, possibly ending in an item) that `code`,
/// a file at module path `own`, names through `crate::` and `super::`.
fn targets(code: &str, own: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (_, from, after) in reaches(code) {
        let base = match from {
            Start::Root => &own[..0],
            Start::Up { climbs, inline } => {
                // Inside an inline module, the first climbs only leave it.
                let climbs_out = climbs.saturating_sub(inline);
                if climbs_out > own.len() {
                    continue;
                }
                &own[..own.len() - climbs_out]
            }
        };
        found.extend(paths(after).into_iter().map(|tail| {
            let mut path = base.to_vec();
            path.extend(tail);
            path
        }));
    }
    found
}

/// Folder -> its parts (modules) -> the parts they reach.
type Edges = BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>;

/// The edges between sibling modules that `files` (module path, code) make.
fn edges(files: &[(Vec<String>, String)], modules: &BTreeSet<Vec<String>>) -> Edges {
    let mut edges = Edges::new();
    for (own, text) in files {
        for target in targets(text, own) {
            // The folder both are in, and the part of it each is in.
            let shared = own.iter().zip(&target).take_while(|(a, b)| a == b).count();
            let (Some(from), Some(to)) = (own.get(shared), target.get(shared)) else {
                continue;
            };
            let folder = own[..shared].to_vec();
            let mut part = folder.clone();
            part.push(to.clone());
            if modules.contains(&part) {
                edges
                    .entry(folder)
                    .or_default()
                    .entry(from.clone())
                    .or_default()
                    .insert(to.clone());
            }
        }
    }
    edges
}

/// A circle among `parts`, if there is one: the parts on it, in order.
fn circle(parts: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        part: &str,
        parts: &BTreeMap<String, BTreeSet<String>>,
        on_path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = on_path.iter().position(|p| p == part) {
            let mut found = on_path[start..].to_vec();
            found.push(part.to_owned());
            return Some(found);
        }
        if done.contains(part) {
            return None;
        }
        on_path.push(part.to_owned());
        for next in parts.get(part).into_iter().flatten() {
            if let Some(found) = visit(next, parts, on_path, done) {
                return Some(found);
            }
        }
        on_path.pop();
        done.insert(part.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    parts
        .keys()
        .find_map(|part| visit(part, parts, &mut Vec::new(), &mut done))
}

#[test]
fn no_folder_has_an_import_circle() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut modules = BTreeSet::new();
    let mut sources = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src()).unwrap().to_owned();
        let path = module_path(&relative);
        if path[0] == "lib" || path[0] == "main" {
            continue;
        }
        modules.insert(path.clone());
        sources.push((path, code(&fs::read_to_string(&file).unwrap())));
    }
    let circles: Vec<String> = edges(&sources, &modules)
        .iter()
        .filter_map(|(folder, parts)| {
            let found = circle(parts)?;
            Some(format!("src/{}/: {}", folder.join("/"), found.join(" -> ")))
        })
        .collect();
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_checker_finds_a_circle_through_any_form_of_path() {
    let path = |p: &str| p.split('/').map(str::to_owned).collect::<Vec<_>>();
    let modules: BTreeSet<Vec<String>> = ["s", "s/a", "s/b", "s/c", "t"]
        .iter()
        .map(|p| path(p))
        .collect();
    let files = |b_to_a: &str| {
        vec![
            (path("s/a"), "use super::{b::X, Shared};".to_owned()),
            (path("s/b"), format!("fn f() {{ {b_to_a} }}")),
            (path("s/c"), "use crate::s::a; use crate::t::Y;".to_owned()),
            (path("s"), "use self::a::X; mod a; mod b;".to_owned()),
        ]
    };
    for back in [
        "super::c::g();",
        "crate::s::{c::g, b};",
        "mod tests { use super::super::c::g; }",
    ] {
        let edges = edges(&files(back), &modules);
        let found = circle(&edges[&path("s")]);
        assert_eq!(
            found,
            Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]),
            "{back}: {edges:?}"
        );
    }
    // The folder's own file reaching its parts, and a part reaching the folder's items, are
    // no circle.
    let edges = edges(&files("super::Shared::new();"), &modules);
    assert_eq!(circle(&edges[&path("s")]), None, "{edges:?}");
    assert_eq!(
        paths("a::{b, c::{d, e}}"),
        [vec!["a", "b"], vec!["a", "c", "d"], vec!["a", "c", "e"]]
    );
    assert!(Path::new(&src()).is_dir());
}
