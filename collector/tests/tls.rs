//! `scheme: https` scrapes with `tls_config`, against real TLS servers: Python's http.server
//! wrapped in its `ssl` module, with a CA, server and client certificates made by the
//! `openssl` command for each run (both from Debian; `scripts/test` installs openssl).

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use epicenter_collector::config::{jobs_from_yaml, Job};
use epicenter_collector::scrape::{ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::ScrapeOutcome;

const BODY: &str = "# TYPE secure_requests_total counter\nsecure_requests_total{path=\"/a\"} 7\nsecure_up 1\n";

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the openssl command (Debian package openssl; scripts/test installs it)");
    assert!(status.success(), "openssl {args:?} failed");
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA.
fn certificates(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=epicenter test CA",
    ]);
    openssl(dir, &ca);
    for (name, usage) in [
        ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(
            dir.join(format!("{name}.ext")),
            format!("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n{usage}"),
        )
        .unwrap();
        let (key, csr, pem, ext, subject) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
            format!("/CN={name}"),
        );
        let mut request = vec!["req"];
        request.extend(ec);
        request.extend(["-keyout", &key, "-out", &csr, "-subj", &subject]);
        openssl(dir, &request);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
        );
    }
}

/// Python's http.server over TLS serving `dir`; with `require_client_cert` it asks for a
/// certificate signed by the test CA.
fn https_server(dir: &Path, require_client_cert: bool) -> (Child, String) {
    https_server_with(dir, require_client_cert, "any")
}

/// [`https_server`] speaking only TLS `version` (`1.2` or `1.3`), or `any`.
fn https_server_with(dir: &Path, require_client_cert: bool, version: &str) -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let program = "import functools, http.server, ssl, sys\n\
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])\n\
        server = http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), handler)\n\
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
        context.load_cert_chain(sys.argv[2] + '/server.pem', sys.argv[2] + '/server.key')\n\
        if sys.argv[3] == 'yes':\n    context.verify_mode = ssl.CERT_REQUIRED\n    context.load_verify_locations(sys.argv[2] + '/ca.pem')\n\
        if sys.argv[4] == '1.2':\n    context.maximum_version = ssl.TLSVersion.TLSv1_2\n\
        if sys.argv[4] == '1.3':\n    context.minimum_version = ssl.TLSVersion.TLSv1_3\n\
        server.socket = context.wrap_socket(server.socket, server_side=True)\n\
        server.serve_forever()\n";
    let child = Command::new("python3")
        .args(["-c", program, &port.to_string()])
        .arg(dir)
        .arg(if require_client_cert { "yes" } else { "no" })
        .arg(version)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 (Debian's python3) serves the TLS test targets");
    let address = format!("127.0.0.1:{port}");
    let ready = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(&address).is_ok()
    });
    assert!(ready, "{address} did not start");
    (child, address)
}

fn job(address: &str, tls: &str) -> Job {
    let yaml = format!(
        "scrape_configs:\n  - job_name: secure\n    scheme: https\n    scrape_timeout: 5s\n    static_configs: [{{targets: ['{address}']}}]\n{tls}"
    );
    jobs_from_yaml(&yaml).unwrap().remove(0)
}

async fn scrape(job: &Job) -> ScrapeOutcome {
    let (targets, _) = targets_for_job(job);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Default::default(),
        ..Default::default()
    };
    Scraper::with_tls(job.config.tls_config.as_ref())
        .unwrap()
        .scrape(&targets[0], job, &context, &mut TargetState::default())
        .await
}

