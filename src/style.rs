//! How the CLI writes for a person: the command to paste back, shell quoting, and colour on a
//! terminal only (https://no-color.org: a non-empty `NO_COLOR` turns it off).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a status line is drawn on the terminal now (without its newline).
static STATUS_DRAWN: AtomicBool = AtomicBool::new(false);

/// Draws `line` on stderr in place of the previous status line (a terminal only; the caller
/// checks), cut to the terminal's width when `COLUMNS` says it.
pub(crate) fn draw_status(line: &str) {
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.parse::<usize>().ok());
    let shown: String = match width {
        Some(width) if width > 1 => line.chars().take(width - 1).collect(),
        _ => line.to_string(),
    };
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "\r\x1b[2K{shown}");
    let _ = stderr.flush();
    STATUS_DRAWN.store(true, Ordering::SeqCst);
}

/// Clears the status line, if one is drawn, so that the next line starts on a clean row.
pub(crate) fn clear_status() {
    if STATUS_DRAWN.swap(false, Ordering::SeqCst) {
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K");
        let _ = stderr.flush();
    }
}

/// Standard error for log lines, clearing a drawn status line before each.
pub(crate) struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = std::io::Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        clear_status();
        std::io::stderr()
    }
}

/// How to call this program again from the same shell: `epicenter` when that name on `PATH`
/// is this program, else the path it was started by (`target/release/epicenter`), so a
/// suggested command can be pasted as printed.
pub(crate) fn own_command() -> String {
    let invoked = std::env::args_os().next().unwrap_or_default();
    let invoked = invoked.to_string_lossy().into_owned();
    if invoked.contains('/') {
        if let Some(found) = on_path("epicenter") {
            if same_file(&found, Path::new(&invoked)) {
                return "epicenter".to_string();
            }
        }
        return shell_word(&invoked);
    }
    "epicenter".to_string()
}

/// The first `name` on `PATH`, if any.
fn on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|folder| folder.join(name))
        .find(|candidate| candidate.is_file())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// `1 scrape`, `2 scrapes`, `0 scrapes`.
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `word` as one shell word: as it is when it holds only safe characters, else in single
/// quotes (`'it'\''s'`).
pub(crate) fn shell_word(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@%,".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `text` as one double-quoted shell word: `"` `\` `$` and `` ` `` escaped with a backslash,
/// so a pasted SQL query keeps its single quotes readable and a scenario name holding `"` or
/// `$(…)` stays text (POSIX sh, "Double-Quotes"; `!` is left alone, as non-interactive shells
/// do).
pub(crate) fn shell_double_quoted(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// Whether standard output gets colour: a terminal, and `NO_COLOR` unset or empty.
pub(crate) fn stdout_colour() -> bool {
    colour_allowed(std::io::stdout().is_terminal(), std::env::var_os("NO_COLOR"))
}

/// Colour only on a terminal, and not when `NO_COLOR` holds anything (https://no-color.org).
fn colour_allowed(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// A verdict line (`epicenter: VERDICT opened: …`) set apart: bold, red when opened (or still
/// open when the run stops), yellow when updated, green when resolved, when `colour`; the
/// plain line otherwise.
pub(crate) fn verdict_line(state: &str, text: &str, colour: bool) -> String {
    let line = format!("epicenter: VERDICT {state}: {text}");
    if !colour {
        return line;
    }
    let code = match state {
        "opened" | "still open at shutdown" => "1;31",
        "updated" => "1;33",
        "resolved" => "1;32",
        _ => "1",
    };
    format!("\x1b[{code}m{line}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_the_shell_would_split_them() {
        assert_eq!(shell_word("target/release/epicenter"), "target/release/epicenter");
        assert_eq!(
            shell_word("demo-data/redis-node-loss-20261202T001204Z"),
            "demo-data/redis-node-loss-20261202T001204Z"
        );
        assert_eq!(shell_word("/tmp/my store"), "'/tmp/my store'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(
            shell_double_quoted("SELECT 1 WHERE s = 'a'"),
            "\"SELECT 1 WHERE s = 'a'\""
        );
        assert_eq!(shell_double_quoted(r#"a"b\c$(x)`y`"#), r#""a\"b\\c\$(x)\`y\`""#);
        // The shell itself reads each back as the text it was.
        for text in [
            "labels['scenario'] = 'it''s'",
            r#"odd "name" $HOME `id` \n !x"#,
            "plain",
        ] {
            let echoed = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_double_quoted(text)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&echoed.stdout), text);
        }
    }

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(count(1, "scrape", "scrapes"), "1 scrape");
        assert_eq!(count(0, "scrape", "scrapes"), "0 scrapes");
        assert_eq!(count(2, "sample", "samples"), "2 samples");
    }

    #[test]
    fn no_color_turns_colour_off_unless_empty() {
        assert!(colour_allowed(true, None));
        assert!(colour_allowed(true, Some("".into())));
        assert!(!colour_allowed(true, Some("1".into())));
        assert!(!colour_allowed(false, None));
    }

    #[test]
    fn verdict_lines_are_coloured_by_state_only_when_asked() {
        assert_eq!(verdict_line("opened", "x", false), "epicenter: VERDICT opened: x");
        assert_eq!(
            verdict_line("opened", "x", true),
            "\x1b[1;31mepicenter: VERDICT opened: x\x1b[0m"
        );
        assert_eq!(
            verdict_line("resolved", "x", true),
            "\x1b[1;32mepicenter: VERDICT resolved: x\x1b[0m"
        );
    }
}
