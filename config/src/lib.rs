//! epicenter's configuration vocabulary, shared by every stage.
//!
//! **Enters:** YAML text (a configuration file, a scenario file) and the values written in
//! it. **Leaves:** typed values ([`PromDuration`], [`ByteSize`], [`Secret`], [`TlsConfig`])
//! and [`ConfigError`]s that name the key path and, when known, the line and column.
//! **Never:** knows what a section means. Each stage owns its own section type (the collector
//! `global` and `scrape_configs`, the store `storage`, `batching` and `placement`, the detector
//! `detector`, on-call `notifiers`, the web server `server`); the binary composes them into the
//! file's one document and calls each section's checks. The one shape shared by two sections,
//! Prometheus's `tls_config` (a scrape job's, `storage.clickhouse.tls`), lives here.
//!
//! Loading is in two steps, as in linkerd2-proxy: [`from_yaml`] reads a document and each
//! section's `problems` function checks what needs no network, reporting every problem at once
//! through [`Problems`]. Reading secrets and connecting are separate start-up steps.

mod redact;
mod tls;
mod units;

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Deserialize as _;

pub use redact::{redacted_url, split_userinfo, MASK};
pub use tls::{ServerTlsConfig, TlsConfig, TlsVersion};
pub use units::{parse_duration, parse_size, ByteSize, PromDuration};

/// `error` and its causes, outermost first, joined by `: `, each cause left out when the
/// text so far already says it: `error sending request: client error (Connect): tcp connect
/// error: Connection refused (os error 111)` where many HTTP clients' own message stops at
/// the first part. The caller removes anything secret (URLs) from `error` first.
pub fn describe_error(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A configuration problem: where (line and column when known, key path) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Key path, e.g. `scrape_configs[1].scrape_timeout`; empty for the document itself.
    pub path: String,
    /// 1-based line and column in the file, when the problem was found while reading it.
    pub location: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((line, column)) = self.location {
            write!(f, "{line}:{column}: ")?;
        }
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every problem a validation finds, in the order found, each with its key path.
#[derive(Debug, Default)]
pub struct Problems(Vec<ConfigError>);

impl Problems {
    /// Records that the value at `path` (a key path such as `batching.max_rows`) is wrong.
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigError {
            path: path.into(),
            location: None,
            message: message.into(),
        });
    }

    /// True when nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, in the order found.
    pub fn into_errors(self) -> Vec<ConfigError> {
        self.0
    }
}

/// Reads a document of type `T` from YAML text; an empty (or all-blank) document is
/// `T::default()`.
///
/// Errors name the key path and, when the YAML parser knows it, the line and column:
/// `3:5: scrape_configs[0].job_nme: unknown field `job_nme`, expected one of …`.
pub fn from_yaml<T: DeserializeOwned + Default>(text: &str) -> Result<T, ConfigError> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    check_shape(text)?;
    let deserializer = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let location = inner.location().map(|location| (location.line(), location.column()));
        // The YAML library repeats the location in its message; keep only the reason.
        let message = inner.to_string();
        let message = match message.rsplit_once(" at line ") {
            Some((reason, _)) if location.is_some() => reason.to_string(),
            _ => message,
        };
        // A value of the wrong type is quoted by serde ("invalid type: string \"user:pass\",
        // expected struct BasicAuth"): it may be a secret written where a section belongs,
        // so its text is never repeated.
        let message = redact_quoted_value(&message);
        // ...and may start with the enclosing path, which we print ourselves.
        let message = match message.split_once(": ") {
            Some((prefix, reason)) if !prefix.is_empty() && path.starts_with(prefix) => reason.to_string(),
            _ => message,
        };
        ConfigError {
            path: if path == "." { String::new() } else { path },
            location,
            message,
        }
    })
}

/// `invalid type: string "…"` / `invalid value: string "…"` with the quoted text replaced
/// by `"xxxxx"` (a secret written where a section belongs must not be echoed).
fn redact_quoted_value(message: &str) -> String {
    for marker in ["invalid type: string \"", "invalid value: string \""] {
        if let Some(start) = message.find(marker) {
            let open = start + marker.len();
            if let Some(length) = message[open..].rfind("\", expected") {
                return format!("{}xxxxx{}", &message[..open], &message[open + length..]);
            }
        }
    }
    message.to_string()
}

