//! Every process a test starts ends within a time limit: no test source waits on a command
//! with `Command::output`, `Command::status` or `Child::wait_with_output`, which wait for ever;
//! they use `cordillera_testkit::process::Bounded` (`output_within`, `status_within`) instead.
//! A hung tool then fails its test with its name and what it printed, instead of holding the
//! run until the nextest profile ends it.

use std::path::{Path, PathBuf};

/// Where a statement waits without a limit: `(line, text)` of each offending statement.
fn unbounded_waits(source: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    // Statements end at `;`, `{` or `}`; a command's chain spans lines.
    let mut start = 0;
    for (i, c) in source.char_indices() {
        if !matches!(c, ';' | '{' | '}') {
            continue;
        }
        let statement = &source[start..i];
        let flat: String = statement.split_whitespace().collect();
        let commandish = flat.contains("Command::new") || flat.contains("cmd.");
        if flat.contains(".output()")
            || flat.contains(".wait_with_output()")
            || (commandish && flat.contains(".status()"))
        {
            let line = source[..start].lines().count() + 1;
            found.push((line, statement.trim().to_string()));
        }
        start = i + 1;
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_test_waits_on_a_process_without_a_limit() {
    let crates = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap().flatten() {
        rust_files(&krate.path().join("tests"), &mut files);
    }
    rust_files(&crates.join("testkit/src"), &mut files);
    assert!(files.len() > 30, "test sources found: {}", files.len());
    let mut offenders = Vec::new();
    // This file names the methods it looks for.
    files.retain(|f| !f.ends_with("testkit/tests/bounded_processes.rs"));
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, statement) in unbounded_waits(&text) {
            offenders.push(format!("{}:{line}: {statement}", f.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "waits without a time limit (use cordillera_testkit::process::Bounded):\n{}",
        offenders.join("\n\n")
    );
}

#[test]
fn the_check_sees_each_kind_of_unbounded_wait() {
    let planted = r#"
fn a() {
    let out = Command::new("fio")
        .args(["--version"])
        .output()
        .unwrap();
}
fn b() {
    let status = Command::new("kill").arg("1").status();
}
fn c(child: Child) {
    let out = child.wait_with_output();
}
fn fine(p: &Pool) {
    let s = p.status();
    let out = Command::new("fio").output_within(LIMIT);
}
"#;
    let found = unbounded_waits(planted);
    let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines.len(), 3, "{found:?}");
    assert!(found[0].1.contains("fio") && found[1].1.contains("kill"));
    assert!(found[2].1.contains("wait_with_output"));
}
