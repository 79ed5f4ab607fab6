//! The store's sections of the configuration file: `storage` (the embedded chDB store, the
//! default, or a ClickHouse server), `batching` (when the writer flushes) and `placement`
//! (which labels fill the `dc`, `host` and `service` columns). Each has a `problems` check
//! that needs no I/O; [`ClickHouseConfig::password`] reads the secret at start-up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use epicenter_config::{
    is_label_name, prometheus_only_warning, redacted_url, split_userinfo, ByteSize, Problems, PromDuration,
    PrometheusOnly, Secret, TlsConfig,
};
use serde::Deserialize;

/// `storage`: the embedded chDB store (default) or a ClickHouse server.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// The embedded store; used when `clickhouse` is absent.
    #[serde(default)]
    pub embedded: Option<EmbeddedConfig>,
    /// A ClickHouse server over HTTP.
    #[serde(default)]
    pub clickhouse: Option<ClickHouseConfig>,
    /// How long samples are kept (table TTL). Default `30d`.
    #[serde(default)]
    pub retention: Option<PromDuration>,
    /// The on-disk spool every batch goes through before it is sent (`crate::spool`): on by
    /// default, in `spool` inside the embedded path.
    #[serde(default)]
    pub spool: crate::spool::SpoolSettings,
    /// The live store's ClickHouse HTTP interface (`crate::endpoint`), served by `run` and
    /// `demo` beside the embedded store they write.
    #[serde(default)]
    pub http: HttpConfig,
    /// Prometheus's local TSDB settings: read, not used (see [`StorageConfig::warnings`]).
    #[serde(default)]
    pub tsdb: PrometheusOnly,
    /// Prometheus's exemplar storage settings: read, not used.
    #[serde(default)]
    pub exemplars: PrometheusOnly,
}

impl StorageConfig {
    /// Retention with its default of 30 days.
    pub fn retention(&self) -> Duration {
        self.retention
            .map_or(Duration::from_secs(30 * 86_400), |retention| retention.0)
    }

