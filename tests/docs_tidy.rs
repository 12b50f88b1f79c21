//! Tidy checks for what the project writes for people: the product documents, code comments,
//! tests and scripts say what is true of the product now, stay inside the repository, and
//! ARCHITECTURE.md's module list cannot drift from the code.
//!
//! - **No development history** in README.md, ARCHITECTURE.md, docs/, models/README.md, the
//!   comments of src/, benches/ and fuzz/, and all of tests/, scripts/, systemd/ and
//!   packaging/ (CHANGELOG.md and git hold the history). [`HISTORY_NUMBERED`] are words that
//!   name a development step or a ticket when a number follows (`stop 26`, `stop-25`,
//!   `issue #12`, `issues 14`); `(#N)` is a ticket reference; [`HISTORY_PHRASES`] are phrases
//!   about a step or an earlier version (`this round`, `build machine`, `session`, `ticket`,
//!   `tried and not kept`, `first shipped`, …), matched as whole words, any case.
//! - **No link leaves the repository.** `../shared` and `/work/shared` (a development
//!   machine's directories) never appear. A markdown link `[text](target)` in a `.md` file
//!   either is an `http(s)` URL on the allow list, or is a relative path that resolves inside
//!   the repository root to a file or directory that exists, and when it names an anchor of a
//!   markdown file, that heading exists.
//! - **http(s) policy**: a URL may appear in the scanned files only when it starts with one of
//!   [`ALLOWED_URLS`]: licence and provenance facts of bundled data, and the package mirror
//!   the build images come from. Anything else (other projects' documentation, issue trackers, tools'
//!   home pages) is written as plain text (a package or crate name) instead.
//! - **ARCHITECTURE.md ↔ code**: every top-level module of `src/` has a `### \`name\`` section
//!   under "## Modules" and every section a module; each section's `May import:` line lists
//!   exactly the modules its non-test code names as `crate::x` (the same reading of the code
//!   as `tests/tidy.rs`: text before the `#[cfg(test)]` module, comment lines left out). An
//!   import the intended picture forbids is marked `*(to be removed)*`; the "## Layering"
//!   section's rules (`` - `a` ↛ `b` ``) must hold in the code unless `b` is so marked in
//!   `a`'s list — so when the import goes, the checks say to update that one line.
//! - README.md and models/README.md are at most 250 lines; README's install section starts
//!   within its first 60 lines; README names the two commands, and `.ci/run` runs the same
//!   test command.
//!
//! This file holds the patterns themselves, so it is not scanned. Every rule has a unit test
//! below showing that it fires.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// Words that name a development step or a ticket when a number follows them.
const HISTORY_NUMBERED: &[&str] = &["stop", "stops", "issue", "issues"];

/// Phrases about development steps or earlier versions (whole words, any case).
const HISTORY_PHRASES: &[&str] = &[
    "this round",
    "that round",
    "build machine",
    "session",
    "sessions",
    "ticket",
    "tickets",
    "tried and not kept",
    "tried and dropped",
    "not kept",
    "kept for the record",
    "for the record",
    "first shipped",
    "shipped until",
    "earlier version",
    "earlier versions",
    "previous version",
    "the old version",
];

/// Directories of a development machine that a clone does not have.
const OUTSIDE_PATHS: &[&str] = &["../shared", "/work/shared"];

/// The only URLs allowed: licence and provenance facts of bundled data.
const ALLOWED_URLS: &[&str] = &[
    // tests/data/README.md: the public-domain statement of a bundled sample photo.
    "https://flic.kr/p/r9qvLn",
    // scripts/cross-image.sh: Debian's package mirror, where the build images' packages come
    // from (a setting the script needs, overridable by LOOKOUT_CROSS_MIRROR).
    "http://deb.debian.org/debian",
];

/// Product documents checked as a whole.
const DOC_FILES: &[&str] = &["README.md", "ARCHITECTURE.md", "models/README.md"];

/// Directories whose text files are checked as a whole.
const WHOLE_DIRS: &[&str] = &["docs", "tests", "scripts", "systemd", "packaging"];

/// Directories of code whose comments are checked (other text files there as a whole).
const COMMENT_DIRS: &[&str] = &["src", "benches", "fuzz"];

