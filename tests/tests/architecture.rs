//! The workspace keeps its shape (issue 28): no module of a shipped crate depends on itself
//! through others, no folder of one grows past 16 files, and ARCHITECTURE.md names every crate
//! and every top-level module folder. Sources are read with `syn`, so comments never count.

// In tests a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use myownshell_envtest::assets::workspace_root;
use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::{self, Visit};
use syn::{Attribute, Item, ItemMod, UseTree};

/// The crates that ship; envtest, tests and xtask are tooling.
const SHIPPED: [&str; 9] =
    ["api", "runtime", "certs", "rbac-proxy", "webhook", "controller", "gateway", "plugin", "session"];

/// More files than this in one folder, and the folder wants sub-folders.
const MAX_FILES_PER_FOLDER: usize = 16;

// ---------------------------------------------------------------------------------------------
// The module tree of a crate.

/// A module: a file, or a `mod x { ... }` inside one.
struct Module {
    /// Its file from the repository root, then any inline modules (`a.rs::inner`).
    name: String,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    /// Its own non-test items; its child modules were taken out (each is a module of its own).
    items: Vec<Item>,
}

/// Every module of one crate: the trees of src/lib.rs and src/main.rs (two crate roots).
#[derive(Default)]
struct Tree {
    modules: Vec<Module>,
}

impl Tree {
    fn of_crate(krate: &Path) -> Tree {
        let mut tree = Tree::default();
        for root in ["lib.rs", "main.rs"].map(|f| krate.join("src").join(f)) {
            if root.exists() {
                tree.add_file(None, &root);
            }
        }
        tree
    }

    fn add_file(&mut self, parent: Option<usize>, file: &Path) -> usize {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let items = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display())).items;
        let place = Place { children_dir: children_dir(file), path_base: file.parent().unwrap().to_path_buf() };
        self.add(relative(file), parent, &place, items)
    }

    /// Adds a module and, depth first, its non-test child modules.
    fn add(&mut self, name: String, parent: Option<usize>, place: &Place, items: Vec<Item>) -> usize {
        let id = self.modules.len();
        self.modules.push(Module { name, parent, children: BTreeMap::new(), items: Vec::new() });
        let mut own = Vec::new();
        for item in items {
            match item {
                // Test modules use `super::*` by design: neither they nor what they hold count.
                _ if is_test_only(item_attrs(&item)) => {}
                Item::Mod(m) => {
                    let ident = m.ident.to_string();
                    let child = self.add_child(id, place, m);
                    self.modules[id].children.insert(ident, child);
                }
                other => own.push(other),
            }
        }
        self.modules[id].items = own;
        id
    }

    fn add_child(&mut self, parent: usize, place: &Place, m: ItemMod) -> usize {
        let ident = m.ident.to_string();
        match m.content {
            Some((_, items)) => {
                let name = format!("{}::{ident}", self.modules[parent].name);
                let dir = place.children_dir.join(&ident);
                // Inside an inline module, `mod x;` and `#[path]` both start from its folder.
                self.add(name, Some(parent), &Place { children_dir: dir.clone(), path_base: dir }, items)
            }
            None => {
                let file = match path_attr(&m.attrs) {
                    Some(path) => place.path_base.join(path),
                    None => module_file(&place.children_dir, &ident),
                };
                self.add_file(Some(parent), &file)
            }
        }
    }

    fn root_of(&self, mut module: usize) -> usize {
        while let Some(parent) = self.modules[module].parent {
            module = parent;
        }
        module
    }

    /// The deepest module a path used in `from` names, if it names one of this crate's:
    /// `crate::`, `self::`, `super::` (repeated), or a child module's name first.
    fn resolve(&self, from: usize, path: &[String]) -> Option<usize> {
        let first = path.first()?;
        let (mut at, rest) = match first.as_str() {
            "crate" => (self.root_of(from), &path[1..]),
            "self" => (from, &path[1..]),
            "super" => {
                let ups = path.iter().take_while(|s| *s == "super").count();
                let mut at = from;
                for _ in 0..ups {
                    at = self.modules[at].parent?;
                }
                (at, &path[ups..])
            }
            // A lone name is a value or a type; `child::x` is the child module.
            name if path.len() > 1 && self.modules[from].children.contains_key(name) => (from, path),
            _ => return None,
        };
        for segment in rest {
            match self.modules[at].children.get(segment) {
                Some(&child) => at = child,
                None => break,
            }
        }
        Some(at)
    }

    /// Who uses whom: (from, to) → the first line in `from` that does.
    fn edges(&self) -> BTreeMap<(usize, usize), usize> {
        let mut edges = BTreeMap::new();
        for module in 0..self.modules.len() {
            let mut uses = Uses { tree: self, module, edges: &mut edges };
            for item in &self.modules[module].items {
                uses.visit_item(item);
            }
        }
        edges
    }
}

