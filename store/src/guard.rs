//! The second wall of a read-only connection: what a reader's statement may hold, checked on
//! its tokens before the embedded engine sees it.
//!
//! The first wall is the engine's own: grants ([`crate::access`]) and `readonly = 1` with
//! fixed limits ([`crate::embedded::EmbeddedStore::open_read_only`]). This one refuses what
//! chDB's local mode leaves open (measured, see [`crate::access`]): the scalar `file()`,
//! `KILL`, `SYSTEM`, `INTO OUTFILE`, system tables beyond [`SYSTEM_TABLES`]; and, again,
//! everything the engine already refuses that names a source outside the store, so one
//! wall failing is not enough.
//!
//! The tokenizer follows ClickHouse's lexer (`src/Parsers/Lexer.cpp`): string literals
//! `'…'` with `\` escapes and `''`, quoted identifiers `"…"` and `` `…` `` with the same
//! escapes, `--` comments to the end of the line, `/* … */` comments. Where it could
//! disagree with the engine it refuses instead: a `/*` inside a comment (nesting), `#` and `#!`
//! comments and `$$` / `$tag$` heredocs outside literals, a NUL byte, an unterminated
//! literal or comment.

/// System tables a reader may name (`system.<name>`): the constant ones, the catalogue that
/// Grafana's ClickHouse data source and the docs' questions read (tables, columns,
/// databases, parts, functions), and `settings`, which the official Python client reads when
/// it connects (it holds the session's settings; epicenter's passwords live in epicenter,
/// never in the engine). Not `processes` (other readers' questions and the writer's
/// inserts), `server_settings`, `users`, `grants`, `stack_trace`, `disks`, `build_options`
/// and the rest.
pub const SYSTEM_TABLES: &[&str] = &[
    "one",
    "numbers",
    "numbers_mt",
    "zeros",
    "zeros_mt",
    "tables",
    "columns",
    "databases",
    "parts",
    "functions",
    "table_functions",
    "table_engines",
    "data_type_families",
    "formats",
    "time_zones",
    "aggregate_function_combinators",
    "settings",
];

/// Statements a reader may send, by their first word: questions only.
pub const STATEMENTS: &[&str] = &["select", "with", "show", "describe", "desc", "explain", "exists", "use"];

/// What `SHOW` may show (after `FULL`/`EXTENDED`): names of databases, tables and columns,
/// and a table's `CREATE` statement. Not `PROCESSLIST`, `USERS`, `GRANTS`, `SETTINGS`.
const SHOWABLE: &[&str] = &["tables", "databases", "columns", "fields", "create", "dictionaries"];

/// Functions and table functions that reach outside the store (files, URLs, other
/// servers, object stores, programs, dictionaries, the request body) or across
/// databases (`merge`), lowercase. A name starting with one of [`REFUSED_PREFIXES`] is
/// refused too.
pub const REFUSED_FUNCTIONS: &[&str] = &[
    "file",
    "filecluster",
    "url",
    "urlcluster",
    "remote",
    "remotesecure",
    "cluster",
    "clusterallreplicas",
    "s3",
    "s3cluster",
    "gcs",
    "oss",
    "cosn",
    "hdfs",
    "hdfscluster",
    "input",
    "executable",
    "dictionary",
    "mysql",
    "postgresql",
    "jdbc",
    "odbc",
    "sqlite",
    "redis",
    "mongodb",
    "merge",
    "loop",
    "hive",
    "ytsaurus",
    "arrowflight",
    "catboostevaluate",
    "modelevaluate",
];

/// Prefixes of refused function names (lowercase): dictionaries (`dictGet…`, `dictHas`,
/// `dictIsIn`), data lakes (`iceberg…`, `deltaLake…`, `hudi…`, `paimon…`), Azure blobs.
pub const REFUSED_PREFIXES: &[&str] = &["dict", "iceberg", "deltalake", "hudi", "paimon", "azureblobstorage"];

