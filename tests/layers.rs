//! The pipeline's layering (ARCHITECTURE.md): each module of the crate may use
//! only the modules above it in `LAYERS`, so every arrow points down the
//! pipeline and there is no cycle. A new module gets its place here.

use std::collections::BTreeSet;
use std::path::Path;

/// Top to bottom: a module may use the ones before it.
const LAYERS: [&str; 18] = [
    "error",
    "digest",
    "sequential",
    "suite",
    "experiment",
    "plan",
    "record",
    "model",
    "sandbox",
    "container",
    "grader",
    "gateway",
    "harness",
    "runner",
    "report",
    "gate",
    "export",
    "import",
];

/// The top-level modules named as `crate::<name>` in the Rust files under `path`.
fn uses(path: &Path, found: &mut BTreeSet<String>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            uses(&e.unwrap().path(), found);
        }
        return;
    }
    if path.extension().is_none_or(|e| e != "rs") {
        return;
    }
    let text = std::fs::read_to_string(path).unwrap();
    for (i, _) in text.match_indices("crate::") {
        // `ablate::crate::` does not occur; skip identifiers that merely end in "crate".
        if text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = text[i + 7..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
}

#[test]
fn every_module_uses_only_the_modules_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut wrong = Vec::new();
    for (at, module) in LAYERS.iter().enumerate() {
        let dir = src.join(module);
        let path = if dir.is_dir() { dir } else { src.join(format!("{module}.rs")) };
        assert!(path.exists(), "src/{module} is in LAYERS but not in src/");
        let mut found = BTreeSet::new();
        uses(&path, &mut found);
        for used in found.iter().filter(|u| u.as_str() != *module) {
            match LAYERS.iter().position(|l| l == used) {
                Some(p) if p < at => {}
                Some(_) => wrong.push(format!("{module} uses {used}, which is below it")),
                None => wrong.push(format!("{module} uses {used}, which is not in LAYERS")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_module_of_the_crate_has_its_layer() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib.lines().filter_map(|l| l.strip_prefix("pub mod ")).map(|l| l.trim_end_matches(';')).collect();
    let layered: BTreeSet<&str> = LAYERS.into_iter().collect();
    assert_eq!(declared, layered, "src/lib.rs's modules and LAYERS differ");
}
