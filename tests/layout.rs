//! The workspace's layout, checked from the source: no file imports a file that imports it
//! (directly or round a longer circle), arrows between crates run one way (from the binary
//! down to the configuration vocabulary), and the binary's modules stay small.
//!
//! Imports are read from the text: `use crate::…`/`use super::…` lines (braces expanded) and
//! `crate::a::b` paths in code, resolved to the file of the longest module prefix that exists.
//! Comment lines are skipped, and so is a file's trailing `#[cfg(test)]` module (its `use
//! super::*` is the file itself). `EPICENTER_LAYOUT_ROOT=<checkout>` runs the checks on
//! another checkout (the commit before this test existed fails them: it had three circles).

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Most lines a module of the binary (`src/`) may hold.
const SRC_MODULE_LINES: usize = 300;

fn root() -> PathBuf {
    std::env::var_os("EPICENTER_LAYOUT_ROOT").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The workspace's crates: (package name, folder), read from the root Cargo.toml.
fn crates(root: &Path) -> Vec<(String, PathBuf)> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members_line = manifest
        .lines()
        .find(|line| line.trim_start().starts_with("members"))
        .expect("workspace members");
    let mut folders: Vec<PathBuf> = members_line
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|member| root.join(member))
        .collect();
    folders.push(root.to_path_buf());
    folders
        .into_iter()
        .map(|folder| {
            let text = std::fs::read_to_string(folder.join("Cargo.toml")).unwrap();
            let name = text
                .lines()
                .find_map(|line| line.strip_prefix("name = \""))
                .and_then(|rest| rest.strip_suffix('"'))
                .expect("package name")
                .to_string();
            (name, folder)
        })
        .collect()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The module path of a source file under `src` (`exposition/syntax.rs` → [exposition,
/// syntax]; `lib.rs`, `main.rs` → []).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

#[test]
fn words_inside_strings_are_not_imports() {
    let code =
        "let a = \"stop it or use another store\"; let b = r#\"use x::y;\"#; let c = '\"'; let d = '\\''; use crate::real::path;";
    let named: BTreeSet<Vec<String>> = named_paths(code, &[]).into_iter().collect();
    assert_eq!(named, BTreeSet::from([vec!["real".to_string(), "path".to_string()]]));
}

/// `a::{b, c::{d, e}}` → [a::b, a::c::d, a::c::e].
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (at, character) in inner.char_indices() {
        match character {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .flat_map(expand)
        .map(|part| format!("{prefix}{part}"))
        .collect()
}

/// `code` with the contents of string and character literals blanked (`"… use x …"` is not a
/// `use` item): plain strings with their escapes, raw strings `r#"…"#`, and `'"'`.
fn without_strings(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut at = 0;
    while at < chars.len() {
        let character = chars[at];
        let word_before = at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_');
        if character == 'r' && !word_before {
            let mut hashes = 0;
            while chars.get(at + 1 + hashes) == Some(&'#') {
                hashes += 1;
            }
            if chars.get(at + 1 + hashes) == Some(&'"') {
                let mut end = at + 2 + hashes;
                while end < chars.len()
                    && !(chars[end] == '"' && (1..=hashes).all(|k| chars.get(end + k) == Some(&'#')))
                {
                    end += 1;
                }
                out.push_str("\"\"");
                at = end + 1 + hashes;
                continue;
            }
        }
        if character == '"' {
            let mut end = at + 1;
            while end < chars.len() && chars[end] != '"' {
                end += if chars[end] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            at = end + 1;
            continue;
        }
        if character == '\'' {
            if chars.get(at + 1) == Some(&'\\') {
                // `'\''`, `'\n'`, `'\u{1F600}'`: the closing quote comes after the escaped one.
                let end = (at + 3..chars.len()).find(|&k| chars[k] == '\'').unwrap_or(chars.len());
                out.push_str("' '");
                at = end + 1;
                continue;
            }
            if chars.get(at + 2) == Some(&'\'') {
                out.push_str("' '");
                at += 3;
                continue;
            }
        }
        out.push(character);
        at += 1;
    }
    out
}

/// The module paths a file names: from `use` items and `crate::` paths in code.
fn named_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code: Vec<&str> = text
        .lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect();
    let code = without_strings(&code.join("\n"));
    let mut paths = Vec::new();
    // `use` items, possibly over several lines.
    let mut rest = code.as_str();
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|character| character.is_alphanumeric() || character == '_') {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        let item = rest[..end].split_whitespace().collect::<Vec<_>>().join("");
        for path in expand(&item) {
            let path = path.split(" as ").next().unwrap_or("").trim().to_string();
            paths.push(path);
        }
    }
    // `crate::a::b` in code.
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at..];
        let end = rest
            .find(|character: char| !(character.is_alphanumeric() || character == '_' || character == ':'))
            .unwrap_or(rest.len());
        paths.push(rest[..end].to_string());
        rest = &rest[end.max(7)..];
    }
    paths
        .into_iter()
        .filter_map(|path| {
            let segments: Vec<String> = path
                .split("::")
                .filter(|segment| !segment.is_empty() && *segment != "self" && *segment != "*")
                .map(str::to_string)
                .collect();
            match segments.first().map(String::as_str) {
                Some("crate") => Some(segments[1..].to_vec()),
                Some("super") => {
                    let mut base = module.to_vec();
                    let mut segments = segments.as_slice();
                    while segments.first().map(String::as_str) == Some("super") {
                        base.pop();
                        segments = &segments[1..];
                    }
                    base.extend(segments.iter().cloned());
                    Some(base)
                }
                _ => None,
            }
        })
        .collect()
}