/// Why `sql` may not run on a read-only connection, as a ClickHouse-style error
/// (`Code: 164. … (READONLY)` for what a reader may not do, `Code: 62. … (SYNTAX_ERROR)`
/// for text this wall will not try to read), or None when it may.
///
/// Refused: more than one statement; a statement that is not a question ([`STATEMENTS`];
/// `SHOW` of anything but [`SHOWABLE`]); a call of [`REFUSED_FUNCTIONS`] or
/// [`REFUSED_PREFIXES`] (quoted or not, any case, comments between the name and `(`);
/// `system.<table>` beyond [`SYSTEM_TABLES`]; the keywords `OUTFILE`, `INFILE`,
/// `SETTINGS`; `#`, `$`, NUL outside literals; unterminated literals and comments.
pub fn read_only_refusal(sql: &str) -> Option<String> {
    let tokens = match tokens(sql) {
        Ok(tokens) => tokens,
        Err(why) => return Some(format!("Code: 62. DB::Exception: {why}. (SYNTAX_ERROR)")),
    };
    let refuse = |what: String| {
        Some(format!(
            "Code: 164. DB::Exception: epicenter's read-only endpoint refuses {what}. (READONLY)"
        ))
    };
    let end = tokens
        .iter()
        .position(|token| *token == Token::Symbol(';'))
        .unwrap_or(tokens.len());
    if tokens[end..].iter().any(|token| *token != Token::Symbol(';')) {
        return Some(
            "Code: 62. DB::Exception: one statement per query: multi-statements are not allowed. (SYNTAX_ERROR)"
                .to_string(),
        );
    }
    let statement = &tokens[..end];
    let first = statement.iter().find(|token| **token != Token::Symbol('('));
    match first {
        None => return Some("Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR)".to_string()),
        Some(Token::Word(word)) if STATEMENTS.contains(&word.as_str()) => {
            if word == "show" {
                let shown = statement
                    .iter()
                    .skip(1)
                    .find_map(|token| match token {
                        Token::Word(word) if word != "full" && word != "extended" => Some(word.as_str()),
                        _ => None,
                    })
                    .unwrap_or("");
                if !SHOWABLE.contains(&shown) {
                    return refuse(format!(
                        "SHOW {} (it shows names of databases, tables and columns, and CREATE statements)",
                        shown.to_ascii_uppercase()
                    ));
                }
            }
        }
        Some(Token::Word(word)) => {
            return refuse(format!(
                "{} statements: it answers questions only (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS, USE)",
                word.to_ascii_uppercase()
            ))
        }
        Some(_) => {
            return refuse(
                "this statement: it answers questions only (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS, USE)"
                    .to_string(),
            )
        }
    }
    for (index, token) in statement.iter().enumerate() {
        let next = statement.get(index + 1);
        match token {
            Token::Word(word) if ["outfile", "infile"].contains(&word.as_str()) => {
                return refuse(format!(
                    "INTO {} (it would touch a file on epicenter's machine)",
                    word.to_ascii_uppercase()
                ));
            }
            // The SETTINGS clause; `system.settings` (a table after `.`) is not one.
            Token::Word(word) if word == "settings" && (index == 0 || statement[index - 1] != Token::Symbol('.')) => {
                return refuse("query-level SETTINGS (the endpoint's limits and readonly are fixed)".to_string());
            }
            _ => {}
        }
        let Some(name) = token.name() else { continue };
        if next == Some(&Token::Symbol('(')) && is_refused_function(name) {
            return refuse(format!(
                "{name}(): it reads outside epicenter's tables (files, URLs, other servers, programs, dictionaries)"
            ));
        }
        if name == "system" && next == Some(&Token::Symbol('.')) {
            let table = statement.get(index + 2).and_then(Token::name).unwrap_or("");
            if !SYSTEM_TABLES.contains(&table) {
                return refuse(format!(
                    "system.{table} (a reader may read system.{} only)",
                    SYSTEM_TABLES.join(", system.")
                ));
            }
        }
    }
    None
}

/// Whether a function named `name` (lowercase) reaches outside the store.
fn is_refused_function(name: &str) -> bool {
    REFUSED_FUNCTIONS.contains(&name) || REFUSED_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// One token of a statement, as far as this wall needs to tell.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A bare word (keyword, identifier or number), lowercase.
    Word(String),
    /// A quoted identifier (`"…"`, `` `…` ``), lowercase, escapes kept as written.
    Quoted(String),
    /// A string literal (its text does not matter here).
    Literal,
    /// Any other character outside literals and comments.
    Symbol(char),
}

