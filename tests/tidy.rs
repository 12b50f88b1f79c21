//! Tidy checks (in the style of rust-analyzer's `tidy.rs`): the architecture invariants that
//! ARCHITECTURE.md states, enforced by reading the source tree instead of trusting prose.
//!
//! - `tract` is imported only under `src/detect/`.
//! - Threads are spawned only in the pipeline (`src/pipeline/`) and in the outlets that run a
//!   thread of their own, which the tracker thread hands work to and never waits for
//!   (`src/metrics/`: the exporter); cores are pinned only in the pipeline. The precise allow
//!   list is [`THREAD_RULES`]: each API that starts threads or touches CPU affinity, and the
//!   files that may use it.
//! - No `.unwrap()`, `.expect(` or `panic!` in non-test code (also denied by clippy through
//!   `#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]`
//!   in `src/lib.rs` and `src/main.rs`, which this file checks are still there).
//! - The modules' imports (`crate::x` in non-test code) form no cycle, and `geom` (plain
//!   geometry) and `sysinfo` (machine facts) import nothing from the crate; `vocab` (the
//!   detection vocabulary) imports only `geom`. The broken rules of the intended layering are
//!   listed in [`NEVER_IMPORTS`] (`track` never imports `detect`, …).
//! - Inside a module, the files' imports (`super::x`, `crate::m::x`, and a `mod.rs` naming its
//!   children outside `mod`/`pub use` lines) form no cycle either.
//! - `unsafe` code lives only in the V4L2 mmap queue (`src/source/v4l2/mmap.rs`) and the one
//!   `malloc_trim` call (`src/memory.rs`).
//! - No function is over [`MAX_FN_LINES`] lines but documented table printers (and the ones
//!   left to split, [`LONG_FNS_LEFT`]); no file of `src/` is over [`MAX_FILE_LINES`] code
//!   lines but the [`NUMERIC_KERNELS`].
//! - The shipped configuration does not claim that automatic pinning assumes cores `0..N-1`
//!   (it counts positions in the process's affinity mask).
//!
//! "Non-test code" is a file's text before its `#[cfg(test)]` module, with comment lines left
//! out; the test module must be the file's last item (checked here too, so code cannot hide
//! after it). Every rule has a unit test below showing that it fires.

use std::path::{Path, PathBuf};

/// A rule: code lines containing any of `needles` may only appear in files whose path
/// (relative to the crate root, `/`-separated) starts with one of `allowed`.
struct Rule {
    /// What the rule protects, for the failure message.
    what: &'static str,
    /// Substrings that mark a use.
    needles: &'static [&'static str],
    /// Path prefixes where a use is allowed.
    allowed: &'static [&'static str],
}

/// Only `detect/` knows tract (the layering of ARCHITECTURE.md's code map).
const TRACT_RULE: Rule = Rule {
    what: "tract is imported only under src/detect/",
    needles: &[
        "tract_onnx",
        "tract_linalg",
        "tract_core",
        "tract_data",
        "tract_nnef",
    ],
    allowed: &["src/detect/"],
};

/// All `unsafe` is the V4L2 mmap queue's, the one `malloc_trim` call's, the SSE2 float → int8
/// quantization (`src/quantize.rs`, shared by the preprocessing and the int8 ops), and
/// lookout's own ops inside tract (`src/detect/int8/`: SIMD intrinsics, and tract's API for allocating packed
/// panels and labelling a tensor's datum type, which has no safe form). Each block has its
/// SAFETY comment there, and the SIMD code a portable twin that tests compare against.
const UNSAFE_RULE: Rule = Rule {
    what: "unsafe code lives only in the V4L2 mmap queue, src/memory.rs, src/quantize.rs and \
           src/detect/int8/",
    needles: &["unsafe {", "unsafe impl", "unsafe fn", "unsafe extern"],
    allowed: &[
        "src/source/v4l2/mmap.rs",
        "src/memory.rs",
        "src/quantize.rs",
        "src/detect/int8/",
    ],
};