/// Text files by extension (and extension-less maintainer scripts by name).
const TEXT_EXTENSIONS: &[&str] = &["rs", "md", "sh", "py", "toml", "service", "txt"];
const TEXT_NAMES: &[&str] = &["postinst", "prerm", "postrm", "preinst"];

/// Not scanned: this file (it holds the patterns), generated lock files, fuzzing data.
const SKIPPED: &[&str] = &[
    "tests/docs_tidy.rs",
    "fuzz/Cargo.lock",
    "fuzz/corpus/",
    "fuzz/artifacts/",
    "fuzz/target/",
    "fuzz/coverage/",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Path relative to the root, `/`-separated.
fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Every text file under `dir` (relative to the root), as (relative path, text).
fn text_files(dir: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root().join(dir)];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", d.display()))
                .path();
            let r = rel(&path);
            if SKIPPED.iter().any(|s| r == *s || r.starts_with(s)) {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !TEXT_EXTENSIONS.contains(&ext) && !TEXT_NAMES.contains(&name) {
                continue;
            }
            // Binary or non-UTF-8 files are not text for this check.
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.push((r, text));
            }
        }
    }
    out.sort();
    out
}

/// The text a file is checked on: comment lines (and trailing comments) of Rust code in the
/// comment directories, the whole text elsewhere. Line numbers are kept.
fn checked_lines(path: &str, text: &str) -> Vec<(usize, String)> {
    let comments_only = path.ends_with(".rs")
        && COMMENT_DIRS
            .iter()
            .any(|d| path.starts_with(&format!("{d}/")));
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            if !comments_only {
                return Some((i + 1, line.to_string()));
            }
            let t = line.trim_start();
            if t.starts_with("//") {
                Some((i + 1, t.to_string()))
            } else {
                line.split_once(" // ").map(|(_, c)| (i + 1, c.to_string()))
            }
        })
        .collect()
}

/// Every file the history and link rules apply to.
fn scanned_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for f in DOC_FILES {
        let text = std::fs::read_to_string(root().join(f))
            .unwrap_or_else(|e| panic!("cannot read {f}: {e}"));
        files.push((f.to_string(), text));
    }
    for d in WHOLE_DIRS.iter().chain(COMMENT_DIRS) {
        files.extend(text_files(d));
    }
    assert!(files.len() > 50, "too few files scanned: {}", files.len());
    files
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Byte offsets where `needle` (lowercase) occurs in `hay` (lowercased) as whole words.
fn word_hits(hay: &str, needle: &str) -> Vec<usize> {
    let lower = hay.to_lowercase();
    let mut hits = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find(needle) {
        let start = from + i;
        let end = start + needle.len();
        let before = lower[..start].chars().next_back();
        let after = lower[end..].chars().next();
        if !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char) {
            hits.push(end);
        }
        from = start + needle.len().max(1);
    }
    hits
}

/// History words in one line, as descriptions.
fn history_in_line(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let lower = line.to_lowercase();
    for word in HISTORY_NUMBERED {
        for end in word_hits(line, word) {
            // `stop 26`, `stop-26`, `issue #12`, `issue 14`
            let rest = &lower[end..];
            let rest = rest
                .strip_prefix(' ')
                .or_else(|| rest.strip_prefix('-'))
                .unwrap_or(rest);
            let rest = rest.strip_prefix('#').unwrap_or(rest);
            if rest.starts_with(|c: char| c.is_ascii_digit()) {
                found.push(format!("`{word} N` names a development step or ticket"));
            }
        }
    }
    let mut from = 0;
    while let Some(i) = line[from..].find("(#") {
        let at = from + i + 2;
        if line[at..].starts_with(|c: char| c.is_ascii_digit()) {
            found.push("`(#N)` names a ticket".to_string());
        }
        from = at;
    }
    for phrase in HISTORY_PHRASES {
        if !word_hits(line, phrase).is_empty() {
            found.push(format!("`{phrase}` tells development history"));
        }
    }
    found
}

/// URLs in a line that are not on the allow list.
fn disallowed_urls(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for scheme in ["http://", "https://"] {
        let mut from = 0;
        while let Some(i) = line[from..].find(scheme) {
            let start = from + i;
            let url: String = line[start..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !")>\"'`]".contains(*c))
                .collect();
            if !ALLOWED_URLS.iter().any(|a| url.starts_with(a)) {
                out.push(url);
            }
            from = start + scheme.len();
        }
    }
    out
}

