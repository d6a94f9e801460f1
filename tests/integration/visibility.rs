//! Visibility that tells you what you may touch: an item of a library crate is `pub` only when
//! something outside that crate may need it: another package (the report crate, the synth crate,
//! the command line) or the tests and benches name it, or it is part of the interface of an item
//! that must be `pub` (a type in its signature, fields or variants). Everything else is
//! `pub(crate)` or narrower. Checked on the parsed source (syn), test code left out; names are
//! matched as words, so a name used outside for something else only keeps an item `pub`, never
//! makes a wrong one fail.

use std::collections::{BTreeMap, BTreeSet};
use syn::visit::Visit;

use crate::source::{child_file, is_test, root, rust_files};

/// Each library crate's source folder, and the folders whose code is outside it.
const CRATES: [(&str, &[&str]); 3] = [
    ("crates/core/src", &["crates/report/src", "crates/synth/src", "src", "tests", "benches"]),
    ("crates/report/src", &["crates/synth/src", "src", "tests", "benches"]),
    ("crates/synth/src", &["crates/report/src", "src", "tests", "benches"]),
];

/// Every word of the Rust files under `dirs`.
fn words_in(dirs: &[&str]) -> BTreeSet<String> {
    let mut files = Vec::new();
    for d in dirs {
        rust_files(&root().join(d), &mut files);
    }
    let mut words = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        words.extend(words_of(&text));
    }
    words
}

fn words_of(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'))
        .map(str::to_string)
}

/// A `pub` item of a crate: its name, where it is, and the words of its interface (what a user
/// of the item must be able to name too).
#[derive(Debug)]
struct PubItem {
    name: String,
    at: String,
    interface: BTreeSet<String>,
    /// Not an item of its own: what a trait implementation adds to its type's interface.
    extends: bool,
}

#[derive(Default)]
struct PubItems {
    file: String,
    items: Vec<PubItem>,
    children: Vec<String>,
    macro_words: BTreeSet<String>,
}

impl PubItems {
    fn add(&mut self, vis: &syn::Visibility, ident: &syn::Ident, interface: String) {
        if matches!(vis, syn::Visibility::Public(_)) {
            self.items.push(PubItem {
                name: ident.to_string(),
                at: self.file.clone(),
                interface: words_of(&interface).collect(),
                extends: false,
            });
        }
    }
}

fn tokens(t: &impl quote::ToTokens) -> String {
    t.to_token_stream().to_string()
}

impl<'ast> Visit<'ast> for PubItems {
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
            self.add(&f.vis, &f.sig.ident, tokens(&f.sig));
        }
    }
    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        let public = s.fields.iter().filter(|f| matches!(f.vis, syn::Visibility::Public(_)));
        let fields: Vec<String> = public.map(tokens).collect();
        self.add(&s.vis, &s.ident, format!("{} {}", tokens(&s.generics), fields.join(" ")));
    }
    fn visit_item_enum(&mut self, e: &'ast syn::ItemEnum) {
        self.add(&e.vis, &e.ident, format!("{} {}", tokens(&e.generics), tokens(&e.variants)));
    }
    fn visit_item_const(&mut self, c: &'ast syn::ItemConst) {
        self.add(&c.vis, &c.ident, tokens(&c.ty));
    }
    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        self.add(&s.vis, &s.ident, tokens(&s.ty));
    }
    fn visit_item_type(&mut self, t: &'ast syn::ItemType) {
        self.add(&t.vis, &t.ident, tokens(&t.ty));
    }
    /// An item-level macro (`builtin_components!`) writes items this visitor cannot see: every
    /// word of it is kept as if named outside.
    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        if !is_test(&m.attrs) {
            self.macro_words.extend(words_of(&tokens(&m.mac.tokens)));
        }
    }
    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.add(&t.vis, &t.ident, tokens(t));
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if is_test(&i.attrs) {
            return;
        }
        if i.trait_.is_some() {
            // A trait's associated types and signatures are as public as the type.
            if let syn::Type::Path(p) = &*i.self_ty
                && let Some(last) = p.path.segments.last()
            {
                let items: Vec<String> = i.items.iter().map(tokens).collect();
                self.items.push(PubItem {
                    name: last.ident.to_string(),
                    at: self.file.clone(),
                    interface: words_of(&items.join(" ")).collect(),
                    extends: true,
                });
            }
            return;
        }
        for item in &i.items {
            if let syn::ImplItem::Fn(f) = item
                && !is_test(&f.attrs)
            {
                self.add(&f.vis, &f.sig.ident, tokens(&f.sig));
            }
        }
    }
}