/// Threads and CPU placement. `std::thread::sleep` and `std::thread::current` are not listed:
/// they start nothing.
const THREAD_RULES: &[Rule] = &[
    Rule {
        // An outlet (notify::Outlet) that has network or file work runs it on one named,
        // unpinned thread of its own: the metrics exporter (`lookout-metrics`), MQTT (`lookout-mqtt`, `lookout-mqtt-send`), snapshots (`lookout-snapshot`).
        what: "threads are spawned only by the pipeline and the outlets' own threads (metrics, MQTT, snapshots)",
        needles: &[
            "thread::spawn",
            "thread::Builder",
            "thread::scope",
            "spawn_scoped",
        ],
        allowed: &["src/pipeline/", "src/metrics/", "src/mqtt/", "src/snapshot/"],
    },
    Rule {
        what: "threads are pinned to cores only by the pipeline",
        needles: &["set_for_current", "sched_setaffinity", "CoreId {"],
        allowed: &["src/pipeline/"],
    },
    Rule {
        what: "the model's matmul pool is built only by the pipeline",
        needles: &["ThreadPoolBuilder"],
        allowed: &["src/pipeline/"],
    },
    Rule {
        // The documented exception: `Detector::load` (one-shot use: `lookout detect`, bench's
        // model-alone timing, tests) lets tract build its own pool for `threads > 1`; the
        // daemon's pipeline hands `Detector::load_with_pool` a pinned pool instead.
        what: "tract's own thread pool is asked for only by detect::Detector::load",
        needles: &["multithread_with_name"],
        allowed: &["src/detect/mod.rs"],
    },
    Rule {
        // Reading the affinity mask (which cores this process may use) is a machine fact.
        what: "the affinity mask is read only in the pipeline or sysinfo",
        needles: &["core_affinity"],
        allowed: &["src/pipeline/", "src/sysinfo.rs"],
    },
];

/// Calls that panic on bad input; none may appear outside tests.
const PANICS: &[&str] = &[".unwrap()", ".expect(", "panic!("];

/// The attribute that makes clippy deny the same outside tests.
const DENY_PANICS: &str =
    "#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]";

/// A claim about pinning that is false since the core map counts over the affinity mask.
const FALSE_PINNING_CLAIMS: &[&str] = &["0..N-1", "0..cores-1"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, as (path relative to the crate root, text).
fn rust_files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("cannot list {}: {e}", d.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", d.display()))
                .path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                let rel = path
                    .strip_prefix(root())
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, text));
            }
        }
    }
    out.sort();
    assert!(
        !out.is_empty(),
        "no Rust files found under {}",
        dir.display()
    );
    out
}

/// The non-test code lines of a file as (1-based line number, code without a trailing
/// comment), or an error when a `#[cfg(test)]` module is not the file's last item.
fn code_lines(text: &str) -> Result<Vec<(usize, &str)>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let test_start = lines.iter().position(|l| *l == "#[cfg(test)]");
    if let Some(start) = test_start {
        // rustfmt indents everything inside the module: a line at column 0 before the final
        // `}` means code continues after the test module.
        let body = &lines[start + 1..];
        let last = body.iter().rposition(|l| !l.trim().is_empty());
        let opens = body.first().is_some_and(|l| {
            // A test module may share helpers with its siblings' tests: `pub(super) mod`.
            let l = l.strip_prefix("pub(super) ").unwrap_or(l);
            l.starts_with("mod ") && l.ends_with('{')
        });
        let closes = last.is_some_and(|i| body[i] == "}");
        let inner_top_level = last.and_then(|i| {
            body[1..i]
                .iter()
                .position(|l| !l.is_empty() && !l.starts_with([' ', '\t']) && !l.starts_with("//"))
                .map(|j| start + 3 + j)
        });
        if !opens || !closes {
            return Err(format!(
                "{}: `#[cfg(test)]` must start the file's last item, a `mod … {{ … }}`",
                start + 1
            ));
        }
        if let Some(n) = inner_top_level {
            return Err(format!(
                "{n}: code at the top level after the `#[cfg(test)]` module of line {}; keep the test module last",
                start + 1
            ));
        }
    }
    let end = test_start.unwrap_or(lines.len());
    Ok(lines[..end]
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l.split(" // ").next().unwrap_or(l)))
        .collect())
}

