//! Reading the workspace's own Rust source, for the tests that check its shape
//! (layers.rs, measures.rs and visibility.rs in tests/integration/): a module of its own,
//! beside `common`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The workspace's root folder.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The file of the child module `name` that `file` declares (`mod name;`): `mod.rs`, `lib.rs`
/// and `main.rs` declare their children beside them, `a/b.rs` in `a/b/`; `name.rs` there, else
/// `name/mod.rs`.
pub fn child_file(file: &Path, name: &str) -> PathBuf {
    let stem = file.file_stem().unwrap();
    let dir = if ["mod", "lib", "main"].iter().any(|s| stem == *s) {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() { flat } else { dir.join(name).join("mod.rs") }
}

/// Every `.rs` file under `dir`, into `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether an item is test code: `#[test]` or `#[cfg(test)]`.
pub fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg")
                && a.parse_args::<syn::Meta>()
                    .is_ok_and(|m| matches!(&m, syn::Meta::Path(p) if p.is_ident("test"))))
    })
}
