//! A scrape that times out while epicenter's own runtime is starved is told from a target
//! that did not answer (issue 17). Its own test binary: it blocks its runtime's only thread on
//! purpose, and the lateness probe is one per process, so no other test may share it.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use epicenter_collector::config::jobs_from_yaml;
use epicenter_collector::scrape::{ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::rows::ScrapeOutcome;

/// A target that answers after 3 s, on 127.0.0.1; returns its `host:port`.
async fn slow_target() -> String {
    let app = Router::new().route(
        "/metrics",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            "up_gauge 1\n"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

async fn scrape(address: &str) -> ScrapeOutcome {
    let yaml = format!(
        "scrape_configs:\n  - job_name: test\n    scrape_interval: 1s\n    scrape_timeout: 500ms\n    static_configs:\n      - targets: ['{address}']\n"
    );
    let job = jobs_from_yaml(&yaml).unwrap().remove(0);
    let (targets, _) = targets_for_job(&job);
    Scraper::new()
        .unwrap()
        .scrape(
            &targets[0],
            &job,
            &ScrapeContext::default(),
            &mut TargetState::default(),
        )
        .await
}

/// The lag the error names, ms.
fn lag_ms(error: &str) -> f64 {
    error
        .split(" ran ")
        .nth(1)
        .and_then(|rest| rest.split(" ms late").next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no lag in {error}"))
}

/// Blocked for 700 ms (its only thread, as a starved process would be), the runtime times the
/// scrape out late: `starved`, `up` 0, and the error gives the lag measured (most of the
/// block), not a guess. (That an unstarved timeout stays the target's is
/// tests/scrape.rs's `failures_mark_the_target_down_with_the_reason`.)
#[tokio::test(flavor = "current_thread")]
async fn a_timeout_while_epicenter_itself_is_starved_is_marked_starved() {
    let address = slow_target().await;
    epicenter_collector::lag::start_probe();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let blocker = tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::thread::sleep(Duration::from_millis(700));
    });
    let starved = scrape(&address).await;
    blocker.await.unwrap();
    let error = starved.report.error.clone().unwrap_or_default();
    assert!(starved.report.starved && !starved.report.up, "{error}");
    assert!(error.starts_with("starved: scrape timed out after 500ms"), "{error}");
    assert!(lag_ms(&error) >= 500.0, "{error}");
    let up = starved.rows.iter().find(|row| row.series.name == "up").unwrap();
    assert_eq!(up.value, 0.0);
}
