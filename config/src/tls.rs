//! `tls_config`: the subset of Prometheus's TLS settings epicenter uses, for a scrape job's
//! `tls_config` and for `storage.clickhouse.tls` (Prometheus configuration reference,
//! `<tls_config>`). Files are PEM; [`TlsConfig::problems`] checks that they can be read.

use std::path::PathBuf;

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
}

impl TlsConfig {
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
        if self.cert_file.is_some() != self.key_file.is_some() {
            problems.push(
                prefix,
                "cert_file and key_file go together (a client certificate needs its key)",
            );
            clean = false;
        }
        clean
    }
}
