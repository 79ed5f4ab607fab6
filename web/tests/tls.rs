//! HTTPS on both sides of epicenter, each against a real peer: its own server
//! (`server.tls`, [`epicenter_web::serve`]) answering reqwest (rustls), and its ClickHouse
//! client (`storage.clickhouse` with an `https://` URL and `tls`) writing to and reading from
//! the ClickHouse HTTP interface over the real embedded engine, served over TLS by the same
//! server code. Certificates (a CA, a server certificate for 127.0.0.1, a client
//! certificate, and a second CA nobody trusts) are made for each run with rcgen.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use epicenter_config::{ServerTlsConfig, TlsConfig};
use epicenter_store::clickhouse::ClickHouseStore;
use epicenter_store::config::ClickHouseConfig;
use epicenter_store::{http, library_path, EmbeddedStore};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};

/// PEM files of one run, in a directory of the test's own.
struct Pki {
    directory: PathBuf,
}

impl Pki {
    fn file(&self, name: &str) -> PathBuf {
        self.directory.join(name)
    }

    fn server_tls(&self, client_ca: bool) -> rustls::ServerConfig {
        ServerTlsConfig {
            cert_file: self.file("server.pem"),
            key_file: self.file("server.key"),
            client_ca_file: client_ca.then(|| self.file("ca.pem")),
        }
        .server_config()
        .unwrap()
    }
}

/// A CA that signs a server certificate for IP 127.0.0.1 and a client certificate, and an
/// unrelated CA, written as `ca.pem`, `server.pem`/`.key`, `client.pem`/`.key`,
/// `other-ca.pem` under a fresh directory named after `test`.
fn pki(test: &str) -> Pki {
    let directory = std::env::temp_dir().join(format!("epicenter-web-tls-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    let write = |name: &str, text: String| std::fs::write(directory.join(name), text).unwrap();
    let certificate_authority = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("epicenter test {name}"));
        let certificate = params.self_signed(&key).unwrap();
        write(&format!("{name}.pem"), certificate.pem());
        Issuer::new(params, key)
    };
    let issuer = certificate_authority("ca");
    certificate_authority("other-ca");
    for (name, alt_names, usage) in [
        (
            "server",
            vec!["127.0.0.1".to_string()],
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        (
            "client",
            vec!["epicenter".to_string()],
            ExtendedKeyUsagePurpose::ClientAuth,
        ),
    ] {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(alt_names).unwrap();
        params.extended_key_usages = vec![usage];
        let certificate = params.signed_by(&key, &issuer).unwrap();
        write(&format!("{name}.pem"), certificate.pem());
        write(&format!("{name}.key"), key.serialize_pem());
    }
    Pki { directory }
}

/// Serves `router` over TLS on a fresh loopback port; returns the port. The server stops
/// when the test's runtime does.
async fn serve_tls(router: axum::Router, tls: rustls::ServerConfig) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(epicenter_web::serve(
        listener,
        router,
        Some(tls),
        std::future::pending(),
    ));
    port
}

fn health_router() -> axum::Router {
    axum::Router::new().route("/healthz", get(|| async { "ok\n" }))
}

fn reqwest_client(pki: &Pki, ca: Option<&str>, identity: bool) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(10));
    if let Some(ca) = ca {
        let pem = std::fs::read(pki.file(ca)).unwrap();
        builder = builder.add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap());
    }
    if identity {
        let mut pem = std::fs::read(pki.file("client.pem")).unwrap();
        pem.extend(std::fs::read(pki.file("client.key")).unwrap());
        builder = builder.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    builder.build().unwrap()
}

use epicenter_config::describe_error as chain;

#[tokio::test]
async fn the_own_server_speaks_tls_to_clients_that_trust_its_ca_and_only_to_them() {
    let pki = pki("server");
    let port = serve_tls(health_router(), pki.server_tls(false)).await;
    let url = format!("https://127.0.0.1:{port}/healthz");

    // A client that connects and never says anything holds no one up: handshakes run off
    // the accept loop.
    let _silent = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();

    let trusted = reqwest_client(&pki, Some("ca.pem"), false);
    let response = trusted.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "ok\n");

    let untrusting = reqwest_client(&pki, Some("other-ca.pem"), false);
    let error = untrusting.get(&url).send().await.unwrap_err();
    assert!(
        chain(&error).to_lowercase().contains("certificate"),
        "{}",
        chain(&error)
    );

    // Plain HTTP to the TLS port gets no answer a client could take for a page.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let answer = plain.get(format!("http://127.0.0.1:{port}/healthz")).send().await;
    assert!(
        answer.as_ref().map_or(true, |response| response.status() != 200),
        "{answer:?}"
    );
}

#[tokio::test]
async fn with_client_ca_file_a_client_certificate_is_required() {
    let pki = pki("mutual");
    let port = serve_tls(health_router(), pki.server_tls(true)).await;
    let url = format!("https://127.0.0.1:{port}/healthz");

    let anonymous = reqwest_client(&pki, Some("ca.pem"), false);
    let refused = anonymous.get(&url).send().await;
    assert!(refused.is_err(), "{refused:?}");

    let identified = reqwest_client(&pki, Some("ca.pem"), true);
    let response = identified.get(&url).send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), "ok\n");
}