/// Where a module's `mod x;` files are, and what its `#[path]`s are relative to.
struct Place {
    children_dir: PathBuf,
    path_base: PathBuf,
}

/// `mod x;` in lib.rs, main.rs or mod.rs is next to it; in a.rs, it is in a/.
fn children_dir(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap();
    match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => dir.to_path_buf(),
        _ => dir.join(file.file_stem().unwrap()),
    }
}

fn module_file(dir: &Path, ident: &str) -> PathBuf {
    let flat = dir.join(format!("{ident}.rs"));
    if flat.exists() { flat } else { dir.join(ident).join("mod.rs") }
}

fn path_attr(attrs: &[Attribute]) -> Option<String> {
    let attr = attrs.iter().find(|a| a.path().is_ident("path"))?;
    match &attr.meta.require_name_value().ok()?.value {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
        _ => None,
    }
}

/// `#[cfg(test)]` or `#[cfg(all(test, ...))]`: a `cfg` with `not` or `any` may hold outside tests.
fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("cfg")).any(|a| {
        let words: Vec<String> = a.meta.require_list().map(|l| idents(l.tokens.clone())).unwrap_or_default();
        words.iter().any(|w| w == "test") && !words.iter().any(|w| w == "not" || w == "any")
    })
}

fn idents(tokens: TokenStream) -> Vec<String> {
    tokens
        .into_iter()
        .flat_map(|t| match t {
            TokenTree::Ident(i) => vec![i.to_string()],
            TokenTree::Group(g) => idents(g.stream()),
            _ => vec![],
        })
        .collect()
}

/// The attributes of the items a `cfg(test)` is put on (others: none, so never test-only).
fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Mod(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Const(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        _ => &[],
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root()).unwrap_or(path).display().to_string()
}

fn line(span: Span) -> usize {
    span.start().line
}

// ---------------------------------------------------------------------------------------------
// The uses in a module's own items.

struct Uses<'t> {
    tree: &'t Tree,
    module: usize,
    edges: &'t mut BTreeMap<(usize, usize), usize>,
}

impl Uses<'_> {
    fn note(&mut self, path: &[String], line: usize) {
        match self.tree.resolve(self.module, path) {
            Some(to) if to != self.module => {
                let first = self.edges.entry((self.module, to)).or_insert(line);
                *first = (*first).min(line);
            }
            _ => {}
        }
    }
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    // A `mod` inside a function body is not in the tree; what it uses is not this module's.
    fn visit_item_mod(&mut self, _: &'ast ItemMod) {}

    // `pub(crate)` and `pub(super)` say who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        flatten_use(&item.tree, &mut Vec::new(), &mut paths);
        for path in paths {
            self.note(&path, line(item.use_token.span));
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.note(&segments, line(path.segments[0].ident.span()));
        }
        visit::visit_path(self, path);
    }

    // syn leaves a macro's arguments as tokens: `a::b` runs in them are paths too.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        for (path, line) in paths_in_tokens(mac.tokens.clone()) {
            self.note(&path, line);
        }
        visit::visit_macro(self, mac);
    }
}

/// Every path a `use` tree names: `crate::{a, b::c as d, e::*}` → `crate::a`, `crate::b::c`, `crate::e`.
fn flatten_use(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let leaf = |prefix: &Vec<String>, ident: &syn::Ident| {
        let mut path = prefix.clone();
        if ident != "self" {
            path.push(ident.to_string());
        }
        path
    };
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => out.push(leaf(prefix, &n.ident)),
        UseTree::Rename(r) => out.push(leaf(prefix, &r.ident)),
        UseTree::Glob(_) => out.push(prefix.clone()),
        UseTree::Group(g) => g.items.iter().for_each(|t| flatten_use(t, prefix, out)),
    }
}

