//! What a person sees in a terminal, from the README's main job on: `epicenter demo` run under
//! a pseudo-terminal (util-linux `script`, as a user's shell gives it) prints no line of the
//! embedded engine's own, sets verdict lines apart in colour, writes a store of its own under
//! ./demo-data, and suggests commands that work when pasted as printed; the README's `run` +
//! `sql` example in the same folder afterwards shows its live status and stores only its own
//! targets.
//!
//! The engine's logger writes only when stderr is a terminal, which is why a plain pipe does
//! not show what a user saw (chDB's `<Fatal> ThreadStatus …` lines, fixed in
//! `epicenter_store::chdb`).
//!
//! Needs `libchdb.so` (`scripts/setup`) and `script`; skipped without them except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::path::{Path, PathBuf};
use std::process::Command;

fn available() -> bool {
    let library = epicenter_store::library_path();
    let script = Path::new("/usr/bin/script").exists();
    if library.exists() && script {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI needs {} (scripts/setup) and /usr/bin/script (Debian bsdutils)",
        library.display()
    );
    eprintln!(
        "SKIPPED: needs {} (run scripts/setup) and /usr/bin/script",
        library.display()
    );
    false
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `command` (a shell command line) under a pseudo-terminal in `dir`; returns everything
/// the terminal showed, with the exit status.
fn in_terminal(dir: &Path, command: &str) -> (bool, String) {
    let typescript = dir.join("typescript");
    let status = Command::new("/usr/bin/script")
        .args(["--quiet", "--return", "--flush", "--command", command])
        .arg(&typescript)
        .current_dir(dir)
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    let shown = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).replace('\r', "");
    (status.success(), shown)
}

#[test]
fn the_readme_demo_in_a_terminal_shows_only_epicenter_and_leaves_its_own_store() {
    if !available() {
        return;
    }
    let dir = scratch("epicenter-terminal");
    let binary = env!("CARGO_BIN_EXE_epicenter");
    let (succeeded, shown) = in_terminal(&dir, &format!("{binary} demo"));
    assert!(succeeded, "{shown}");

    // Nothing of the engine's own: its log lines and its exception texts.
    for engine in [
        "<Fatal>",
        "<Error>",
        "<Warning>",
        "<Information>",
        "DB::Exception",
        "ThreadStatus",
    ] {
        assert!(
            !shown.contains(engine),
            "the terminal showed the engine's {engine}:\n{shown}"
        );
    }

    // A store of its own, named at the start.
    let stores: Vec<String> = std::fs::read_dir(dir.join("demo-data"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(stores.len(), 1, "{stores:?}");
    let store = &stores[0];
    assert!(
        store.starts_with("redis-node-loss-2") && store.ends_with('Z'),
        "{store}"
    );
    assert!(shown.contains(&format!("into demo-data/{store}")), "{shown}");

    // Verdict lines stand out: each is coloured from its first character.
    let verdicts: Vec<&str> = shown.lines().filter(|line| line.contains("VERDICT ")).collect();
    assert!(!verdicts.is_empty(), "no verdict line:\n{shown}");
    for line in &verdicts {
        assert!(line.starts_with("\x1b[1;3"), "not set apart: {line:?}");
        assert!(line.ends_with("\x1b[0m"), "colour not reset: {line:?}");
    }

    // The suggested commands name this binary and this store, and work pasted as printed.
    let suggested: Vec<&str> = shown
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with(&format!("{binary} sql --data demo-data/{store} ")))
        .collect();
    assert_eq!(suggested.len(), 3, "{shown}");
    for command in suggested {
        let output = Command::new("sh")
            .args(["-c", command])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            output.status.success() && !output.stdout.is_empty(),
            "{command}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // The README's own `run` + `sql` example, from the same folder: only its own targets.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/examples/epicenter.yml");
    let (succeeded, shown) = in_terminal(&dir, &format!("{binary} run --for 8s --config {}", example.display()));
    assert!(succeeded, "{shown}");
    // Its live status: one line redrawn in place, cleared before the next message.
    assert!(shown.contains("\x1b[2Kepicenter: targets "), "no status line:\n{shown}");
    assert!(shown.contains("writer backlog"), "{shown}");
    assert!(shown.contains("\x1b[2Kepicenter: stopping (time limit)"), "{shown}");
    let output = Command::new(binary)
        .args(["sql", "--format", "TabSeparated", "--config"])
        .arg(&example)
        .arg("SELECT DISTINCT job, instance FROM scrapes ORDER BY job")
        .current_dir(&dir)
        .output()
        .unwrap();
    let rows = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!rows.is_empty(), "the example scraped nothing in 8 s");
    for row in rows.lines() {
        assert!(
            row == "epicenter\t127.0.0.1:9464" || row == "redis\t127.0.0.1:9121",
            "not one of the example's targets: {row}\n{rows}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
