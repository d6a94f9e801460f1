//! The pipeline's layering (ARCHITECTURE.md, its `layers` block): each module
//! of the library sits on the modules after its arrow there and on everything
//! those sit on, and uses no other module of the crate. Checked on the parsed
//! source (syn): every path that starts with `crate::`, every `use crate::...`
//! tree (grouped ones included) and every `crate::` inside a macro's tokens,
//! in the library's non-test code: `#[cfg(test)]` items, and the files of
//! `#[cfg(test)] mod x;`, are test code, which may use any module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

use crate::source::{child_file, is_test, root};

/// The `layers` block of ARCHITECTURE.md: each module and the modules it sits on directly.
fn declared() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let block = text
        .split("```layers\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a ```layers block")
        .split("```")
        .next()
        .unwrap();
    let mut layers = BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (module, on) =
            line.split_once("->").unwrap_or_else(|| panic!("not `module -> modules`: {line}"));
        let on: Vec<String> =
            on.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
        assert!(
            layers.insert(module.trim().to_string(), on).is_none(),
            "{} is declared twice",
            module.trim()
        );
    }
    layers
}

/// What each module may use: what it sits on, and what those sit on, and so
/// on down. A cycle (a module below itself) fails.
fn allowed(layers: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for module in layers.keys() {
        let mut below = BTreeSet::new();
        let mut todo: Vec<&String> = layers[module].iter().collect();
        while let Some(m) = todo.pop() {
            assert!(m != module, "the layers have a cycle through {module}");
            let on = layers.get(m).unwrap_or_else(|| {
                panic!("{module} sits on {m}, which has no line in the layers block")
            });
            if below.insert(m.clone()) {
                todo.extend(on);
            }
        }
        out.insert(module.clone(), below);
    }
    out
}

/// The modules of the crate a file's non-test code names, and the files of
/// the modules it declares (`mod x;`) outside test code.
#[derive(Default)]
struct Uses {
    found: BTreeSet<String>,
    children: Vec<String>,
}

/// The library's root in a path: `crate`, or `ablate_core` in the report
/// crate, whose modules sit on the core crate's.
fn is_root(ident: &proc_macro2::Ident) -> bool {
    ident == "crate" || ident == "ablate_core"
}

/// The library crates of the workspace, each the source folder of some of the layers' modules.
const CRATES: [&str; 2] = ["crates/core/src", "crates/report/src"];