struct Servers(Vec<Child>, PathBuf);

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_targets_are_verified_against_the_configured_ca() {
    let dir = std::env::temp_dir().join(format!("epicenter-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("metrics"), BODY).unwrap();
    certificates(&dir);
    let (plain, address) = https_server(&dir, false);
    let (mutual, mutual_address) = https_server(&dir, true);
    let _servers = Servers(vec![plain, mutual], dir.clone());
    let ca = format!("    tls_config: {{ca_file: '{}'}}\n", dir.join("ca.pem").display());

    // Trusted through ca_file: up, with the body's samples.
    let outcome = scrape(&job(&address, &ca)).await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    assert_eq!(outcome.report.samples_scraped, 2);
    let requests = outcome
        .rows
        .iter()
        .find(|row| row.series.name == "secure_requests_total")
        .unwrap();
    assert_eq!(requests.value, 7.0);

    // The test CA is not among the system's roots: without ca_file the certificate is refused.
    let refused = scrape(&job(&address, "")).await;
    assert!(!refused.report.up);
    let error = refused.report.error.unwrap();
    assert!(
        error.contains("certificate") || error.contains("UnknownIssuer"),
        "{error}"
    );

    // insecure_skip_verify accepts it anyway.
    let skipped = scrape(&job(&address, "    tls_config: {insecure_skip_verify: true}\n")).await;
    assert!(skipped.report.up, "{:?}", skipped.report.error);

    // A server that requires a client certificate: refused without one, up with one.
    let without = scrape(&job(&mutual_address, &ca)).await;
    assert!(
        !without.report.up,
        "a server requiring a client certificate answered without one"
    );
    let with_cert = format!(
        "    tls_config: {{ca_file: '{}', cert_file: '{}', key_file: '{}'}}\n",
        dir.join("ca.pem").display(),
        dir.join("client.pem").display(),
        dir.join("client.key").display()
    );
    let outcome = scrape(&job(&mutual_address, &with_cert)).await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    assert_eq!(outcome.report.samples_scraped, 2);
}

/// Issue 16: the PEM written in the file itself (`ca`, `cert`, `key`, Prometheus's inline
/// forms) works as the files do, and `server_name` is the name the certificate must carry
/// when the host scraped is another (the test certificate names IP 127.0.0.1 only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_pem_and_server_name_work_as_prometheus_s() {
    let dir = std::env::temp_dir().join(format!("epicenter-tls-inline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("metrics"), BODY).unwrap();
    certificates(&dir);
    let (mutual, address) = https_server(&dir, true);
    let _servers = Servers(vec![mutual], dir.clone());
    let pem = |name: &str| serde_json::to_string(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
    let inline = format!(
        "    tls_config: {{ca: {}, cert: {}, key: {}}}\n",
        pem("ca.pem"),
        pem("client.pem"),
        pem("client.key")
    );
    let outcome = scrape(&job(&address, &inline)).await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    assert_eq!(outcome.report.samples_scraped, 2);

    // Scraped as localhost, the certificate (IP 127.0.0.1 only) does not match...
    let port = address.rsplit_once(':').unwrap().1;
    let by_name = format!("localhost:{port}");
    let refused = scrape(&job(&by_name, &inline)).await;
    assert!(!refused.report.up);
    let error = refused.report.error.unwrap();
    assert!(error.contains("does not name the address scraped"), "{error}");
    // ...unless server_name says which name to expect.
    let named = inline.replace("}\n", ", server_name: '127.0.0.1'}\n");
    let outcome = scrape(&job(&by_name, &named)).await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    // A server_name the certificate does not carry is refused even at the right address.
    let wrong = inline.replace("}\n", ", server_name: db-7.example.org}\n");
    let refused = scrape(&job(&address, &wrong)).await;
    assert!(!refused.report.up);

    // Inline and file forms of the same PEM together, or a certificate without its key:
    // configuration errors at the key; the key's text is never echoed.
    let yaml = |tls: &str| {
        format!("scrape_configs:\n  - job_name: secure\n    scheme: https\n    static_configs: [{{targets: ['{address}']}}]\n{tls}")
    };
    let both = format!(
        "    tls_config: {{ca: {}, ca_file: '{}'}}\n",
        pem("ca.pem"),
        dir.join("ca.pem").display()
    );
    let errors = jobs_from_yaml(&yaml(&both)).unwrap_err();
    assert_eq!(errors[0].path, "scrape_configs[0].tls_config.ca", "{errors:?}");
    let half = format!("    tls_config: {{cert: {}}}\n", pem("client.pem"));
    let errors = jobs_from_yaml(&yaml(&half)).unwrap_err();
    assert!(errors[0].message.contains("go together"), "{errors:?}");
    let not_a_key = "    tls_config: {cert: 'x', key: 'hunter2-not-a-key'}\n";
    let errors = jobs_from_yaml(&yaml(not_a_key)).unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|error| error.starts_with("scrape_configs[0].tls_config.key: key: no PEM private key")),
        "{text:?}"
    );
    assert!(!format!("{text:?}").contains("hunter2"), "{text:?}");
}

/// The self-signed certificate `openssl req -x509` makes is a CA certificate; rustls refuses
/// it as a server's own even when it is the ca_file, and the error says so in plain words.
/// A plain-http server behind `scheme: https` is named as such.
/// Issue 16: `min_version` and `max_version` (Prometheus's names) bound the TLS versions
/// offered: a server speaking only TLS 1.2 is refused under `min_version: TLS13`, one
/// speaking only 1.3 under `max_version: TLS12`, and both are scraped within the bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_version_and_max_version_bound_the_tls_versions() {
    let dir = std::env::temp_dir().join(format!("epicenter-tls-versions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("metrics"), BODY).unwrap();
    certificates(&dir);
    let (old, old_address) = https_server_with(&dir, false, "1.2");
    let (new, new_address) = https_server_with(&dir, false, "1.3");
    let _servers = Servers(vec![old, new], dir.clone());
    let ca = format!("ca_file: '{}'", dir.join("ca.pem").display());
    let tls = |versions: &str| format!("    tls_config: {{{ca}{versions}}}\n");
    let cases = [
        (&old_address, "", true),
        (&old_address, ", min_version: TLS13", false),
        (&old_address, ", max_version: TLS12", true),
        (&new_address, "", true),
        (&new_address, ", max_version: TLS12", false),
        (&new_address, ", min_version: TLS13", true),
    ];
    for (address, versions, up) in cases {
        let outcome = scrape(&job(address, &tls(versions))).await;
        assert_eq!(
            outcome.report.up, up,
            "{address} {versions}: {:?}",
            outcome.report.error
        );
    }
    // TLS 1.0 and 1.1 are refused, and so is a minimum above the maximum.
    for (versions, message) in [
        (", min_version: TLS10", "TLS 1.0 and 1.1 are not offered"),
        (", min_version: TLS13, max_version: TLS12", "newer than max_version"),
    ] {
        let yaml = format!(
            "scrape_configs:\n  - job_name: secure\n    scheme: https\n    static_configs: [{{targets: ['{old_address}']}}]\n{}",
            tls(versions)
        );
        let errors = jobs_from_yaml(&yaml).unwrap_err();
        assert!(
            errors.iter().any(
                |error| error.path == "scrape_configs[0].tls_config.min_version" && error.message.contains(message)
            ),
            "{versions}: {errors:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn common_tls_mistakes_are_explained() {
    let dir = std::env::temp_dir().join(format!("epicenter-tls-self-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("metrics"), BODY).unwrap();
    openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
    );
    let (server, address) = https_server(&dir, false);
    let plain_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let plain = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &plain_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let plain_address = format!("127.0.0.1:{plain_port}");
    assert!((0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(&plain_address).is_ok()
    }));
    let _servers = Servers(vec![server, plain], dir.clone());
    let ca = format!("    tls_config: {{ca_file: '{}'}}\n", dir.join("server.pem").display());
    let outcome = scrape(&job(&address, &ca)).await;
    assert!(!outcome.report.up);
    let error = outcome.report.error.unwrap();
    assert!(error.contains("itself a CA certificate"), "{error}");
    let outcome = scrape(&job(&plain_address, "")).await;
    assert!(!outcome.report.up);
    let error = outcome.report.error.unwrap();
    assert!(error.contains("did not answer with TLS"), "{error}");
}

#[test]
fn unusable_pem_files_fail_the_config_check_not_the_run() {
    let dir = std::env::temp_dir().join(format!("epicenter-tls-pem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    certificates(&dir);
    let check = |tls: &str| -> Vec<String> {
        let yaml = format!(
            "scrape_configs:\n  - job_name: secure\n    scheme: https\n    static_configs: [{{targets: ['127.0.0.1:1']}}]\n    tls_config: {tls}\n"
        );
        match jobs_from_yaml(&yaml) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    };
    let directory = check(&format!("{{ca_file: '{}'}}", dir.display()));
    assert!(
        directory
            .iter()
            .any(|error| error.starts_with("scrape_configs[0].tls_config") && error.contains("ca_file")),
        "{directory:?}"
    );
    let key_as_ca = check(&format!("{{ca_file: '{}'}}", dir.join("ca.key").display()));
    assert!(
        key_as_ca.iter().any(|error| error.contains("no PEM certificate")),
        "{key_as_ca:?}"
    );
    let swapped = check(&format!(
        "{{cert_file: '{0}', key_file: '{0}'}}",
        dir.join("client.pem").display()
    ));
    assert!(
        swapped
            .iter()
            .any(|error| error.contains("key_file") && error.contains("no PEM private key")),
        "{swapped:?}"
    );
    let good = check(&format!(
        "{{ca_file: '{}', cert_file: '{}', key_file: '{}'}}",
        dir.join("ca.pem").display(),
        dir.join("client.pem").display(),
        dir.join("client.key").display()
    ));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(good.is_empty(), "{good:?}");
}

#[test]
fn unreadable_or_half_tls_files_are_config_errors_with_their_path() {
    let yaml = "scrape_configs:\n  - job_name: secure\n    scheme: https\n    static_configs: [{targets: ['127.0.0.1:1']}]\n    tls_config: {ca_file: /nonexistent/ca.pem, cert_file: /nonexistent/client.pem}\n";
    let problems: Vec<String> = jobs_from_yaml(yaml)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    let problems = problems.join("\n");
    assert!(problems.contains("scrape_configs[0].tls_config.ca_file"), "{problems}");
    assert!(problems.contains("/nonexistent/ca.pem"), "{problems}");
    assert!(
        problems.contains("a client certificate (cert or cert_file) and its key (key or key_file) go together"),
        "{problems}"
    );
    let garbage = std::env::temp_dir().join(format!("epicenter-not-pem-{}", std::process::id()));
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let tls = epicenter_config::TlsConfig {
        ca_file: Some(garbage.clone()),
        ..Default::default()
    };
    let error = Scraper::with_tls(Some(&tls)).unwrap_err().to_string();
    std::fs::remove_file(&garbage).unwrap();
    assert!(
        error.contains("ca_file") && error.contains("epicenter-not-pem"),
        "{error}"
    );
}