/// Violations of `rule` in one file.
fn check_rule(rule: &Rule, path: &str, text: &str) -> Vec<String> {
    if rule.allowed.iter().any(|a| path.starts_with(a)) {
        return Vec::new();
    }
    let Ok(lines) = code_lines(text) else {
        return Vec::new(); // reported by `check_test_module_last`
    };
    lines
        .into_iter()
        .filter_map(|(n, l)| {
            rule.needles
                .iter()
                .find(|needle| l.contains(*needle))
                .map(|needle| {
                    format!(
                        "{path}:{n}: `{needle}`: {} (allowed in {:?})",
                        rule.what, rule.allowed
                    )
                })
        })
        .collect()
}

/// `.unwrap()`, `.expect(` and `panic!(` in one file's non-test code.
fn check_panics(path: &str, text: &str) -> Vec<String> {
    let Ok(lines) = code_lines(text) else {
        return Vec::new();
    };
    lines
        .into_iter()
        .filter_map(|(n, l)| {
            PANICS.iter().find(|p| l.contains(*p)).map(|p| {
                format!("{path}:{n}: `{p}` outside tests: return an error that names the thing")
            })
        })
        .collect()
}

fn check_test_module_last(path: &str, text: &str) -> Option<String> {
    code_lines(text).err().map(|e| format!("{path}:{e}"))
}

/// The top-level module a file belongs to (`src/track/mod.rs` → `track`, `src/geom.rs` →
/// `geom`); `None` for the crate roots.
fn module_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// Module → the modules its non-test code names as `crate::x`.
fn import_graph(files: &[(String, String)]) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut graph = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (path, text) in files {
        let Some(from) = module_of(path) else {
            continue;
        };
        let deps = graph.entry(from.clone()).or_default();
        for (_, line) in code_lines(text).unwrap_or_default() {
            for part in line.split("crate::").skip(1) {
                let to: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !to.is_empty() && to != from && !deps.contains(&to) {
                    deps.push(to);
                }
            }
        }
    }
    graph
}

/// One cycle of the graph, as `a → b → … → a`, if there is any.
fn find_cycle(graph: &std::collections::BTreeMap<String, Vec<String>>) -> Option<String> {
    fn visit<'a>(
        node: &'a str,
        graph: &'a std::collections::BTreeMap<String, Vec<String>>,
        path: &mut Vec<&'a str>,
        done: &mut Vec<&'a str>,
    ) -> Option<String> {
        if let Some(i) = path.iter().position(|n| *n == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node);
            return Some(cycle.join(" → "));
        }
        if done.contains(&node) {
            return None;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.push(node);
        None
    }
    let mut done = Vec::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// Module pairs `(from, to)`: `from` never imports `to` (the intended layering: the tracker,
/// the configuration and the preprocessing stay below the detector and the pipeline).
const NEVER_IMPORTS: &[(&str, &str)] = &[
    ("track", "detect"),
    ("track", "pipeline"),
    ("schedule", "detect"),
    ("config", "pipeline"),
    ("preprocess", "detect"),
    ("vocab", "detect"),
];

