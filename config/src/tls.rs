//! `tls_config`: the subset of Prometheus's TLS settings epicenter uses, for a scrape job's
//! `tls_config` and for `storage.clickhouse.tls` (Prometheus configuration reference,
//! `<tls_config>`), and `server.tls` for epicenter's own HTTPS ([`ServerTlsConfig`], the
//! shape of Prometheus's web configuration file). Files are PEM; `problems` checks that they
//! can be read; [`TlsConfig::client_config`] and [`ServerTlsConfig::server_config`] build
//! rustls configurations from them at start-up.

use std::path::PathBuf;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

use crate::Problems;

/// TLS settings. Files are PEM; `problems` checks they exist.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM file of the CA (or CAs) that signed the server's certificate, trusted besides the
    /// system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate, for servers that require one; needs `key_file`.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `cert_file`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Accept any certificate and host name (testing only: anyone on the path can read and
    /// change the traffic).
    #[serde(default)]
    pub insecure_skip_verify: bool,
    /// Oldest TLS version accepted (Prometheus `min_version`: `TLS10` … `TLS13`). rustls
    /// speaks TLS 1.2 and 1.3 only, so `TLS10` and `TLS11` are refused. Default TLS 1.2.
    #[serde(default)]
    pub min_version: Option<TlsVersion>,
    /// Newest TLS version offered (Prometheus `max_version`). Default TLS 1.3.
    #[serde(default)]
    pub max_version: Option<TlsVersion>,
    /// PEM CA certificates written in the file itself (Prometheus `ca`); not with `ca_file`.
    #[serde(default)]
    pub ca: Option<String>,
    /// PEM client certificate written in the file itself (Prometheus `cert`); not with
    /// `cert_file`.
    #[serde(default)]
    pub cert: Option<String>,
    /// PEM private key written in the file itself (Prometheus `key`; never printed); not with
    /// `key_file`.
    #[serde(default)]
    pub key: Option<crate::Secret>,
    /// The name the server's certificate must carry, when it is not the host scraped (a
    /// target listed by IP whose certificate names `db-7.example.org`). Prometheus also sends
    /// it as SNI; epicenter checks the certificate against it and sends SNI for the host
    /// scraped.
    #[serde(default)]
    pub server_name: Option<String>,
}

/// A TLS protocol version as Prometheus's configuration spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum TlsVersion {
    /// TLS 1.0 (refused: rustls does not speak it).
    TLS10,
    /// TLS 1.1 (refused: rustls does not speak it).
    TLS11,
    /// TLS 1.2.
    TLS12,
    /// TLS 1.3.
    TLS13,
}

impl TlsConfig {
    /// Makes `ca_file`, `cert_file` and `key_file` relative to `directory` (the folder of the
    /// configuration file that holds them) when they are relative
    /// ([`crate::resolve_relative`]).
    pub fn set_directory(&mut self, directory: &std::path::Path) {
        for path in [&mut self.ca_file, &mut self.cert_file, &mut self.key_file]
            .into_iter()
            .flatten()
        {
            crate::resolve_relative(directory, path);
        }
    }

    /// The TLS versions `min_version` and `max_version` allow among the two rustls speaks,
    /// oldest first: `(allows 1.2, allows 1.3)`.
    pub fn allowed_versions(&self) -> (bool, bool) {
        let min = self.min_version.unwrap_or(TlsVersion::TLS12);
        let max = self.max_version.unwrap_or(TlsVersion::TLS13);
        let allows = |version: TlsVersion| min <= version && version <= max;
        (allows(TlsVersion::TLS12), allows(TlsVersion::TLS13))
    }

