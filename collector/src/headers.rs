//! `http_headers`: extra request headers of a scrape job, in the shape of Prometheus's HTTP
//! client configuration (prometheus/common `config.Headers`, Prometheus 2.55 and later):
//! each header name maps to `values` (sent as written), `secrets` (sent, never printed) and
//! `files` (read at every scrape, so a rotated token is picked up). Headers that the HTTP
//! client or the scrape itself sets (`Authorization`, `Host`, `User-Agent`,
//! `Accept-Encoding`, …) cannot be set here, as in Prometheus.

use std::collections::BTreeMap;
use std::path::PathBuf;

use epicenter_config::{Problems, Secret};
use serde::Deserialize;

/// One header's values (`http_headers.<Name>`). All of them are sent, in the order values,
/// secrets, files.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderValues {
    /// Values written in the file.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub values: Vec<String>,
    /// Values written in the file that are never printed.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub secrets: Vec<Secret>,
    /// Files whose content (trailing newline removed) is a value, read at every scrape.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub files: Vec<PathBuf>,
}

/// Headers a job may not set (prometheus/common's reserved list): the HTTP client, the
/// authentication settings or the scrape own them.
pub const RESERVED_HEADERS: [&str; 18] = [
    "authorization",
    "host",
    "content-encoding",
    "content-length",
    "content-type",
    "user-agent",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "www-authenticate",
    "accept-encoding",
    "x-prometheus-remote-write-version",
    "x-prometheus-remote-read-version",
    "x-prometheus-scrape-timeout-seconds",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
];

/// Largest header file read, in bytes (a token is far smaller; `/dev/zero` must not fill memory).
const MAX_HEADER_FILE_BYTES: u64 = 64 * 1024;

/// Records each problem of `http_headers` at `at("http_headers.<Name>…")`: a name that is not
/// an HTTP header name, a reserved header, a value that cannot be sent (control characters;
/// a secret's value is never echoed), a file that cannot be read.
pub fn problems(headers: &BTreeMap<String, HeaderValues>, at: &dyn Fn(&str) -> String, problems: &mut Problems) {
    for (name, values) in headers {
        let path = at(&format!("http_headers.{name}"));
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            problems.push(path, "is not an HTTP header name");
            continue;
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            problems.push(
                path,
                "is a reserved header (set by the HTTP client, the authentication settings or the scrape)",
            );
            continue;
        }
        for (index, value) in values.values.iter().enumerate() {
            if reqwest::header::HeaderValue::from_str(value).is_err() {
                problems.push(
                    format!("{path}.values[{index}]"),
                    "holds a character a header value cannot carry",
                );
            }
        }
        for (index, secret) in values.secrets.iter().enumerate() {
            if reqwest::header::HeaderValue::from_str(secret.expose()).is_err() {
                problems.push(
                    format!("{path}.secrets[{index}]"),
                    "holds a character a header value cannot carry",
                );
            }
        }
        for (index, file) in values.files.iter().enumerate() {
            if let Err(message) = read_file(file) {
                problems.push(format!("{path}.files[{index}]"), message);
            }
        }
    }
}

/// A header file's value: its content without the trailing newline. Errors name the file
/// (never its content): unreadable, not a regular file, larger than 64 KiB, not a valid
/// header value.
fn read_file(path: &std::path::Path) -> Result<String, String> {
    let metadata = std::fs::metadata(path).map_err(|error| format!("cannot read '{}': {error}", path.display()))?;
    if !metadata.is_file() || metadata.len() > MAX_HEADER_FILE_BYTES {
        return Err(format!("'{}' is not a regular file of at most 64 KiB", path.display()));
    }
    let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read '{}': {error}", path.display()))?;
    let value = text.trim_end_matches(['\n', '\r']).to_string();
    if reqwest::header::HeaderValue::from_str(&value).is_err() {
        return Err(format!(
            "'{}' holds a character a header value cannot carry",
            path.display()
        ));
    }
    Ok(value)
}

/// Adds the job's headers to `request` (every value of every header, files read now).
/// Errors name the header file that cannot be read; the scrape then fails with that reason.
pub fn apply(
    headers: &BTreeMap<String, HeaderValues>,
    mut request: reqwest::RequestBuilder,
) -> Result<reqwest::RequestBuilder, String> {
    for (name, values) in headers {
        for value in &values.values {
            request = request.header(name.as_str(), value.as_str());
        }
        for secret in &values.secrets {
            let mut value = reqwest::header::HeaderValue::from_str(secret.expose())
                .map_err(|_| format!("http_headers.{name}: a secret that cannot be sent"))?;
            value.set_sensitive(true);
            request = request.header(name.as_str(), value);
        }
        for file in &values.files {
            let value = read_file(file).map_err(|message| format!("http_headers.{name}: {message}"))?;
            let mut value = reqwest::header::HeaderValue::from_str(&value)
                .map_err(|_| format!("http_headers.{name}: a value that cannot be sent"))?;
            value.set_sensitive(true);
            request = request.header(name.as_str(), value);
        }
    }
    Ok(request)
}