/// The `a::b::c` runs in a macro's tokens (two segments or more), with their lines.
fn paths_in_tokens(tokens: TokenStream) -> Vec<(Vec<String>, usize)> {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut paths = Vec::new();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Group(g) => paths.extend(paths_in_tokens(g.stream())),
            // A path starts at a name not preceded by `::`.
            TokenTree::Ident(first) if !(i >= 2 && colons_at(&trees, i - 2)) => {
                let mut path = vec![first.to_string()];
                let mut at = i;
                while let (true, Some(TokenTree::Ident(next))) = (colons_at(&trees, at + 1), trees.get(at + 3)) {
                    path.push(next.to_string());
                    at += 3;
                }
                if path.len() > 1 {
                    paths.push((path, line(first.span())));
                }
            }
            _ => {}
        }
    }
    paths
}

fn colons_at(trees: &[TokenTree], i: usize) -> bool {
    let colon = |t: Option<&TokenTree>| matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == ':');
    colon(trees.get(i)) && colon(trees.get(i + 1))
}

// ---------------------------------------------------------------------------------------------
// Cycles.

/// The modules each module reaches through uses (itself only if on a cycle).
fn reachable(count: usize, edges: &BTreeMap<(usize, usize), usize>) -> Vec<BTreeSet<usize>> {
    (0..count)
        .map(|start| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![start];
            while let Some(at) = todo.pop() {
                for (&(_, to), _) in edges.range((at, 0)..(at + 1, 0)) {
                    if seen.insert(to) {
                        todo.push(to);
                    }
                }
            }
            seen
        })
        .collect()
}

/// Each cycle (a strongly connected component of two modules or more), with the uses inside it.
fn cycles(tree: &Tree) -> Vec<String> {
    let edges = tree.edges();
    let reach = reachable(tree.modules.len(), &edges);
    let mut reported = BTreeSet::new();
    let mut found = Vec::new();
    for start in 0..tree.modules.len() {
        let component: BTreeSet<usize> =
            reach[start].iter().copied().filter(|&m| reach[m].contains(&start)).chain([start]).collect();
        if component.len() < 2 || !reported.insert(component.clone()) {
            continue;
        }
        let names = |m: usize| tree.modules[m].name.as_str();
        let uses: Vec<String> = edges
            .iter()
            .filter(|((from, to), _)| component.contains(from) && component.contains(to))
            .map(|(&(from, to), line)| format!("    {}:{line} uses {}", names(from), names(to)))
            .collect();
        found.push(format!("  cycle of {} modules:\n{}", component.len(), uses.join("\n")));
    }
    found
}

#[test]
fn no_shipped_crate_has_a_module_cycle() {
    let found: Vec<String> =
        SHIPPED.iter().flat_map(|krate| cycles(&Tree::of_crate(&workspace_root().join(krate)))).collect();
    assert!(
        found.is_empty(),
        "module cycles in shipped crates (break each by moving what both sides need to a module \
         they both use):\n{}",
        found.join("\n")
    );
}

/// The check itself sees a cycle, through a group, `super::` and a macro, and not through a
/// test module or a comment.
#[test]
fn the_cycle_check_finds_a_cycle_and_only_that() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::{b::Thing, c};\npub struct Other;\n"),
        ("b.rs", "pub struct Thing;\nfn f() { println!(\"{:?}\", super::a::Other); }\n"),
        ("c.rs", "// crate::a::Other\n#[cfg(test)]\nmod tests {\n    use crate::a::*;\n}\n"),
    ];
    std::fs::create_dir(dir.path().join("src")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join("src").join(name), text).unwrap();
    }
    let found = cycles(&Tree::of_crate(dir.path()));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("cycle of 2 modules"), "{}", found[0]);
    assert!(found[0].contains("a.rs:1 uses") && found[0].contains("b.rs:2 uses"), "{}", found[0]);
}

// ---------------------------------------------------------------------------------------------
// Folders.

