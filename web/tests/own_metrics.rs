//! epicenter's own `/metrics` as a Prometheus user scrapes it (issue 16, "own telemetry a
//! Prometheus user expects"): the detector's rounds, tick time and anomalies on a driven clock;
//! the notifiers' sent, failed and dropped notifications and queue depth against receivers on
//! 127.0.0.1; and OpenMetrics 1.0 when the scraper asks for it. Every expectation comes from
//! the test's own script (the receiver's answers, the clock, the events handed over), and
//! every body is read back with epicenter's own parser in strict mode.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Validation};
use epicenter_collector::targets::TargetRegistry;
use epicenter_config::PromDuration;
use epicenter_detector::live::{self, Batch};
use epicenter_detector::{InstanceInfo, Settings, Verdict, VerdictEvent};
use epicenter_oncall::config::{NotifierConfig, NotifierKind};
use epicenter_oncall::{AlertSource, Notifiers};
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::Series;
use epicenter_store::writer::WriterStats;
use epicenter_web::config::ServerConfig;
use epicenter_web::{AppState, Telemetry, VerdictBook};
use tokio::sync::{mpsc, watch};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Prometheus 2.42's scrape `Accept` header (its default, OpenMetrics first).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

// === helpers ===

/// The web state `run` builds, with `notifiers` watched by its telemetry.
fn state(notifiers: Notifiers) -> Arc<AppState> {
    let notifiers = Arc::new(notifiers);
    let telemetry = Telemetry::new(Arc::new(WriterStats::default())).unwrap();
    let targets = Arc::new(TargetRegistry::default());
    telemetry.watch_targets(targets.clone()).unwrap();
    telemetry.watch_notifiers(notifiers.clone()).unwrap();
    Arc::new(AppState {
        telemetry,
        targets,
        verdicts: Mutex::new(VerdictBook::default()),
        graph: Mutex::new(None),
        notifiers,
        store: None,
    })
}