impl Token {
    /// The identifier this token names, bare or quoted.
    fn name(&self) -> Option<&str> {
        match self {
            Token::Word(word) | Token::Quoted(word) => Some(word),
            _ => None,
        }
    }
}

/// The tokens of `sql` without whitespace and comments, or why this wall will not read it.
fn tokens(sql: &str) -> Result<Vec<Token>, String> {
    let bytes = sql.as_bytes();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        match byte {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c' => index += 1,
            0 => return Err("a NUL byte in the query".to_string()),
            b'-' if bytes.get(index + 1) == Some(&b'-') => {
                while index < bytes.len() && bytes[index] != b'\n' {
                    index += 1;
                }
            }
            b'/' if bytes.get(index + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                loop {
                    if index + 1 >= bytes.len() {
                        return Err("an unterminated /* comment".to_string());
                    }
                    if bytes[index] == b'/' && bytes[index + 1] == b'*' {
                        // Whether a lexer nests comments is where it could disagree.
                        if depth > 0 {
                            return Err("a /* comment inside a /* comment".to_string());
                        }
                        depth += 1;
                        index += 2;
                    } else if bytes[index] == b'*' && bytes[index + 1] == b'/' {
                        depth -= 1;
                        index += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        index += 1;
                    }
                }
            }
            b'#' => {
                return Err(
                    "`#` outside a string (a `#` or `#!` comment): epicenter's live endpoint takes `--` and `/* */` comments only"
                        .to_string(),
                )
            }
            b'$' => {
                return Err(
                    "`$` outside a string (a `$$` heredoc): epicenter's live endpoint takes '…' string literals only".to_string(),
                )
            }
            quote @ (b'\'' | b'"' | b'`') => {
                let start = index + 1;
                index += 1;
                loop {
                    match bytes.get(index) {
                        None => return Err(format!("an unterminated {} literal", quote as char)),
                        Some(b'\\') => index += 2,
                        Some(&found) if found == quote => {
                            if bytes.get(index + 1) == Some(&quote) {
                                index += 2;
                            } else {
                                break;
                            }
                        }
                        Some(_) => index += 1,
                    }
                }
                let text = &sql[start..index];
                index += 1;
                tokens.push(if quote == b'\'' {
                    Token::Literal
                } else {
                    Token::Quoted(text.to_ascii_lowercase())
                });
            }
            _ if is_word_byte(byte) => {
                let start = index;
                while index < bytes.len() && is_word_byte(bytes[index]) {
                    index += 1;
                }
                tokens.push(Token::Word(sql[start..index].to_ascii_lowercase()));
            }
            _ => {
                // One character (a UTF-8 sequence whole, so slicing stays on boundaries).
                let character = sql[index..].chars().next().unwrap_or('\u{fffd}');
                tokens.push(Token::Symbol(character));
                index += character.len_utf8().max(1);
            }
        }
    }
    Ok(tokens)
}

