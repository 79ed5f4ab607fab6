//! The live store's SQL endpoint: while `epicenter run` or `demo` writes the embedded store,
//! its ClickHouse HTTP interface ([`crate::http::live_router`]) answers on
//! `storage.http.listen_address` (127.0.0.1:9465 by default), so `epicenter sql`, curl,
//! ClickHouse clients and Grafana's ClickHouse data source can ask it questions during the
//! incident. (chDB serves one process at a time: without this, the store cannot be read
//! until epicenter stops.)
//!
//! Shape: each request gets a connection of its own to the same data path (chDB lets one
//! process open several), made read-only with the engine's own `readonly = 1` and its
//! limits before it answers anything ([`EmbeddedStore::open_read_only`]), at most
//! [`crate::http::LIVE_QUERIES`] at once; users and passwords from `storage.http.users`
//! (required beyond loopback: [`serve`] refuses to start without them); only requests whose
//! `Host` names the listen address or loopback ([`crate::http::HostCheck`]). Who can read
//! what: docs/investigation.md, "The live endpoint". The URL is written to [`ENDPOINT_FILE`] inside
//! the store's directory while it is served (and removed when it stops), so `epicenter sql
//! --data DIR` finds a running epicenter's endpoint without being told the port.

use std::path::{Path, PathBuf};

use crate::config::HttpConfig;
use crate::embedded::EmbeddedStore;

/// File inside the embedded store's directory holding the live endpoint's URL
/// (`http://127.0.0.1:9465`) while `run` or `demo` serves it.
pub const ENDPOINT_FILE: &str = "http-endpoint";

/// A served endpoint: its URL and the task serving it (which ends after shutdown, once the
/// requests in flight are answered, and removes [`ENDPOINT_FILE`]).
#[derive(Debug)]
pub struct LiveEndpoint {
    /// `http://ip:port`, the port as bound (`:0` in the config picks a free one).
    pub url: String,
    /// The serving task.
    pub task: tokio::task::JoinHandle<()>,
}

/// Serves the embedded store at `data_path` (database `database`) read-only on
/// `config.address()` until `shutdown` changes. `Ok(None)` when the endpoint is off
/// (`listen_address: ''`).
///
/// # Errors
/// A sentence naming the key path: a password that cannot be read, an address that cannot
/// be bound; or the engine refusing the second connection or `readonly`.
pub async fn serve(
    data_path: &Path,
    database: &str,
    config: &HttpConfig,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<Option<LiveEndpoint>, String> {
    if !config.enabled() {
        return Ok(None);
    }
    let users = config.credentials()?;
    // Beyond loopback, a password for everyone (the configuration check says so too; this
    // holds for callers that skip it).
    if let Ok(address) = config.address().parse::<std::net::SocketAddr>() {
        if !address.ip().is_loopback() && users.iter().any(|(_, password)| password.is_none()) {
            return Err(format!(
                "storage.http.users: listening on {address}, beyond loopback, needs users with passwords (the user 'default' without a password is allowed on 127.0.0.1 only); or set storage.http.listen_address to '' to turn the endpoint off"
            ));
        }
    }
    // Each request gets a connection of its own (crate::http::live_router); one now says
    // at start-up, rather than at the first question, if the engine refuses.
    drop(
        EmbeddedStore::open_read_only(data_path, database)
            .map_err(|error| format!("storage.http: a read-only connection to the embedded store: {error}"))?,
    );
    let listener = match tokio::net::TcpListener::bind(config.address()).await {
        Ok(listener) => listener,
        // The default port taken (another epicenter, a test beside this one): a free port
        // on loopback instead, said once; `sql --data` finds it in the endpoint file.
        Err(error) if config.listen_address.is_none() => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|error| format!("storage.http: cannot listen on loopback: {error}"))?;
            if let Ok(address) = listener.local_addr() {
                tracing::warn!(
                    "the live SQL endpoint's default address {} is taken ({error}); it listens on {address} instead (set storage.http.listen_address to choose)",
                    config.address()
                );
            }
            listener
        }
        Err(error) => {
            return Err(format!(
                "storage.http.listen_address {}: cannot listen: {error}",
                config.address()
            ))
        }
    };
    let bound = listener.local_addr().map_err(|error| {
        format!(
            "storage.http.listen_address {}: cannot read the bound address: {error}",
            config.address()
        )
    })?;
    let url = format!("http://{bound}");
    let file = data_path.join(ENDPOINT_FILE);
    if let Err(error) = std::fs::write(&file, format!("{url}\n")) {
        // `sql --data` will not find the endpoint on its own; `--config` still names it.
        tracing::warn!(file = %file.display(), %error, "cannot write the live endpoint's address");
    }
    let router = crate::http::live_router(
        data_path.to_path_buf(),
        database.to_string(),
        users,
        crate::http::HostCheck::for_address(bound),
    );
    let task = tokio::spawn(async move {
        let stopped = async move {
            let _ = shutdown.changed().await;
        };
        if let Err(error) = axum::serve(listener, router).with_graceful_shutdown(stopped).await {
            tracing::error!(%error, "the live store's SQL endpoint stopped");
        }
        let _ = std::fs::remove_file(&file);
    });
    Ok(Some(LiveEndpoint { url, task }))
}

/// The URL a running epicenter wrote for the store at `data_path`, if any
/// ([`ENDPOINT_FILE`]). It may be stale after a `kill -9`: a caller that cannot connect
/// should say so rather than trust it.
pub fn advertised(data_path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(endpoint_file(data_path)).ok()?;
    let url = text.trim();
    (url.starts_with("http://") || url.starts_with("https://")).then(|| url.to_string())
}

fn endpoint_file(data_path: &Path) -> PathBuf {
    data_path.join(ENDPOINT_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn beyond_loopback_without_passwords_the_endpoint_does_not_start() {
        let config = HttpConfig {
            listen_address: Some("0.0.0.0:0".to_string()),
            users: Vec::new(),
        };
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let data = std::env::temp_dir().join(format!("epicenter-endpoint-refused-{}", std::process::id()));
        let refused = serve(&data, "epicenter", &config, shutdown).await.unwrap_err();
        assert!(
            refused.starts_with("storage.http.users: listening on 0.0.0.0:0"),
            "{refused}"
        );
        assert!(!data.exists(), "the store was opened");
    }
}