/// Problems of the history and plain-text link rules in one file.
fn check_text(path: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (n, line) in checked_lines(path, text) {
        for h in history_in_line(&line) {
            problems.push(format!("{path}:{n}: {h}: {}", line.trim()));
        }
        for o in OUTSIDE_PATHS {
            if line.contains(o) {
                problems.push(format!("{path}:{n}: `{o}` is outside the repository"));
            }
        }
        for url in disallowed_urls(&line) {
            problems.push(format!(
                "{path}:{n}: link {url} leaves the repository (not on ALLOWED_URLS)"
            ));
        }
    }
    problems
}

/// Markdown link targets `[text](target)` of a document, with line numbers.
fn markdown_links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code_block = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code_block = !in_code_block;
            continue;
        }
        if in_code_block {
            continue;
        }
        let mut from = 0;
        while let Some(j) = line[from..].find("](") {
            let start = from + j + 2;
            let Some(len) = line[start..].find(')') else {
                break;
            };
            let target = line[start..start + len].trim();
            // `[text](target "title")`
            let target = target.split_whitespace().next().unwrap_or("");
            if !target.is_empty() {
                out.push((i + 1, target.to_string()));
            }
            from = start + len;
        }
    }
    out
}

/// GitHub's anchor for a heading: lowercase, punctuation dropped, spaces → `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown text's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code_block = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code_block = !in_code_block;
        } else if !in_code_block && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// `path` with `.` and `..` resolved lexically; `None` when it climbs above its start.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Problems of the markdown links of one document at `path` (relative to `repo`).
fn check_links(repo: &Path, path: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let dir = Path::new(path).parent().unwrap_or(Path::new(""));
    for (n, target) in markdown_links(text) {
        if target.starts_with("http://") || target.starts_with("https://") {
            if !ALLOWED_URLS.iter().any(|a| target.starts_with(a)) {
                problems.push(format!(
                    "{path}:{n}: link {target} leaves the repository (not on ALLOWED_URLS)"
                ));
            }
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            problems.push(format!("{path}:{n}: link {target} leaves the repository"));
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved = if file.is_empty() {
            Some(PathBuf::from(path))
        } else if file.starts_with('/') {
            None
        } else {
            normalize(&dir.join(file))
        };
        let Some(resolved) = resolved else {
            problems.push(format!(
                "{path}:{n}: link {target} resolves outside the repository"
            ));
            continue;
        };
        let on_disk = repo.join(&resolved);
        if !on_disk.exists() {
            problems.push(format!(
                "{path}:{n}: link {target}: {} does not exist in the repository",
                resolved.display()
            ));
            continue;
        }
        if let Some(anchor) = anchor {
            let is_md = resolved.extension().is_some_and(|e| e == "md");
            if is_md {
                let target_text = if file.is_empty() {
                    text.to_string()
                } else {
                    std::fs::read_to_string(&on_disk).unwrap_or_default()
                };
                if !anchors(&target_text).contains(anchor) {
                    problems.push(format!(
                        "{path}:{n}: link {target}: no heading with anchor #{anchor}"
                    ));
                }
            }
        }
    }
    problems
}

// ── ARCHITECTURE.md against the code ──

/// The top-level module a file belongs to (`src/track/mod.rs` → `track`); `None` for the
/// crate roots.
fn module_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// Non-test code lines: the text before the `#[cfg(test)]` module, comment lines left out,
/// trailing comments cut.
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| *l == "#[cfg(test)]")
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| l.split(" // ").next().unwrap_or(l))
        .collect()
}