/// Bytes of a bare word: ASCII letters, digits, `_`, and any byte of a non-ASCII character
/// (ClickHouse reads those as part of a word too).
fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_reader_may_not_do_is_refused() {
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
            "SELECT file('/proc/self/environ')",
            "SELECT FILE ('/etc/shadow')",
            "SELECT `file`('/etc/shadow')",
            "SELECT \"File\" /* x */ ('/etc/shadow')",
            "SELECT * FROM file('/etc/hostname', 'LineAsString')",
            "SELECT * FROM url('http://127.0.0.1/', 'LineAsString')",
            "SELECT * FROM remote('127.0.0.1:9000', system.one)",
            "SELECT * FROM remoteSecure('127.0.0.1:9440', system.one)",
            "SELECT * FROM cluster('default', system.one)",
            "SELECT * FROM s3('s3://bucket/key.csv')",
            "SELECT * FROM input('x String')",
            "SELECT * FROM executable('cat', 'TSV', 'x String')",
            "SELECT dictGet('d', 'a', 1)",
            "SELECT * FROM dictionary('d')",
            "SELECT * FROM icebergS3('http://x/y')",
            "SELECT * FROM merge('system', '.*')",
            "SELECT * FROM system.users",
            "SELECT * FROM system.processes",
            "SELECT * FROM `system`.`server_settings`",
            "SELECT * FROM system . stack_trace",
            "SHOW PROCESSLIST",
            "SHOW GRANTS",
            "SHOW SETTINGS LIKE 'max%'",
            "CREATE DICTIONARY d (x UInt64) PRIMARY KEY x SOURCE(FILE(path '/etc/passwd' format 'TSV')) LAYOUT(FLAT()) LIFETIME(0)",
            "SET max_memory_usage = 0",
            "SELECT 1 SETTINGS readonly = 0",
            "SELECT name FROM system.settings SETTINGS readonly = 0",
            "SELECT 1 settings\nmax_execution_time = 0",
            "SELECT 1 #!\nKILL QUERY WHERE 1",
            "SELECT 1 # comment",
            "SELECT $$; KILL QUERY WHERE 1; $$",
            "SELECT $a$x$a$",
            "SELECT 'unterminated",
            "SELECT 1 /* unterminated",
            "SELECT 1 /* nested /* */ ; KILL QUERY WHERE 1 */",
            "SELECT 1\0; KILL QUERY WHERE 1",
            "INSERT INTO scrapes (job) VALUES ('x')",
            "DROP TABLE scrapes",
            "ALTER TABLE scrapes DELETE WHERE 1",
            "",
            " -- only a comment\n",
        ] {
            assert!(read_only_refusal(refused).is_some(), "{refused}");
        }
    }

    #[test]
    fn questions_pass() {
        for allowed in [
            "SELECT count() FROM scrapes",
            "SELECT 1;",
            "SELECT 1; -- trailing comment\n",
            "-- did anything get scraped?\nSELECT count() > 0 FROM scrapes;\n",
            "SELECT error FROM scrapes WHERE error LIKE '%; kill%'",
            "SELECT 'it''s; fine', \"a;b\", `c;d` FROM t /* ; */",
            "SELECT '\\'; KILL QUERY WHERE 1'",
            "SELECT 'file(''/etc/passwd'')', '#', '$$'",
            "WITH systems AS (SELECT 1) SELECT * FROM systems",
            "(SELECT 1) UNION ALL (SELECT 2)",
            "SELECT name FROM system.tables WHERE database = 'epicenter'",
            "SELECT * FROM system.one",
            // What clickhouse-connect (PyPI) asks when it connects.
            "SELECT name, value, readonly FROM system.settings LIMIT 10000",
            "SELECT value FROM `system` . settings WHERE name = 'readonly'",
            "SELECT profile FROM t WHERE filename = 'x'",
            "SELECT count() FROM numbers(10)",
            "SELECT timeSeriesRateToGrid(0, 10, 1, 5)(time, value) FROM t",
            "SELECT count() > 0 FROM scrapes WHERE job = {job:String}",
            "SHOW TABLES",
            "SHOW FULL TABLES FROM epicenter",
            "SHOW CREATE TABLE scrapes",
            "DESCRIBE TABLE scrapes",
            "EXPLAIN SELECT 1",
            "EXISTS TABLE scrapes",
            "USE system",
            "SELECT 'ünïcode' AS ä FROM t",
        ] {
            assert_eq!(read_only_refusal(allowed), None, "{allowed}");
        }
    }

    #[test]
    fn refusals_say_what_and_use_clickhouse_codes() {
        let refusal = read_only_refusal("SELECT file('/proc/self/environ')").unwrap();
        assert!(refusal.starts_with("Code: 164."), "{refusal}");
        assert!(refusal.contains("file()"), "{refusal}");
        let refusal = read_only_refusal("SELECT 1 #!\nSYSTEM STOP MERGES").unwrap();
        assert!(refusal.starts_with("Code: 62."), "{refusal}");
        let refusal = read_only_refusal("SYSTEM STOP MERGES").unwrap();
        assert!(refusal.contains("SYSTEM statements"), "{refusal}");
    }
}