/// A folder and every folder below it.
fn folders(dir: &Path) -> Vec<PathBuf> {
    let mut all = vec![dir.to_path_buf()];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all.extend(folders(&path));
        }
    }
    all
}

/// The `.rs` files directly in a folder, crate roots not counted.
fn rust_files_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| !matches!(p.file_name().and_then(|n| n.to_str()), Some("lib.rs" | "main.rs")))
        .count()
}

#[test]
fn no_folder_of_a_shipped_crate_holds_more_than_16_files() {
    let crowded: Vec<String> = SHIPPED
        .iter()
        .flat_map(|krate| folders(&workspace_root().join(krate).join("src")))
        .filter_map(|dir| {
            let count = rust_files_in(&dir);
            (count > MAX_FILES_PER_FOLDER).then(|| format!("  {}/: {count} files", relative(&dir)))
        })
        .collect();
    assert!(
        crowded.is_empty(),
        "folders with more than {MAX_FILES_PER_FOLDER} .rs files (lib.rs and main.rs not counted):\n{}",
        crowded.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Function length.

/// The longest a shipped function may be, from `fn` to its closing brace: one that does more
/// than a screen of work is split at its steps, each with a name.
const MAX_FUNCTION_LINES: usize = 80;

/// The non-test functions and methods of a module's own items, longer than the limit.
struct LongFunctions<'t> {
    file: &'t str,
    found: &'t mut Vec<String>,
}

impl LongFunctions<'_> {
    fn note(&mut self, name: &syn::Ident, fn_token: Span, close: Span) {
        let lines = close.end().line + 1 - fn_token.start().line;
        if lines > MAX_FUNCTION_LINES {
            self.found.push(format!("  {}:{} fn {name}: {lines} lines", self.file, fn_token.start().line));
        }
    }
}

impl<'ast> Visit<'ast> for LongFunctions<'_> {
    fn visit_item(&mut self, item: &'ast Item) {
        if !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.note(&f.sig.ident, f.sig.fn_token.span, f.block.brace_token.span.close());
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            self.note(&f.sig.ident, f.sig.fn_token.span, f.block.brace_token.span.close());
            visit::visit_impl_item_fn(self, f);
        }
    }
}

#[test]
fn no_shipped_function_is_over_80_lines() {
    let mut found = Vec::new();
    for krate in SHIPPED {
        let tree = Tree::of_crate(&workspace_root().join(krate));
        for module in &tree.modules {
            let mut long = LongFunctions { file: &module.name, found: &mut found };
            for item in &module.items {
                long.visit_item(item);
            }
        }
    }
    assert!(
        found.is_empty(),
        "shipped functions over {MAX_FUNCTION_LINES} lines (split each at its steps):\n{}",
        found.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// ARCHITECTURE.md.

/// The strings of a one-key TOML array (`members = ["a", "b"]`), which may span lines.
fn toml_array(text: &str, key: &str) -> Vec<String> {
    let start = text.lines().find(|l| l.trim_start().starts_with(key) && l.contains('=')).unwrap();
    let offset = text.find(start).unwrap();
    let rest = &text[offset..];
    let array = &rest[rest.find('[').unwrap()..=rest.find(']').unwrap()];
    array.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

/// The names ARCHITECTURE.md must hold: `crate/` for every member and fuzz (excluded from the
/// workspace, but ours), and `crate/src/folder/` for every top-level module folder that ships.
fn names_the_architecture_needs() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let mut names: Vec<String> = toml_array(&manifest, "members").into_iter().map(|m| format!("`{m}/`")).collect();
    names.extend(toml_array(&manifest, "exclude").into_iter().map(|m| format!("`{m}/`")));
    for krate in SHIPPED {
        let src = workspace_root().join(krate).join("src");
        let mut dirs: Vec<PathBuf> =
            std::fs::read_dir(&src).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
        dirs.sort();
        names.extend(dirs.iter().map(|d| format!("`{}/`", relative(d))));
    }
    names
}

#[test]
fn the_architecture_names_every_crate_and_module_folder() {
    let architecture = std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap();
    let missing: Vec<String> =
        names_the_architecture_needs().into_iter().filter(|name| !architecture.contains(name.as_str())).collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md does not name:\n  {}", missing.join("\n  "));
}
