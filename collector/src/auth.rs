//! Scrape authentication, with the names and semantics of Prometheus's `<scrape_config>`
//! (prometheus/common `http_config`): `basic_auth` (`username`, `password`,
//! `password_file`), `authorization` (`type`, default `Bearer`; `credentials`,
//! `credentials_file`) and the older `bearer_token` / `bearer_token_file`, which are
//! `authorization` of type `Bearer`. At most one of them per job.
//!
//! Secrets from files are read when a scrape needs them and read again when the file
//! changes (its modification time or length), so a rotated token is used from the next
//! scrape on without a restart; surrounding whitespace is trimmed, as Prometheus does. A
//! file that cannot be read fails that scrape, naming the key and the file, never the
//! secret. Inline secrets are [`Secret`]s: `Debug` prints `<redacted>`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use epicenter_config::{Problems, Secret};
use serde::Deserialize;

/// `basic_auth`: HTTP Basic authentication (RFC 7617).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicAuth {
    /// User name.
    #[serde(default)]
    pub username: String,
    /// Password, written inline. Exclusive with `password_file`.
    #[serde(default)]
    pub password: Option<Secret>,
    /// File holding the password (re-read when it changes).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

/// `authorization`: an `Authorization: <type> <credentials>` header.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Authorization {
    /// The scheme, `Bearer` by default. `Basic` is refused (use `basic_auth`), as in
    /// Prometheus.
    #[serde(rename = "type", default = "default_type")]
    pub kind: String,
    /// Credentials, written inline. Exclusive with `credentials_file`.
    #[serde(default)]
    pub credentials: Option<Secret>,
    /// File holding the credentials (re-read when it changes).
    #[serde(default)]
    pub credentials_file: Option<PathBuf>,
}

fn default_type() -> String {
    "Bearer".to_string()
}

/// `oauth2`: the OAuth 2.0 client credentials grant (RFC 6749 section 4.4): a token is asked
/// of `token_url` with the client's id and secret (HTTP Basic, section 2.3.1), `scopes` and
/// `endpoint_params`, kept until shortly before its `expires_in`, and sent as
/// `Authorization: Bearer <token>`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuth2 {
    /// The client's id.
    pub client_id: String,
    /// The client's secret, inline. Exclusive with `client_secret_file`.
    #[serde(default)]
    pub client_secret: Option<Secret>,
    /// File holding the client's secret (re-read when it changes).
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    /// Scopes asked for (sent space-separated as `scope`).
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub scopes: Vec<String>,
    /// `http://` or `https://` URL of the token endpoint.
    pub token_url: String,
    /// More form parameters for the token request (an `audience`, say).
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub endpoint_params: std::collections::BTreeMap<String, String>,
}

impl BasicAuth {
    /// Makes `password_file` relative to `directory` (the folder of the configuration file
    /// that holds it) when it is relative, as Prometheus does.
    pub fn set_directory(&mut self, directory: &std::path::Path) {
        if let Some(path) = &mut self.password_file {
            epicenter_config::resolve_relative(directory, path);
        }
    }
}

impl Authorization {
    /// Makes `credentials_file` relative to `directory` (the folder of the configuration file
    /// that holds it) when it is relative, as Prometheus does.
    pub fn set_directory(&mut self, directory: &std::path::Path) {
        if let Some(path) = &mut self.credentials_file {
            epicenter_config::resolve_relative(directory, path);
        }
    }
}

impl OAuth2 {
    /// Makes `client_secret_file` relative to `directory` (the folder of the configuration
    /// file that holds it) when it is relative, as Prometheus does.
    pub fn set_directory(&mut self, directory: &std::path::Path) {
        if let Some(path) = &mut self.client_secret_file {
            epicenter_config::resolve_relative(directory, path);
        }
    }
}

/// Largest secret file read (a token or password; a JWT is a few KiB).
pub const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// How long before its expiry a token is asked for again.
pub const TOKEN_EARLY_REFRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// The authentication settings of one `<scrape_config>`, as written.
#[derive(Debug, Clone, Copy)]
pub struct AuthSettings<'a> {
    /// `basic_auth`.
    pub basic_auth: Option<&'a BasicAuth>,
    /// `authorization`.
    pub authorization: Option<&'a Authorization>,
    /// `bearer_token`.
    pub bearer_token: Option<&'a Secret>,
    /// `bearer_token_file`.
    pub bearer_token_file: Option<&'a Path>,
    /// `oauth2`.
    pub oauth2: Option<&'a OAuth2>,
}

/// How a job's scrapes authenticate, ready to use: see the module documentation.
#[derive(Debug)]
pub enum ScrapeAuth {
    /// HTTP Basic.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: SecretValue,
    },
    /// `Authorization: <scheme> <credentials>`.
    Header {
        /// The scheme (`Bearer`, `Token`, …).
        scheme: String,
        /// The credentials.
        credentials: SecretValue,
    },
    /// A bearer token from an OAuth 2.0 token endpoint.
    OAuth2 {
        /// The settings as written.
        config: OAuth2,
        /// The client's secret.
        secret: SecretValue,
        /// The token and when it is to be asked for again.
        token: tokio::sync::Mutex<Option<(Secret, std::time::Instant)>>,
    },
}