    /// The embedded store's directory: `storage.embedded.path`, else [`DEFAULT_DATA_PATH`]
    /// (`./data`, in the working directory).
    pub fn embedded_path(&self) -> PathBuf {
        self.embedded
            .as_ref()
            .and_then(|embedded| embedded.path.clone())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_PATH))
    }

    /// Makes every relative path written in `storage` relative to `directory`, the folder of
    /// the configuration file, as the paths of scrape jobs are: `embedded.path`, `spool.path`,
    /// `clickhouse.password_file`, `clickhouse.tls` files and `http.users[].password_file`.
    /// A path not written stays its default: the embedded store in `./data` of the working
    /// directory (as Prometheus's `--storage.tsdb.path` defaults to `data/` there), the spool
    /// inside the embedded store's directory. Absolute paths stay as they are.
    pub fn set_directory(&mut self, directory: &Path) {
        let join = |path: &mut PathBuf| epicenter_config::resolve_relative(directory, path);
        if let Some(path) = self.embedded.as_mut().and_then(|embedded| embedded.path.as_mut()) {
            join(path);
        }
        self.spool.path.iter_mut().for_each(join);
        if let Some(clickhouse) = &mut self.clickhouse {
            clickhouse.password_file.iter_mut().for_each(join);
            clickhouse.tls.iter_mut().for_each(|tls| tls.set_directory(directory));
        }
        for user in &mut self.http.users {
            user.password_file.iter_mut().for_each(join);
        }
    }

    /// The spool to open (None when `storage.spool.enabled` is false): `storage.spool.path`,
    /// else `spool` inside [`StorageConfig::embedded_path`].
    pub fn spool(&self) -> Option<crate::spool::SpoolConfig> {
        self.spool.resolve(&self.embedded_path().join("spool"))
    }

    /// Records problems with the choice of store and the server's settings (not the
    /// retention: see [`StorageConfig::retention_problems`]). Checks TLS files exist.
    pub fn problems(&self, problems: &mut Problems) {
        if self.embedded.is_some() && self.clickhouse.is_some() {
            problems.push("storage", "set either embedded or clickhouse, not both");
        }
        self.spool.problems(problems);
        self.http.problems(problems);
        let Some(clickhouse) = &self.clickhouse else {
            return;
        };
        if !(clickhouse.url.starts_with("http://") || clickhouse.url.starts_with("https://")) {
            problems.push(
                "storage.clickhouse.url",
                format!(
                    "'{}' must start with http:// or https:// (the HTTP interface, port 8123 by default)",
                    redacted_url(&clickhouse.url)
                ),
            );
        }
        if let Some(message) = authority_problem(&split_userinfo(&clickhouse.url).1) {
            problems.push(
                "storage.clickhouse.url",
                format!("'{}': {message}", redacted_url(&clickhouse.url)),
            );
        }
        let password_in_url = matches!(split_userinfo(&clickhouse.url).0, Some((_, Some(_))));
        if password_in_url && (clickhouse.password_env.is_some() || clickhouse.password_file.is_some()) {
            problems.push(
                "storage.clickhouse.url",
                "carries a password and password_env or password_file is set too: give the password one way",
            );
        }
        if let Some(tls) = &clickhouse.tls {
            tls.problems("storage.clickhouse.tls", problems);
        }
        if clickhouse.password_env.is_some() && clickhouse.password_file.is_some() {
            problems.push(
                "storage.clickhouse",
                "set either password_env or password_file, not both",
            );
        }
        if clickhouse.database.is_empty()
            || !clickhouse
                .database
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            problems.push(
                "storage.clickhouse.database",
                format!("'{}' must be letters, digits and '_'", clickhouse.database),
            );
        }
        if let Some(cluster) = &clickhouse.cluster {
            if !crate::schema::is_cluster_name(cluster) {
                problems.push(
                    "storage.clickhouse.cluster",
                    format!("'{cluster}' must be letters, digits and '_', not starting with a digit"),
                );
            }
        }
    }

    /// Records a zero `storage.retention`.
    pub fn retention_problems(&self, problems: &mut Problems) {
        if self.retention().is_zero() {
            problems.push("storage.retention", "must be greater than 0");
        }
    }

    /// Settings that are accepted but probably not what was meant, as sentences for
    /// warnings: `storage.clickhouse.tls` with an `http://` URL (the connection is not
    /// encrypted; ClickHouse serves HTTPS on another port, 8443 by default).
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.tsdb.is_some() {
            warnings.push(prometheus_only_warning(
                "storage.tsdb",
                "epicenter stores in storage.embedded or storage.clickhouse, and keeps samples for storage.retention",
            ));
        }
        if self.exemplars.is_some() {
            warnings.push(prometheus_only_warning(
                "storage.exemplars",
                "epicenter does not store exemplars",
            ));
        }
        if let Some(clickhouse) = &self.clickhouse {
            if clickhouse.tls.is_some() && clickhouse.url.starts_with("http://") {
                warnings.push(format!(
                    "storage.clickhouse.tls: set, but the url '{}' is http://, so the connection is not encrypted (ClickHouse serves HTTPS on its https_port, 8443 by default: use an https:// URL)",
                    redacted_url(&clickhouse.url)
                ));
            }
        }
        warnings
    }
}

/// `storage.http`: the ClickHouse HTTP interface of the embedded store while `run` or `demo`
/// holds it (`crate::endpoint`), read-only, for `epicenter sql`, curl, ClickHouse clients
/// and Grafana's ClickHouse data source.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// `ip:port` to listen on; an empty string turns the endpoint off. Not served for
    /// `storage.clickhouse` (query that server). Default `127.0.0.1:9465` (loopback only),
    /// or, when another process holds that port, a free loopback port (warned about, and
    /// written where `epicenter sql` finds it); a configured address that cannot be bound
    /// is an error.
    #[serde(default)]
    pub listen_address: Option<String>,
    /// Who may query. Empty (the default): the user `default` without a password, allowed
    /// only while `listen_address` is a loopback address, as ClickHouse's own `default`
    /// user is.
    #[serde(default)]
    pub users: Vec<HttpUser>,
}

/// Where the live endpoint listens unless `storage.http.listen_address` says otherwise.
pub const DEFAULT_HTTP_LISTEN_ADDRESS: &str = "127.0.0.1:9465";

/// `storage.http.users[]`: a name and where its password is read from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpUser {
    /// User name, as a client sends it (`X-ClickHouse-User`, HTTP basic auth, `user=`).
    pub name: String,
    /// Environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// File holding the password (trailing newline ignored).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

impl HttpConfig {
    /// The address to listen on: the configured one, else [`DEFAULT_HTTP_LISTEN_ADDRESS`].
    pub fn address(&self) -> &str {
        self.listen_address.as_deref().unwrap_or(DEFAULT_HTTP_LISTEN_ADDRESS)
    }

