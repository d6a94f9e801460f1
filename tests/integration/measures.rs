//! The measures in ARCHITECTURE.md's header (its ```measures block) are the code's: the largest
//! source file, the functions over 80 lines outside tests, and the import circles between the
//! files of one module (between modules, tests/integration/layers.rs holds the order). Counted on the text
//! as rustfmt lays it out, test code left out: `#[cfg(test)]` items and the files only they
//! declare. When the code changes a figure, this test fails with the block to write instead.

use crate::source::{child_file, root};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every source root of the workspace's packages.
const ROOTS: [&str; 5] = [
    "src/lib.rs",
    "src/main.rs",
    "crates/core/src/lib.rs",
    "crates/report/src/lib.rs",
    "crates/synth/src/lib.rs",
];

/// The longest a function may be without counting as long.
const LONG: usize = 80;

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The index of the line that closes the item starting at `start` (its `}` at its indent), or
/// `start` itself for an item of one line.
fn item_end(lines: &[&str], start: usize) -> usize {
    let at = indent(lines[start]);
    let first = lines[start].trim_end();
    if first.ends_with(';') || (first.contains('{') && first.ends_with('}')) {
        return start;
    }
    (start + 1..lines.len())
        .find(|&j| indent(lines[j]) == at && lines[j].trim_start().starts_with('}'))
        .unwrap_or(lines.len() - 1)
}

/// A file's lines with its `#[cfg(test)]` items left out.
fn non_test(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let mut item = i + 1;
            while item < lines.len() && lines[item].trim_start().starts_with("#[") {
                item += 1;
            }
            i = item_end(&lines, item.min(lines.len() - 1)) + 1;
            continue;
        }
        out.push(lines[i]);
        i += 1;
    }
    out
}

/// `mod x;` outside test code: the names of the child modules a file declares.
fn children(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub(crate) ").or_else(|| l.strip_prefix("pub ")).unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_string)
        })
        .collect()
}

/// Every non-test source file reachable from the roots, with its non-test text.
fn sources() -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<PathBuf> = ROOTS.iter().map(|r| root().join(r)).collect();
    while let Some(file) = todo.pop() {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let kept = non_test(&text);
        todo.extend(children(&kept).iter().map(|c| child_file(&file, c)));
        out.insert(file, kept.join("\n"));
    }
    out
}

/// Whether `line` starts a function (not a closure, not a call).
fn starts_fn(line: &str) -> bool {
    let mut rest = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    rest.starts_with("fn ")
}

/// `path:name (lines)` of every function over [`LONG`] lines in `text`.
fn long_functions(path: &str, text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    (0..lines.len())
        .filter(|&i| starts_fn(lines[i]))
        .filter_map(|i| {
            let n = item_end(&lines, i) - i + 1;
            let name = lines[i].split("fn ").nth(1)?.split(['(', '<']).next()?.to_string();
            (n > LONG).then(|| (n, format!("{path}:{name}")))
        })
        .collect()
}

/// The sibling files of one folder that each file names through `super::`, as edges.
fn sibling_edges(files: &BTreeMap<PathBuf, String>) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (file, text) in files {
        if file.file_name().is_some_and(|n| n == "mod.rs") {
            continue;
        }
        let dir = file.parent().unwrap();
        for part in text.split("super::").skip(1) {
            let name: String =
                part.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let sibling = dir.join(format!("{name}.rs"));
            if sibling != *file && files.contains_key(&sibling) {
                edges.entry(file.clone()).or_default().insert(sibling);
            }
        }
        // `use super::{a, b::c}`: each name of the group.
        for group in text.split("super::{").skip(1) {
            let inside = group.split('}').next().unwrap_or_default();
            for name in inside.split(',').map(|n| n.trim().split("::").next().unwrap_or_default()) {
                let sibling = dir.join(format!("{name}.rs"));
                if sibling != *file && files.contains_key(&sibling) {
                    edges.entry(file.clone()).or_default().insert(sibling);
                }
            }
        }
    }
    edges
}

