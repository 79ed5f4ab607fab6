//! The HTTP client of a scrape job: reqwest with rustls, gzip and connection reuse, built from
//! the job's `tls_config` (Prometheus `<tls_config>`), and plain-words descriptions of the
//! request and TLS failures people meet most.

use epicenter_config::TlsConfig;

/// A client for a job with `tls_config`: `ca`/`ca_file` is trusted besides the system's
/// roots, `cert`/`cert_file` + `key`/`key_file` are presented to servers that ask,
/// `server_name` is the name the certificate must carry, and `insecure_skip_verify` accepts
/// any certificate. Errors name the key or file that cannot be read or parsed (`ca_file
/// '/etc/ca.pem': no PEM certificate in it`). Reads the PEM files.
/// The client does not use the `HTTP_PROXY`/`HTTPS_PROXY` environment variables unless
/// asked to ([`http_client_with_proxy`]), as Prometheus's `proxy_from_environment` defaults
/// to false.
pub fn http_client(tls: Option<&TlsConfig>) -> Result<reqwest::Client, String> {
    http_client_with_proxy(tls, &Proxy::None, true)
}

/// Which proxy a job's requests go through (Prometheus `proxy_url`, `no_proxy`,
/// `proxy_from_environment`).
#[derive(Debug, Clone, PartialEq)]
pub enum Proxy {
    /// Straight to the target.
    None,
    /// Through `url` (`http://`, `https://` or `socks5://`, user information for
    /// `Proxy-Authorization`), except for the hosts, domains and networks in `no_proxy`
    /// (comma-separated, as in the `NO_PROXY` environment variable).
    Url {
        /// The proxy.
        url: String,
        /// Exceptions.
        no_proxy: Option<String>,
        /// Headers sent to the proxy (`proxy_connect_header`), name and secret value.
        headers: Vec<(String, epicenter_config::Secret)>,
    },
    /// As `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` say.
    FromEnvironment,
}

/// [`http_client`] through `proxy`, following up to 10 redirects when `follow_redirects`
/// (Prometheus's `follow_redirects`, default true) and none otherwise (a `3xx` answer then
/// fails the scrape with its status). Errors name what cannot be used (the proxy URL shown
/// without its password).
pub fn http_client_with_proxy(
    tls: Option<&TlsConfig>,
    proxy: &Proxy,
    follow_redirects: bool,
) -> Result<reqwest::Client, String> {
    let redirects = if follow_redirects {
        reqwest::redirect::Policy::limited(10)
    } else {
        reqwest::redirect::Policy::none()
    };
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("epicenter/", env!("CARGO_PKG_VERSION")))
        .gzip(true)
        .redirect(redirects)
        .use_rustls_tls();
    builder = match proxy {
        Proxy::None => builder.no_proxy(),
        Proxy::FromEnvironment => builder,
        Proxy::Url { url, no_proxy, headers } => {
            let proxy = reqwest::Proxy::all(url.as_str()).map_err(|error| {
                format!(
                    "proxy_url '{}': {}",
                    epicenter_config::redacted_url(url),
                    describe_request_error(&error)
                )
            })?;
            let mut extra = reqwest::header::HeaderMap::new();
            for (name, value) in headers {
                let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("proxy_connect_header: '{name}' is not an HTTP header name"))?;
                let mut value = reqwest::header::HeaderValue::from_str(value.expose())
                    .map_err(|_| format!("proxy_connect_header.{name}: a value that cannot be sent"))?;
                value.set_sensitive(true);
                extra.append(name, value);
            }
            let proxy = if extra.is_empty() { proxy } else { proxy.headers(extra) };
            builder.proxy(proxy.no_proxy(no_proxy.as_deref().and_then(reqwest::NoProxy::from_string)))
        }
    };
    if let Some(tls) = tls {
        // The same rustls configuration as the ClickHouse client's ([`TlsConfig::client_config`]):
        // CA, client certificate (inline or from files), versions, server_name, or no
        // verification. HTTP/1.1 only, so no ALPN is needed.
        builder = builder.use_preconfigured_tls(tls.client_config()?);
    }
    builder.build().map_err(|error| describe_request_error(&error))
}

/// reqwest's error with its causes, e.g. `error sending request: … Connection refused`, and
/// a plain-words hint for the TLS failures people meet most.
pub fn describe_request_error(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    // reqwest names the URL it failed on; shown as `redacted_url` shows it (no password, no
    // query values: a target's `params` may carry a key).
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), &epicenter_config::redacted_url(url.as_str()));
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if let Some(hint) = tls_hint(&text) {
        text.push_str(" (");
        text.push_str(hint);
        text.push(')');
    }
    text
}

/// What a rustls failure means for the person configuring the scrape.
fn tls_hint(text: &str) -> Option<&'static str> {
    let hints = [
        (
            "CaUsedAsEndEntity",
            "the server's certificate is itself a CA certificate (basicConstraints CA:TRUE, as `openssl req -x509` makes by default); serve a leaf certificate signed by a CA and put that CA in tls_config.ca_file (docs/configuration.md shows how), or set tls_config.insecure_skip_verify",
        ),
        (
            "UnknownIssuer",
            "the server's certificate is not signed by a trusted CA: put its CA in tls_config.ca_file",
        ),
        (
            "InvalidContentType",
            "the server did not answer with TLS: is it plain http? (scheme: http)",
        ),
        (
            "NotValidForName",
            "the certificate does not name the address scraped: scrape a name its subjectAltName lists",
        ),
        ("not valid for name", "the certificate does not name the address scraped: scrape a name its subjectAltName lists"),
        ("Expired", "the server's certificate has expired"),
    ];
    hints
        .iter()
        .find(|(token, _)| text.contains(token))
        .map(|(_, hint)| *hint)
}
