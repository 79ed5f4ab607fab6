//! A ClickHouse server over its HTTP interface, through the official `clickhouse` crate
//! (0.15.3; what it sends is in `../shared/CLICKHOUSE_HTTP.md`): DDL and queries with
//! `query_raw`, rows with `insert_formatted_with(... FORMAT RowBinary)` compressed with LZ4.
//! Same schema and SQL as the embedded store.

use std::time::Duration;

use epicenter_config::{redacted_url, split_userinfo, Secret};

use crate::config::ClickHouseConfig;
use crate::schema::{self, Table};

/// A ClickHouse server holding epicenter's tables in one database.
#[derive(Clone)]
pub struct ClickHouseStore {
    client: clickhouse::Client,
    database: String,
    /// `storage.clickhouse.cluster`: the schema is created on this cluster.
    cluster: Option<String>,
    url: String,
    /// The schema still to be created, shared by clones ([`ClickHouseStore::defer_schema`]).
    schema: std::sync::Arc<SchemaState>,
}

/// A schema whose creation waits for the server to answer ([`ClickHouseStore::defer_schema`]).
#[derive(Debug, Default)]
struct SchemaState {
    /// `Some(retention)` while the schema is still to be created with that retention.
    pending: std::sync::Mutex<Option<Duration>>,
    /// Why the last attempt failed (the server's URL redacted, never a password).
    last_error: std::sync::Mutex<Option<String>>,
    /// Held while an attempt runs: one migration at a time, however many writers wait.
    creating: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for ClickHouseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClickHouseStore")
            .field("url", &self.url)
            .field("database", &self.database)
            .finish()
    }
}

impl std::fmt::Display for ClickHouseStore {
    /// `the ClickHouse server at http://host:8123 (database epicenter)`, the URL as
    /// [`redacted_url`] shows it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the ClickHouse server at {} (database {})", self.url, self.database)
    }
}

/// A failed request, and whether trying again can help (network errors and server-side
/// failures yes; ClickHouse data, type and syntax errors no).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("ClickHouse at {url}: {message}")]
pub struct ClickHouseError {
    /// Server URL.
    pub url: String,
    /// What went wrong (the server's exception text when it sent one).
    pub message: String,
    /// Whether a retry may succeed.
    pub retryable: bool,
}

/// A mutex's value, also after a panic elsewhere (the values here are plain data).
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Exception names of ClickHouse errors that repeat on retry (bad data, types, SQL).
const PERMANENT: &[&str] = &[
    "SYNTAX_ERROR",
    "TYPE_MISMATCH",
    "CANNOT_PARSE",
    "CANNOT_READ_ALL_DATA",
    "UNKNOWN_TABLE",
    "UNKNOWN_DATABASE",
    "UNKNOWN_IDENTIFIER",
    "NO_SUCH_COLUMN",
    "ILLEGAL_TYPE_OF_ARGUMENT",
    "ILLEGAL_COLUMN",
    "AUTHENTICATION_FAILED",
    "READONLY",
];

/// TCP keep-alive and idle-connection lifetime of the HTTP client: the `clickhouse` crate's
/// own defaults (60 s; 2 s, under the server's 3 s `keep_alive_timeout`).
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(2);

/// A `clickhouse` client over hyper: plain HTTP, or rustls when the URL is `https://` or
/// `tls` is set (then plain `http://` URLs still work, as hyper-rustls's `https_or_http`).
fn http_client(config: &ClickHouseConfig) -> Result<clickhouse::Client, String> {
    use hyper_util::client::legacy::{connect::HttpConnector, Client};
    use hyper_util::rt::TokioExecutor;
    let mut connector = HttpConnector::new();
    connector.set_keepalive(Some(TCP_KEEPALIVE));
    let Some(tls) = config.tls_client_config()? else {
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector);
        return Ok(clickhouse::Client::with_http_client(client));
    };
    connector.enforce_http(false);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build(connector);
    Ok(clickhouse::Client::with_http_client(client))
}