/// The `pub` items of a crate's non-test code, from its lib.rs down the `mod` tree, and the
/// words of its item-level macros.
fn pub_items(krate: &str) -> (Vec<PubItem>, BTreeSet<String>) {
    let mut out = Vec::new();
    let mut macro_words = BTreeSet::new();
    let mut todo = vec![root().join(krate).join("lib.rs")];
    while let Some(file) = todo.pop() {
        let text = std::fs::read_to_string(&file).unwrap();
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let rel = file.strip_prefix(root()).unwrap().display().to_string();
        let mut v = PubItems { file: rel, ..Default::default() };
        v.visit_file(&parsed);
        todo.extend(v.children.iter().map(|child| child_file(&file, child)));
        out.extend(v.items);
        macro_words.extend(v.macro_words);
    }
    (out, macro_words)
}

/// The items that need not be `pub`: named nowhere outside the crate, and in the interface of no
/// item that is (the interfaces followed until nothing new is reached).
fn needlessly_public(items: &[PubItem], outside: &BTreeSet<String>) -> Vec<String> {
    let mut needed: BTreeSet<String> = outside.clone();
    loop {
        let before = needed.len();
        let reached: Vec<&String> =
            items.iter().filter(|i| needed.contains(&i.name)).flat_map(|i| &i.interface).collect();
        needed.extend(reached.into_iter().cloned());
        if needed.len() == before {
            break;
        }
    }
    let mut out: Vec<String> = items
        .iter()
        .filter(|i| !i.extends && !needed.contains(&i.name))
        .map(|i| format!("{} {}", i.at, i.name))
        .collect();
    out.sort();
    out
}

#[test]
fn items_no_other_package_needs_are_not_pub() {
    let mut found: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (krate, outside) in CRATES {
        let (items, macro_words) = pub_items(krate);
        let mut named = words_in(outside);
        named.extend(macro_words);
        let loose = needlessly_public(&items, &named);
        if !loose.is_empty() {
            found.insert(krate, loose);
        }
    }
    let total: usize = found.values().map(Vec::len).sum();
    assert!(
        found.is_empty(),
        "{total} items are `pub` that nothing outside their crate names; make them `pub(crate)`:\n{}",
        found.values().flatten().cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The rule itself, on items whose answers are known by hand: `Used` is named outside, `Shown` is
/// in its signature, `ByTrait` in a trait implementation of `Shown`, `Hidden` is in nothing
/// outside, and `Loop` names itself.
#[test]
fn the_rule_follows_interfaces_from_what_is_named_outside() {
    let item = |name: &str, interface: &[&str]| PubItem {
        name: name.into(),
        at: "x.rs".into(),
        interface: interface.iter().map(|s| s.to_string()).collect(),
        extends: false,
    };
    let items = [
        item("Used", &["Shown", "u8"]),
        item("Shown", &["Deeper"]),
        item("Deeper", &[]),
        item("Hidden", &["Used"]),
        item("Loop", &["Loop"]),
        PubItem { extends: true, ..item("Shown", &["ByTrait"]) },
        item("ByTrait", &[]),
    ];
    let outside: BTreeSet<String> = ["Used".to_string(), "main".to_string()].into();
    assert_eq!(needlessly_public(&items, &outside), ["x.rs Hidden", "x.rs Loop"]);
}