fn ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The modules one line names as `crate::x` (also `crate::{x, y::z}` on one line).
fn crate_imports(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in line.split("crate::").skip(1) {
        if let Some(group) = part.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[i..]);
                        if !name.is_empty() && name != "self" {
                            out.push(name);
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(part);
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// Module → the modules its non-test code imports.
fn import_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::<String, BTreeSet<String>>::new();
    for (path, text) in files {
        if !path.ends_with(".rs") {
            continue;
        }
        let Some(from) = module_of(path) else {
            continue;
        };
        let deps = graph.entry(from.clone()).or_default();
        for line in code_lines(text) {
            for to in crate_imports(line) {
                if to != from {
                    deps.insert(to);
                }
            }
        }
    }
    graph
}

/// One module's section of ARCHITECTURE.md.
#[derive(Debug, Default)]
struct Section {
    /// Documented imports.
    imports: BTreeSet<String>,
    /// Of those, the ones marked `(to be removed)`.
    to_remove: BTreeSet<String>,
    /// Whether a `May import:` line was found.
    has_imports_line: bool,
}

/// The backticked names of a `May import:` list, each with its "to be removed" mark.
fn parse_import_list(list: &str) -> Vec<(String, bool)> {
    list.split(',')
        .filter_map(|item| {
            let mut parts = item.split('`');
            parts.next()?;
            let name = parts.next()?.trim().to_string();
            let marked = item.contains("to be removed");
            (!name.is_empty()).then_some((name, marked))
        })
        .collect()
}

/// The "## Modules" sections and the "## Layering" rules of ARCHITECTURE.md.
fn parse_architecture(text: &str) -> (BTreeMap<String, Section>, Vec<(String, String)>) {
    let mut sections = BTreeMap::<String, Section>::new();
    let mut rules = Vec::new();
    let mut chapter = String::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            chapter = h.trim().to_string();
            current = None;
        } else if let Some(h) = line.strip_prefix("### ") {
            current = None;
            if chapter == "Modules" {
                let name = h.trim().trim_matches('`').to_string();
                sections.entry(name.clone()).or_default();
                current = Some(name);
            }
        } else if let (Some(name), Some(list)) = (&current, line.strip_prefix("May import:")) {
            let s = sections.entry(name.clone()).or_default();
            s.has_imports_line = true;
            for (m, marked) in parse_import_list(list) {
                if marked {
                    s.to_remove.insert(m.clone());
                }
                s.imports.insert(m);
            }
        } else if chapter == "Layering" && line.starts_with("- ") && line.contains('↛') {
            let names: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
            if let [a, b] = names[..] {
                rules.push((a.to_string(), b.to_string()));
            }
        }
    }
    (sections, rules)
}

/// Differences between ARCHITECTURE.md's sections and rules and the code's import graph.
fn check_architecture(
    sections: &BTreeMap<String, Section>,
    rules: &[(String, String)],
    graph: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (module, actual) in graph {
        let Some(s) = sections.get(module) else {
            problems.push(format!(
                "src/{module} has no \"### `{module}`\" section under \"## Modules\""
            ));
            continue;
        };
        if !s.has_imports_line {
            problems.push(format!("section `{module}` has no `May import:` line"));
            continue;
        }
        for extra in actual.difference(&s.imports) {
            problems.push(format!(
                "`{module}` imports `{extra}` (crate::{extra}), but its `May import:` line does not list it"
            ));
        }
        for gone in s.imports.difference(actual) {
            problems.push(format!(
                "`{module}`'s `May import:` line lists `{gone}`, which its code does not import: drop it"
            ));
        }
    }
    for name in sections.keys() {
        if !graph.contains_key(name) {
            problems.push(format!(
                "section `{name}` names no module of src/ (renamed or removed?)"
            ));
        }
    }
    for (a, b) in rules {
        let imports = graph.get(a).is_some_and(|d| d.contains(b));
        let marked = sections.get(a).is_some_and(|s| s.to_remove.contains(b));
        if imports && !marked {
            problems.push(format!(
                "rule `{a}` ↛ `{b}` is broken: `{a}` imports `{b}` (mark it `(to be removed)` in `{a}`'s list only if it is on its way out)"
            ));
        }
        if !imports && marked {
            problems.push(format!(
                "`{a}` no longer imports `{b}`: drop `{b}` and its mark from `{a}`'s `May import:` line"
            ));
        }
    }
    problems
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
fn no_development_history_and_no_links_leaving_the_repository() {
    let problems = scanned_files()
        .iter()
        .flat_map(|(p, t)| check_text(p, t))
        .collect();
    report("history or outside links", problems);
}

#[test]
fn markdown_links_stay_inside_the_repository_and_resolve() {
    let problems = scanned_files()
        .iter()
        .filter(|(p, _)| p.ends_with(".md"))
        .flat_map(|(p, t)| check_links(&root(), p, t))
        .collect();
    report("markdown links", problems);
}

#[test]
fn architecture_lists_every_module_and_its_actual_imports() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md"))
        .unwrap_or_else(|e| panic!("cannot read ARCHITECTURE.md: {e}"));
    let (sections, rules) = parse_architecture(&text);
    assert!(
        rules.len() >= 3,
        "ARCHITECTURE.md's \"## Layering\" lists too few rules: {rules:?}"
    );
    let graph = import_graph(&text_files("src"));
    assert!(graph.contains_key("pipeline") && graph.contains_key("track"));
    report(
        "ARCHITECTURE.md against the code",
        check_architecture(&sections, &rules, &graph),
    );
}