impl ClickHouseStore {
    /// A client for `config` (password already read, see [`ClickHouseConfig::password`]),
    /// with LZ4-compressed inserts. Credentials in the URL's userinfo
    /// (`http://user:password@host:8123`) are sent as the user and password (the
    /// `X-ClickHouse-User` and `X-ClickHouse-Key` headers, as the `clickhouse` crate does),
    /// never as part of the URL; a user there overrides `user`, a password `password`.
    ///
    /// An `https://` URL is reached over TLS (rustls, TLS 1.2 and 1.3) under `config.tls`
    /// (Prometheus's `tls_config`): the system's roots plus `ca_file`, a client certificate
    /// from `cert_file`/`key_file`, or `insecure_skip_verify`. ClickHouse serves HTTPS on
    /// port 8443 by default (`https_port`).
    ///
    /// # Errors
    /// A TLS file that cannot be read or parsed, named with its key path
    /// (`storage.clickhouse.tls.ca_file '/etc/ca.pem': no PEM certificate in it`). Reads the
    /// TLS files and the system's roots when the URL is `https://` or `tls` is set.
    pub fn new(config: &ClickHouseConfig, password: Option<Secret>) -> Result<ClickHouseStore, String> {
        let (userinfo, url) = split_userinfo(&config.url);
        let (user, password) = match userinfo {
            Some((user, in_url)) => (
                if user.is_empty() { config.user.clone() } else { user },
                in_url.map(Secret::new).or(password),
            ),
            None => (config.user.clone(), password),
        };
        let mut client = http_client(config)?
            .with_url(url)
            .with_user(user)
            .with_compression(clickhouse::Compression::Lz4);
        if let Some(password) = password {
            client = client.with_password(password.expose());
        }
        Ok(ClickHouseStore {
            client,
            database: config.database.clone(),
            cluster: config.cluster.clone(),
            // For errors, Debug and Display: never the credentials a URL may carry.
            url: redacted_url(&config.url),
            schema: std::sync::Arc::default(),
        })
    }

    /// Leaves the schema to be created (with `retention`) by the first write that finds the
    /// server answering ([`ClickHouseStore::ensure_schema`]), after `error` (why creating it
    /// at start failed: the server did not answer). Until then
    /// [`ClickHouseStore::waiting_for_schema`] says why.
    pub fn defer_schema(&self, retention: Duration, error: &ClickHouseError) {
        *lock(&self.schema.pending) = Some(retention);
        *lock(&self.schema.last_error) = Some(error.to_string());
    }

    /// While the schema waits to be created ([`ClickHouseStore::defer_schema`]): why the last
    /// attempt failed (`ClickHouse at http://host:8123: … Connection refused`). `None` once
    /// it exists (or was never deferred).
    pub fn waiting_for_schema(&self) -> Option<String> {
        lock(&self.schema.pending).as_ref()?;
        Some(lock(&self.schema.last_error).clone().unwrap_or_default())
    }

    /// Creates the schema if its creation was deferred ([`ClickHouseStore::defer_schema`]);
    /// at once otherwise. One attempt at a time; said in the log when it succeeds.
    ///
    /// # Errors
    /// The migration's error, always retryable (`creating the schema: …`): data waiting
    /// for the schema is not bad data, so a spooled batch is kept and tried again.
    pub async fn ensure_schema(&self) -> Result<(), ClickHouseError> {
        if lock(&self.schema.pending).is_none() {
            return Ok(());
        }
        let _creating = self.schema.creating.lock().await;
        let Some(retention) = *lock(&self.schema.pending) else {
            return Ok(());
        };
        match self.migrate(retention).await {
            Ok(()) => {
                *lock(&self.schema.pending) = None;
                *lock(&self.schema.last_error) = None;
                tracing::warn!(store = %self, "the store answers now: its schema is in place, and what was spooled meanwhile is delivered");
                Ok(())
            }
            Err(error) => {
                *lock(&self.schema.last_error) = Some(error.to_string());
                Err(ClickHouseError {
                    message: format!("creating the schema: {}", error.message),
                    retryable: true,
                    ..error
                })
            }
        }
    }

    fn error(&self, error: clickhouse::error::Error) -> ClickHouseError {
        // With its causes: hyper says only `client error (Connect)`; what failed (refused,
        // a certificate nobody trusts) is in the chain.
        let mut message = epicenter_config::describe_error(&error);
        if message.contains("UnknownIssuer") {
            message.push_str(" (the server's certificate is not signed by a trusted CA: put its CA in storage.clickhouse.tls.ca_file)");
        }
        let retryable = match &error {
            clickhouse::error::Error::Network(_) | clickhouse::error::Error::TimedOut => true,
            clickhouse::error::Error::BadResponse(text) => !PERMANENT.iter().any(|name| text.contains(name)),
            _ => false,
        };
        ClickHouseError {
            url: self.url.clone(),
            message,
            retryable,
        }
    }