    /// Records problems with the files under key path `prefix` (e.g.
    /// `scrape_configs[0].tls_config`): a file that cannot be read, a certificate without its
    /// key. Returns whether it found none. Reads file metadata only.
    pub fn problems(&self, prefix: &str, problems: &mut Problems) -> bool {
        let mut clean = true;
        for (key, path) in [
            ("ca_file", &self.ca_file),
            ("cert_file", &self.cert_file),
            ("key_file", &self.key_file),
        ] {
            if let Some(path) = path {
                if let Err(error) = std::fs::metadata(path) {
                    problems.push(
                        format!("{prefix}.{key}"),
                        format!("cannot read '{}': {error}", path.display()),
                    );
                    clean = false;
                }
            }
        }
        for (key, version) in [("min_version", self.min_version), ("max_version", self.max_version)] {
            if matches!(version, Some(TlsVersion::TLS10 | TlsVersion::TLS11)) {
                problems.push(
                    format!("{prefix}.{key}"),
                    "TLS 1.0 and 1.1 are not offered (epicenter's TLS library, rustls, speaks TLS 1.2 and 1.3)",
                );
                clean = false;
            }
        }
        if let (Some(min), Some(max)) = (self.min_version, self.max_version) {
            if min > max {
                problems.push(
                    format!("{prefix}.min_version"),
                    format!("{min:?} is newer than max_version {max:?}"),
                );
                clean = false;
            }
        }
        for (inline, file, present) in [
            ("ca", "ca_file", self.ca.is_some() && self.ca_file.is_some()),
            ("cert", "cert_file", self.cert.is_some() && self.cert_file.is_some()),
            ("key", "key_file", self.key.is_some() && self.key_file.is_some()),
        ] {
            if present {
                problems.push(
                    format!("{prefix}.{inline}"),
                    format!("{inline} and {file} are both set; give the PEM one way"),
                );
                clean = false;
            }
        }
        let has_cert = self.cert.is_some() || self.cert_file.is_some();
        let has_key = self.key.is_some() || self.key_file.is_some();
        if has_cert != has_key {
            problems.push(
                prefix,
                "a client certificate (cert or cert_file) and its key (key or key_file) go together",
            );
            clean = false;
        }
        if let Some(name) = &self.server_name {
            if rustls::pki_types::ServerName::try_from(name.as_str()).is_err() {
                problems.push(
                    format!("{prefix}.server_name"),
                    format!("'{name}' is not a DNS name or IP address"),
                );
                clean = false;
            }
        }
        if let Some(text) = &self.ca {
            if let Err(message) = certificates_from("ca", text.as_bytes()) {
                problems.push(format!("{prefix}.ca"), message);
                clean = false;
            }
        }
        if let Some(text) = &self.cert {
            if let Err(message) = certificates_from("cert", text.as_bytes()) {
                problems.push(format!("{prefix}.cert"), message);
                clean = false;
            }
        }
        if let Some(key) = &self.key {
            if let Err(message) = private_key_from("key", key.expose().as_bytes()) {
                problems.push(format!("{prefix}.key"), message);
                clean = false;
            }
        }
        clean
    }