/// The circles of `edges`: each set of two or more files that reach one another.
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<BTreeSet<PathBuf>> {
    let reach = |from: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(f) = todo.pop() {
            for next in edges.get(&f).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
        edges.keys().map(|f| (f, reach(f))).collect();
    let mut out: Vec<BTreeSet<PathBuf>> = Vec::new();
    for (f, r) in &reached {
        let circle: BTreeSet<PathBuf> = r
            .iter()
            .filter(|g| reached.get(g).is_some_and(|back| back.contains(*f)))
            .cloned()
            .collect();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

/// The measures block as the code has it.
fn measured() -> (String, Vec<(usize, String)>) {
    let files = sources();
    let rel = |p: &Path| p.strip_prefix(root()).unwrap().display().to_string();
    let (largest, lines) = files
        .keys()
        .map(|p| (p, std::fs::read_to_string(p).unwrap().lines().count()))
        .max_by_key(|(_, n)| *n)
        .unwrap();
    let mut long: Vec<(usize, String)> =
        files.iter().flat_map(|(p, text)| long_functions(&rel(p), text)).collect();
    long.sort_by(|a, b| b.cmp(a));
    let circles = circles(&sibling_edges(&files));
    let circles = if circles.is_empty() {
        "none".to_string()
    } else {
        let each =
            circles.iter().map(|c| c.iter().map(|p| rel(p)).collect::<Vec<_>>().join(" <-> "));
        each.collect::<Vec<_>>().join("; ")
    };
    let block = format!(
        "source files: {}\nlargest file: {} ({lines} lines)\nfunctions over {LONG} lines outside tests: {}\nimport circles between a module's files: {circles}\n",
        files.len(),
        rel(largest),
        long.len()
    );
    (block, long)
}

#[test]
fn the_architecture_header_states_the_codes_measures() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let stated = text
        .split("```measures\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a ```measures block")
        .split("```")
        .next()
        .unwrap();
    let (block, long) = measured();
    let list: Vec<String> = long.iter().map(|(n, f)| format!("{n:>5} {f}")).collect();
    assert_eq!(
        stated,
        block,
        "ARCHITECTURE.md's measures block is not the code's; write:\n{block}\nthe long functions:\n{}",
        list.join("\n")
    );
}

/// The counter itself, on a text whose answers are known by hand.
#[test]
fn the_counter_skips_test_code_and_measures_functions_to_their_closing_brace() {
    let body = "    let x = 1;\n".repeat(LONG);
    let text = format!(
        "pub fn long() {{\n{body}}}\nfn short() -> u8 {{ 1 }}\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests {{\n    fn in_test() {{\n{body}    }}\n}}\nimpl X {{\n    pub(crate) async fn method(\n        a: u8,\n    ) {{\n{body}    }}\n}}\n"
    );
    let kept = non_test(&text).join("\n");
    assert!(!kept.contains("in_test"), "{kept}");
    let long = long_functions("x.rs", &kept);
    assert_eq!(long, [(LONG + 2, "x.rs:long".to_string()), (LONG + 4, "x.rs:method".to_string())]);
    assert_eq!(children(&["mod a;", "pub(crate) mod b;", "#[cfg(test)]"]), ["a", "b"]);
    // Two files naming each other through `super::` are one circle; a third naming one is not in it.
    let a = PathBuf::from("/m/a.rs");
    let b = PathBuf::from("/m/b.rs");
    let c = PathBuf::from("/m/c.rs");
    let files: BTreeMap<PathBuf, String> = [
        (a.clone(), "use super::b::X;".to_string()),
        (b.clone(), "use super::{a, c::Y};".to_string()),
        (c.clone(), "fn f() { super::a::g() }".to_string()),
    ]
    .into();
    let found = circles(&sibling_edges(&files));
    assert_eq!(found, [BTreeSet::from([a, b, c])]);
}