    /// Creates the schema if it is missing (idempotent): on the configured cluster when there is
    /// one ([`schema::statements_for`]). On a cluster only when `schema_version` does not yet
    /// hold [`schema::SCHEMA_VERSION`]: each `ON CLUSTER` statement waits for every host
    /// (`distributed_ddl_task_timeout`, 180 s by default), so running them at every start would
    /// keep every collector from starting while one host is down. (A changed
    /// `storage.retention` is then applied by hand on a cluster: docs/scaling.md.)
    pub async fn migrate(&self, retention: Duration) -> Result<(), ClickHouseError> {
        if self.cluster.is_some() {
            let current = self
                .query(
                    &format!("SELECT max(version) FROM {}.schema_version", self.database),
                    "TabSeparated",
                )
                .await
                .ok()
                .and_then(|text| String::from_utf8_lossy(&text).trim().parse::<u32>().ok());
            if current.is_some_and(|version| version >= schema::SCHEMA_VERSION) {
                tracing::info!(version = current, "the cluster's schema is current: no DDL sent");
                return Ok(());
            }
        }
        let cluster = self.cluster.as_deref();
        let execute = |statement: String| async move {
            self.client
                .query_raw(&statement)
                .execute()
                .await
                .map_err(|error| self.error(error))
        };
        // The database first (`CREATE DATABASE IF NOT EXISTS`): the check below is asked in it.
        if let Some(create_database) = schema::migration(&self.database, retention, cluster, false)
            .into_iter()
            .next()
        {
            execute(create_database).await?;
        }
        let wide = self
            .query(&schema::wide_samples_query(&self.database, cluster), "TabSeparated")
            .await?;
        let upgrading = String::from_utf8_lossy(&wide).trim() != "0";
        if upgrading {
            tracing::info!(
                "the store holds schema 2's wide `samples`: kept as `samples_v2` (and `samples_1m_v2`) and copied into `sample_values` and `series`"
            );
        }
        for statement in schema::migration(&self.database, retention, cluster, upgrading)
            .into_iter()
            .skip(1)
        {
            execute(statement).await?;
        }
        if let Err(error) = execute(schema::merge_settings(&self.database, cluster)).await {
            tracing::warn!(
                error = %error,
                "the server refused sample_values' merge settings (ClickHouse before 24.11 does not know merge_selector_base and min_parts_to_merge_at_once): it merges with the server's defaults, at some more CPU per sample (docs/schema.md, Merges)"
            );
        }
        let (query, expected) = schema::samples_engine_check(&self.database, cluster);
        let engine = self.query(&query, "TabSeparated").await?;
        let engine = String::from_utf8_lossy(&engine).trim().to_string();
        if engine != expected {
            return Err(ClickHouseError {
                url: self.url.clone(),
                message: format!(
                    "after the migration `{}.samples` has engine {engine:?}, not schema 3's {expected}: new samples would not show",
                    self.database
                ),
                retryable: false,
            });
        }
        Ok(())
    }

    /// Runs a query (tables may be named without the database) and returns the output in
    /// `format`.
    pub async fn query(&self, sql: &str, format: &str) -> Result<Vec<u8>, ClickHouseError> {
        self.fetch(self.client.clone(), sql, format).await
    }

    /// Runs a query as [`ClickHouseStore::query`] does, with the server's `readonly = 1`
    /// setting: statements that write, change settings or call table functions are refused by
    /// the server (`Code: 164 … (READONLY)`).
    pub async fn query_read_only(&self, sql: &str, format: &str) -> Result<Vec<u8>, ClickHouseError> {
        self.fetch(self.client.clone().with_setting("readonly", "1"), sql, format)
            .await
    }

    async fn fetch(&self, client: clickhouse::Client, sql: &str, format: &str) -> Result<Vec<u8>, ClickHouseError> {
        let mut cursor = client
            .with_database(self.database.clone())
            .query_raw(sql)
            .fetch_bytes(format)
            .map_err(|error| self.error(error))?;
        let bytes = cursor.collect().await.map_err(|error| self.error(error))?;
        Ok(bytes.to_vec())
    }