    /// The CA certificates of `ca` or `ca_file`, if either is set.
    fn ca_certificates(&self) -> Result<Option<Vec<CertificateDer<'static>>>, String> {
        match (&self.ca, &self.ca_file) {
            (Some(text), _) => certificates_from("ca", text.as_bytes()).map(Some),
            (None, Some(path)) => read_certificates("ca_file", path).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The client certificate and key (`cert`/`cert_file`, `key`/`key_file`), if set.
    fn client_identity(&self) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, String> {
        let certificates = match (&self.cert, &self.cert_file) {
            (Some(text), _) => certificates_from("cert", text.as_bytes())?,
            (None, Some(path)) => read_certificates("cert_file", path)?,
            (None, None) => return Ok(None),
        };
        let key = match (&self.key, &self.key_file) {
            (Some(key), _) => private_key_from("key", key.expose().as_bytes())?,
            (None, Some(path)) => read_private_key("key_file", path)?,
            (None, None) => return Ok(None),
        };
        Ok(Some((certificates, key)))
    }
}

/// The certificates of PEM text given inline under `key`, or an error naming the key (the
/// text is not echoed).
fn certificates_from(key: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{key}: not PEM certificates ({error})"))?;
    if certificates.is_empty() {
        return Err(format!(
            "{key}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(certificates)
}

/// The private key of PEM text given inline under `key`; the text never appears in an error.
fn private_key_from(key: &str, pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|_| {
        format!("{key}: no PEM private key in it (PKCS#8, PKCS#1 or SEC1, e.g. -----BEGIN PRIVATE KEY-----)")
    })
}

// === impl TlsConfig: building rustls ===

/// The rustls provider every TLS connection of epicenter uses: *ring*, the one reqwest's
/// rustls already brings (one crypto library in the binary, not two).
fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}

/// Largest PEM file read (a CA bundle of a few hundred certificates is under 1 MiB): a
/// path such as `/dev/zero` must not take the machine's memory.
const MAX_PEM_BYTES: u64 = 8 << 20;

/// The bytes of a PEM file, at most [`MAX_PEM_BYTES`], or an error naming `key` and the
/// file.
fn read_pem(key: &str, path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_PEM_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|error| format!("{key} '{}': {error}", path.display()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(format!(
            "{key} '{}': larger than {} MiB, not a PEM file",
            path.display(),
            MAX_PEM_BYTES >> 20
        ));
    }
    Ok(bytes)
}

/// The certificates of a PEM file, or an error naming `key` and the file: unreadable, not
/// PEM, or no certificate in it.
fn read_certificates(key: &str, path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem(key, path)?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{key} '{}': not a PEM certificate file ({error})", path.display()))?;
    if certificates.is_empty() {
        return Err(format!(
            "{key} '{}': no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certificates)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1), or an error naming `key` and the
/// file. The key's bytes never appear in an error.
fn read_private_key(key: &str, path: &std::path::Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_pem(key, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|_| {
        format!(
            "{key} '{}': no PEM private key in it (PKCS#8, PKCS#1 or SEC1, e.g. -----BEGIN PRIVATE KEY-----)",
            path.display()
        )
    })
}

impl TlsConfig {
    /// A rustls client configuration (TLS 1.2 and 1.3, *ring*) for connecting to a server
    /// under these settings: the system's roots (`rustls-native-certs`: `SSL_CERT_FILE`,
    /// `SSL_CERT_DIR`, else the distribution's bundle) plus every certificate in `ca_file`;
    /// `cert_file` and `key_file` presented when the server asks for a client certificate;
    /// with `insecure_skip_verify`, any chain and host name are accepted (the handshake's
    /// signatures are still checked). ALPN is left to the caller.
    ///
    /// Errors name the key and file that cannot be read or parsed (`ca_file
    /// '/etc/ca.pem': no PEM certificate in it`), or a certificate that does not match its
    /// key. Reads the PEM files and the system's roots: call at start-up.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, String> {
        let versions: Vec<&'static rustls::SupportedProtocolVersion> = match self.allowed_versions() {
            (true, true) => vec![&rustls::version::TLS12, &rustls::version::TLS13],
            (true, false) => vec![&rustls::version::TLS12],
            (false, true) => vec![&rustls::version::TLS13],
            (false, false) => {
                return Err("min_version and max_version leave no TLS version (rustls speaks 1.2 and 1.3)".to_string())
            }
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&versions)
            .map_err(|error| format!("TLS: {error}"))?;
        let builder = if self.insecure_skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(std::sync::Arc::new(AnyServerCertificate(provider())))
        } else {
            let mut roots = rustls::RootCertStore::empty();
            // Unreadable system roots are not an error here: a ca_file may be all that is
            // needed, and a server signed by neither fails its handshake with rustls's words.
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
            for certificate in self.ca_certificates()?.unwrap_or_default() {
                roots.add(certificate).map_err(|error| match &self.ca_file {
                    Some(path) if self.ca.is_none() => format!("ca_file '{}': {error}", path.display()),
                    _ => format!("ca: {error}"),
                })?;
            }
            match &self.server_name {
                None => builder.with_root_certificates(roots),
                Some(name) => {
                    let name = rustls::pki_types::ServerName::try_from(name.clone())
                        .map_err(|_| format!("server_name '{name}' is not a DNS name or IP address"))?;
                    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
                        std::sync::Arc::new(roots),
                        provider(),
                    )
                    .build()
                    .map_err(|error| format!("TLS: {error}"))?;
                    builder
                        .dangerous()
                        .with_custom_certificate_verifier(std::sync::Arc::new(FixedServerName { inner, name }))
                }
            }
        };
        match self.client_identity()? {
            Some((certificates, key)) => builder.with_client_auth_cert(certificates, key).map_err(|error| {
                format!("client certificate: {error} (the key must be the private key of the certificate)")
            }),
            None => Ok(builder.with_no_client_auth()),
        }
    }
}

/// `server_name`: the usual WebPKI verification, against the configured name instead of the
/// host connected to.
#[derive(Debug)]
struct FixedServerName {
    inner: std::sync::Arc<rustls::client::WebPkiServerVerifier>,
    name: rustls::pki_types::ServerName<'static>,
}

impl rustls::client::danger::ServerCertVerifier for FixedServerName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, certificate, signature)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, certificate, signature)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `insecure_skip_verify`: accepts any server certificate and name, but still checks that
/// the server holds the key of the certificate it sent (the handshake signatures).
#[derive(Debug)]
struct AnyServerCertificate(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `server.tls`: HTTPS for a server of epicenter's, in the shape of Prometheus's web
/// configuration file (`tls_server_config`: `cert_file`, `key_file`, `client_ca_file`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTlsConfig {
    /// PEM certificate chain the server presents (its own certificate first).
    pub cert_file: PathBuf,
    /// PEM private key of `cert_file` (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM CA certificates: when set, every client must present a certificate signed by one
    /// of them (Prometheus's `client_auth_type: RequireAndVerifyClientCert`).
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
}