/// The first identifier of `s` (letters, digits, `_`).
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The names a path continues with after `prefix` in `line`: `super::a` → `a`,
/// `super::{a, b::C}` → `a`, `b`.
fn names_after<'a>(line: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    for part in line.split(prefix).skip(1) {
        if let Some(group) = part.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(ident(group[start..i].trim_start()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(group[start..i].trim_start()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(part));
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

/// The import graph between the files of each folder of `src/`: node `src/m/a.rs` (or
/// `src/m/a/mod.rs`) → the files of the same folder its non-test code names: `super::b`
/// (a sibling, or the folder's `mod.rs` for anything else), `crate::m::b`, and, from a
/// `mod.rs`, `b::…` for a child `b` (lines declaring modules or re-exporting, the façade, do
/// not count).
fn file_graph(files: &[(String, String)]) -> std::collections::BTreeMap<String, Vec<String>> {
    use std::collections::BTreeMap;
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    // A folder's child named `name` → its file, if it has one.
    let child = |dir: &str, name: &str| -> Option<String> {
        [format!("{dir}/{name}.rs"), format!("{dir}/{name}/mod.rs")]
            .into_iter()
            .find(|p| paths.contains(&p.as_str()))
    };
    let mut graph = BTreeMap::<String, Vec<String>>::new();
    for (path, text) in files {
        let Some(rel) = path.strip_prefix("src/") else {
            continue;
        };
        let is_mod = path.ends_with("/mod.rs");
        let file_dir = &path[..path.rfind('/').unwrap_or(0)];
        // The folder `super::` names: a `mod.rs` is its own folder's root.
        let super_dir = if is_mod {
            &file_dir[..file_dir.rfind('/').unwrap_or(0)]
        } else {
            file_dir
        };
        let deps = graph.entry(path.clone()).or_default();
        let add = |to: String, deps: &mut Vec<String>| {
            if &to != path && !deps.contains(&to) {
                deps.push(to);
            }
        };
        // Inside an inline `mod x { … }`, `super::` names the file itself.
        let mut inline_module = false;
        for (_, line) in code_lines(text).unwrap_or_default() {
            let trimmed = line.trim_start();
            let opens = ["mod ", "pub mod ", "pub(crate) mod ", "pub(super) mod "];
            if opens.iter().any(|o| line.starts_with(o)) && line.ends_with('{') {
                inline_module = true;
            } else if inline_module && line == "}" {
                inline_module = false;
            }
            if !inline_module && super_dir != "src" && !line.contains("super::super::") {
                for name in names_after(line, "super::") {
                    match child(super_dir, name) {
                        Some(f) => add(f, deps),
                        None => add(format!("{super_dir}/mod.rs"), deps),
                    }
                }
            }
            let module = rel.split('/').next().unwrap_or("");
            for name in names_after(line, &format!("crate::{module}::")) {
                if let Some(f) = child(&format!("src/{module}"), name) {
                    add(f, deps);
                }
            }
            let facade = [
                "mod ",
                "pub mod ",
                "pub(crate) mod ",
                "pub use ",
                "pub(crate) use ",
            ];
            if is_mod && !facade.iter().any(|f| trimmed.starts_with(f)) {
                for word in
                    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                {
                    let Some((first, _)) = word.split_once("::") else {
                        continue;
                    };
                    if matches!(first, "" | "crate" | "super" | "self" | "std") {
                        continue;
                    }
                    if let Some(f) = child(file_dir, first) {
                        add(f, deps);
                    }
                }
            }
        }
    }
    graph
}

fn report(what: &str, problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{what}: {} problem(s)\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn test_modules_come_last() {
    let problems = rust_files(&root().join("src"))
        .iter()
        .filter_map(|(p, t)| check_test_module_last(p, t))
        .collect();
    report("test modules", problems);
}

#[test]
fn only_detect_imports_tract() {
    let files = rust_files(&root().join("src"));
    let problems = files
        .iter()
        .flat_map(|(p, t)| check_rule(&TRACT_RULE, p, t))
        .collect();
    report("tract outside src/detect/", problems);
    // The rule would be empty if detect stopped using tract under these names.
    assert!(
        files
            .iter()
            .any(|(p, t)| p.starts_with("src/detect/") && t.contains("tract_onnx")),
        "src/detect/ no longer names tract_onnx: update TRACT_RULE"
    );
}

#[test]
fn only_the_mmap_queue_is_unsafe() {
    let files = rust_files(&root().join("src"));
    let problems = files
        .iter()
        .flat_map(|(p, t)| check_rule(&UNSAFE_RULE, p, t))
        .collect();
    report(
        "unsafe outside src/source/v4l2/mmap.rs and src/memory.rs",
        problems,
    );
}

#[test]
fn only_the_pipeline_and_the_outlets_start_threads_and_only_the_pipeline_pins_cores() {
    let files = rust_files(&root().join("src"));
    let problems = THREAD_RULES
        .iter()
        .flat_map(|r| files.iter().flat_map(move |(p, t)| check_rule(r, p, t)))
        .collect();
    report(
        "threads outside the pipeline and the outlets, or pinning outside the pipeline",
        problems,
    );
}

#[test]
fn no_unwrap_expect_or_panic_outside_tests() {
    let files = rust_files(&root().join("src"));
    report(
        "panicking calls in non-test code",
        files.iter().flat_map(|(p, t)| check_panics(p, t)).collect(),
    );
    for crate_root in ["src/lib.rs", "src/main.rs"] {
        let text = files
            .iter()
            .find(|(p, _)| p == crate_root)
            .map(|(_, t)| t.as_str())
            .unwrap_or_default();
        // rustfmt may wrap the attribute: compare without whitespace.
        let squeeze = |s: &str| s.split_whitespace().collect::<String>();
        assert!(
            squeeze(text).contains(&squeeze(DENY_PANICS)),
            "{crate_root} must keep `{DENY_PANICS}` (clippy enforces the rule in CI)"
        );
    }
}

#[test]
fn module_imports_form_no_cycle() {
    let graph = import_graph(&rust_files(&root().join("src")));
    assert!(graph.contains_key("pipeline") && graph.contains_key("geom"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import cycle between modules: {cycle}\nfull graph: {graph:#?}");
    }
    for leaf in ["geom", "sysinfo", "frame", "stats"] {
        let deps = graph.get(leaf).cloned().unwrap_or_default();
        assert!(
            deps.is_empty(),
            "src/{leaf} must import nothing from the crate, imports {deps:?}"
        );
    }
    let vocab = graph.get("vocab").cloned().unwrap_or_default();
    assert!(
        vocab.iter().all(|m| m == "geom"),
        "src/vocab must import nothing from the crate but geom, imports {vocab:?}"
    );
}

#[test]
fn the_layering_has_no_broken_rule() {
    let graph = import_graph(&rust_files(&root().join("src")));
    let problems = NEVER_IMPORTS
        .iter()
        .filter(|(from, to)| graph.get(*from).is_some_and(|d| d.iter().any(|m| m == to)))
        .map(|(from, to)| format!("src/{from} imports crate::{to}, which it must never do"))
        .collect();
    report("layering", problems);
}

/// Folders whose files still import each other in a circle, to be untied (none today). The
/// test fails when one of them no longer has a circle, so the list only shrinks.
const FILE_CYCLES_LEFT: &[&str] = &[];

#[test]
fn files_inside_a_module_import_each_other_in_no_cycle() {
    let graph = file_graph(&rust_files(&root().join("src")));
    assert!(
        graph
            .get("src/pipeline/scheduler.rs")
            .is_some_and(|d| d.iter().any(|f| f == "src/pipeline/hub.rs")),
        "the file graph sees `use super::hub::…`: {graph:#?}"
    );
    let within = |keep: &dyn Fn(&str) -> bool| {
        let mut g = graph.clone();
        g.retain(|f, _| keep(f));
        for deps in g.values_mut() {
            deps.retain(|f| keep(f));
        }
        g
    };
    let left = |f: &str| FILE_CYCLES_LEFT.iter().any(|p| f.starts_with(p));
    if let Some(cycle) = find_cycle(&within(&|f| !left(f))) {
        panic!("import cycle between files: {cycle}");
    }
    for folder in FILE_CYCLES_LEFT {
        assert!(
            find_cycle(&within(&|f| f.starts_with(folder))).is_some(),
            "{folder} has no import cycle between its files any more: take it off FILE_CYCLES_LEFT"
        );
    }
}

/// The longest a function may be, in lines, unless its doc comment says it is "a table
/// printer" (linear on purpose: one `writeln!` per line of output).
const MAX_FN_LINES: usize = 100;

/// Functions still over [`MAX_FN_LINES`], to be split (`file::name`). The test fails when
/// one is no longer over, so the list only shrinks.
const LONG_FNS_LEFT: &[&str] = &[];

/// The most code lines (not blank, not comments, before the test module) a file of `src/`
/// may have, unless it is one of [`NUMERIC_KERNELS`].
const MAX_FILE_LINES: usize = 700;

/// Files allowed over [`MAX_FILE_LINES`]: numeric kernels, each documented at its top.
const NUMERIC_KERNELS: &[&str] = &["src/detect/int8/qconv.rs"];

/// The functions of a file's non-test code as (`file::name`, lines from `fn` to its closing
/// brace, its doc comment): a function ends at the first `}` line indented as its `fn`.
fn functions(path: &str, text: &str) -> Vec<(String, usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| *l == "#[cfg(test)]")
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut rest = line.trim_start();
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "unsafe ",
            "async ",
        ] {
            rest = rest.strip_prefix(prefix).unwrap_or(rest);
        }
        let Some(sig) = rest.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name = ident(sig);
        let close = format!("{indent}}}");
        let n = if line.trim_end().ends_with('}') {
            1
        } else {
            match lines[i + 1..end].iter().position(|l| *l == close) {
                Some(k) => k + 2,
                None => continue,
            }
        };
        let doc: Vec<&str> = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim_start())
            .take_while(|l| l.starts_with("///") || l.starts_with("#["))
            .map(|l| l.trim_start_matches('/').trim())
            .collect();
        let doc: Vec<&str> = doc.into_iter().rev().collect();
        out.push((format!("{path}::{name}"), n, doc.join(" ")));
    }
    out
}

#[test]
fn no_function_is_over_100_lines_but_table_printers() {
    let mut problems = Vec::new();
    let mut long = Vec::new();
    for (path, text) in rust_files(&root().join("src")) {
        for (name, n, doc) in functions(&path, &text) {
            if n > MAX_FN_LINES && !doc.contains("a table printer") {
                long.push(name.clone());
                if !LONG_FNS_LEFT.contains(&name.as_str()) {
                    problems.push(format!("{name}: {n} lines (at most {MAX_FN_LINES})"));
                }
            }
        }
    }
    for left in LONG_FNS_LEFT {
        if !long.iter().any(|l| l == left) {
            problems.push(format!(
                "{left} is no longer long: take it off LONG_FNS_LEFT"
            ));
        }
    }
    report("long functions", problems);
}

#[test]
fn no_file_is_over_700_code_lines_but_numeric_kernels() {
    let problems = rust_files(&root().join("src"))
        .iter()
        .filter(|(path, _)| !NUMERIC_KERNELS.contains(&path.as_str()))
        .filter_map(|(path, text)| {
            let n = code_lines(text)
                .ok()?
                .iter()
                .filter(|(_, l)| !l.trim().is_empty())
                .count();
            (n > MAX_FILE_LINES)
                .then(|| format!("{path}: {n} code lines (at most {MAX_FILE_LINES})"))
        })
        .collect();
    report("long files", problems);
}

#[test]
fn shipped_config_does_not_claim_pinning_assumes_cores_0_to_n() {
    let path = root().join("systemd/lookout.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let problems = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            FALSE_PINNING_CLAIMS.iter().find(|c| l.contains(*c)).map(|c| {
                format!(
                    "systemd/lookout.toml:{}: `{c}`: automatic pinning counts over the cores the process may use (its affinity mask), not 0..N-1",
                    i + 1
                )
            })
        })
        .collect();
    report("shipped configuration", problems);
}

