//! HTTPS for epicenter's own server (`server.tls`): a listener that completes each TLS
//! handshake off the accept loop, so one slow or silent client never holds up the others,
//! and hands axum only connections that finished it.
//!
//! Shape: `TcpListener` ─ accept ─► one task per connection (handshake, at most
//! [`HANDSHAKE_TIMEOUT`]) ─ mpsc ─► [`TlsListener`] ─►
//! `axum::serve`, which keeps its graceful shutdown. A failed handshake is logged at debug
//! level (a port scanner or a client without the CA is not epicenter's error) and counted
//! nowhere else.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Longest a client may take to complete its TLS handshake before the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections whose handshake completed, waiting for axum to take them.
const READY_QUEUE: usize = 64;

/// A listener whose connections are TLS streams (rustls), for [`axum::serve`].
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_address: SocketAddr,
    acceptor: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting on `tcp` and handshaking with `config` (see
    /// `epicenter_config::ServerTlsConfig::server_config`). Must be called inside a tokio
    /// runtime; the accept task ends when the listener is dropped.
    pub fn new(tcp: TcpListener, config: rustls::ServerConfig) -> std::io::Result<TlsListener> {
        let local_address = tcp.local_addr()?;
        let (ready_sender, ready) = mpsc::channel(READY_QUEUE);
        let acceptor = tokio::spawn(accept_loop(tcp, TlsAcceptor::from(Arc::new(config)), ready_sender));
        Ok(TlsListener {
            ready,
            local_address,
            acceptor,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

async fn accept_loop(tcp: TcpListener, acceptor: TlsAcceptor, ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>) {
    // No bound on handshakes in progress: with one, a few hundred idle connections held
    // the accept loop for everyone (found by a helper); each costs a task and a socket
    // for at most HANDSHAKE_TIMEOUT.
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, say: wait a moment rather than spin (as axum does).
                tracing::warn!(%error, "own HTTPS server: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => {
                    let _ = ready.send((stream, peer)).await;
                }
                Ok(Err(error)) => tracing::debug!(%peer, %error, "own HTTPS server: TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "own HTTPS server: TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept task ended (it only does when aborted): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local_address)
    }
}

/// Serves `router` on `tcp` until `shutdown` completes, then finishes the requests in
/// flight (axum's graceful shutdown): over TLS when `tls` is given, plain HTTP otherwise.
///
/// # Errors
/// What `axum::serve` returns (it retries failed accepts itself), or the listener's address
/// that cannot be read.
pub async fn serve(
    tcp: TcpListener,
    router: axum::Router,
    tls: Option<rustls::ServerConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        Some(config) => {
            axum::serve(TlsListener::new(tcp, config)?, router)
                .with_graceful_shutdown(shutdown)
                .await
        }
        None => axum::serve(tcp, router).with_graceful_shutdown(shutdown).await,
    }
}

/// Binds `server.listen_address`: the listener and epicenter's base URL as on-call should
/// reach it: `server.external_url` when set, else `http(s)://<bound address>` (an
/// unspecified address, `0.0.0.0` or `[::]`, replaced by the machine's host name).
///
/// # Errors
/// An address that cannot be bound, named with its key path.
pub async fn bind(config: &crate::config::ServerConfig) -> Result<(TcpListener, String), String> {
    let tcp = TcpListener::bind(&config.listen_address).await.map_err(|error| {
        format!(
            "server.listen_address {}: cannot listen: {error}",
            config.listen_address
        )
    })?;
    if let Some(url) = &config.external_url {
        return Ok((tcp, url.trim_end_matches('/').to_string()));
    }
    let scheme = if config.tls.is_some() { "https" } else { "http" };
    let url = match tcp.local_addr() {
        Ok(address) if address.ip().is_unspecified() => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "localhost".into());
            format!("{scheme}://{}:{}", host.trim(), address.port())
        }
        Ok(address) => format!("{scheme}://{address}"),
        Err(_) => format!("{scheme}://{}", config.listen_address),
    };
    Ok((tcp, url))
}

/// Reads `server.tls` and the bearer token, and serves [`crate::app`] on `tcp` (from
/// [`bind`]) until `shutdown` changes; returns the server's task.
///
/// # Errors
/// A sentence naming the key path: a token or TLS file that cannot be read. Call at
/// start-up.
pub fn start(
    state: Arc<crate::AppState>,
    config: &crate::config::ServerConfig,
    tcp: TcpListener,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let router = crate::app(state, config)?;
    let tls = config.tls_server_config()?;
    Ok(tokio::spawn(async move {
        let stopped = async move {
            let _ = shutdown.changed().await;
        };
        if let Err(error) = serve(tcp, router, tls, stopped).await {
            tracing::error!(%error, "own HTTP server stopped");
        }
    }))
}