/// A secret written inline or read from a file when needed.
#[derive(Debug)]
pub enum SecretValue {
    /// Written in the configuration.
    Inline(Secret),
    /// Read from `path`; `key` is the configuration key that names it, for errors.
    File {
        /// Key path, e.g. `scrape_configs[2].basic_auth.password_file`.
        key: String,
        /// The file.
        path: PathBuf,
        /// The last read: the file's modification time and length, and its content.
        last: Mutex<Option<(SystemTime, u64, Secret)>>,
    },
}

impl SecretValue {
    fn file(key: String, path: &Path) -> SecretValue {
        SecretValue::File {
            key,
            path: path.to_path_buf(),
            last: Mutex::new(None),
        }
    }

    /// The secret now: inline, or the file's content, read again when the file changed.
    ///
    /// # Errors
    /// The file cannot be read: the key, the file and the operating system's reason.
    pub fn current(&self) -> Result<Secret, String> {
        let (key, path, last) = match self {
            SecretValue::Inline(secret) => return Ok(secret.clone()),
            SecretValue::File { key, path, last } => (key, path, last),
        };
        let unreadable = |error: std::io::Error| format!("{key}: cannot read {}: {error}", path.display());
        let metadata = std::fs::metadata(path).map_err(unreadable)?;
        // Only a regular file of a sensible size: /dev/zero, a FIFO or a log file named by
        // mistake must not block a scrape or take the memory.
        if !metadata.is_file() {
            return Err(format!("{key}: {} is not a regular file", path.display()));
        }
        if metadata.len() > MAX_SECRET_FILE_BYTES {
            return Err(format!(
                "{key}: {} holds {} bytes; a secret file holds at most {MAX_SECRET_FILE_BYTES}",
                path.display(),
                metadata.len()
            ));
        }
        let stamp = (metadata.modified().map_err(unreadable)?, metadata.len());
        let mut last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((modified, length, secret)) = last.as_ref() {
            if (*modified, *length) == stamp {
                return Ok(secret.clone());
            }
        }
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(std::fs::File::open(path).map_err(unreadable)?, MAX_SECRET_FILE_BYTES),
            &mut text,
        )
        .map_err(unreadable)?;
        let secret = Secret::new(text.trim().to_string());
        *last = Some((stamp.0, stamp.1, secret.clone()));
        Ok(secret)
    }
}