/// Serves `state`'s router on 127.0.0.1 (a port of its own); its base URL.
async fn serve(state: Arc<AppState>) -> String {
    let router = epicenter_web::app(state, &ServerConfig::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

/// GET `/metrics` with `accept` (or none): (content type, body).
async fn scrape(base: &str, accept: Option<&str>) -> (String, String) {
    let mut request = reqwest::Client::new().get(format!("{base}/metrics"));
    if let Some(accept) = accept {
        request = request.header(reqwest::header::ACCEPT, accept);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_string();
    (content_type, response.text().await.unwrap())
}

/// The value of the sample `name` whose labels include `labels`, read with the strict parser
/// in `format` (so every body a test reads is also checked against the format's rules).
fn value(body: &str, format: FormatChoice, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let options = ParseOptions {
        format,
        validation: Validation::Strict,
    };
    let exposition = parse(body.as_bytes(), options).unwrap_or_else(|error| panic!("{error}\n{body}"));
    exposition
        .samples
        .iter()
        .find(|sample| {
            sample.name == name
                && labels
                    .iter()
                    .all(|(label, wanted)| exposition.label_value(sample, label).as_deref() == Some(*wanted))
        })
        .map(|sample| sample.value)
}

/// A receiver on 127.0.0.1 that answers its requests with `answers` in order (200 once they
/// are used up), or never answers when `hang`; its URL and the requests it has seen.
async fn receiver(answers: &[u16], hang: bool) -> (String, Arc<AtomicUsize>) {
    let answers = Arc::new(Mutex::new(answers.iter().copied().collect::<VecDeque<u16>>()));
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let router = axum::Router::new().fallback(move || {
        let answers = answers.clone();
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            if hang {
                std::future::pending::<()>().await;
            }
            let status = answers.lock().unwrap().pop_front().unwrap_or(200);
            StatusCode::from_u16(status).unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://{address}"), requests)
}

fn notifier(name: &str, kind: NotifierKind, url: &str) -> NotifierConfig {
    NotifierConfig {
        name: name.into(),
        kind,
        url: url.into(),
        timeout: PromDuration(Duration::from_secs(30)),
        // No re-send of the open alert during a test: every request is the event's own.
        resend_interval: PromDuration(Duration::from_secs(3600)),
        kinds: Vec::new(),
        dcs: Vec::new(),
        services: Vec::new(),
        min_confidence: 0.0,
    }
}

fn opened(instance: &str) -> VerdictEvent {
    VerdictEvent {
        time_ms: 2_000,
        state: "opened".into(),
        verdict: Verdict {
            id: format!("2000-{instance}"),
            kind: "node_loss".into(),
            dc: "dc-2".into(),
            dcs: vec!["dc-2".into()],
            hosts: vec!["dc-2-host-3".into()],
            service: "redis".into(),
            instances: vec![instance.into()],
            confidence: 0.9,
            leader_share: 0.5,
            candidates: Vec::new(),
            evidence: Vec::new(),
            onset_ms: 1_000,
            opened_ms: 2_000,
        },
    }
}

/// Waits (up to 20 s) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// === notifiers ===

/// An Alertmanager that answers 500 and then 200 gets the notification on the retry: one
/// sent, one failed request, nothing dropped. A webhook that answers 400 is not retried: one
/// failed request, and the notification is dropped as given up.
#[tokio::test]
async fn a_retry_is_not_a_second_send_and_a_refusal_is_given_up() {
    let (alertmanager, alertmanager_requests) = receiver(&[500, 200], false).await;
    let (webhook, webhook_requests) = receiver(&[400], false).await;
    let (_stop, shutdown) = watch::channel(false);
    let notifiers = Notifiers::start(
        &[
            notifier("oncall", NotifierKind::Alertmanager, &alertmanager),
            notifier("chat", NotifierKind::Webhook, &webhook),
        ],
        AlertSource::default(),
        shutdown,
    );
    notifiers.notify(&opened("redis-2-1"));
    let state = state(notifiers);
    let delivered = state.clone();
    until("both notifiers to finish", move || {
        let snapshot = delivered.notifiers.snapshot();
        snapshot[0].sent == 1 && snapshot[1].given_up == 1
    })
    .await;
    assert_eq!(alertmanager_requests.load(Ordering::SeqCst), 2);
    assert_eq!(webhook_requests.load(Ordering::SeqCst), 1);
    let base = serve(state).await;
    let (content_type, body) = scrape(&base, None).await;
    assert_eq!(content_type, TEXT);
    let metric = |name: &str, labels: &[(&str, &str)]| value(&body, FormatChoice::Text, name, labels);
    let oncall = ("notifier", "oncall");
    let chat = ("notifier", "chat");
    assert_eq!(metric("epicenter_notifications_sent_total", &[oncall]), Some(1.0));
    assert_eq!(metric("epicenter_notifications_failed_total", &[oncall]), Some(1.0));
    for reason in ["queue_full", "given_up"] {
        assert_eq!(
            metric("epicenter_notifications_dropped_total", &[oncall, ("reason", reason)]),
            Some(0.0)
        );
    }
    assert_eq!(metric("epicenter_notifications_sent_total", &[chat]), Some(0.0));
    assert_eq!(metric("epicenter_notifications_failed_total", &[chat]), Some(1.0));
    assert_eq!(
        metric("epicenter_notifications_dropped_total", &[chat, ("reason", "given_up")]),
        Some(1.0)
    );
    assert_eq!(
        metric(
            "epicenter_notifications_dropped_total",
            &[chat, ("reason", "queue_full")]
        ),
        Some(0.0)
    );
    for labels in [oncall, chat] {
        assert_eq!(metric("epicenter_notification_queue_depth", &[labels]), Some(0.0));
        assert_eq!(metric("epicenter_notification_queue_capacity", &[labels]), Some(100.0));
    }
}

/// A receiver that never answers holds the first event in delivery; the next 100 fill the
/// queue and the 3 after them are dropped.
#[tokio::test]
async fn a_full_queue_drops_and_shows_its_depth() {
    let (url, requests) = receiver(&[], true).await;
    let (_stop, shutdown) = watch::channel(false);
    let notifiers = Notifiers::start(
        &[notifier("slow", NotifierKind::Webhook, &url)],
        AlertSource::default(),
        shutdown,
    );
    notifiers.notify(&opened("redis-0"));
    until("the first request to arrive", || requests.load(Ordering::SeqCst) == 1).await;
    for index in 1..=103 {
        notifiers.notify(&opened(&format!("redis-{index}")));
    }
    let base = serve(state(notifiers)).await;
    let (content_type, body) = scrape(&base, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(content_type, OPENMETRICS);
    let metric = |name: &str, labels: &[(&str, &str)]| value(&body, FormatChoice::OpenMetrics, name, labels);
    let slow = ("notifier", "slow");
    assert_eq!(metric("epicenter_notification_queue_depth", &[slow]), Some(100.0));
    assert_eq!(
        metric(
            "epicenter_notifications_dropped_total",
            &[slow, ("reason", "queue_full")]
        ),
        Some(3.0)
    );
    assert_eq!(metric("epicenter_notifications_sent_total", &[slow]), Some(0.0));
    assert_eq!(metric("epicenter_notifications_failed_total", &[slow]), Some(0.0));
    assert_eq!(requests.load(Ordering::SeqCst), 1);
}

// === detector ===

fn batch(second: i64, redis_up: f64) -> Batch {
    Batch {
        time_ms: 1_780_000_000_000 + second * 1_000,
        instance: InstanceInfo {
            name: "redis-2-1".into(),
            dc: "dc-2".into(),
            host: "dc-2-host-3".into(),
            service: "redis".into(),
        },
        samples: vec![(
            Arc::new(Series::new(
                "redis_up".into(),
                BTreeMap::new(),
                &PlacementConfig::default(),
            )),
            redis_up,
        )],
        late: false,
        reported: false,
    }
}

/// The live detector on tokio's paused clock, ticking every second: its first tick (t = 0)
/// finds no interval yet; six samples at t = 0.5 s fix it, so every tick from t = 1 s to the
/// stop at t = 29.5 s judges a round: 29 rounds, none late. One Redis node reports
/// `redis_up 1` for 20 scrapes and then `0`: one availability anomaly, seen once, and a
/// node-loss verdict open at the end.
#[tokio::test(start_paused = true)]
async fn detector_rounds_on_a_driven_clock_are_counted() {
    let tick = Duration::from_secs(1);
    let rules = epicenter_detector::rules::parse(
        "signals:\n  - {metric: redis_up, kind: gauge, class: availability, bad: down, floor: 0.5, role: cache}\n",
    )
    .unwrap();
    let (batches, inbox) = mpsc::channel(64);
    let (out, mut rounds) = mpsc::channel(64);
    let (stop, shutdown) = watch::channel(false);
    let detector = tokio::spawn(live::run(
        rules,
        Vec::new(),
        Settings::default(),
        (tick, live::Pacing::Arrival),
        inbox,
        std::sync::Arc::default(),
        out,
        shutdown,
    ));
    let (_stop_notifiers, no_notifiers) = watch::channel(false);
    let state = state(Notifiers::start(&[], AlertSource::default(), no_notifiers));
    let published = state.clone();
    let publisher = tokio::spawn(async move {
        let mut last = None;
        while let Some(round) = rounds.recv().await {
            published.publish(&round);
            last = Some(round);
        }
        last
    });
    let started = tokio::time::Instant::now();
    tokio::time::sleep(tick / 2).await;
    for second in 0..=5 {
        batches.send(batch(second, 1.0)).await.unwrap();
    }
    for second in 6..30 {
        tokio::time::sleep(tick).await;
        batches
            .send(batch(second, if second < 20 { 1.0 } else { 0.0 }))
            .await
            .unwrap();
    }
    tokio::time::sleep(tick * 5).await;
    let stopped = tokio::time::Instant::now();
    stop.send(true).unwrap();
    detector.await.unwrap();
    let last = publisher.await.unwrap().unwrap();
    // Ticks after the interval was known (t = 0.5 s) up to the stop.
    let expected = ((stopped - started - tick / 2).as_millis() / tick.as_millis()) as f64;
    assert_eq!(expected, 29.0);
    let body = state.telemetry.render().unwrap();
    let metric = |name: &str, labels: &[(&str, &str)]| value(&body, FormatChoice::Text, name, labels);
    assert_eq!(metric("epicenter_detector_rounds_total", &[]), Some(expected));
    assert_eq!(
        metric("epicenter_detector_round_duration_seconds_count", &[]),
        Some(expected)
    );
    assert_eq!(
        metric("epicenter_detector_round_lag_seconds_count", &[]),
        Some(expected)
    );
    assert_eq!(metric("epicenter_detector_rounds_held_total", &[]), Some(0.0));
    // One series (redis_up), read by one rule: one signal, one series held.
    assert_eq!(metric("epicenter_detector_signals", &[]), Some(1.0));
    assert_eq!(metric("epicenter_detector_series", &[]), Some(1.0));
    assert_eq!(
        metric("epicenter_detector_anomalies_total", &[("class", "availability")]),
        Some(1.0)
    );
    for class in ["errors", "latency", "saturation", "traffic", "restart"] {
        assert_eq!(
            metric("epicenter_detector_anomalies_total", &[("class", class)]),
            Some(0.0)
        );
    }
    // The node that reports itself down is named, and the verdict is still open after the
    // last round: epicenter_verdict_open says so with its place and kind.
    assert_eq!(
        last.open
            .iter()
            .map(|verdict| verdict.kind.as_str())
            .collect::<Vec<_>>(),
        ["node_loss"]
    );
    let named = [
        ("dc", "dc-2"),
        ("host", "dc-2-host-3"),
        ("service", "redis"),
        ("kind", "node_loss"),
    ];
    assert_eq!(metric("epicenter_verdict_open", &named), Some(1.0));
}

// === OpenMetrics ===

/// With Prometheus's `Accept` header the answer is OpenMetrics 1.0 that the strict parser
/// reads (counters as `<family>` + `_total`, histograms with `+Inf`, `# EOF` last) and holds
/// the same values as the text 0.0.4 answer given without it.
#[tokio::test]
async fn openmetrics_is_served_when_asked_for_and_text_otherwise() {
    let (_stop, shutdown) = watch::channel(false);
    let state = state(Notifiers::start(
        &[notifier("oncall", NotifierKind::Alertmanager, "http://127.0.0.1:9")],
        AlertSource::default(),
        shutdown,
    ));
    let base = serve(state).await;
    let (content_type, openmetrics) = scrape(&base, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(content_type, OPENMETRICS);
    assert!(openmetrics.ends_with("\n# EOF\n"), "{openmetrics}");
    assert_eq!(openmetrics.matches("# EOF").count(), 1);
    let exposition = parse(
        openmetrics.as_bytes(),
        ParseOptions {
            format: FormatChoice::OpenMetrics,
            validation: Validation::Strict,
        },
    )
    .unwrap();
    let rounds = exposition.family("epicenter_detector_rounds").unwrap();
    assert_eq!(rounds.metric_type.as_str(), "counter");
    assert_eq!(exposition.samples_of(rounds)[0].name, "epicenter_detector_rounds_total");
    let lag = exposition.family("epicenter_detector_round_lag_seconds").unwrap();
    assert_eq!(lag.unit.as_deref(), Some("seconds"));
    assert!(openmetrics.contains("epicenter_detector_round_lag_seconds_bucket{le=\"+Inf\"} 0\n"));
    assert!(openmetrics.contains("epicenter_detector_round_lag_seconds_bucket{le=\"1.0\"} 0\n"));
    assert_eq!(
        value(
            &openmetrics,
            FormatChoice::OpenMetrics,
            "epicenter_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    for accept in [None, Some("text/plain;version=0.0.4"), Some("*/*")] {
        let (content_type, text) = scrape(&base, accept).await;
        assert_eq!(content_type, TEXT, "Accept: {accept:?}");
        assert!(!text.contains("# EOF"));
        for (name, labels) in [
            ("epicenter_notification_queue_capacity", vec![("notifier", "oncall")]),
            ("epicenter_detector_rounds_held_total", vec![]),
            ("process_max_fds", vec![]),
        ] {
            assert_eq!(
                value(&text, FormatChoice::Text, name, &labels),
                value(&openmetrics, FormatChoice::OpenMetrics, name, &labels),
                "{name}"
            );
        }
    }
}

// === scrapes ===

/// A skipped scrape (epicenter behind its schedule) counts in
/// `epicenter_scrapes_skipped_total` for its job, not as a finished scrape, and leaves the
/// target's health as its last real scrape set it.
#[tokio::test]
async fn a_skipped_scrape_is_counted_and_leaves_target_health_alone() {
    use epicenter_collector::scrape::skipped_outcome;
    use epicenter_collector::targets::Target;
    let (_stop, no_notifiers) = watch::channel(false);
    let state = state(Notifiers::start(&[], AlertSource::default(), no_notifiers));
    let target = Target {
        job: "node".into(),
        url: "http://10.0.0.1:9100/metrics".into(),
        labels: [
            ("instance".to_string(), "10.0.0.1:9100".to_string()),
            ("job".to_string(), "node".to_string()),
        ]
        .into_iter()
        .collect(),
        identity: 42,
        interval: Duration::from_secs(10),
        timeout: Duration::from_secs(10),
    };
    state.targets.add(&target);
    let placement = || epicenter_store::rows::Placement::of(&target.labels, &Default::default());
    let mut up = skipped_outcome(&target, placement(), 1_780_000_000_000, Duration::ZERO, 1);
    up.report.skipped = false;
    up.report.up = true;
    up.report.error = None;
    state.telemetry.observe(&up);
    state.targets.observe(&up);
    for slot in 1..=3 {
        let skipped = skipped_outcome(
            &target,
            placement(),
            1_780_000_000_000 + slot * 10_000,
            Duration::from_secs(25),
            1,
        );
        state.telemetry.observe(&skipped);
        state.targets.observe(&skipped);
    }
    let base = serve(state).await;
    let (_, body) = scrape(&base, None).await;
    let metric = |name: &str, labels: &[(&str, &str)]| value(&body, FormatChoice::Text, name, labels);
    assert_eq!(metric("epicenter_scrapes_skipped_total", &[("job", "node")]), Some(3.0));
    assert_eq!(
        metric("epicenter_scrapes_total", &[("job", "node"), ("result", "up")]),
        Some(1.0)
    );
    assert_eq!(
        metric("epicenter_scrapes_total", &[("job", "node"), ("result", "down")]),
        None
    );
    assert_eq!(
        metric(
            "epicenter_target_up",
            &[("scrape_job", "node"), ("target_instance", "10.0.0.1:9100")]
        ),
        Some(1.0)
    );
}

/// Every metric family epicenter renders (with a notifier configured) has its row in
/// docs/telemetry.md, under its own name.
#[tokio::test]
async fn every_own_metric_is_documented() {
    let (_stop, shutdown) = watch::channel(false);
    let state = state(Notifiers::start(
        &[notifier("pager", NotifierKind::Webhook, "http://127.0.0.1:9/")],
        AlertSource::default(),
        shutdown,
    ));
    let body = state.telemetry.render().unwrap();
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/telemetry.md")).unwrap();
    let families: std::collections::BTreeSet<&str> = body
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|name| name.starts_with("epicenter_"))
        .collect();
    assert!(
        families.contains("epicenter_detect_sample_rows_read_total"),
        "{families:?}"
    );
    let missing: Vec<&&str> = families
        .iter()
        .filter(|name| !docs.contains(&format!("`{name}`")))
        .collect();
    assert!(missing.is_empty(), "not in docs/telemetry.md: {missing:?}");
}