#[test]
fn readme_is_short_and_starts_with_install_and_the_two_commands() {
    let readme = std::fs::read_to_string(root().join("README.md"))
        .unwrap_or_else(|e| panic!("cannot read README.md: {e}"));
    let lines: Vec<&str> = readme.lines().collect();
    assert!(
        lines.len() <= 250,
        "README.md has {} lines (≤ 250)",
        lines.len()
    );
    let install = lines
        .iter()
        .position(|l| l.starts_with("## Install"))
        .unwrap_or(usize::MAX);
    assert!(
        install < 60,
        "README.md's \"## Install…\" section must start within its first 60 lines"
    );
    for cmd in ["scripts/demo.sh", "scripts/test.sh"] {
        assert!(readme.contains(cmd), "README.md must name `{cmd}`");
    }
    let ci = std::fs::read_to_string(root().join(".ci/run"))
        .unwrap_or_else(|e| panic!("cannot read .ci/run: {e}"));
    assert!(
        ci.lines().any(|l| l.trim() == "bash scripts/test.sh"),
        ".ci/run must run the README's test command, scripts/test.sh"
    );
    let card = std::fs::read_to_string(root().join("models/README.md"))
        .unwrap_or_else(|e| panic!("cannot read models/README.md: {e}"));
    let n = card.lines().count();
    assert!(n <= 250, "models/README.md has {n} lines (≤ 250)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_steps_and_tickets_fire() {
        for line in [
            "measured in stop 26",
            "the stop-25 reading",
            "Stops 25–29 ran on a Xeon",
            "issue #12's targets",
            "(issue 14, item 7)",
            "issues #8 and #11",
            "made faster (#9)",
        ] {
            assert!(!history_in_line(line).is_empty(), "{line:?} not caught");
        }
        for line in [
            "stops within a second",
            "a stop (SIGTERM)",
            "the issue is the camera",
            "array[#0]",
            "nonstop 3",
        ] {
            assert!(history_in_line(line).is_empty(), "{line:?} caught");
        }
    }

    #[test]
    fn history_phrases_fire_as_whole_words() {
        for line in [
            "on this round's machine",
            "the build machine of the day",
            "replayed in one session",
            "see the ticket",
            "Tried and not kept: a second pass",
            "the first shipped INT8 files",
            "an earlier version did this",
        ] {
            assert!(!history_in_line(line).is_empty(), "{line:?} not caught");
        }
        for line in [
            "ort.SessionOptions()",
            "InferenceSession(model)",
            "a ticketing",
        ] {
            assert!(history_in_line(line).is_empty(), "{line:?} caught");
        }
    }

    #[test]
    fn outside_paths_and_urls_fire() {
        let p = check_text("README.md", "see ../shared/review/REVIEW-3.md\n");
        assert_eq!(p.len(), 1, "{p:?}");
        let p = check_text("tests/vm/x.sh", "HARNESS=/work/shared/harness\n");
        assert_eq!(p.len(), 1, "{p:?}");
        let p = check_text("docs/x.md", "read https://example.org/docs first\n");
        assert_eq!(p.len(), 1, "{p:?}");
        let p = check_text("tests/data/README.md", "<https://flic.kr/p/r9qvLn>`__\n");
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn code_is_not_checked_in_source_directories_but_comments_are() {
        let text = "let s = Session::new(); // a session of its own\nfn f() {}\n";
        let p = check_text("src/x.rs", text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(check_text("src/x.rs", "let x = \"stop 3\";\n").is_empty());
        // tests/ and scripts/ are checked as a whole.
        assert_eq!(check_text("tests/x.rs", "let x = \"stop 3\";\n").len(), 1);
    }

    /// A small repository on disk for the link checks.
    fn fixture() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::create_dir_all(dir.path().join("docs")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("docs/a.md"), "# A\n## Some part\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("README.md"), "# R\n").unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    #[test]
    fn links_to_missing_files_outside_paths_urls_and_missing_anchors_fire() {
        let dir = fixture();
        let ok = "[a](docs/a.md) [p](docs/a.md#some-part) [s](#r) [d](docs/)\n# R\n";
        assert!(check_links(dir.path(), "README.md", ok).is_empty());
        let from_docs = "[r](../README.md) [self](a.md#a)\n";
        assert!(check_links(dir.path(), "docs/a.md", from_docs).is_empty());
        for bad in [
            "[x](docs/missing.md)",
            "[x](../outside.md)",
            "[x](docs/../../outside.md)",
            "[x](/etc/passwd)",
            "[x](https://github.com/some/project)",
            "[x](ftp://example.org/f)",
            "[x](docs/a.md#no-such-part)",
        ] {
            let p = check_links(dir.path(), "README.md", bad);
            assert_eq!(p.len(), 1, "{bad}: {p:?}");
        }
        // Code blocks are not links.
        assert!(check_links(dir.path(), "README.md", "```\n[x](missing)\n```\n").is_empty());
    }

    #[test]
    fn slugs_follow_github() {
        assert_eq!(
            slug(" Instructions per image on a Pi"),
            "instructions-per-image-on-a-pi"
        );
        assert_eq!(slug(" `lookout bench` over SSH"), "lookout-bench-over-ssh");
        assert_eq!(slug(" API boundaries"), "api-boundaries");
    }

    #[test]
    fn imports_are_read_from_non_test_code_only() {
        let text = "use crate::geom::BBox;\n// crate::track in a comment\nuse crate::{frame::Frame, detect};\nfn f() { crate::stats::x(); } // crate::memory\n#[cfg(test)]\nmod tests {\n    use crate::config;\n}\n";
        let graph = import_graph(&[("src/track/mod.rs".to_string(), text.to_string())]);
        let got: Vec<&str> = graph["track"].iter().map(String::as_str).collect();
        assert_eq!(got, ["detect", "frame", "geom", "stats"]);
    }

    fn graph_of(edges: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        edges
            .iter()
            .map(|(m, d)| (m.to_string(), d.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    const DOC: &str = "## Layering\n\n- `track` ↛ `detect`\n- `geom` ↛ `track`\n\n## Modules\n\n### `geom`\n\nMay import: nothing\n\n### `track`\n\nMay import: `detect` *(to be removed)*, `geom`\n";

    #[test]
    fn matching_architecture_passes() {
        let (sections, rules) = parse_architecture(DOC);
        assert_eq!(rules.len(), 2);
        let graph = graph_of(&[("geom", &[]), ("track", &["detect", "geom"])]);
        let p = check_architecture(&sections, &rules, &graph);
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn an_undocumented_or_stale_import_fires() {
        let (sections, rules) = parse_architecture(DOC);
        let extra = graph_of(&[("geom", &["frame"]), ("track", &["detect", "geom"])]);
        assert_eq!(check_architecture(&sections, &rules, &extra).len(), 1);
        // track no longer imports geom: the list is stale.
        let stale = graph_of(&[("geom", &[]), ("track", &["detect"])]);
        assert_eq!(check_architecture(&sections, &rules, &stale).len(), 1);
    }

    #[test]
    fn a_removed_import_still_marked_fires() {
        let (sections, rules) = parse_architecture(DOC);
        let gone = graph_of(&[("geom", &[]), ("track", &["geom"])]);
        // Two: the list names `detect`, and the mark is left over.
        assert_eq!(check_architecture(&sections, &rules, &gone).len(), 2);
    }

    #[test]
    fn a_broken_rule_without_the_mark_fires() {
        let doc = DOC.replace(" *(to be removed)*", "");
        let (sections, rules) = parse_architecture(&doc);
        let graph = graph_of(&[("geom", &[]), ("track", &["detect", "geom"])]);
        let p = check_architecture(&sections, &rules, &graph);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("rule `track` ↛ `detect`"), "{p:?}");
    }

    #[test]
    fn a_module_without_a_section_or_a_section_without_a_module_fires() {
        let (sections, rules) = parse_architecture(DOC);
        let graph = graph_of(&[("geom", &[]), ("track", &["detect", "geom"]), ("new", &[])]);
        assert_eq!(check_architecture(&sections, &rules, &graph).len(), 1);
        let graph = graph_of(&[("track", &["detect", "geom"])]);
        assert_eq!(check_architecture(&sections, &rules, &graph).len(), 1);
    }
}