/// Like [`from_yaml`], but an unknown key does not stop the reading: every unknown key is
/// reported in one run, each with its line, column and key path, the way a user fixing a
/// Prometheus file wants them (one run per typo took 59 runs for Prometheus's own
/// `conf.good.yml`). After an unknown key, the key and its value are blanked out of a copy
/// of the text (lines and columns stay where they were) and the document is read again, up
/// to [`MAX_UNKNOWN_KEYS`] times. Blanking needs the key to start its line (block style,
/// after any `- `); an unknown key inside a flow mapping (`{a: 1, typo: 2}`) ends the
/// collection there. Any other error is reported only when it is the first: after a
/// blanking it may be a consequence of it.
pub fn from_yaml_all<T: DeserializeOwned + Default>(text: &str) -> Result<T, Vec<ConfigError>> {
    if text.contains("<<:") {
        return from_yaml_merged(text).map_err(|error| vec![error]);
    }
    let mut current = std::borrow::Cow::Borrowed(text);
    let mut errors: Vec<ConfigError> = Vec::new();
    loop {
        let error = match from_yaml(&current) {
            Ok(value) if errors.is_empty() => return Ok(value),
            Ok(_) => return Err(errors),
            Err(error) => error,
        };
        let unknown = error.message.starts_with("unknown field");
        if !unknown {
            if errors.is_empty() {
                errors.push(error);
            }
            return Err(errors);
        }
        let blanked = error
            .location
            .and_then(|(line, column)| blank_key(&current, line, column))
            .filter(|text| *text != *current);
        errors.push(error);
        match blanked {
            Some(text) if errors.len() < MAX_UNKNOWN_KEYS => current = std::borrow::Cow::Owned(text),
            Some(_) => {
                errors.push(ConfigError {
                    path: String::new(),
                    location: None,
                    message: format!("more unknown keys may follow: only the first {MAX_UNKNOWN_KEYS} are listed"),
                });
                return Err(errors);
            }
            None => return Err(errors),
        }
    }
}

/// [`from_yaml`] for a document with YAML merge keys (`<<: *anchor`, which Prometheus's YAML
/// library applies): read as a YAML value, merged, then typed. Errors name the key path;
/// once merged, the document has no lines and columns to give, and only the first problem
/// is reported.
fn from_yaml_merged<T: DeserializeOwned + Default>(text: &str) -> Result<T, ConfigError> {
    check_shape(text)?;
    let located = |error: serde_norway::Error| ConfigError {
        path: String::new(),
        location: error.location().map(|location| (location.line(), location.column())),
        message: error.to_string(),
    };
    let mut value: serde_norway::Value = serde_norway::from_str(text).map_err(located)?;
    value.apply_merge().map_err(located)?;
    if value.is_null() {
        return Ok(T::default());
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        ConfigError {
            path: if path == "." { String::new() } else { path },
            location: None,
            message: redact_quoted_value(&error.into_inner().to_string()),
        }
    })
}

/// How many unknown keys [`from_yaml_all`] reports at most (a file that is not an epicenter
/// configuration at all has one per top-level key).
pub const MAX_UNKNOWN_KEYS: usize = 100;

/// `text` with the block-style key at 1-based `line`/`column` and its value blanked: the
/// key's line from the key on, and every following line indented deeper than the key (or
/// blank), replaced by spaces. `None` when the key does not start its line (after
/// indentation and `- ` sequence marks).
fn blank_key(text: &str, line: usize, column: usize) -> Option<String> {
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let key_line = lines.get(line.checked_sub(1)?)?;
    let key_start = key_line.char_indices().nth(column.checked_sub(1)?).map(|(at, _)| at)?;
    if !key_line[..key_start]
        .chars()
        .all(|character| character == ' ' || character == '-')
    {
        // In a flow mapping on one line: blank up to the `,` (included) or `}` that ends the
        // entry at its own depth, outside quotes.
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        let mut end = None;
        for (at, character) in key_line[key_start..].char_indices() {
            match (quote, character) {
                (Some(open), close) if close == open => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(character),
                (None, '[' | '{') => depth += 1,
                (None, ']' | '}') if depth > 0 => depth -= 1,
                (None, ',') if depth == 0 => {
                    end = Some(key_start + at + 1);
                    break;
                }
                (None, '}') => {
                    end = Some(key_start + at);
                    break;
                }
                _ => {}
            }
        }
        let end = end?;
        let blanked = format!(
            "{}{}{}",
            &key_line[..key_start],
            " ".repeat(key_line[key_start..end].chars().count()),
            &key_line[end..]
        );
        lines[line - 1] = blanked;
        return Some(lines.join("\n"));
    }
    let indent = column - 1;
    let blank = |text: &str| " ".repeat(text.chars().count());
    let (before, after) = key_line.split_at(key_start);
    lines[line - 1] = format!("{before}{}", blank(after));
    for following in lines.iter_mut().skip(line) {
        let content = following.trim_start_matches(' ');
        let depth = following.len() - content.len();
        if !content.trim().is_empty() && !content.starts_with('#') && depth <= indent {
            break;
        }
        *following = blank(following);
    }
    Some(lines.join("\n"))
}