impl ServerTlsConfig {
    /// Makes `cert_file`, `key_file` and `client_ca_file` relative to `directory` (the folder
    /// of the configuration file) when they are relative ([`crate::resolve_relative`]).
    pub fn set_directory(&mut self, directory: &std::path::Path) {
        crate::resolve_relative(directory, &mut self.cert_file);
        crate::resolve_relative(directory, &mut self.key_file);
        if let Some(path) = &mut self.client_ca_file {
            crate::resolve_relative(directory, path);
        }
    }

    /// Records files that cannot be read under key path `prefix` (e.g. `server.tls`). Reads
    /// file metadata only. Returns whether it found none.
    pub fn problems(&self, prefix: &str, problems: &mut Problems) -> bool {
        let mut clean = true;
        for (key, path) in [
            ("cert_file", Some(&self.cert_file)),
            ("key_file", Some(&self.key_file)),
            ("client_ca_file", self.client_ca_file.as_ref()),
        ] {
            if let Some(path) = path {
                if let Err(error) = std::fs::metadata(path) {
                    problems.push(
                        format!("{prefix}.{key}"),
                        format!("cannot read '{}': {error}", path.display()),
                    );
                    clean = false;
                }
            }
        }
        clean
    }

    /// The rustls server configuration (TLS 1.2 and 1.3, *ring*, ALPN `http/1.1`): the
    /// certificate chain and key, and client certificate verification against
    /// `client_ca_file` when set. Errors name the key and file (unreadable, not PEM, a key
    /// that does not match the certificate). Reads the files: call at start-up.
    pub fn server_config(&self) -> Result<rustls::ServerConfig, String> {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("TLS: {error}"))?;
        let builder = match &self.client_ca_file {
            Some(path) => {
                let mut roots = rustls::RootCertStore::empty();
                for certificate in read_certificates("client_ca_file", path)? {
                    roots
                        .add(certificate)
                        .map_err(|error| format!("client_ca_file '{}': {error}", path.display()))?;
                }
                let verifier =
                    rustls::server::WebPkiClientVerifier::builder_with_provider(std::sync::Arc::new(roots), provider())
                        .build()
                        .map_err(|error| format!("client_ca_file '{}': {error}", path.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let chain = read_certificates("cert_file", &self.cert_file)?;
        let key = read_private_key("key_file", &self.key_file)?;
        let mut config = builder.with_single_cert(chain, key).map_err(|error| {
            format!(
                "cert_file '{}' / key_file '{}': {error} (key_file must hold the private key of cert_file's certificate)",
                self.cert_file.display(),
                self.key_file.display()
            )
        })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}
