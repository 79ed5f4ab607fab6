//! Prometheus's limits and protocol settings on a job and in `global` (issue 16), against an
//! exporter on 127.0.0.1: `target_limit` (past it no target of the job is scraped, each is
//! down with Prometheus's reason), global limits inherited and overridden per job, and
//! `scrape_protocols` turned into the `Accept` header Prometheus sends.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::{header, HeaderMap};
use axum::routing::get;
use axum::Router;
use epicenter_collector::config::{accept_header, jobs_from_yaml, warnings, CollectorConfig, Job};
use epicenter_collector::scrape::{ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{Labels, ScrapeOutcome};
use running::RunningJob;

mod running;

/// An exporter counting its scrapes and keeping the last `Accept` header.
async fn exporter() -> (String, Arc<AtomicU64>, Arc<Mutex<String>>) {
    let (hits, accept) = (Arc::new(AtomicU64::new(0)), Arc::new(Mutex::new(String::new())));
    let (count, last) = (hits.clone(), accept.clone());
    let router = Router::new().route(
        "/metrics",
        get(move |headers: HeaderMap| {
            let (count, last) = (count.clone(), last.clone());
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                *last.lock().unwrap() = headers
                    .get(header::ACCEPT)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                "a 1\nb 2\nc{long_label_name=\"v\"} 3\n"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (address, hits, accept)
}

fn job(yaml: &str) -> Job {
    jobs_from_yaml(yaml)
        .unwrap_or_else(|errors| panic!("{errors:?}"))
        .remove(0)
}

async fn scrape(job: &Job) -> ScrapeOutcome {
    let (targets, _) = targets_for_job(job);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Labels::new(),
        ..Default::default()
    };
    Scraper::new()
        .unwrap()
        .scrape(&targets[0], job, &context, &mut TargetState::default())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_target_limit_no_target_of_the_job_is_scraped() {
    let (address, hits, _) = exporter().await;
    let port = address.rsplit_once(':').unwrap().1;
    // Three targets (one exporter under three names), limit 2 from global.
    let yaml = format!(
        "global: {{target_limit: 2}}\nscrape_configs:\n  - job_name: limited\n    scrape_interval: 100ms\n    scrape_timeout: 90ms\n    static_configs: [{{targets: ['127.0.0.1:{port}', 'localhost:{port}', '127.0.0.2:{port}']}}]\n"
    );
    let limited = job(&yaml);
    assert_eq!(limited.limits.targets, 2);
    let running = RunningJob::start(limited);
    running
        .wait_for("three targets down", |targets| targets.len() == 3)
        .await;
    let statuses = serde_json::to_value(running.registry.statuses()).unwrap();
    for status in statuses.as_array().unwrap() {
        assert_eq!(status["health"], "down", "{status}");
        assert_eq!(
            status["lastError"], "target_limit exceeded (number of targets: 3, limit: 2)",
            "{status}"
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a target was scraped past target_limit");
    running.stop().await;

    // The job's own limit wins over global's: 3 allowed, all three scraped.
    let allowed = job(&yaml.replace("scrape_timeout: 90ms\n", "scrape_timeout: 90ms\n    target_limit: 3\n"));
    assert_eq!(allowed.limits.targets, 3);
    let running = RunningJob::start(allowed);
    running.wait_for("three targets up", |targets| targets.len() == 3).await;
    let started = std::time::Instant::now();
    while hits.load(Ordering::SeqCst) < 3 && started.elapsed() < std::time::Duration::from_secs(30) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(hits.load(Ordering::SeqCst) >= 3);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_limits_apply_to_jobs_that_set_none() {
    let (address, _, _) = exporter().await;
    let base = |global: &str, own: &str| {
        format!("global: {{{global}}}\nscrape_configs:\n  - job_name: j\n    static_configs: [{{targets: ['{address}']}}]\n{own}")
    };
    // The body has 3 samples: a global sample_limit of 2 fails the scrape...
    let outcome = scrape(&job(&base("sample_limit: 2", ""))).await;
    assert!(!outcome.report.up);
    assert!(outcome.report.error.unwrap().contains("sample_limit"));
    // ...unless the job sets its own.
    let outcome = scrape(&job(&base("sample_limit: 2", "    sample_limit: 3\n"))).await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    // label_name_length_limit 10 from global: `long_label_name` (15 bytes) fails it.
    let outcome = scrape(&job(&base("label_name_length_limit: 10", ""))).await;
    assert!(!outcome.report.up);
    assert!(outcome.report.error.unwrap().contains("label_name_length_limit"));
    // body_size_limit from global: the body is 33 bytes.
    let body = "a 1\nb 2\nc{long_label_name=\"v\"} 3\n".len();
    assert_eq!(body, 33);
    let outcome = scrape(&job(&base("body_size_limit: 32B", ""))).await;
    assert!(!outcome.report.up);
    let outcome = scrape(&job(&base("body_size_limit: 33B", ""))).await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_protocols_become_prometheus_s_accept_header() {
    let (address, _, accept) = exporter().await;
    let yaml = |protocols: &str| {
        format!("scrape_configs:\n  - job_name: j\n    static_configs: [{{targets: ['{address}']}}]\n    scrape_protocols: {protocols}\n")
    };
    let outcome = scrape(&job(&yaml("[PrometheusText0.0.4, OpenMetricsText1.0.0]"))).await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    assert_eq!(
        *accept.lock().unwrap(),
        "text/plain;version=0.0.4;q=0.6,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.4"
    );
    // PrometheusProto is left out (with a warning) and the weights stay Prometheus's.
    assert_eq!(
        accept_header(Some(&[
            "PrometheusProto".to_string(),
            "OpenMetricsText0.0.1".to_string()
        ])),
        "application/openmetrics-text;version=0.0.1;q=0.6,*/*;q=0.5"
    );
    let config = CollectorConfig::from_yaml(&yaml("[PrometheusProto, PrometheusText0.0.4]")).unwrap();
    let said = warnings(&config.global, &config.scrape_configs);
    assert!(
        said.iter()
            .any(|warning| warning.starts_with("scrape_configs[0].scrape_protocols: PrometheusProto is left out")),
        "{said:?}"
    );
    // The default is unchanged: OpenMetrics 1.0, then text 0.0.4.
    let plain = format!("scrape_configs:\n  - job_name: j\n    static_configs: [{{targets: ['{address}']}}]\n");
    scrape(&job(&plain)).await;
    assert_eq!(*accept.lock().unwrap(), epicenter_collector::scrape::ACCEPT);
    // Mistakes are named at their key.
    for (protocols, path, words) in [
        ("[]", "scrape_configs[0].scrape_protocols", "at least one"),
        (
            "[OpenMetricsText2.0.0]",
            "scrape_configs[0].scrape_protocols[0]",
            "unknown protocol",
        ),
        (
            "[PrometheusText0.0.4, PrometheusText0.0.4]",
            "scrape_configs[0].scrape_protocols[1]",
            "twice",
        ),
        (
            "[PrometheusProto]",
            "scrape_configs[0].scrape_protocols",
            "only PrometheusProto",
        ),
    ] {
        let errors = jobs_from_yaml(&yaml(protocols)).unwrap_err();
        assert_eq!(errors[0].path, path, "{protocols}: {errors:?}");
        assert!(errors[0].message.contains(words), "{protocols}: {errors:?}");
    }
}