    /// Inserts RowBinary rows in `table`'s column order.
    /// The schema is created first when that was deferred ([`ClickHouseStore::ensure_schema`]).
    pub async fn insert_encoded(&self, table: Table, data: &[u8], token: &str) -> Result<u64, ClickHouseError> {
        if data.is_empty() {
            return Ok(0);
        }
        self.ensure_schema().await?;
        let sql = format!(
            "{} FORMAT RowBinary",
            crate::schema::insert_statement(&self.database, table, token)
        );
        let mut insert = self.client.insert_formatted_with(sql);
        insert
            .send(bytes::Bytes::copy_from_slice(data))
            .await
            .map_err(|error| self.error(error))?;
        insert.end().await.map_err(|error| self.error(error))?;
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the server receives: the read-only query carries `readonly=1` as a ClickHouse
    /// setting in the URL (the HTTP interface's way), the plain one does not.
    #[tokio::test]
    async fn a_read_only_query_asks_the_server_for_readonly() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let mut request_lines = Vec::new();
            for _ in 0..2 {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut buffer = vec![0u8; 16 * 1024];
                let read = stream.read(&mut buffer).await.unwrap();
                let text = String::from_utf8_lossy(&buffer[..read]).into_owned();
                request_lines.push(text.lines().next().unwrap_or_default().to_string());
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n1\n")
                    .await;
            }
            request_lines
        });
        let store = ClickHouseStore::new(&config(url, "default"), None).unwrap();
        assert_eq!(store.query_read_only("SELECT 1", "TabSeparated").await.unwrap(), b"1\n");
        assert_eq!(store.query("SELECT 1", "TabSeparated").await.unwrap(), b"1\n");
        let lines = server.await.unwrap();
        assert!(lines[0].contains("readonly=1"), "{lines:?}");
        assert!(!lines[1].contains("readonly"), "{lines:?}");
    }

    /// A server config for `url` and `user`, database `epicenter` (the password is passed on
    /// its own, as read at start-up).
    fn config(url: String, user: &str) -> ClickHouseConfig {
        ClickHouseConfig {
            url,
            database: "epicenter".into(),
            user: user.into(),
            password_env: None,
            password_file: None,
            tls: None,
            cluster: None,
        }
    }

    /// One request to a server that records it and answers `1`; returns the request's text.
    async fn one_request(listener: tokio::net::TcpListener) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buffer = vec![0u8; 16 * 1024];
        let read = stream.read(&mut buffer).await.unwrap();
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n1\n")
            .await;
        String::from_utf8_lossy(&buffer[..read]).into_owned()
    }

    #[tokio::test]
    async fn credentials_in_the_url_are_sent_as_user_and_key_and_never_shown() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(one_request(listener));
        let url = format!("http://reader:p%40ss-w0rd@{address}");
        let store = ClickHouseStore::new(&config(url, "default"), Some(Secret::new("from-env".into()))).unwrap();
        assert_eq!(store.query("SELECT 1", "TabSeparated").await.unwrap(), b"1\n");
        let request = server.await.unwrap().to_ascii_lowercase();
        assert!(request.contains("x-clickhouse-user: reader\r\n"), "{request}");
        assert!(request.contains("x-clickhouse-key: p@ss-w0rd\r\n"), "{request}");
        assert!(
            !request.contains("from-env") && !request.contains("p%40ss"),
            "{request}"
        );
        // Shown without the password, however the store is printed.
        for shown in [
            store.to_string(),
            format!("{store:?}"),
            store.error(clickhouse::error::Error::TimedOut).to_string(),
        ] {
            assert!(!shown.contains("ss-w0rd") && !shown.contains("p%40ss"), "{shown}");
            assert!(shown.contains(&format!("http://reader:xxxxx@{address}/")), "{shown}");
        }
    }

    #[tokio::test]
    async fn without_userinfo_the_configured_user_and_password_are_sent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(one_request(listener));
        let store = ClickHouseStore::new(
            &config(format!("http://{address}"), "writer"),
            Some(Secret::new("from-env".into())),
        )
        .unwrap();
        assert_eq!(store.query("SELECT 1", "TabSeparated").await.unwrap(), b"1\n");
        let request = server.await.unwrap().to_ascii_lowercase();
        assert!(request.contains("x-clickhouse-user: writer\r\n"), "{request}");
        assert!(request.contains("x-clickhouse-key: from-env\r\n"), "{request}");
    }
}