    /// Whether the endpoint is served (`listen_address` not empty).
    pub fn enabled(&self) -> bool {
        !self.address().trim().is_empty()
    }

    /// The users and their passwords (I/O: reads them; call at start-up): `[("default",
    /// None)]` when none are configured. Errors name the key path, never the value.
    pub fn credentials(&self) -> Result<Vec<(String, Option<Secret>)>, String> {
        if self.users.is_empty() {
            return Ok(vec![("default".to_string(), None)]);
        }
        self.users
            .iter()
            .enumerate()
            .map(|(index, user)| {
                let env_key = format!("storage.http.users[{index}].password_env");
                let file_key = format!("storage.http.users[{index}].password_file");
                let password = epicenter_config::read_secret(epicenter_config::SecretSource {
                    env_key: &env_key,
                    env: user.password_env.as_deref(),
                    file_key: &file_key,
                    file: user.password_file.as_deref(),
                })?;
                match password {
                    Some(password) if password.expose().is_empty() => Err(format!(
                        "storage.http.users[{index}]: the password of '{}' is empty (an empty password would let anyone in)",
                        user.name
                    )),
                    password => Ok((user.name.clone(), password)),
                }
            })
            .collect()
    }

    /// Records an address that is not `ip:port`, users without a name or a password or named
    /// twice, and a non-loopback address without users (the anonymous `default` user is
    /// for loopback only).
    pub fn problems(&self, problems: &mut Problems) {
        if !self.enabled() {
            return;
        }
        match self.address().parse::<std::net::SocketAddr>() {
            Err(_) => problems.push(
                "storage.http.listen_address",
                format!(
                    "'{}' is not an address to listen on (ip:port, e.g. 127.0.0.1:9465; an empty string turns the endpoint off)",
                    self.address()
                ),
            ),
            Ok(address) if !address.ip().is_loopback() && self.users.is_empty() => problems.push(
                "storage.http.users",
                format!(
                    "listening on {address}, beyond loopback, needs users with passwords (the user 'default' without a password is allowed on 127.0.0.1 only)"
                ),
            ),
            Ok(_) => {}
        }
        let mut seen = std::collections::HashSet::new();
        for (index, user) in self.users.iter().enumerate() {
            let key = format!("storage.http.users[{index}]");
            if user.name.is_empty() {
                problems.push(format!("{key}.name"), "must not be empty");
            } else if !seen.insert(user.name.as_str()) {
                problems.push(format!("{key}.name"), format!("'{}' is listed twice", user.name));
            }
            match (&user.password_env, &user.password_file) {
                (None, None) => problems.push(key, "needs password_env or password_file"),
                (Some(_), Some(_)) => problems.push(key, "set either password_env or password_file, not both"),
                _ => {}
            }
        }
    }
}

/// `storage.embedded`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedConfig {
    /// Directory of the embedded store; relative to the configuration file's folder when
    /// written there ([`StorageConfig::set_directory`]). `None` (not written): the default,
    /// [`DEFAULT_DATA_PATH`] in the working directory ([`StorageConfig::embedded_path`]).
    #[serde(default)]
    pub path: Option<PathBuf>,
}

/// The embedded store's directory when `storage.embedded.path` is not written: `./data`, in
/// the working directory (as Prometheus's `--storage.tsdb.path` defaults to `data/`).
pub const DEFAULT_DATA_PATH: &str = "./data";

/// `storage.clickhouse`: a ClickHouse server reached over its HTTP interface.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClickHouseConfig {
    /// Base URL, e.g. `http://127.0.0.1:8123`. May carry `user:password@` (sent as the user
    /// and password, never shown: see `epicenter_config::redacted_url`); prefer
    /// `password_env` or `password_file`, which keep the password out of the file.
    pub url: String,
    /// Database holding epicenter's tables. Default `epicenter`.
    #[serde(default = "default_database")]
    pub database: String,
    /// User. Default `default`.
    #[serde(default = "default_user")]
    pub user: String,
    /// Environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// File holding the password (trailing newline ignored).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// TLS settings for `https` URLs.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// A ClickHouse cluster (a `remote_servers` entry of the servers' configuration) to create
    /// the schema on: every DDL statement `ON CLUSTER`, each table replicated on every shard as
    /// `<table>_local` with a `Distributed` `<table>` over them
    /// ([`crate::schema::statements_for`], docs/scaling.md). Letters, digits and `_`. Unset:
    /// plain tables on the one server `url` names.
    #[serde(default)]
    pub cluster: Option<String>,
}

