//! The rules on imports (docs/design.md, "Layers"), checked on the source: `core` and `api`
//! import nothing of the I/O shell, the store nothing of the controllers, controllers nothing
//! from `runtime`, no module imports a module that imports it back, and only the write layer
//! calls the client's write methods.
//!
//! The graph is built from the source text: every `use` tree and every inline `crate::`,
//! `super::` and `self::` path of a file's non-test code, resolved to the deepest module file
//! it names. A module may use what its ancestors define and declare its children, so edges
//! between a module and its own ancestors or descendants are not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// Every module file under `src/`, by module path.
fn modules(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut found = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(root).expect("under src/");
            let mut module: Module = relative
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod")) {
                module.pop();
            }
            if module == ["lib"] || module == ["main"] {
                module.clear();
            }
            found.insert(module, path);
        }
    }
    found
}

/// The code of a file that counts: no comments, no `#[cfg(test)] mod tests`.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(tests) => &text[..tests],
        None => text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(|line| match line.find(" // ") {
            Some(comment) => &line[..comment],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The full paths a `use` tree names: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn use_paths(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.to_owned()];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .flat_map(use_paths)
        .map(|path| match (prefix.is_empty(), path.as_str()) {
            (true, _) => path,
            (false, "self") => prefix.to_owned(),
            (false, _) => format!("{prefix}::{path}"),
        })
        .collect()
}

/// Every path of `code` that may name a module of this crate.
fn paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    // `use` trees, whole: a `use` that begins its line, after a visibility if any (not one
    // inside a string, such as an error's "cannot use …").
    while let Some(at) = rest.find("use ") {
        let line_start = rest[..at].rfind('\n').map_or(0, |newline| newline + 1);
        let before = rest[line_start..at].trim();
        let boundary = before.is_empty()
            || before == "pub"
            || (before.starts_with("pub(") && before.ends_with(')'));
        let after = &rest[at + 4..];
        let Some(end) = after.find(';') else { break };
        if boundary {
            found.extend(use_paths(&after[..end].replace('\n', " ")));
            rest = &after[end + 1..];
        } else {
            rest = after;
        }
    }
    // Inline paths: `crate::a::b`, `super::super::c`, `self::d`.
    let bytes: Vec<char> = code.chars().collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < bytes.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|s| bytes[i..].iter().take(s.len()).copied().eq(s.chars()));
        if starts && (i == 0 || !is_ident(bytes[i - 1])) {
            let mut j = i;
            while j < bytes.len() && (is_ident(bytes[j]) || bytes[j] == ':') {
                j += 1;
            }
            found.push(
                bytes[i..j]
                    .iter()
                    .collect::<String>()
                    .trim_end_matches(':')
                    .to_owned(),
            );
            i = j;
        } else {
            i += 1;
        }
    }
    found
}

/// The module `path`, written in `from`, names: its deepest module prefix; `None` for a
/// path outside this crate.
fn resolve(path: &str, from: &[String], modules: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let mut segments = path.split("::").map(str::trim).filter(|s| !s.is_empty());
    let first = segments.next()?;
    let mut base: Module = match first {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        "super" => from[..from.len().saturating_sub(1)].to_vec(),
        child if modules.contains_key(&[from, &[child.to_owned()]].concat()) => {
            [from, &[child.to_owned()]].concat()
        }
        _ => return None,
    };
    for segment in segments {
        if segment == "super" {
            base.pop();
        } else {
            base.push(segment.to_owned());
        }
    }
    while !modules.contains_key(&base) {
        base.pop();
    }
    Some(base)
}

/// Module → the modules it imports, leaving out its own ancestors and descendants.
fn imports() -> BTreeMap<Module, BTreeSet<Module>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&root);
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let text = fs::read_to_string(file).expect("a source file");
        let targets: BTreeSet<Module> = paths(&code(&text))
            .iter()
            .filter_map(|path| resolve(path, module, &modules))
            .filter(|target| !target.starts_with(module) && !module.starts_with(target))
            .collect();
        graph.insert(module.clone(), targets);
    }
    graph
}

fn under(module: &[String], top: &str) -> bool {
    module.first().is_some_and(|m| m == top)
}