/// `deserialize_with` for lists and maps that Prometheus accepts empty: a key written with no
/// value (`relabel_configs:`, which YAML reads as null; ten of Prometheus's own example files
/// have one) is the empty default, as in Prometheus's Go YAML reader.
///
/// # Errors
/// Whatever the value's own type refuses.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A section of a Prometheus server's configuration that epicenter reads without using
/// (`rule_files`, `alerting`, `storage.tsdb`, …): present or not, and its value skipped.
/// Each one in a file is reported once, with what to use instead
/// ([`prometheus_only_warning`]).
pub type PrometheusOnly = Option<serde::de::IgnoredAny>;

/// The warning for Prometheus-only section `path` that a file sets: what it is for in
/// Prometheus, and what epicenter offers instead, if anything.
pub fn prometheus_only_warning(path: &str, instead: &str) -> String {
    format!("{path}: a Prometheus server setting, not used by epicenter: {instead}")
}

/// Largest YAML document [`from_yaml`] reads, in bytes (64 MiB: a discovery file of a
/// hundred thousand targets with labels is about 20 MiB).
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// Deepest nesting of flow collections (`[` and `{`) [`from_yaml`] reads, counting every
/// bracket. The YAML library takes time quadratic in this depth before it reports anything
/// (100,000 levels in 200 KB took minutes; 4,096 take about 0.4 s), and the count is crude on
/// purpose (brackets in strings and comments count too, so nothing can be hidden from it):
/// the limit sits far above any real file's brackets, `\[` in 70 regexes included.
pub const MAX_NESTING: usize = 4_096;

/// Refuses, before any parsing, a document over [`MAX_DOCUMENT_BYTES`] or nested deeper than
/// [`MAX_NESTING`]. Brackets are counted wherever they are, quoted or in comments: a document
/// cannot hide nesting from the count, and a real one never has 64 unclosed brackets in its
/// strings. The error gives the line and column of the bracket that went too deep.
pub fn check_shape(text: &str) -> Result<(), ConfigError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(ConfigError {
            path: String::new(),
            location: None,
            message: format!(
                "{} bytes is larger than the {MAX_DOCUMENT_BYTES} bytes a document may have",
                text.len()
            ),
        });
    }
    let mut depth = 0usize;
    let (mut line, mut column) = (1usize, 0usize);
    for character in text.chars() {
        column += 1;
        match character {
            '\n' => (line, column) = (line + 1, 0),
            '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(ConfigError {
                        path: String::new(),
                        location: Some((line, column)),
                        message: format!(
                            "nested deeper than {MAX_NESTING} levels of [ and {{ (unclosed brackets in strings and comments count too)"
                        ),
                    });
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// A password or token: never printed by `Debug`, and without `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value read at start-up (from an environment variable or a file).
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// The secret value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this secret, compared in time that depends on the lengths only
    /// (not on where the first difference is), for checking a password or token a client
    /// sent.
    pub fn matches(&self, given: &str) -> bool {
        let expected = self.0.as_bytes();
        given.len() == expected.len()
            && given
                .bytes()
                .zip(expected)
                .fold(0u8, |differences, (a, b)| differences | (a ^ b))
                == 0
    }
}

