//! What ClickHouse's `readonly = 1` leaves open in the embedded engine, refused before a
//! read-only query reaches it.
//!
//! chDB runs ClickHouse's local mode, where some statements act in the client, beside the
//! engine, and the `readonly` setting does not cover them: `INTO OUTFILE` writes a file as
//! epicenter's own user, `KILL QUERY` cancels the writer's inserts, and parts of `SYSTEM`
//! pass (found by a helper attacking the live endpoint). A ClickHouse server refuses the
//! first over HTTP and guards the others with grants; here a read-only caller gets
//! `Code: 164 (READONLY)` for them, and, as a ClickHouse server's HTTP interface does, one
//! statement per request.

/// Why `sql` may not run on a read-only connection, as a ClickHouse-style error
/// (`Code: 164. … (READONLY)`, `Code: 62. … (SYNTAX_ERROR)`), or None when it may.
///
/// The word `OUTFILE` anywhere, string literals included, is refused (a false alarm costs a
/// rephrased question, a miss costs a written file); `KILL` and `SYSTEM` as the statement's
/// first word are refused; a `;` followed by another statement, outside string literals,
/// quoted identifiers and comments, is refused.
pub fn read_only_refusal(sql: &str) -> Option<String> {
    if sql
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|word| word.eq_ignore_ascii_case("outfile"))
    {
        return Some("Code: 164. DB::Exception: epicenter's read-only connection refuses INTO OUTFILE (it would write a file on epicenter's machine). (READONLY)".to_string());
    }
    let statements = statements(sql);
    if statements.len() > 1 {
        return Some(
            "Code: 62. DB::Exception: one statement per query: multi-statements are not allowed. (SYNTAX_ERROR)"
                .to_string(),
        );
    }
    let first = statements
        .first()
        .map(|statement| first_word(statement))
        .unwrap_or_default();
    if ["kill", "system"].iter().any(|word| first.eq_ignore_ascii_case(word)) {
        return Some(format!(
            "Code: 164. DB::Exception: epicenter's read-only connection refuses {} statements. (READONLY)",
            first.to_ascii_uppercase()
        ));
    }
    None
}

/// The statements of `sql`: the text between `;` that are outside string literals
/// (`'…'` with `\` escapes and `''`), quoted identifiers (`"…"`, `` `…` ``) and comments
/// (`--` to the end of the line, `/* … */`), without those that hold only whitespace and
/// comments.
fn statements(sql: &str) -> Vec<&str> {
    let bytes = sql.as_bytes();
    let mut statements = Vec::new();
    let mut start = 0;
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            quote @ (b'\'' | b'"' | b'`') => {
                index += 1;
                while index < bytes.len() {
                    if bytes[index] == b'\\' {
                        index += 2;
                        continue;
                    }
                    if bytes[index] == quote {
                        // A doubled quote stays inside.
                        if bytes.get(index + 1) == Some(&quote) {
                            index += 2;
                            continue;
                        }
                        break;
                    }
                    index += 1;
                }
                index += 1;
            }
            b'-' if bytes.get(index + 1) == Some(&b'-') => {
                while index < bytes.len() && bytes[index] != b'\n' {
                    index += 1;
                }
            }
            b'/' if bytes.get(index + 1) == Some(&b'*') => {
                index += 2;
                while index < bytes.len() && !(bytes[index] == b'*' && bytes.get(index + 1) == Some(&b'/')) {
                    index += 1;
                }
                index += 2;
            }
            b';' => {
                statements.push(&sql[start..index]);
                index += 1;
                start = index;
            }
            _ => index += 1,
        }
    }
    statements.push(&sql[start.min(sql.len())..]);
    statements.retain(|statement| !first_word(statement).is_empty());
    statements
}

/// The first word of `statement` after whitespace and comments, or "".
fn first_word(statement: &str) -> &str {
    let mut rest = statement;
    loop {
        rest = rest.trim_start();
        if let Some(comment) = rest.strip_prefix("--") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(comment) = rest.strip_prefix("/*") {
            rest = comment.split_once("*/").map_or("", |(_, after)| after);
        } else {
            break;
        }
    }
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    &rest[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_readonly_leaves_open_is_refused_and_questions_pass() {
        for refused in [
            "SELECT 'x' INTO OUTFILE '/tmp/evil' FORMAT RawBLOB",
            "select 1 into/**/outfile 'x' truncate",
            "KILL QUERY WHERE query LIKE 'INSERT%' SYNC",
            "  -- a comment first\n/* another */ kill query where 1",
            "SYSTEM STOP MERGES",
            "system flush logs",
            "SELECT 1; SELECT 2",
            "SELECT 1; -- fine\nKILL QUERY WHERE 1",
            "SELECT '\\\\'; KILL QUERY WHERE 1",
        ] {
            assert!(read_only_refusal(refused).is_some(), "{refused}");
        }
        for allowed in [
            "SELECT count() FROM scrapes",
            "SELECT 1;",
            "SELECT 1; -- trailing comment\n",
            "-- did anything get scraped?\nSELECT count() > 0 FROM scrapes;\n",
            "SELECT error FROM scrapes WHERE error LIKE '%; kill%'",
            "SELECT 'it''s; fine', \"a;b\", `c;d` FROM t /* ; */",
            "SELECT '\\'; KILL QUERY WHERE 1'",
            "WITH systems AS (SELECT 1) SELECT * FROM systems",
        ] {
            assert_eq!(read_only_refusal(allowed), None, "{allowed}");
        }
    }
}
