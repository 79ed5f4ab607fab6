//! A job's HTTP options with Prometheus's names and meaning (issue 16), against an exporter
//! on 127.0.0.1 that records the headers it receives: `http_headers` (values, secrets, and
//! files re-read at every scrape; reserved headers refused), `follow_redirects` (followed by
//! default; a `3xx` fails the scrape when false) and `enable_http2` (accepted).

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::sync::{Arc, Mutex};

use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use epicenter_collector::config::{jobs_from_yaml, Job};
use epicenter_collector::scrape::{ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{Labels, ScrapeOutcome};

/// Every value of each `x-*` header of the last request but the scrape's own timeout header.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

async fn exporter() -> (String, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let router = Router::new()
        .route(
            "/metrics",
            get(move |headers: HeaderMap| {
                let record = record.clone();
                async move {
                    *record.lock().unwrap() = headers
                        .iter()
                        .filter(|(name, _)| {
                            name.as_str().starts_with("x-") && !name.as_str().starts_with("x-prometheus")
                        })
                        .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_string()))
                        .collect();
                    "options_up 1\n"
                }
            }),
        )
        .route(
            "/moved",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/metrics")], "") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (address, seen)
}

fn job(address: &str, extra: &str) -> Job {
    let yaml =
        format!("scrape_configs:\n  - job_name: options\n    static_configs: [{{targets: ['{address}']}}]\n{extra}");
    jobs_from_yaml(&yaml)
        .unwrap_or_else(|errors| panic!("{errors:?}"))
        .remove(0)
}

async fn scrape(address: &str, extra: &str) -> ScrapeOutcome {
    scrape_job(&job(address, extra)).await
}

async fn scrape_job(job: &Job) -> ScrapeOutcome {
    let (targets, _) = targets_for_job(job);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Labels::new(),
        ..Default::default()
    };
    Scraper::for_job(&job.config)
        .unwrap()
        .scrape(&targets[0], job, &context, &mut TargetState::default())
        .await
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_headers_send_values_secrets_and_files_read_at_every_scrape() {
    let (address, seen) = exporter().await;
    let file = std::env::temp_dir().join(format!("epicenter-header-{}", std::process::id()));
    std::fs::write(&file, "token-one\n").unwrap();
    let headers = format!(
        "    http_headers:\n      X-Tenant: {{values: [blue, green]}}\n      X-Api-Key: {{secrets: [s3cret]}}\n      X-From-File: {{files: ['{}']}}\n",
        file.display()
    );
    let job = job(&address, &headers);
    let outcome = scrape_job(&job).await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    assert_eq!(
        got,
        pairs(&[
            ("x-api-key", "s3cret"),
            ("x-from-file", "token-one"),
            ("x-tenant", "blue"),
            ("x-tenant", "green")
        ])
    );
    // The file is read again at the next scrape: a rotated token is sent.
    std::fs::write(&file, "token-two\n").unwrap();
    assert!(scrape_job(&job).await.report.up);
    assert!(seen
        .lock()
        .unwrap()
        .contains(&("x-from-file".to_string(), "token-two".to_string())));
    // The file gone: the scrape fails naming the header and the file, not its content.
    std::fs::remove_file(&file).unwrap();
    let failed = scrape_job(&job).await;
    assert!(!failed.report.up);
    let error = failed.report.error.unwrap();
    assert!(
        error.contains("http_headers.X-From-File") && error.contains(&file.display().to_string()),
        "{error}"
    );
}

#[test]
fn reserved_or_unsendable_headers_are_configuration_errors_without_the_secret() {
    let check = |headers: &str| {
        let yaml = format!(
            "scrape_configs:\n  - job_name: j\n    static_configs: [{{targets: ['127.0.0.1:9']}}]\n    http_headers:\n{headers}"
        );
        jobs_from_yaml(&yaml).unwrap_err()
    };
    let errors = check("      Authorization: {values: [Bearer x]}\n");
    assert_eq!(errors[0].path, "scrape_configs[0].http_headers.Authorization");
    assert!(errors[0].message.contains("reserved"), "{errors:?}");
    let errors = check("      user-agent: {values: [me]}\n");
    assert_eq!(errors[0].path, "scrape_configs[0].http_headers.user-agent");
    let errors = check("      'Bad Name': {values: [x]}\n");
    assert!(errors[0].message.contains("not an HTTP header name"), "{errors:?}");
    let errors = check("      X-Key: {secrets: [\"hunter2\\nX-Evil: 1\"]}\n");
    assert_eq!(errors[0].path, "scrape_configs[0].http_headers.X-Key.secrets[0]");
    assert!(!format!("{errors:?}").contains("hunter2"), "{errors:?}");
    let errors = check("      X-Key: {files: [/nonexistent/token]}\n");
    assert_eq!(errors[0].path, "scrape_configs[0].http_headers.X-Key.files[0]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_followed_unless_follow_redirects_is_false() {
    let (address, _) = exporter().await;
    let moved = "    metrics_path: /moved\n";
    let followed = scrape(&address, moved).await;
    assert!(followed.report.up, "{:?}", followed.report.error);
    assert_eq!(followed.report.samples_scraped, 1);
    let refused = scrape(&address, &format!("{moved}    follow_redirects: false\n")).await;
    assert!(!refused.report.up);
    assert!(refused.report.error.unwrap().contains("302"));
    // enable_http2 is accepted either way; the scrape is HTTP/1.1.
    for value in ["true", "false"] {
        let outcome = scrape(&address, &format!("    enable_http2: {value}\n")).await;
        assert!(outcome.report.up, "{value}: {:?}", outcome.report.error);
    }
}