/// The modules a library crate declares (`pub mod x;` in its lib.rs).
fn lib_modules(krate: &str) -> BTreeSet<String> {
    std::fs::read_to_string(root().join(krate).join("lib.rs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

/// A module's root file, in whichever library crate holds it.
fn module_file(module: &str) -> PathBuf {
    CRATES
        .iter()
        .flat_map(|c| {
            [
                root().join(c).join(module).join("mod.rs"),
                root().join(c).join(format!("{module}.rs")),
            ]
        })
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{module} is in the layers block and in no crate of {CRATES:?}"))
}

impl Uses {
    fn tree(&mut self, t: &syn::UseTree, after_crate: bool) {
        match t {
            syn::UseTree::Path(p) if after_crate => {
                self.found.insert(p.ident.to_string());
            }
            syn::UseTree::Path(p) if is_root(&p.ident) => self.tree(&p.tree, true),
            syn::UseTree::Name(n) if after_crate => {
                self.found.insert(n.ident.to_string());
            }
            syn::UseTree::Rename(r) if after_crate => {
                self.found.insert(r.ident.to_string());
            }
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.tree(item, after_crate);
                }
            }
            syn::UseTree::Glob(_) if after_crate => {
                self.found.insert("*".into());
            }
            _ => {}
        }
    }

    /// `crate :: name` anywhere in a token stream (a macro's arguments).
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let flat: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        for (i, t) in flat.iter().enumerate() {
            match t {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Ident(id) if is_root(id) => {
                    if let (
                        Some(proc_macro2::TokenTree::Punct(a)),
                        Some(proc_macro2::TokenTree::Punct(b)),
                        Some(proc_macro2::TokenTree::Ident(name)),
                    ) = (flat.get(i + 1), flat.get(i + 2), flat.get(i + 3))
                        && a.as_char() == ':'
                        && b.as_char() == ':'
                    {
                        self.found.insert(name.to_string());
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if is_test(&m.attrs) {
            return;
        }
        if m.content.is_none() {
            self.children.push(m.ident.to_string());
        }
        syn::visit::visit_item_mod(self, m);
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_test(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if !is_test(&u.attrs) {
            self.tree(&u.tree, false);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let mut segments = p.segments.iter();
        if segments.next().is_some_and(|s| is_root(&s.ident))
            && let Some(s) = segments.next()
        {
            self.found.insert(s.ident.to_string());
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// Parse `text` and name the crate's modules its non-test code uses.
fn uses_in(text: &str, uses: &mut Uses) {
    let file = syn::parse_file(text).unwrap_or_else(|e| panic!("does not parse: {e}"));
    uses.visit_file(&file);
}

/// A module's files from its root, following `mod x;` outside test code.
fn module_uses(file: &Path, found: &mut BTreeSet<String>) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut uses = Uses::default();
    uses_in(&text, &mut uses);
    found.extend(uses.found);
    for child in uses.children {
        let path = child_file(file, &child);
        assert!(
            path.exists(),
            "{} declares `mod {child};` and neither {child}.rs nor {child}/mod.rs exists",
            file.display()
        );
        module_uses(&path, found);
    }
}

#[test]
fn every_module_uses_only_the_modules_it_sits_on() {
    let layers = declared();
    let allowed = allowed(&layers);
    let mut wrong = Vec::new();
    for module in layers.keys() {
        let path = module_file(module);
        let mut found = BTreeSet::new();
        module_uses(&path, &mut found);
        for used in found.iter().filter(|u| *u != module) {
            if !allowed[module].contains(used) {
                wrong.push(format!("{module} uses {used}, which it does not sit on (ARCHITECTURE.md, the layers block)"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_module_of_the_crate_has_its_layer() {
    let declared_in_lib: BTreeSet<String> = CRATES.iter().flat_map(|c| lib_modules(c)).collect();
    let layered: BTreeSet<String> = declared().into_keys().collect();
    assert_eq!(
        declared_in_lib, layered,
        "the library crates' modules and ARCHITECTURE.md's layers block differ"
    );
}

/// The checker itself: a grouped `use`, a path in an expression and one in a
/// macro's arguments are found; test code is not. And the order has the rules
/// it is written for: the runner and the report do not know each other.
#[test]
fn the_checker_finds_every_form_of_use_and_the_rules_hold() {
    let mut uses = Uses::default();
    uses_in(
        "use crate::{record::TrialRecord, runner::events::{self, Event}};\n\
         use std::{fmt, path::Path};\n\
         use ablate_core::sequential::Monitor;\n\
         fn f() -> u8 { let _ = crate::report::x(); format!(\"{}\", crate::gate::y()); 1 }\n\
         #[cfg(test)]\nmod tests { use crate::import::z; fn g() { crate::export::w(); } }\n\
         #[cfg(test)]\nfn h() { crate::cli::v(); }\n\
         mod child;\n#[cfg(test)]\nmod more_tests;\n",
        &mut uses,
    );
    let names: Vec<&str> = uses.found.iter().map(String::as_str).collect();
    assert_eq!(names, ["gate", "record", "report", "runner", "sequential"]);
    assert_eq!(uses.children, ["child"]);
    let allowed = allowed(&declared());
    assert!(!allowed["report"].contains("runner") && !allowed["runner"].contains("report"));
    for upper in ["gate", "export", "import"] {
        assert!(
            !allowed[upper].contains("runner")
                && allowed[upper].contains("report")
                && allowed[upper].contains("record"),
            "{upper}"
        );
    }
    assert!(allowed["runner"].contains("record") && allowed["report"].contains("record"));
    assert!(!allowed["record"].contains("model") && !allowed["sequential"].contains("record"));
}

/// The workspace agrees with the layers: no module of the core crate sits on a
/// module of the report crate (the compiler refuses such a use; this keeps the
/// layers block from claiming one).
#[test]
fn the_core_crate_sits_below_the_report_crate() {
    let (core, report) = (lib_modules(CRATES[0]), lib_modules(CRATES[1]));
    assert!(core.contains("record") && report.contains("report"));
    let allowed = allowed(&declared());
    for module in &core {
        let above: Vec<&String> = allowed[module].intersection(&report).collect();
        assert!(above.is_empty(), "{module} (core crate) sits on {above:?} (report crate)");
    }
}
