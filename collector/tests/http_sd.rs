//! HTTP service discovery (Prometheus `<http_sd_config>`, issue 16) against a target list
//! served on 127.0.0.1 that changes while the job runs: the listed targets are scraped with
//! their labels and `__meta_url` (available to relabeling), a changed list starts and stops
//! targets, a failing endpoint keeps the previous targets, and the endpoint's basic auth is
//! sent. Waits are bounded and assert on the state reached, not on how many refreshes ran.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use epicenter_collector::config::jobs_from_yaml;
use running::RunningJob;

mod running;

/// What the SD endpoint answers now: status, content type and body.
type Answer = Arc<Mutex<(StatusCode, &'static str, String)>>;

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targets_follow_the_served_list_and_survive_its_failures() {
    let exporter = serve(Router::new().route("/metrics", get(|| async { "up_metric 1\n" }))).await;
    let (first, second) = (exporter.clone(), exporter.replace("127.0.0.1", "localhost"));
    let answer: Answer = Arc::new(Mutex::new((
        StatusCode::OK,
        "application/json",
        format!(r#"[{{"targets": ["{first}"], "labels": {{"dc": "dc-1", "__meta_rack": "r7"}}}}]"#),
    )));
    let sd = serve(
        Router::new()
            .route(
                "/sd",
                get(|State(answer): State<Answer>, headers: HeaderMap| async move {
                    // The endpoint's own basic auth: user "sd", password "sd-pass".
                    let expected = "Basic c2Q6c2QtcGFzcw==";
                    if headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) != Some(expected) {
                        return (
                            StatusCode::UNAUTHORIZED,
                            [(header::CONTENT_TYPE, "text/plain")],
                            String::new(),
                        );
                    }
                    let (status, content_type, body) = answer.lock().unwrap().clone();
                    (status, [(header::CONTENT_TYPE, content_type)], body)
                }),
            )
            .with_state(answer.clone()),
    )
    .await;
    let yaml = format!(
        "scrape_configs:
  - job_name: discovered
    scrape_interval: 200ms
    scrape_timeout: 150ms
    http_sd_configs:
      - url: 'http://{sd}/sd'
        refresh_interval: 200ms
        basic_auth: {{username: sd, password: sd-pass}}
    relabel_configs:
      - {{source_labels: [__meta_rack], target_label: rack}}
      - {{source_labels: [__meta_url], regex: '.*/(sd)', target_label: source}}
"
    );
    let job = jobs_from_yaml(&yaml)
        .unwrap_or_else(|errors| panic!("{errors:?}"))
        .remove(0);
    let running = RunningJob::start(job);

    running.wait_for("the first list", |targets| targets.len() == 1).await;
    let targets = running.active();
    assert_eq!(targets[0].0, format!("http://{first}/metrics"));
    let labels = &targets[0].1;
    assert_eq!(labels["dc"], "dc-1");
    assert_eq!(labels["rack"], "r7");
    assert_eq!(labels["source"], "sd");
    assert_eq!(labels["instance"], first.as_str());
    assert!(labels.get("__meta_rack").is_none() && labels.get("__meta_url").is_none());

    // The list changes: the old target stops, the new one starts.
    answer.lock().unwrap().2 = format!(r#"[{{"targets": ["{second}"], "labels": {{}}}}]"#);
    running
        .wait_for("the changed list", |targets| {
            targets.len() == 1 && targets[0].0 == format!("http://{second}/metrics")
        })
        .await;

    // A failing endpoint (500, then the wrong content type) keeps the targets it gave last.
    answer.lock().unwrap().0 = StatusCode::INTERNAL_SERVER_ERROR;
    tokio::time::sleep(Duration::from_millis(600)).await;
    answer.lock().unwrap().0 = StatusCode::OK;
    answer.lock().unwrap().1 = "text/plain";
    answer.lock().unwrap().2 = "[]".to_string();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let kept = running.active();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].0, format!("http://{second}/metrics"));

    // An empty list, served properly, means no targets.
    answer.lock().unwrap().1 = "application/json";
    running.wait_for("the empty list", <[_]>::is_empty).await;

    running.stop().await;
}

#[test]
fn http_sd_urls_and_intervals_are_checked() {
    let cases = [
        (
            "ftp://127.0.0.1/sd",
            "scrape_configs[0].http_sd_configs[0].url",
            "not http or https",
        ),
        ("127.0.0.1:8080/sd", "scrape_configs[0].http_sd_configs[0].url", "http"),
        ("http://", "scrape_configs[0].http_sd_configs[0].url", "not a URL"),
    ];
    for (url, path, message) in cases {
        let yaml = format!("scrape_configs:\n  - job_name: j\n    http_sd_configs: [{{url: '{url}'}}]\n");
        let errors = jobs_from_yaml(&yaml).unwrap_err();
        assert_eq!(errors.len(), 1, "{url}: {errors:?}");
        assert_eq!(errors[0].path, path, "{url}");
        assert!(errors[0].message.contains(message), "{url}: {}", errors[0].message);
    }
    let yaml = "scrape_configs:\n  - job_name: j\n    http_sd_configs: [{url: 'http://127.0.0.1:1/sd', refresh_interval: 0s}]\n";
    let errors = jobs_from_yaml(yaml).unwrap_err();
    assert_eq!(errors[0].path, "scrape_configs[0].http_sd_configs[0].refresh_interval");
    // The default refresh interval is Prometheus's minute.
    let yaml = "scrape_configs:\n  - job_name: j\n    http_sd_configs: [{url: 'http://127.0.0.1:1/sd'}]\n";
    let job = jobs_from_yaml(yaml).unwrap().remove(0);
    assert_eq!(
        job.config.http_sd_configs[0].refresh_interval.0,
        Duration::from_secs(60)
    );
}