/// Where a secret is read from: the config keys that name an environment variable and a
/// file (`storage.clickhouse.password_env`, `…password_file`), and their values.
#[derive(Debug, Clone, Copy)]
pub struct SecretSource<'a> {
    /// Key path of the environment variable's name, for errors.
    pub env_key: &'a str,
    /// The environment variable, if set in the config.
    pub env: Option<&'a str>,
    /// Key path of the file's name, for errors.
    pub file_key: &'a str,
    /// The file, if set in the config.
    pub file: Option<&'a std::path::Path>,
}

/// Reads a secret at start-up from the environment variable or the file `source` names
/// (trailing newline ignored), whichever is set; `Ok(None)` when neither is. Errors name the
/// key and the variable or file, never the value.
pub fn read_secret(source: SecretSource<'_>) -> Result<Option<Secret>, String> {
    if let Some(variable) = source.env {
        return std::env::var(variable)
            .map(|value| Some(Secret::new(value)))
            .map_err(|_| format!("{}: environment variable {variable} is not set", source.env_key));
    }
    if let Some(path) = source.file {
        return std::fs::read_to_string(path)
            .map(|text| Some(Secret::new(text.trim_end_matches(['\n', '\r']).to_string())))
            .map_err(|error| format!("{}: cannot read {}: {error}", source.file_key, path.display()));
    }
    Ok(None)
}