fn default_database() -> String {
    "epicenter".to_string()
}

fn default_user() -> String {
    "default".to_string()
}

impl ClickHouseConfig {
    /// Reads the password from `password_env` or `password_file` (I/O: call at start-up, not
    /// in a `problems` check). `Ok(None)` when neither is set. Errors name the key, never the
    /// value.
    pub fn password(&self) -> Result<Option<Secret>, String> {
        epicenter_config::read_secret(epicenter_config::SecretSource {
            env_key: "storage.clickhouse.password_env",
            env: self.password_env.as_deref(),
            file_key: "storage.clickhouse.password_file",
            file: self.password_file.as_deref(),
        })
    }
}

impl ClickHouseConfig {
    /// The TLS client configuration for this server: `Some` when the URL is `https://` or
    /// `tls` is set (`epicenter_config::TlsConfig::client_config`), `None` for plain HTTP.
    /// I/O: reads the PEM files and the system's roots; call at start-up. Errors name the key
    /// path and the file (`storage.clickhouse.tls.ca_file '/x.pem': …`).
    pub fn tls_client_config(&self) -> Result<Option<rustls::ClientConfig>, String> {
        if !(self.url.starts_with("https://") || self.tls.is_some()) {
            return Ok(None);
        }
        let tls = self.tls.clone().unwrap_or_default();
        tls.client_config()
            .map(Some)
            .map_err(|error| format!("storage.clickhouse.tls.{error}"))
    }
}

/// What is wrong with the host and port of an `http(s)://` URL (userinfo already removed):
/// no host, or a port that is not a number from 1 to 65535. None when both are fine, or
/// when the scheme is not http(s) (reported on its own).
fn authority_problem(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if rest[authority.len()..].contains('@') {
        return Some(
            "a '#', '?' or '/' ends the host part before the '@': if the password holds one, percent-encode it (%23, %3F, %2F) or give it with password_env / password_file".to_string(),
        );
    }
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 literal without a port: `[::1]`.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    if host.is_empty() || host == "[]" {
        return Some("has no host (e.g. http://127.0.0.1:8123)".to_string());
    }
    // The port's text is not echoed: in a URL whose password holds a `#` or `?`, what looks
    // like the port is part of the password.
    match port.map(str::parse::<u16>) {
        Some(Ok(0) | Err(_)) => Some("the port is not a number from 1 to 65535".to_string()),
        _ => None,
    }
}

/// `batching`: the writer flushes when any limit is reached.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchingConfig {
    /// Rows per batch. Default 1,000,000.
    #[serde(default = "default_max_rows")]
    pub max_rows: u64,
    /// Encoded (RowBinary) bytes per batch. Default `256MiB`: at 100k samples/s a 5 s batch
    /// is about 95 MB, and a lower cap only makes inserts smaller and dearer (fleet benchmark,
    /// docs/schema.md, Cost: 0.48 cores at 64 MiB, 0.43 uncapped).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: ByteSize,
    /// Oldest row's age before a flush. Default `5s`: larger, fewer inserts cost the engine
    /// far less CPU (fleet benchmark, docs/schema.md, Cost), and the detector reads samples
    /// from the scrape path, not from storage.
    #[serde(default = "default_max_age")]
    pub max_age: PromDuration,
}

impl Default for BatchingConfig {
    fn default() -> Self {
        BatchingConfig {
            max_rows: default_max_rows(),
            max_bytes: default_max_bytes(),
            max_age: default_max_age(),
        }
    }
}

impl BatchingConfig {
    /// Records zero limits.
    pub fn problems(&self, problems: &mut Problems) {
        if self.max_rows == 0 {
            problems.push("batching.max_rows", "must be greater than 0");
        }
        if self.max_bytes.0 == 0 {
            problems.push("batching.max_bytes", "must be greater than 0");
        }
        if self.max_age.0.is_zero() {
            problems.push("batching.max_age", "must be greater than 0");
        }
    }
}

fn default_max_rows() -> u64 {
    1_000_000
}

fn default_max_bytes() -> ByteSize {
    ByteSize(256 << 20)
}

fn default_max_age() -> PromDuration {
    PromDuration(Duration::from_secs(5))
}