// --- the checks themselves fire ---------------------------------------------------------

#[test]
fn tidy_rules_fire_on_violations() {
    let code = "use std::io;\nfn f(x: Option<u8>) -> u8 {\n    x.unwrap()\n}\n";
    assert_eq!(check_panics("src/frame.rs", code).len(), 1);
    assert!(check_panics("src/frame.rs", "    x.expect(\"y\")\n")[0].contains(":1:"));
    assert_eq!(
        check_panics("src/frame.rs", "    panic!(\"no\");\n").len(),
        1
    );
    // Comments and test modules do not count.
    let quiet = "// x.unwrap()\nfn g() {}\n\n#[cfg(test)]\nmod tests {\n    fn t() { None::<u8>.unwrap(); }\n}\n";
    assert!(check_panics("src/frame.rs", quiet).is_empty());
    // Code after a test module is an error, not hidden.
    let hidden = "#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn h() { None::<u8>.unwrap(); }\n";
    assert!(check_test_module_last("src/frame.rs", hidden).is_some());

    let spawn = "fn s() {\n    std::thread::spawn(|| ());\n}\n";
    let threads = &THREAD_RULES[0];
    assert_eq!(
        check_rule(threads, "src/source/v4l2/streaming.rs", spawn).len(),
        1
    );
    assert_eq!(check_rule(threads, "src/pipeline.rs", spawn).len(), 1);
    assert!(check_rule(threads, "src/pipeline/hub.rs", spawn).is_empty());
    assert!(check_rule(threads, "src/metrics/server.rs", spawn).is_empty());
    // The exporter may start its thread but never pin it.
    let pin_here = "core_affinity::set_for_current(id);\n";
    assert_eq!(
        check_rule(&THREAD_RULES[1], "src/metrics/server.rs", pin_here).len(),
        1
    );
    assert!(check_rule(
        threads,
        "src/source/v4l2/streaming.rs",
        "std::thread::sleep(d);\n"
    )
    .is_empty());
    let pin = "core_affinity::set_for_current(id);\n";
    assert_eq!(check_rule(&THREAD_RULES[1], "src/sysinfo.rs", pin).len(), 1);

    let files = |a: &str, b: &str| {
        vec![
            ("src/a.rs".to_string(), a.to_string()),
            ("src/b/mod.rs".to_string(), b.to_string()),
        ]
    };
    let cyclic = import_graph(&files("use crate::b::X;\n", "fn f() { crate::a::g() }\n"));
    assert_eq!(find_cycle(&cyclic).as_deref(), Some("a → b → a"));
    let acyclic = import_graph(&files("use crate::b::X;\n", "fn f() {}\n"));
    assert_eq!(find_cycle(&acyclic), None);

    let folder = |m: &str, a: &str, b: &str| {
        vec![
            ("src/m/a.rs".to_string(), a.to_string()),
            ("src/m/b.rs".to_string(), b.to_string()),
            ("src/m/mod.rs".to_string(), m.to_string()),
        ]
    };
    let siblings = file_graph(&folder(
        "mod a;\nmod b;\n",
        "use super::b::X;\n",
        "use super::{a::Y, Z};\n",
    ));
    assert_eq!(
        find_cycle(&siblings).as_deref(),
        Some("src/m/a.rs → src/m/b.rs → src/m/a.rs")
    );
    assert_eq!(siblings["src/m/b.rs"], ["src/m/a.rs", "src/m/mod.rs"]);
    let through_mod = file_graph(&folder("mod a;\nuse a::X;\n", "use super::Y;\n", ""));
    assert_eq!(
        find_cycle(&through_mod).as_deref(),
        Some("src/m/a.rs → src/m/mod.rs → src/m/a.rs")
    );
    let facade = file_graph(&folder("mod a;\npub use a::X;\n", "use super::Y;\n", ""));
    assert_eq!(find_cycle(&facade), None);

    let body = "    x();\n".repeat(MAX_FN_LINES);
    let long = format!("/// Does x.\npub fn f() {{\n{body}}}\n\nimpl A {{\n    fn g() {{}}\n}}\n");
    let fns = functions("src/a.rs", &long);
    assert_eq!(fns[0].0, "src/a.rs::f");
    assert!(fns[0].1 > MAX_FN_LINES && !fns[0].2.contains("a table printer"));
    assert_eq!((fns[1].0.as_str(), fns[1].1), ("src/a.rs::g", 1));
    let printer = format!("/// The report: a table printer.\nfn p() {{\n{body}}}\n");
    assert!(functions("src/a.rs", &printer)[0]
        .2
        .contains("a table printer"));

    let tract = "use tract_onnx::prelude::*;\n";
    assert_eq!(check_rule(&TRACT_RULE, "src/preprocess.rs", tract).len(), 1);
    let raw = "    let b = unsafe { std::mem::zeroed() };\n";
    assert_eq!(
        check_rule(&UNSAFE_RULE, "src/source/v4l2/streaming.rs", raw).len(),
        1
    );
    assert!(check_rule(&UNSAFE_RULE, "src/source/v4l2/mmap.rs", raw).is_empty());
    assert!(check_rule(&TRACT_RULE, "src/detect/mod.rs", tract).is_empty());
}