/// File-level import edges of one crate: file → files it names.
fn file_edges(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let files = rust_files(src);
    let by_module: BTreeMap<Vec<String>, PathBuf> =
        files.iter().map(|file| (module_of(src, file), file.clone())).collect();
    let mut edges = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let mut targets = BTreeSet::new();
        for path in named_paths(&text, &module) {
            // The longest prefix that is a file of this crate.
            let target = (1..=path.len())
                .rev()
                .find_map(|length| by_module.get(&path[..length]))
                .or_else(|| path.is_empty().then(|| by_module.get(&Vec::new())).flatten());
            if let Some(target) = target {
                if target != file {
                    targets.insert(target.clone());
                }
            }
        }
        edges.insert(file.clone(), targets);
    }
    edges
}

/// Every circle in `edges` (each as the files on it), found by depth-first search.
fn circles<T: Ord + Clone>(edges: &BTreeMap<T, BTreeSet<T>>) -> Vec<Vec<T>> {
    fn visit<T: Ord + Clone>(
        node: &T,
        edges: &BTreeMap<T, BTreeSet<T>>,
        stack: &mut Vec<T>,
        done: &mut BTreeSet<T>,
        found: &mut Vec<Vec<T>>,
    ) {
        if let Some(at) = stack.iter().position(|on| on == node) {
            found.push(stack[at..].to_vec());
            return;
        }
        if done.contains(node) {
            return;
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, stack, done, found);
        }
        stack.pop();
        done.insert(node.clone());
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        visit(node, edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn no_file_imports_a_file_that_imports_it() {
    let root = root();
    let mut problems = Vec::new();
    let mut files_seen = 0;
    for (name, folder) in crates(&root) {
        let edges = file_edges(&folder.join("src"));
        files_seen += edges.len();
        for circle in circles(&edges) {
            let names: Vec<String> = circle
                .iter()
                .map(|file| file.strip_prefix(&root).unwrap_or(file).display().to_string())
                .collect();
            problems.push(format!("{name}: {}", names.join(" -> ")));
        }
    }
    assert!(files_seen > 40, "only {files_seen} files read under {}", root.display());
    assert!(problems.is_empty(), "import circles:\n{}", problems.join("\n"));
}

/// Each crate's place, lowest first: a crate may depend only on crates below it.
const LAYERS: [(&str, u8); 10] = [
    ("epicenter-config", 0),
    ("epicenter-loadgen", 0),
    ("epicenter-store", 1),
    ("epicenter-fleet", 1),
    ("epicenter-collector", 2),
    ("epicenter-detector", 2),
    ("epicenter-oncall", 3),
    ("epicenter-eval", 3),
    ("epicenter-web", 4),
    ("epicenter", 5),
];

/// The workspace crates `section` of a manifest names (`dependencies`, `dev-dependencies`).
fn workspace_dependencies(manifest: &str, section: &str) -> Vec<String> {
    let mut inside = false;
    let mut names = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
            continue;
        }
        if inside && line.starts_with("epicenter-") {
            let name = line.split(['.', ' ', '=']).next().unwrap_or("");
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn arrows_between_crates_run_one_way() {
    let root = root();
    let layer = |name: &str| {
        LAYERS
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .map(|(_, layer)| *layer)
            .unwrap_or_else(|| panic!("{name}: give the new crate a place in LAYERS"))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, folder) in crates(&root) {
        let manifest = std::fs::read_to_string(folder.join("Cargo.toml")).unwrap();
        graph.entry(name.clone()).or_default();
        for dependency in workspace_dependencies(&manifest, "dependencies") {
            if layer(&dependency) >= layer(&name) {
                problems.push(format!("{name} depends on {dependency}, which is not below it"));
            }
            graph.entry(name.clone()).or_default().insert(dependency);
        }
        for dependency in workspace_dependencies(&manifest, "dev-dependencies") {
            graph.entry(name.clone()).or_default().insert(dependency);
        }
    }
    // The store is the collector's sink, never the other way round.
    assert!(
        !graph
            .get("epicenter-store")
            .is_some_and(|deps| deps.contains("epicenter-collector")),
        "epicenter-store imports the collector"
    );
    // A crate's tests may use a crate above it (the fleet's tests parse with the collector),
    // as long as no circle closes.
    for circle in circles(&graph) {
        problems.push(format!("dependency circle: {}", circle.join(" -> ")));
    }
    assert!(graph.len() >= 10, "read only {graph:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_binary_holds_small_modules() {
    let root = root();
    let mut large = Vec::new();
    for file in rust_files(&root.join("src")) {
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        if lines > SRC_MODULE_LINES {
            large.push(format!("{}: {lines} lines", file.display()));
        }
    }
    assert!(
        large.is_empty(),
        "src/ is the CLI only (at most {SRC_MODULE_LINES} lines a module):\n{}",
        large.join("\n")
    );
}

#[test]
fn expanding_use_trees_and_finding_circles() {
    assert_eq!(
        expand("crate::{rows::{self, Labels}, schema::Table}"),
        vec!["crate::rows::self", "crate::rows::Labels", "crate::schema::Table"]
    );
    let module = vec!["exposition".to_string(), "json".to_string()];
    assert_eq!(
        named_paths("use super::model::{Exposition, LabelRange};\n", &module),
        vec![
            vec!["exposition".to_string(), "model".to_string(), "Exposition".to_string()],
            vec!["exposition".to_string(), "model".to_string(), "LabelRange".to_string()],
        ]
    );
    let edges: BTreeMap<u8, BTreeSet<u8>> = [(1, [2].into()), (2, [3].into()), (3, [1].into()), (4, [1].into())].into();
    assert_eq!(circles(&edges), vec![vec![1, 2, 3]]);
    let tree: BTreeMap<u8, BTreeSet<u8>> = [(1, [2, 3].into()), (2, [3].into())].into();
    assert!(circles(&tree).is_empty());
}