/// `placement`: which labels say which instance a series belongs to and where it runs (the
/// `instance`, `dc`, `host` and `service` columns of every table, and the detector's instance,
/// datacenter, host and service).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementConfig {
    /// Label naming the instance: the identity of a process in every table (`samples`,
    /// `scrapes`, `anomalies`, `verdicts`) and in the detector's verdicts. Default
    /// `instance` (Prometheus's scraped address); `pod` on Kubernetes, or whatever label
    /// names the process. A series without the label falls back to `instance`.
    #[serde(default = "default_instance_label")]
    pub instance_label: String,
    /// Label naming the datacenter. Default `dc`.
    #[serde(default = "default_dc_label")]
    pub dc_label: String,
    /// Label naming the host. Default `host`.
    #[serde(default = "default_host_label")]
    pub host_label: String,
    /// Label naming the service. Default `service`.
    #[serde(default = "default_service_label")]
    pub service_label: String,
    /// When a series has no host label, take the host part of `instance` (`host:port`).
    /// Default true.
    #[serde(default = "default_true")]
    pub host_from_instance: bool,
    /// When a target's series have no host label and its exposition has
    /// `node_uname_info{nodename="…"}` (node_exporter's `uname` collector), that nodename is
    /// their host, before the host part of `instance`. Default true.
    #[serde(default = "default_true")]
    pub host_from_uname: bool,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            instance_label: default_instance_label(),
            dc_label: default_dc_label(),
            host_label: default_host_label(),
            service_label: default_service_label(),
            host_from_instance: true,
            host_from_uname: true,
        }
    }
}