fn violations(
    graph: &BTreeMap<Module, BTreeSet<Module>>,
    from: &str,
    allowed: &[&str],
) -> Vec<String> {
    graph
        .iter()
        .filter(|(module, _)| under(module, from))
        .flat_map(|(module, targets)| {
            targets
                .iter()
                .filter(|t| !allowed.iter().any(|a| under(t, a)))
                .map(move |t| format!("{} imports {}", name(module), name(t)))
        })
        .collect()
}

/// Every set of modules that import each other, directly or through others (Tarjan).
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, module: &'a Module) {
            let n = self.index.len();
            self.index.insert(module, n);
            self.low.insert(module, n);
            self.stack.push(module);
            for target in self.graph.get(module).into_iter().flatten() {
                if !self.index.contains_key(target) {
                    self.visit(target);
                    let low = self.low[target].min(self.low[module]);
                    self.low.insert(module, low);
                } else if self.stack.contains(&target) {
                    let low = self.index[target].min(self.low[module]);
                    self.low.insert(module, low);
                }
            }
            if self.low[module] == self.index[module] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    component.push(name(member));
                    if member == module {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module) {
            walk.visit(module);
        }
    }
    walk.found
}

#[test]
fn controllers_import_nothing_from_the_runtime() {
    let found = violations(
        &imports(),
        "controller",
        &["controller", "store", "core", "api", "metrics", "shutdown"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn core_and_api_import_nothing_of_the_io_shell() {
    let graph = imports();
    let mut found = violations(&graph, "core", &["core", "api"]);
    found.extend(violations(&graph, "api", &["api"]));
    assert!(found.is_empty(), "{found:#?}");
}

/// What the broker holds in memory is filled by watches and read by the controllers; it
/// knows nothing of them.
#[test]
fn the_store_imports_nothing_of_the_controllers() {
    let found = violations(
        &imports(),
        "store",
        &["store", "core", "api", "metrics", "shutdown"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

/// The client's write methods, and the parameters only a write takes.
const WRITES: [&str; 12] = [
    ".create(",
    ".patch(",
    ".patch_status(",
    ".patch_subresource(",
    ".patch_metadata(",
    ".replace_status(",
    ".delete(",
    ".delete_collection(",
    "PostParams",
    "PatchParams",
    "DeleteParams",
    "Preconditions",
];

/// Every write goes through the write layer (`controller::write`), which guards each with the
/// read it was decided on. Events (kube's `Recorder`) and the lease (kube-lease-manager) are
/// written by their crates.
#[test]
fn only_the_write_layer_calls_the_clients_write_methods() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let write_layer: Module = ["controller", "write"].map(str::to_owned).to_vec();
    let mut found = Vec::new();
    for (module, file) in modules(&root) {
        let text = fs::read_to_string(&file).expect("a source file");
        let code = code(&text);
        for write in WRITES {
            if module != write_layer && code.contains(write) {
                found.push(format!("{} calls {write}", name(&module)));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
    // The check sees the write layer's own calls.
    let text = fs::read_to_string(root.join("controller/write.rs")).expect("write.rs");
    for write in [
        ".create(",
        ".patch(",
        ".patch_status(",
        ".delete(",
        "DeleteParams",
    ] {
        assert!(code(&text).contains(write), "{write}");
    }
}

/// The screening of the API server's responses is pure: the client layer and the
/// quarantine that use it are the runtime's.
#[test]
fn the_screening_imports_nothing_of_the_io_shell() {
    let found = violations(&imports(), "screening", &["screening", "api"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let graph = imports();
    let found = cycles(&graph);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_graph_sees_the_imports_it_checks() {
    // A parser that found nothing would pass every rule above.
    let graph = imports();
    let controller = |m: &str| -> Module { ["controller", m].map(str::to_owned).to_vec() };
    let pool = &graph[&controller("pool")];
    assert!(pool.contains(&controller("write")), "{pool:?}");
    assert!(pool.contains(&controller("context")), "{pool:?}");
    let run = &graph[&vec!["runtime".to_owned(), "run".to_owned()]];
    assert!(run.contains(&controller("claim")), "{run:?}");
    assert!(run.contains(&vec!["metrics".to_owned()]), "{run:?}");
    let summaries = &graph[&["store", "claim_summaries"].map(str::to_owned).to_vec()];
    let watch = ["store", "shared_watch"].map(str::to_owned).to_vec();
    assert!(summaries.contains(&watch), "{summaries:?}");
}
