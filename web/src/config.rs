//! The `server` section of the configuration file: where epicenter's own HTTP endpoints
//! listen.

use epicenter_config::Problems;
use serde::Deserialize;

/// `server`: where epicenter's own HTTP endpoints listen.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `host:port` to listen on. Default `127.0.0.1:9464` (loopback only; set `0.0.0.0:9464`
    /// to expose it).
    #[serde(default = "default_listen_address")]
    pub listen_address: String,
    /// Environment variable holding a bearer token. When set (or `bearer_token_file` is),
    /// every endpoint but `/healthz`, `/readyz` and `/metrics` needs
    /// `Authorization: Bearer <token>` (RFC 6750).
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// File holding the bearer token (trailing newline ignored).
    #[serde(default)]
    pub bearer_token_file: Option<std::path::PathBuf>,
    /// HTTPS: `cert_file`, `key_file` and optionally `client_ca_file` (client certificates
    /// required), as in Prometheus's web configuration file. Plain HTTP when absent.
    #[serde(default)]
    pub tls: Option<epicenter_config::ServerTlsConfig>,
    /// epicenter's base URL as on-call reaches it (behind a proxy, say), for the links in
    /// alerts (`generatorURL`), as Prometheus's `--web.external-url`. Default: the scheme and
    /// address it listens on (`http://127.0.0.1:9464`; the host name for `0.0.0.0`).
    #[serde(default)]
    pub external_url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen_address: default_listen_address(),
            bearer_token_env: None,
            bearer_token_file: None,
            tls: None,
            external_url: None,
        }
    }
}

fn default_listen_address() -> String {
    "127.0.0.1:9464".to_string()
}

impl ServerConfig {
    /// Makes `bearer_token_file` and the `tls` files relative to `directory`, the folder of
    /// the configuration file, when they are relative (as Prometheus reads the paths of its
    /// web configuration file from that file's folder).
    pub fn set_directory(&mut self, directory: &std::path::Path) {
        if let Some(path) = &mut self.bearer_token_file {
            epicenter_config::resolve_relative(directory, path);
        }
        if let Some(tls) = &mut self.tls {
            tls.set_directory(directory);
        }
    }

    /// Reads the bearer token (I/O: call at start-up). `Ok(None)` when none is configured.
    /// Errors name the key and the variable or file, never the value.
    pub fn bearer_token(&self) -> Result<Option<epicenter_config::Secret>, String> {
        let token = epicenter_config::read_secret(epicenter_config::SecretSource {
            env_key: "server.bearer_token_env",
            env: self.bearer_token_env.as_deref(),
            file_key: "server.bearer_token_file",
            file: self.bearer_token_file.as_deref(),
        })?;
        match token {
            Some(token) if token.expose().trim().is_empty() => {
                Err("server.bearer_token: the token is empty (an empty token would let anyone in)".to_string())
            }
            token => Ok(token),
        }
    }

    /// The rustls configuration of `server.tls` (I/O: reads the PEM files; call at
    /// start-up). `Ok(None)` for plain HTTP. Errors name the key path and the file.
    pub fn tls_server_config(&self) -> Result<Option<rustls::ServerConfig>, String> {
        self.tls
            .as_ref()
            .map(|tls| tls.server_config().map_err(|error| format!("server.tls.{error}")))
            .transpose()
    }

    /// Records a `listen_address` that is not `ip:port`, both token sources set, and
    /// `server.tls` files that cannot be read.
    pub fn problems(&self, problems: &mut Problems) {
        if let Some(tls) = &self.tls {
            tls.problems("server.tls", problems);
        }
        if let Some(url) = &self.external_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url::Url::parse(url).is_err() {
                problems.push(
                    "server.external_url",
                    format!("'{url}' is not an http:// or https:// URL (e.g. https://epicenter.example.com)"),
                );
            }
        }
        if self.bearer_token_env.is_some() && self.bearer_token_file.is_some() {
            problems.push("server", "set either bearer_token_env or bearer_token_file, not both");
        }
        if self.listen_address.parse::<std::net::SocketAddr>().is_err() {
            problems.push(
                "server.listen_address",
                format!(
                    "'{}' is not an address to listen on (ip:port, e.g. 127.0.0.1:9464)",
                    self.listen_address
                ),
            );
        }
    }
}