impl PlacementConfig {
    /// Records label names that are not valid label names.
    pub fn problems(&self, problems: &mut Problems) {
        for (key, name) in [
            ("placement.instance_label", &self.instance_label),
            ("placement.dc_label", &self.dc_label),
            ("placement.host_label", &self.host_label),
            ("placement.service_label", &self.service_label),
        ] {
            if !is_label_name(name) {
                problems.push(key, format!("'{name}' is not a valid label name"));
            }
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_instance_label() -> String {
    "instance".to_string()
}

fn default_dc_label() -> String {
    "dc".to_string()
}

fn default_host_label() -> String {
    "host".to_string()
}

fn default_service_label() -> String {
    "service".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_read_from_the_environment_and_errors_name_the_key() {
        let config = ClickHouseConfig {
            url: "http://127.0.0.1:8123".into(),
            database: "epicenter".into(),
            user: "default".into(),
            password_env: Some("EPICENTER_TEST_SURELY_UNSET_VARIABLE".into()),
            password_file: None,
            tls: None,
            cluster: None,
        };
        let error = config.password().unwrap_err();
        assert!(
            error.contains("EPICENTER_TEST_SURELY_UNSET_VARIABLE is not set"),
            "{error}"
        );
    }

    /// The problems `record` finds, one per line.
    fn problems_of(record: impl FnOnce(&mut Problems)) -> String {
        let mut problems = Problems::default();
        record(&mut problems);
        problems
            .into_errors()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Paths written in `storage` are read from the configuration's folder; absolute ones
    /// and the defaults (not written) stay as they are, the spool following the store.
    #[test]
    fn written_storage_paths_are_relative_to_the_configuration_s_folder() {
        let folder = Path::new("/etc/epicenter");
        let mut written: StorageConfig = epicenter_config::from_yaml(
            "embedded: {path: store}\nspool: {path: ./spool}\nhttp: {users: [{name: a, password_file: secrets/a}, {name: b, password_file: /run/b}]}\n",
        )
        .unwrap();
        written.set_directory(folder);
        assert_eq!(written.embedded_path(), Path::new("/etc/epicenter/store"));
        assert_eq!(written.spool().unwrap().path, Path::new("/etc/epicenter/./spool"));
        let files: Vec<_> = written
            .http
            .users
            .iter()
            .map(|user| user.password_file.clone().unwrap())
            .collect();
        assert_eq!(
            files,
            [PathBuf::from("/etc/epicenter/secrets/a"), PathBuf::from("/run/b")]
        );
        // The spool's default is inside the (resolved) store.
        let mut store_only: StorageConfig = epicenter_config::from_yaml("embedded: {path: ../data}\n").unwrap();
        store_only.set_directory(folder);
        assert_eq!(
            store_only.spool().unwrap().path,
            Path::new("/etc/epicenter/../data/spool")
        );
        // Not written: the working directory's ./data, as before.
        let mut defaults = StorageConfig::default();
        defaults.set_directory(folder);
        assert_eq!(defaults.embedded_path(), Path::new("./data"));
        assert_eq!(defaults.spool().unwrap().path, Path::new("./data/spool"));
        let mut section_only: StorageConfig = epicenter_config::from_yaml("embedded: {}\n").unwrap();
        section_only.set_directory(folder);
        assert_eq!(section_only.embedded_path(), Path::new("./data"));
        let mut server: StorageConfig = epicenter_config::from_yaml(
            "clickhouse: {url: 'https://ch:8443', password_file: pw, tls: {ca_file: ca.pem, cert_file: /pki/c.pem, key_file: k.pem}}\n",
        )
        .unwrap();
        server.set_directory(folder);
        let clickhouse = server.clickhouse.unwrap();
        assert_eq!(clickhouse.password_file.unwrap(), Path::new("/etc/epicenter/pw"));
        let tls = clickhouse.tls.unwrap();
        assert_eq!(tls.ca_file.unwrap(), Path::new("/etc/epicenter/ca.pem"));
        assert_eq!(tls.cert_file.unwrap(), Path::new("/pki/c.pem"));
        assert_eq!(tls.key_file.unwrap(), Path::new("/etc/epicenter/k.pem"));
    }

    #[test]
    fn a_cluster_name_is_an_identifier() {
        let check = |yaml: &str| {
            let config: StorageConfig = epicenter_config::from_yaml(yaml).unwrap();
            problems_of(|problems| config.problems(problems))
        };
        assert_eq!(check("clickhouse: {url: 'http://127.0.0.1:8123', cluster: main_2}"), "");
        assert_eq!(
            check("clickhouse: {url: 'http://127.0.0.1:8123', cluster: \"main'; DROP\"}"),
            "storage.clickhouse.cluster: 'main'; DROP' must be letters, digits and '_', not starting with a digit"
        );
    }

    #[test]
    fn the_live_endpoint_beyond_loopback_needs_users_with_passwords() {
        let check = |yaml: &str| {
            let config: HttpConfig = epicenter_config::from_yaml(yaml).unwrap();
            problems_of(|problems| config.problems(problems))
        };
        assert_eq!(check("{}"), "");
        assert_eq!(check("listen_address: ''"), "");
        assert!(
            check("listen_address: 0.0.0.0:9465")
                .contains("storage.http.users: listening on 0.0.0.0:9465, beyond loopback, needs users"),
            "{}",
            check("listen_address: 0.0.0.0:9465")
        );
        assert_eq!(
            check("listen_address: 0.0.0.0:9465\nusers: [{name: grafana, password_env: X}]"),
            ""
        );
        let both =
            check("users: [{name: a, password_env: X}, {name: a}, {name: '', password_file: /p, password_env: Y}]");
        assert!(
            both.contains("storage.http.users[1].name: 'a' is listed twice"),
            "{both}"
        );
        assert!(
            both.contains("storage.http.users[1]: needs password_env or password_file"),
            "{both}"
        );
        assert!(both.contains("storage.http.users[2].name: must not be empty"), "{both}");
        assert!(
            both.contains("storage.http.users[2]: set either password_env or password_file"),
            "{both}"
        );
        assert!(check("listen_address: localhost").contains("'localhost' is not an address to listen on"));
    }

    #[test]
    fn urls_without_a_host_or_with_a_bad_port_are_reported() {
        for (url, expected) in [
            ("http://127.0.0.1:8123", None),
            ("https://clickhouse.example:8443/", None),
            ("http://[::1]:8123", None),
            ("http://[::1]", None),
            ("http://localhost", None),
            ("http://:8123", Some("has no host")),
            ("http://", Some("has no host")),
            ("http:///path", Some("has no host")),
            (
                "http://127.0.0.1:81234",
                Some("the port is not a number from 1 to 65535"),
            ),
            ("http://127.0.0.1:0", Some("the port is not a number")),
            ("http://127.0.0.1:http", Some("the port is not a number")),
            (
                "http://reader:pass#word@127.0.0.1:8123",
                Some("percent-encode it (%23, %3F, %2F)"),
            ),
        ] {
            let problem = authority_problem(url);
            match expected {
                None => assert_eq!(problem, None, "{url}"),
                Some(text) => assert!(
                    problem.as_deref().is_some_and(|problem| problem.contains(text)),
                    "{url}: {problem:?}"
                ),
            }
        }
    }
}