/// A secret written inline in a configuration file (Prometheus's `password`,
/// `credentials`, `bearer_token`): read as a string, never printed.
impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Secret, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Makes `path` relative to `directory` when it is relative (an absolute path stays as it
/// is): how a path written in a configuration file is read from that file's folder, as
/// Prometheus reads the paths of its configuration (`SetDirectory`). `directory` is the
/// folder of the file that holds the path; a path given on the command line is not passed
/// through this.
pub fn resolve_relative(directory: &std::path::Path, path: &mut std::path::PathBuf) {
    if path.is_relative() {
        *path = directory.join(&*path);
    }
}

/// Whether `name` is a Prometheus label name, `[a-zA-Z_][a-zA-Z0-9_]*` (Prometheus data
/// model, "Metric names and labels"; UTF-8 names are not accepted as label names here).
pub fn is_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(first) if first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Section {
        #[serde(default)]
        name: String,
        #[serde(default, deserialize_with = "null_as_default")]
        items: Vec<Item>,
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Item {
        #[serde(default)]
        a: u32,
        #[serde(default)]
        b: u32,
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Document {
        #[serde(default)]
        section: Section,
    }

    #[test]
    fn merge_keys_are_applied_as_prometheus_s_yaml_library_applies_them() {
        // An anchored item merged into the next, one key overridden, at any depth.
        let text = "section:\n  name: x\n  items:\n    - &first {a: 1, b: 2}\n    - <<: *first\n      b: 5\n";
        let document: Document = from_yaml_all(text).unwrap();
        assert_eq!(document.section.items, vec![Item { a: 1, b: 2 }, Item { a: 1, b: 5 }]);
        // A mistake after merging is named by its path (no line: the merged document has none).
        let text = "section:\n  items:\n    - &first {a: 1}\n    - <<: *first\n      c: 5\n";
        let errors = from_yaml_all::<Document>(text).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "section.items[1].c");
        assert!(errors[0].message.starts_with("unknown field `c`"), "{errors:?}");
    }

    #[test]
    fn every_unknown_key_is_reported_with_its_place_in_one_run() {
        let text = "section:\n  nmae: x\n  items:\n    - a: 1\n      c: |\n        two\n        lines\n      b: 2\n    - {a: 3, d: \"x,}\", b: 4}\n    - {e: [1, {f: 2}], a: 5}\ntop: 1\n";
        let errors = from_yaml_all::<Document>(text).unwrap_err();
        let found: Vec<(String, Option<(usize, usize)>)> = errors
            .iter()
            .map(|error| (error.path.clone(), error.location))
            .collect();
        assert_eq!(
            found,
            vec![
                ("section.nmae".to_string(), Some((2, 3))),
                ("section.items[0].c".to_string(), Some((5, 7))),
                ("section.items[1].d".to_string(), Some((9, 14))),
                ("section.items[2].e".to_string(), Some((10, 8))),
                ("top".to_string(), Some((11, 1))),
            ]
        );
        // Without the unknown keys the rest reads as written.
        let fixed = "section:\n  items:\n    - a: 1\n      b: 2\n    - {a: 3, b: 4}\n    - {a: 5}\n";
        let document = from_yaml_all::<Document>(fixed).unwrap();
        let values: Vec<(u32, u32)> = document.section.items.iter().map(|item| (item.a, item.b)).collect();
        assert_eq!(values, vec![(1, 2), (3, 4), (5, 0)]);
    }

    #[test]
    fn an_error_after_an_unknown_key_is_left_out_and_a_first_one_kept() {
        // Blanking the only key of an item leaves a null item: that second error is a
        // consequence of the blanking, not the user's.
        let errors = from_yaml_all::<Document>("section:\n  items:\n    - z: 1\n").unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "section.items[0].z");
        let errors = from_yaml_all::<Document>("section:\n  name: [1]\n  typo: 2\n").unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "section.name");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_not_repeated_in_the_error() {
        // A secret written where a section belongs (`basic_auth: "user:pass"`).
        let error = from_yaml_all::<Document>("section:\n  items: \"user:s3cret\"\n").unwrap_err();
        assert_eq!(error[0].path, "section.items");
        assert!(
            error[0].message.starts_with("invalid type: string \"xxxxx\", expected"),
            "{}",
            error[0].message
        );
        assert!(!error[0].message.contains("s3cret"));
    }

    #[test]
    fn past_the_limit_of_unknown_keys_the_list_says_it_is_cut() {
        let text: String = (0..150).map(|index| format!("k{index}: 1\n")).collect();
        let errors = from_yaml_all::<Document>(&text).unwrap_err();
        assert_eq!(errors.len(), MAX_UNKNOWN_KEYS + 1);
        assert_eq!(errors[99].path, "k99");
        assert!(
            errors[100].message.contains("only the first 100"),
            "{}",
            errors[100].message
        );
        // An explicit `? key` in a flow mapping, which blanking cannot remove: the unknown
        // key is reported once, not a hundred times.
        let errors = from_yaml_all::<Document>("section: {name: a, ? c : 2, x: 3}\n").unwrap_err();
        assert!(errors.len() <= 3, "{errors:?}");
    }

    #[test]
    fn a_key_written_without_a_value_is_an_empty_list() {
        let document = from_yaml_all::<Document>("section:\n  items:\n  name: n\n").unwrap();
        assert_eq!(
            document.section,
            Section {
                name: "n".to_string(),
                items: Vec::new()
            }
        );
        let error = from_yaml_all::<Document>("section:\n  items: 3\n").unwrap_err();
        assert_eq!(error[0].path, "section.items");
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing_with_where() {
        let deep = format!("a: 1\nscrape_configs: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let started = std::time::Instant::now();
        let error = from_yaml::<std::collections::BTreeMap<String, serde_norway::Value>>(&deep).unwrap_err();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(error.location, Some((2, 16 + MAX_NESTING + 1)), "{error}");
        assert!(error.to_string().contains("nested deeper than 4096 levels"), "{error}");
        // Exactly the limit parses; brackets in strings count but close again.
        let ok = format!("a: {}1{}\nb: '[x]'\n", "[".repeat(100), "]".repeat(100));
        assert!(from_yaml::<std::collections::BTreeMap<String, serde_norway::Value>>(&ok).is_ok());
        // Unbalanced brackets in strings and comments, as real files have them: accepted.
        let regexes: String = (0..200).map(|n| format!("r{n}: 'foo\\[' # old list [{n}\n")).collect();
        assert!(check_shape(&regexes).is_ok());
        let big = " ".repeat(MAX_DOCUMENT_BYTES + 1);
        assert!(check_shape(&big).unwrap_err().to_string().contains("larger than"));
    }

    #[test]
    fn label_names_follow_the_data_model() {
        for good in ["dc", "_x", "A1_b"] {
            assert!(is_label_name(good), "{good}");
        }
        for bad in ["", "1dc", "data-center", "dc.name", "é"] {
            assert!(!is_label_name(bad), "{bad}");
        }
    }

    #[test]
    fn secrets_are_redacted() {
        let secret = Secret::new("hunter2".to_string());
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(secret.expose(), "hunter2");
    }
}