impl ScrapeAuth {
    /// The job's authentication, or `None` without any; problems (more than one mechanism,
    /// a secret both inline and in a file, `type: Basic`) go to `problems` under `at(key)`.
    pub fn from_settings(
        settings: AuthSettings<'_>,
        at: &dyn Fn(&str) -> String,
        problems: &mut Problems,
    ) -> Option<ScrapeAuth> {
        let set: Vec<&str> = [
            ("basic_auth", settings.basic_auth.is_some()),
            ("authorization", settings.authorization.is_some()),
            ("bearer_token", settings.bearer_token.is_some()),
            ("bearer_token_file", settings.bearer_token_file.is_some()),
            ("oauth2", settings.oauth2.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, present)| present.then_some(key))
        .collect();
        if set.len() > 1 {
            problems.push(
                at(set[1]),
                format!(
                    "{} are set: a job authenticates one way (choose one)",
                    set.join(" and ")
                ),
            );
            return None;
        }
        let mut either =
            |inline: Option<&Secret>, file: Option<&Path>, inline_key: &str, file_key: &str| match (inline, file) {
                (Some(_), Some(_)) => {
                    problems.push(
                        at(file_key),
                        format!("{inline_key} and {file_key} are both set: choose one"),
                    );
                    None
                }
                (Some(secret), None) => Some(SecretValue::Inline(secret.clone())),
                (None, Some(path)) => {
                    // Missing is allowed (a mounted secret may appear later); something that
                    // is there but is not a regular file never works.
                    if std::fs::metadata(path).is_ok_and(|metadata| !metadata.is_file()) {
                        problems.push(at(file_key), format!("{} is not a regular file", path.display()));
                        return None;
                    }
                    Some(SecretValue::file(at(file_key), path))
                }
                (None, None) => Some(SecretValue::Inline(Secret::new(String::new()))),
            };
        if let Some(basic) = settings.basic_auth {
            let password = either(
                basic.password.as_ref(),
                basic.password_file.as_deref(),
                "basic_auth.password",
                "basic_auth.password_file",
            )?;
            return Some(ScrapeAuth::Basic {
                username: basic.username.clone(),
                password,
            });
        }
        if let Some(oauth2) = settings.oauth2 {
            match url::Url::parse(&oauth2.token_url) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => {}
                _ => {
                    problems.push(
                        at("oauth2.token_url"),
                        format!(
                            "'{}' is not an http:// or https:// URL",
                            epicenter_config::redacted_url(&oauth2.token_url)
                        ),
                    );
                    return None;
                }
            }
            let secret = either(
                oauth2.client_secret.as_ref(),
                oauth2.client_secret_file.as_deref(),
                "oauth2.client_secret",
                "oauth2.client_secret_file",
            )?;
            return Some(ScrapeAuth::OAuth2 {
                config: oauth2.clone(),
                secret,
                token: tokio::sync::Mutex::new(None),
            });
        }
        if let Some(authorization) = settings.authorization {
            if authorization.kind.eq_ignore_ascii_case("basic") {
                problems.push(
                    at("authorization.type"),
                    "type Basic is written as basic_auth (username, password), as in Prometheus",
                );
                return None;
            }
            if authorization.kind.is_empty() || authorization.kind.contains(char::is_whitespace) {
                problems.push(at("authorization.type"), "must be one word, such as Bearer");
                return None;
            }
            let credentials = either(
                authorization.credentials.as_ref(),
                authorization.credentials_file.as_deref(),
                "authorization.credentials",
                "authorization.credentials_file",
            )?;
            return Some(ScrapeAuth::Header {
                scheme: authorization.kind.clone(),
                credentials,
            });
        }
        if settings.bearer_token.is_none() && settings.bearer_token_file.is_none() {
            return None;
        }
        // At most one of the two is set (checked above): the older spelling of
        // `authorization` with type Bearer.
        let credentials = either(
            settings.bearer_token,
            settings.bearer_token_file,
            "bearer_token",
            "bearer_token_file",
        )?;
        Some(ScrapeAuth::Header {
            scheme: "Bearer".to_string(),
            credentials,
        })
    }

    /// Adds the `Authorization` header (marked sensitive) to a request; for `oauth2`, asks
    /// for a token first when there is none or it is about to expire, with `client`.
    ///
    /// # Errors
    /// A secret file cannot be read ([`SecretValue::current`]), or the token endpoint fails
    /// (its URL without user information, the status or the reason; never the secret).
    pub async fn apply(
        &self,
        client: &reqwest::Client,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, String> {
        match self {
            ScrapeAuth::OAuth2 { config, secret, token } => {
                let mut token = token.lock().await;
                let fresh = token
                    .as_ref()
                    .filter(|(_, refresh_at)| std::time::Instant::now() < *refresh_at)
                    .map(|(value, _)| value.clone());
                let value = match fresh {
                    Some(value) => value,
                    None => {
                        let (value, lifetime) = fetch_token(client, config, &secret.current()?).await?;
                        let refresh_at = std::time::Instant::now() + lifetime.saturating_sub(TOKEN_EARLY_REFRESH);
                        *token = Some((value.clone(), refresh_at));
                        value
                    }
                };
                let mut header = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", value.expose()))
                    .map_err(|_| "oauth2: the token holds characters an HTTP header cannot carry".to_string())?;
                header.set_sensitive(true);
                Ok(request.header(reqwest::header::AUTHORIZATION, header))
            }
            ScrapeAuth::Basic { username, password } => {
                let password = password.current()?;
                Ok(request.basic_auth(username, Some(password.expose())))
            }
            ScrapeAuth::Header { scheme, credentials } => {
                let credentials = credentials.current()?;
                let mut value =
                    reqwest::header::HeaderValue::from_str(&format!("{scheme} {}", credentials.expose()))
                        .map_err(|_| "the credentials hold characters an HTTP header cannot carry".to_string())?;
                value.set_sensitive(true);
                Ok(request.header(reqwest::header::AUTHORIZATION, value))
            }
        }
    }
}

/// Asks `config.token_url` for a token (client credentials grant). Returns the token and its
/// lifetime (`expires_in`, or an hour when the server does not say).
async fn fetch_token(
    client: &reqwest::Client,
    config: &OAuth2,
    secret: &Secret,
) -> Result<(Secret, std::time::Duration), String> {
    let shown = epicenter_config::redacted_url(&config.token_url);
    let mut form: Vec<(&str, &str)> = vec![("grant_type", "client_credentials")];
    let scope = config.scopes.join(" ");
    if !scope.is_empty() {
        form.push(("scope", &scope));
    }
    for (name, value) in &config.endpoint_params {
        form.push((name, value));
    }
    let response = client
        .post(&config.token_url)
        .basic_auth(&config.client_id, Some(secret.expose()))
        .form(&form)
        .send()
        .await
        .map_err(|error| {
            format!(
                "oauth2: token request to {shown} failed: {}",
                crate::client::describe_request_error(&error)
            )
        })?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("oauth2: token endpoint {shown} answered HTTP status {status}"));
    }
    #[derive(Deserialize)]
    struct TokenAnswer {
        access_token: Secret,
        #[serde(default)]
        expires_in: Option<u64>,
    }
    let body = response.bytes().await.map_err(|error| {
        format!(
            "oauth2: token request to {shown} failed: {}",
            crate::client::describe_request_error(&error)
        )
    })?;
    let answer: TokenAnswer = serde_json::from_slice(&body)
        .map_err(|error| format!("oauth2: token endpoint {shown} answered no usable token: {error}"))?;
    let lifetime = std::time::Duration::from_secs(answer.expires_in.unwrap_or(3600));
    Ok((answer.access_token, lifetime))
}