#[test]
fn unreadable_or_mismatched_pem_files_are_named_in_the_error() {
    let pki = pki("files");
    let not_pem = pki.file("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let with = |cert: &Path, key: &Path| ServerTlsConfig {
        cert_file: cert.to_path_buf(),
        key_file: key.to_path_buf(),
        client_ca_file: None,
    };
    let error = with(&not_pem, &pki.file("server.key")).server_config().unwrap_err();
    assert!(
        error.contains(&format!("cert_file '{}': no PEM certificate", not_pem.display())),
        "{error}"
    );
    let error = with(&pki.file("server.pem"), &pki.file("client.key"))
        .server_config()
        .unwrap_err();
    assert!(error.contains("key_file must hold the private key"), "{error}");
    let missing = pki.file("missing.pem");
    let error = TlsConfig {
        ca_file: Some(missing.clone()),
        ..TlsConfig::default()
    }
    .client_config()
    .unwrap_err();
    assert!(
        error.starts_with(&format!("ca_file '{}': ", missing.display())),
        "{error}"
    );
    // The key's text never appears in an error about it.
    let key_text = std::fs::read_to_string(pki.file("server.key")).unwrap();
    let error = with(&pki.file("server.key"), &pki.file("server.key"))
        .server_config()
        .unwrap_err();
    let key_body = key_text.lines().nth(1).unwrap();
    assert!(!error.contains(key_body), "{error}");
}

/// The ClickHouse server sink over HTTPS with a client certificate, against the HTTP interface
/// over the real engine: DDL, an insert and a read come back; a client without the CA, or
/// without its certificate, is refused; `insecure_skip_verify` skips only the chain check.
#[tokio::test]
async fn the_clickhouse_sink_writes_and_reads_over_https_with_a_client_certificate() {
    // The chDB check of the store's tests: skipped without the library, except in CI.
    if !library_path().exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} missing: CI runs scripts/setup first",
            library_path().display()
        );
        eprintln!(
            "SKIPPED: chDB library not found at {} (run scripts/setup)",
            library_path().display()
        );
        return;
    }
    let pki = pki("clickhouse");
    let data = pki.file("store");
    let engine = Arc::new(EmbeddedStore::open(&data, "default").unwrap());
    let port = serve_tls(http::router(engine), pki.server_tls(true)).await;

    let sink = |tls: TlsConfig| {
        let config = ClickHouseConfig {
            url: format!("https://127.0.0.1:{port}"),
            database: "over_tls".into(),
            user: "default".into(),
            password_env: None,
            password_file: None,
            tls: Some(tls),
            cluster: None,
        };
        ClickHouseStore::new(&config, None).unwrap()
    };
    let full = TlsConfig {
        ca_file: Some(pki.file("ca.pem")),
        cert_file: Some(pki.file("client.pem")),
        key_file: Some(pki.file("client.key")),
        ..TlsConfig::default()
    };
    let store = sink(full.clone());
    store.migrate(Duration::from_secs(86_400)).await.unwrap();
    store
        .query(
            "CREATE TABLE IF NOT EXISTS over_tls.t (x UInt32) ENGINE = MergeTree ORDER BY x",
            "TabSeparated",
        )
        .await
        .unwrap();
    store
        .query("INSERT INTO over_tls.t VALUES (7), (35)", "TabSeparated")
        .await
        .unwrap();
    let sum = store
        .query("SELECT sum(x) FROM over_tls.t", "TabSeparated")
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&sum), "42\n");
    let tables = store
        .query(
            "SELECT count() FROM system.tables WHERE database = 'over_tls' AND name = 'sample_values'",
            "TabSeparated",
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&tables),
        "1\n",
        "migrate created the sample_values table over TLS"
    );

    let untrusted = sink(TlsConfig {
        ca_file: Some(pki.file("other-ca.pem")),
        ..full.clone()
    });
    let error = untrusted.query("SELECT 1", "TabSeparated").await.unwrap_err();
    assert!(error.message.contains("UnknownIssuer"), "{error}");
    assert!(
        error.message.contains("put its CA in storage.clickhouse.tls.ca_file"),
        "{error}"
    );
    eprintln!("an untrusted server, as epicenter says it: {error}");
    assert!(error.url.starts_with("https://127.0.0.1:"), "{error}");

    let anonymous = sink(TlsConfig {
        cert_file: None,
        key_file: None,
        ..full.clone()
    });
    assert!(anonymous.query("SELECT 1", "TabSeparated").await.is_err());

    let skipping = sink(TlsConfig {
        ca_file: None,
        insecure_skip_verify: true,
        ..full
    });
    let one = skipping.query("SELECT 1", "TabSeparated").await.unwrap();
    assert_eq!(String::from_utf8_lossy(&one), "1\n");
}
