//! Docs a newcomer can navigate: every file path the docs name exists (a path in backquotes in
//! `README.md` or `docs/*.md` that starts with a directory of the repository — `crates/`,
//! `scripts/`, `docs/`, `fuzz/`, `.ci/`, `.config/`, or a crate's `NAME/src/` — with `{a,b}`
//! alternatives expanded), and every crate's `lib.rs` names each of its modules.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repository paths named in one line of Markdown (a crate's `NAME/src/…` made
/// `crates/NAME/src/…`, alternatives expanded, a trailing `:line` or `::item` dropped).
fn named_paths(line: &str) -> Vec<String> {
    const TOP: [&str; 6] = ["crates/", "scripts/", "docs/", "fuzz/", ".ci/", ".config/"];
    let mut out = Vec::new();
    for (i, quoted) in line.split('`').enumerate() {
        // Odd pieces are inside backquotes.
        if i % 2 == 0 || quoted.contains(char::is_whitespace) {
            continue;
        }
        let mut path = quoted.trim_end_matches([':', ',', '.']).to_string();
        let crate_src = path.split_once('/').is_some_and(|(first, rest)| {
            !first.is_empty()
                && first.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                && rest.starts_with("src/")
        });
        if crate_src && !path.starts_with("crates/") {
            path = format!("crates/{path}");
        } else if !TOP.iter().any(|t| path.starts_with(t)) {
            continue;
        }
        if let Some(at) = path.find("::") {
            path.truncate(at);
        }
        if let Some((p, line)) = path.rsplit_once(':') {
            if line.chars().all(|c| c.is_ascii_digit() || c == '-') {
                path = p.to_string();
            }
        }
        // Placeholders and globs name no one file.
        if path.contains(['*', '…', '<', '>']) || path.chars().any(|c| c.is_ascii_uppercase()) {
            continue;
        }
        match (path.find('{'), path.find('}')) {
            (Some(a), Some(b)) if a < b => {
                for alt in path[a + 1..b].split(',') {
                    out.push(format!("{}{alt}{}", &path[..a], &path[b + 1..]));
                }
            }
            _ => out.push(path),
        }
    }
    out
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = root();
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    let (mut checked, mut missing) = (0, Vec::new());
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (n, line) in text.lines().enumerate() {
            for path in named_paths(line) {
                checked += 1;
                if !root.join(&path).exists() {
                    missing.push(format!(
                        "{}:{}: {path}",
                        doc.strip_prefix(&root).unwrap_or(doc).display(),
                        n + 1
                    ));
                }
            }
        }
    }
    println!("{checked} paths named in {} docs", docs.len());
    assert!(
        checked > 100,
        "too few paths found ({checked}): the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_scan_finds_what_the_docs_write() {
    assert_eq!(
        named_paths(
            "see `crates/trace/src/{stats,peaks}.rs` and `lab/src/everest.rs`, not `DIR/x`"
        ),
        [
            "crates/trace/src/stats.rs",
            "crates/trace/src/peaks.rs",
            "crates/lab/src/everest.rs"
        ]
    );
    assert_eq!(
        named_paths("`crates/vstore/src/store/api.rs:160` `scripts/bench.sh` `cargo nextest`"),
        ["crates/vstore/src/store/api.rs", "scripts/bench.sh"]
    );
}

/// The modules a `lib.rs` declares (`mod x;`, `pub mod x;`), test modules left out.
fn declared_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ");
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            (name != "tests").then(|| name.to_string())
        })
        .collect()
}

#[test]
fn every_crate_names_its_modules_in_its_lib_rs() {
    let crates = root().join("crates");
    let (mut checked, mut unnamed) = (0, Vec::new());
    for entry in std::fs::read_dir(&crates).unwrap() {
        let lib = entry.unwrap().path().join("src/lib.rs");
        let Ok(text) = std::fs::read_to_string(&lib) else {
            continue;
        };
        let doc: String = text
            .lines()
            .filter(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        for m in declared_modules(&text) {
            checked += 1;
            if !doc.contains(&format!("`{m}`")) && !doc.contains(&format!("`{m}::")) {
                unnamed.push(format!(
                    "{}: {m}",
                    lib.strip_prefix(root()).unwrap_or(&lib).display()
                ));
            }
        }
    }
    println!("{checked} modules named in their crates' lib.rs");
    assert!(
        checked > 50,
        "too few modules found ({checked}): the scan is broken"
    );
    assert!(
        unnamed.is_empty(),
        "modules their lib.rs does not name:\n{}",
        unnamed.join("\n")
    );
}
