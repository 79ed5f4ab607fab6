//! Scrape behaviour against test HTTP servers on 127.0.0.1: success, OpenMetrics and gzip,
//! timeouts, 5xx, malformed and oversized bodies, limits, label handling, and a failing
//! target leaving the others untouched.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use epicenter_collector::config::{jobs_from_yaml, Job};
use epicenter_collector::scrape::{run_target, ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{series_id, Labels, ScrapeOutcome};
use tokio::sync::{mpsc, watch};

const TEXT_BODY: &str = "\
# HELP redis_connected_clients Number of client connections
# TYPE redis_connected_clients gauge
redis_connected_clients 48
# TYPE redis_commands_total counter
redis_commands_total{cmd=\"get\"} 1234
redis_commands_total{cmd=\"set\"} 56
# TYPE go_goroutines gauge
go_goroutines 12
";

/// The exposition timestamp the `/om` route prints, in Unix milliseconds: thirty seconds
/// before the test started plus 250 ms, so it lies inside the collector's sample bounds
/// (at most one hour behind the scrape) and differs from the scrape's own time.
static OPENMETRICS_STAMP_MS: std::sync::LazyLock<i64> = std::sync::LazyLock::new(|| {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (now.as_secs() as i64 - 30) * 1000 + 250
});

/// An OpenMetrics histogram whose samples carry [`OPENMETRICS_STAMP_MS`] (in seconds, as
/// the OpenMetrics text format writes timestamps).
fn openmetrics_body() -> String {
    let stamp = format!("{}.{:03}", *OPENMETRICS_STAMP_MS / 1000, *OPENMETRICS_STAMP_MS % 1000);
    format!(
        "# TYPE lettuce_command_completion_seconds histogram\n\
lettuce_command_completion_seconds_bucket{{le=\"0.01\"}} 3 {stamp}\n\
lettuce_command_completion_seconds_bucket{{le=\"+Inf\"}} 5 {stamp}\n\
lettuce_command_completion_seconds_count 5 {stamp}\n\
lettuce_command_completion_seconds_sum 0.02 {stamp}\n\
# EOF\n"
    )
}

fn gzip(text: &str) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).unwrap();
    encoder.finish().unwrap()
}

/// Starts the test exporter and returns its `host:port`.
async fn exporter() -> String {
    let app = Router::new()
        .route(
            "/metrics",
            get(|| async { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], TEXT_BODY) }),
        )
        .route(
            "/om",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0")],
                    openmetrics_body(),
                )
            }),
        )
        .route(
            "/gzip",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain"), (header::CONTENT_ENCODING, "gzip")],
                    gzip(TEXT_BODY),
                )
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                TEXT_BODY
            }),
        )
        .route(
            "/error",
            get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "down for maintenance") }),
        )
        .route("/malformed", get(|| async { "ok 1\nbroken{a=\"b\" 2\n" }))
        .route("/repeated-label", get(|| async { "ok 1\n  m{a=\"1\",a=\"2\"} 2\n" }))
        .route("/big", get(|| async { "x 1\n".repeat(300_000) }))
        .route(
            "/bomb",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain"), (header::CONTENT_ENCODING, "gzip")],
                    bomb().to_vec(),
                )
            }),
        )
        .route(
            "/long-labels",
            get(|| async {
                format!(
                    "m{{short=\"v\"}} 1\nm{{{}=\"v\",value=\"{}\"}} 2\n",
                    "n".repeat(40),
                    "v".repeat(300)
                )
            }),
        )
        .route(
            "/accept",
            get(|headers: HeaderMap| async move {
                let accept = headers
                    .get(header::ACCEPT)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                format!("accept_seen{{value=\"{}\"}} 1\n", accept.replace('"', "'"))
            }),
        )
        .route(
            "/changing",
            get(|| async {
                static CALLS: AtomicU64 = AtomicU64::new(0);
                let call = CALLS.fetch_add(1, Ordering::SeqCst);
                format!(
                    "requests_total{{path=\"/a\"}} {call}\ngo_goroutines {call}\nphase_info{{phase=\"{}\"}} 1\n",
                    call % 2
                )
            }),
        )
        .route(
            "/clash",
            get(|| async { "app_info{job=\"app\",instance=\"inner\",version=\"1.2\"} 1\n" }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

/// 64 MiB of samples in a few hundred KiB of gzip: the body's real size shows only as it is
/// decompressed. Made once, before the first scrape asks for it.
fn bomb() -> &'static [u8] {
    static BOMB: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BOMB.get_or_init(|| gzip(&"a 1\n".repeat(16 * 1024 * 1024)))
}

/// A gzip stream that never ends: the gzip header (RFC 1952, 2.3), then the same raw deflate
/// chunk forever. Each chunk is 1 MiB of `a 1\n` compressed to about 1 KiB and ended with a
/// full flush, which byte-aligns the output and resets the compressor's history (zlib's
/// `Z_FULL_FLUSH`), so the chunk is a valid continuation of itself. Returns its `host:port`.
async fn endless_gzip_exporter() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let data = "a 1\n".repeat(256 * 1024);
    let mut compress = flate2::Compress::new(flate2::Compression::best(), false);
    let mut chunk = Vec::with_capacity(64 * 1024);
    let status = compress
        .compress_vec(data.as_bytes(), &mut chunk, flate2::FlushCompress::Full)
        .unwrap();
    assert_eq!(status, flate2::Status::Ok);
    assert_eq!(
        compress.total_in(),
        data.len() as u64,
        "the whole MiB fits in one chunk"
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let chunk = Arc::new(chunk);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let chunk = Arc::clone(&chunk);
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\n\r\n";
                let gzip_header = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
                if stream.write_all(head).await.is_err() || stream.write_all(&gzip_header).await.is_err() {
                    return;
                }
                while stream.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    address
}

/// A target whose body never ends (no length, never closed); returns its `host:port`.
async fn endless_exporter() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
                    .await;
                let chunk = "a 1\n".repeat(16 * 1024);
                while stream.write_all(chunk.as_bytes()).await.is_ok() {}
            });
        }
    });
    address
}

fn job_for(address: &str, path: &str, extra: &str) -> Job {
    let yaml = format!(
        "scrape_configs:\n  - job_name: test\n    scrape_interval: 1s\n    scrape_timeout: 500ms\n    metrics_path: {path}\n    static_configs:\n      - targets: ['{address}']\n        labels: {{dc: dc-2, service: redis}}\n{extra}"
    );
    jobs_from_yaml(&yaml).unwrap().remove(0)
}

fn context() -> ScrapeContext {
    let external_labels: Labels = [("collector".to_string(), "test".to_string())].into_iter().collect();
    ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels,
        ..Default::default()
    }
}

async fn scrape_once(address: &str, path: &str, extra: &str) -> ScrapeOutcome {
    scrape_job(job_for(address, path, extra)).await
}

/// One scrape of `job`'s first target.
async fn scrape_job(job: Job) -> ScrapeOutcome {
    let (targets, _) = targets_for_job(&job);
    Scraper::new()
        .unwrap()
        .scrape(&targets[0], &job, &context(), &mut TargetState::default())
        .await
}

/// [`scrape_once`] with a 5 s timeout (10 s interval): for a limit that must trip before the
/// timeout however busy the machine is (decompressing 16 MiB took over 500 ms beside a busy
/// suite on 2 cores).
async fn scrape_patiently(address: &str, path: &str) -> ScrapeOutcome {
    let yaml = format!(
        "scrape_configs:\n  - job_name: test\n    scrape_interval: 10s\n    scrape_timeout: 5s\n    metrics_path: {path}\n    static_configs:\n      - targets: ['{address}']\n        labels: {{dc: dc-2, service: redis}}\n"
    );
    scrape_job(jobs_from_yaml(&yaml).unwrap().remove(0)).await
}

fn value_of(outcome: &ScrapeOutcome, name: &str) -> f64 {
    outcome
        .rows
        .iter()
        .find(|row| row.series.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_target_yields_its_samples_and_synthetic_series() {
    let address = exporter().await;
    let outcome = scrape_once(&address, "/metrics", "").await;
    let report = &outcome.report;
    assert!(report.up, "{:?}", report.error);
    assert_eq!(report.samples_scraped, 4);
    assert_eq!(report.samples_post_metric_relabeling, 4);
    assert_eq!(report.series_added, 4);
    assert_eq!(report.instance, address);
    assert_eq!(
        (report.placement.dc.as_str(), report.placement.host.as_str()),
        ("dc-2", "127.0.0.1")
    );
    assert_eq!(outcome.rows.len(), 4 + 5);
    let get = outcome
        .rows
        .iter()
        .find(|row| row.series.labels.get("cmd").map(String::as_str) == Some("get"))
        .unwrap();
    assert_eq!(get.series.name, "redis_commands_total");
    assert_eq!(get.value, 1234.0);
    for (label, value) in [
        ("job", "test"),
        ("instance", address.as_str()),
        ("dc", "dc-2"),
        ("service", "redis"),
        ("collector", "test"),
    ] {
        assert_eq!(get.series.labels.get(label).map(String::as_str), Some(value), "{label}");
    }
    assert_eq!(get.series.placement.service, "redis");
    assert_eq!(value_of(&outcome, "up"), 1.0);
    assert_eq!(value_of(&outcome, "scrape_samples_scraped"), 4.0);
    assert_eq!(value_of(&outcome, "scrape_series_added"), 4.0);
    assert!(value_of(&outcome, "scrape_duration_seconds") > 0.0);
    // Rows without exposition timestamps carry the scrape's start.
    assert!(outcome.rows.iter().all(|row| row.timestamp_ms == report.timestamp_ms));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openmetrics_timestamps_are_honoured_and_gzip_is_read() {
    let address = exporter().await;
    let outcome = scrape_once(&address, "/om", "").await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    let bucket = &outcome.rows[0];
    assert_eq!(bucket.series.name, "lettuce_command_completion_seconds_bucket");
    assert_eq!(bucket.timestamp_ms, *OPENMETRICS_STAMP_MS);
    let ignored = scrape_once(&address, "/om", "    honor_timestamps: false\n").await;
    assert_eq!(ignored.rows[0].timestamp_ms, ignored.report.timestamp_ms);

    let gzipped = scrape_once(&address, "/gzip", "").await;
    assert!(gzipped.report.up, "{:?}", gzipped.report.error);
    assert_eq!(gzipped.report.samples_scraped, 4);

    let accept = scrape_once(&address, "/accept", "").await;
    let seen = accept.rows[0].series.labels.get("value").unwrap();
    assert!(seen.starts_with("application/openmetrics-text;version=1.0.0"), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_mark_the_target_down_with_the_reason() {
    let address = exporter().await;
    let cases = [
        ("/slow", "", "timed out after 500ms"),
        ("/error", "", "HTTP status 503 Service Unavailable"),
        (
            "/malformed",
            "",
            "invalid body: 2:14: expected ',' or '}' after a label",
        ),
        // Found when the new series' labels are read (the parse defers them), with the same
        // line and column as a full parse; nothing of the body is kept.
        ("/repeated-label", "", "invalid body: 2:11: duplicate label name 'a'"),
        (
            "/big",
            "    body_size_limit: 1MiB\n",
            "body larger than body_size_limit (1048576 bytes)",
        ),
        (
            "/metrics",
            "    sample_limit: 3\n",
            "sample_limit exceeded: more than 3 samples after metric relabeling (the body has 4)",
        ),
        ("/metrics", "    label_limit: 5\n", "label_limit exceeded"),
        ("/nowhere", "", "HTTP status 404"),
    ];
    for (path, extra, reason) in cases {
        let outcome = scrape_once(&address, path, extra).await;
        let error = outcome.report.error.clone().unwrap_or_default();
        assert!(!outcome.report.up, "{path}");
        assert!(error.contains(reason), "{path}: {error}");
        // Only the synthetic series are written, with up = 0.
        assert_eq!(outcome.rows.len(), 5, "{path}");
        assert_eq!(value_of(&outcome, "up"), 0.0);
    }
    // Connection refused: a port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap().to_string();
    drop(listener);
    let outcome = scrape_once(&closed, "/metrics", "").await;
    assert!(!outcome.report.up);
    assert!(outcome.report.error.unwrap().contains("request failed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_relabeling_and_label_clashes() {
    let address = exporter().await;
    let relabel = "    metric_relabel_configs:\n      - {source_labels: [__name__], regex: 'go_.*', action: drop}\n";
    let outcome = scrape_once(&address, "/metrics", relabel).await;
    assert_eq!(outcome.report.samples_scraped, 4);
    assert_eq!(outcome.report.samples_post_metric_relabeling, 3);
    assert!(outcome.rows.iter().all(|row| row.series.name != "go_goroutines"));

    let clash = scrape_once(&address, "/clash", "").await;
    let row = &clash.rows[0];
    assert_eq!(row.series.labels.get("job").map(String::as_str), Some("test"));
    assert_eq!(row.series.labels.get("exported_job").map(String::as_str), Some("app"));
    assert_eq!(
        row.series.labels.get("exported_instance").map(String::as_str),
        Some("inner")
    );
    let honored = scrape_once(&address, "/clash", "    honor_labels: true\n").await;
    assert_eq!(
        honored.rows[0].series.labels.get("job").map(String::as_str),
        Some("app")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_added_counts_only_new_series() {
    let address = exporter().await;
    let job = job_for(&address, "/metrics", "");
    let (targets, _) = targets_for_job(&job);
    let scraper = Scraper::new().unwrap();
    let mut state = TargetState::default();
    let first = scraper.scrape(&targets[0], &job, &context(), &mut state).await;
    let second = scraper.scrape(&targets[0], &job, &context(), &mut state).await;
    assert_eq!(first.report.series_added, 4);
    assert_eq!(second.report.series_added, 0);
}

/// The scrape cache reuses series between scrapes: values stay per scrape, dropped series stay
/// dropped, series that come and go count as added each time they return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_series_match_freshly_built_ones() {
    let address = exporter().await;
    let relabel = "    metric_relabel_configs:\n      - {source_labels: [__name__], regex: 'go_.*', action: drop}\n";
    let job = job_for(&address, "/changing", relabel);
    let (targets, _) = targets_for_job(&job);
    let scraper = Scraper::new().unwrap();
    let mut state = TargetState::default();
    let mut previous_call = None;
    for round in 0..4 {
        let outcome = scraper.scrape(&targets[0], &job, &context(), &mut state).await;
        assert!(outcome.report.up, "{:?}", outcome.report.error);
        assert_eq!(outcome.report.samples_scraped, 3);
        assert_eq!(outcome.report.samples_post_metric_relabeling, 2, "round {round}");
        let requests = outcome
            .rows
            .iter()
            .find(|row| row.series.name == "requests_total")
            .unwrap();
        let call = requests.value as u64;
        if let Some(previous) = previous_call {
            assert_eq!(call, previous + 1, "each scrape brings its own value");
        }
        previous_call = Some(call);
        let phase = outcome.rows.iter().find(|row| row.series.name == "phase_info").unwrap();
        let mut expected: Labels = [
            ("phase", (call % 2).to_string()),
            ("job", "test".to_string()),
            ("instance", address.clone()),
            ("dc", "dc-2".to_string()),
            ("service", "redis".to_string()),
            ("collector", "test".to_string()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
        assert_eq!(phase.series.labels, expected, "round {round}");
        assert_eq!(phase.series.id, series_id("phase_info", &expected));
        expected.remove("phase");
        expected.insert("path".to_string(), "/a".to_string());
        assert_eq!(requests.series.labels, expected);
        // Round 0 sees both series first; later rounds bring back the other phase only.
        let added = if round == 0 { 2 } else { 1 };
        assert_eq!(outcome.report.series_added, added, "round {round}");
        assert!(outcome.rows.iter().all(|row| row.series.name != "go_goroutines"));
    }
}

/// How long the tests against live servers wait for what they check: far above an idle
/// machine's needs, so they hold on a busy one.
const WAIT: Duration = Duration::from_secs(90);

/// A target whose every scrape times out (its endpoint answers after 3 s) does not hold the
/// good one back: the good target keeps being scraped, up, on its own schedule, while the bad
/// one is reported down each time. The test waits for the counts; it does not count what fits
/// in a wall-clock window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_target_leaves_the_others_scraping() {
    let address = exporter().await;
    let yaml = format!(
        "scrape_configs:\n  - job_name: good\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n    static_configs: [{{targets: ['{address}']}}]\n  - job_name: bad\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n    metrics_path: /slow\n    static_configs: [{{targets: ['{address}']}}]\n"
    );
    let jobs = jobs_from_yaml(&yaml).unwrap();
    let (sender, mut receiver) = mpsc::channel(64);
    let (stop, shutdown) = watch::channel(false);
    let scraper = Scraper::new().unwrap();
    let context = Arc::new(context());
    for job in jobs {
        let job = Arc::new(job);
        for target in targets_for_job(&job).0 {
            tokio::spawn(run_target(
                target,
                job.clone(),
                scraper.clone(),
                context.clone(),
                sender.clone(),
                shutdown.clone(),
            ));
        }
    }
    drop(sender);
    let mut good_up = 0;
    let mut bad_down = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    while good_up < 5 || bad_down < 4 {
        let Ok(Some(outcome)) = tokio::time::timeout_at(deadline, receiver.recv()).await else {
            panic!("within {WAIT:?}: good target up {good_up} times, bad target down {bad_down} times");
        };
        match (outcome.report.job.as_str(), outcome.report.up) {
            ("good", true) => good_up += 1,
            ("bad", false) => {
                bad_down += 1;
                let error = outcome.report.error.clone().unwrap_or_default();
                assert!(error.contains("timed out"), "{error}");
            }
            other => panic!("unexpected outcome {other:?}: {:?}", outcome.report.error),
        }
    }
    stop.send(true).unwrap();
}

/// The next scrape outcome, before `deadline`; panics when none comes.
async fn next_outcome(receiver: &mut mpsc::Receiver<ScrapeOutcome>, deadline: tokio::time::Instant) -> ScrapeOutcome {
    tokio::time::timeout_at(deadline, receiver.recv())
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no scrape outcome within {WAIT:?}"))
}

/// Issue 3 acceptance: killing one target mid-run marks only that target down, with the
/// error, and its `up` goes to 0 from the first scrape that starts after the kill, while the
/// other targets stay up. The targets are separate processes (Python's http.server serving a
/// file), so the kill is a real `kill -9`. "Within one interval" is held in scrapes (the
/// scrapes' own start times), not in how soon a busy machine delivers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_one_target_marks_only_it_down_within_one_interval() {
    let dir = std::env::temp_dir().join(format!("epicenter-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("metrics"), TEXT_BODY).unwrap();
    let mut servers = Vec::new();
    let mut addresses = Vec::new();
    for _ in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 (Debian's python3) serves the test targets");
        servers.push(child);
        addresses.push(format!("127.0.0.1:{port}"));
    }
    for address in &addresses {
        let ready = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            std::net::TcpStream::connect(address).is_ok()
        });
        assert!(ready, "{address} did not start");
    }
    let target_list: Vec<String> = addresses.iter().map(|address| format!("'{address}'")).collect();
    let yaml = format!(
        "scrape_configs:\n  - job_name: fleet\n    scrape_interval: 500ms\n    scrape_timeout: 400ms\n    static_configs: [{{targets: [{}]}}]\n",
        target_list.join(", ")
    );
    let job = Arc::new(jobs_from_yaml(&yaml).unwrap().remove(0));
    let (sender, mut receiver) = mpsc::channel(256);
    let (stop, shutdown) = watch::channel(false);
    let scraper = Scraper::new().unwrap();
    let context = Arc::new(context());
    for target in targets_for_job(&job).0 {
        tokio::spawn(run_target(
            target,
            job.clone(),
            scraper.clone(),
            context.clone(),
            sender.clone(),
            shutdown.clone(),
        ));
    }
    drop(sender);
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let victim = addresses[1].clone();
    let deadline = tokio::time::Instant::now() + WAIT;
    // Before the kill: every target up, twice.
    let mut before: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    while before.len() < 3 || before.values().any(|count| *count < 2) {
        let outcome = next_outcome(&mut receiver, deadline).await;
        assert!(
            outcome.report.up,
            "{} down before the kill: {:?}",
            outcome.report.instance, outcome.report.error
        );
        *before.entry(outcome.report.instance.clone()).or_default() += 1;
    }
    servers[1].kill().unwrap();
    servers[1].wait().unwrap();
    let killed_ms = now_ms();
    // After it: the victim's first scrape started after the kill is down (and so is every
    // later one); the others stay up for six more scrapes.
    let mut victim_down = 0;
    let mut others_up = 0;
    while victim_down < 2 || others_up < 6 {
        let outcome = next_outcome(&mut receiver, deadline).await;
        let report = &outcome.report;
        if report.instance != victim {
            assert!(report.up, "{} went down: {:?}", report.instance, report.error);
            others_up += 1;
        } else if report.timestamp_ms >= killed_ms {
            assert!(
                !report.up,
                "victim up in a scrape started {} ms after the kill",
                report.timestamp_ms - killed_ms
            );
            assert!(
                report.error.as_deref().unwrap_or("").contains("request failed"),
                "{:?}",
                report.error
            );
            let up = outcome.rows.iter().find(|row| row.series.name == "up").unwrap();
            assert_eq!(up.value, 0.0);
            victim_down += 1;
        }
        // A victim scrape that started before the kill may end either way.
    }
    stop.send(true).unwrap();
    for server in &mut servers {
        let _ = server.kill();
        let _ = server.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Limits hold by default: a gzip bomb (64 MiB decompressed) and a body that never ends fail
/// at the default 16 MiB instead of taking the memory; `body_size_limit: 0` turns the limit
/// off, and bodies under it are untouched. Label name and value lengths fail the scrape
/// when limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_by_default_and_bound_the_decompressed_body() {
    let address = exporter().await;
    let default_limit = format!(
        "body larger than body_size_limit ({} bytes)",
        epicenter_collector::config::DEFAULT_BODY_SIZE_LIMIT
    );
    assert_eq!(epicenter_collector::config::DEFAULT_BODY_SIZE_LIMIT, 16 << 20);
    let compressed = bomb().len();
    assert!(compressed < 1 << 20, "the bomb is {compressed} bytes compressed");
    let bomb = scrape_patiently(&address, "/bomb").await;
    assert!(!bomb.report.up);
    assert!(
        bomb.report.error.as_deref().unwrap_or("").contains(&default_limit),
        "{:?}",
        bomb.report.error
    );
    let endless = scrape_patiently(&endless_exporter().await, "/metrics").await;
    assert!(
        endless.report.error.as_deref().unwrap_or("").contains(&default_limit),
        "{:?}",
        endless.report.error
    );
    // With the limit off, the timeout still bounds a body that decompresses forever:
    // decompression counts. (A finite bomb would test the machine's speed instead: a fast one
    // reads 64 MiB within the timeout.)
    let started = std::time::Instant::now();
    let unlimited = scrape_once(&endless_gzip_exporter().await, "/metrics", "    body_size_limit: 0\n").await;
    assert_eq!(unlimited.report.error.as_deref(), Some("scrape timed out after 500ms"));
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    // 300,000 samples (one series, repeated: duplicates count, as in Prometheus): over the
    // default sample_limit, the scrape fails naming it.
    let default_samples = scrape_once(&address, "/big", "").await;
    assert!(!default_samples.report.up);
    let error = default_samples.report.error.clone().unwrap_or_default();
    assert_eq!(
        error,
        "sample_limit exceeded: more than 50000 samples after metric relabeling (the body has 300000)"
    );
    // 1.2 MB: under the default body limit; and with the limit off.
    for extra in ["    sample_limit: 0\n", "    body_size_limit: 0\n    sample_limit: 0\n"] {
        let big = scrape_once(&address, "/big", extra).await;
        assert!(big.report.up, "{extra}: {:?}", big.report.error);
        assert_eq!(big.report.samples_scraped, 300_000);
    }
    let cases = [
        ("", None),
        (
            "    label_name_length_limit: 40\n    label_value_length_limit: 300\n",
            None,
        ),
        (
            "    label_name_length_limit: 39\n",
            Some("label_name_length_limit exceeded: series 'm' has a label name of 40 bytes > 39"),
        ),
        (
            "    label_value_length_limit: 299\n",
            Some("label_value_length_limit exceeded: series 'm' has a label value of 300 bytes > 299"),
        ),
    ];
    for (extra, error) in cases {
        let outcome = scrape_once(&address, "/long-labels", extra).await;
        assert_eq!(outcome.report.error.as_deref(), error, "{extra}");
        assert_eq!(outcome.report.up, error.is_none(), "{extra}");
    }
}

/// Issue 19 ("never skip a scrape silently"): a target whose outcomes cannot be handed on
/// (the channel to the writer is full for 2 s, ten 200 ms slots) scrapes late once and
/// records every slot that passed meanwhile as a skipped scrape: no samples, `up` false, an
/// error starting "skipped:", stamped on the schedule. Counted over the whole run, every slot
/// from the first report to the last is either a scrape or a skipped record (the count is
/// computed from the reports' own times, so a busy machine that runs late only adds records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_held_back_records_every_slot_it_missed() {
    let address = exporter().await;
    let yaml = format!(
        "scrape_configs:\n  - job_name: held\n    scrape_interval: 200ms\n    scrape_timeout: 150ms\n    static_configs: [{{targets: ['{address}']}}]\n"
    );
    let job = Arc::new(jobs_from_yaml(&yaml).unwrap().remove(0));
    let target = targets_for_job(&job).0.remove(0);
    let interval_ms = 200.0;
    // Room for one outcome: the target waits on the channel while the test does not read.
    let (sender, mut receiver) = mpsc::channel(1);
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(run_target(
        target,
        job,
        Scraper::new().unwrap(),
        Arc::new(context()),
        sender,
        shutdown,
    ));
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut reports = vec![next_outcome(&mut receiver, deadline).await];
    tokio::time::sleep(Duration::from_secs(2)).await;
    let drain_until = tokio::time::Instant::now() + Duration::from_millis(1500);
    while let Ok(Some(outcome)) = tokio::time::timeout_at(drain_until, receiver.recv()).await {
        reports.push(outcome);
    }
    stop.send(true).unwrap();

    let skipped: Vec<&ScrapeOutcome> = reports.iter().filter(|outcome| outcome.report.skipped).collect();
    // 2 s held = 10 slots; the one outcome in the channel and the one waiting to go in
    // account for two of them.
    assert!(
        skipped.len() >= 5,
        "only {} skipped records in {} reports",
        skipped.len(),
        reports.len()
    );
    for outcome in &skipped {
        let report = &outcome.report;
        assert!(outcome.rows.is_empty(), "a skipped slot has no samples");
        assert!(!report.up);
        let error = report.error.as_deref().unwrap_or_default();
        assert!(error.starts_with("skipped: epicenter was "), "{error}");
        assert_eq!(report.instance, address);
    }
    // Skipped slots lie on one schedule: whole intervals apart (1 ms of rounding).
    for pair in skipped.windows(2) {
        let gap = (pair[1].report.timestamp_ms - pair[0].report.timestamp_ms) as f64;
        let slots = (gap / interval_ms).round();
        assert!(
            slots >= 1.0 && (gap - slots * interval_ms).abs() <= 2.0,
            "skipped slots {gap} ms apart"
        );
    }
    let first = reports.iter().map(|outcome| outcome.report.timestamp_ms).min().unwrap();
    let last = reports.iter().map(|outcome| outcome.report.timestamp_ms).max().unwrap();
    let slots = ((last - first) as f64 / interval_ms).round() as i64 + 1;
    let recorded = reports.len() as i64;
    assert!(
        (recorded - slots).abs() <= 1,
        "{recorded} reports ({} scrapes, {} skipped) for {slots} slots from the first to the last",
        recorded - skipped.len() as i64,
        skipped.len()
    );
}

/// Issue 18's host join: a target whose body has node_exporter's `node_uname_info{nodename}`
/// and no host label is placed on that nodename (every series and its scrape row), not on the
/// host part of its address; a new nodename re-places every series at the next scrape; a host
/// label on the target wins; `placement.host_from_uname: false` keeps the address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_uname_info_places_a_target_on_its_nodename() {
    let body = Arc::new(std::sync::Mutex::new(String::new()));
    let served = Arc::clone(&body);
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let served = Arc::clone(&served);
            async move { served.lock().unwrap().clone() }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let uname = |name: &str| {
        format!("# TYPE node_load1 gauge\nnode_load1 0.5\n# TYPE node_uname_info gauge\nnode_uname_info{{machine=\"x86_64\",nodename=\"{name}\",sysname=\"Linux\"}} 1\n")
    };
    let hosts = |outcome: &ScrapeOutcome| -> std::collections::BTreeSet<String> {
        outcome
            .rows
            .iter()
            .map(|row| row.series.placement.host.clone())
            .collect()
    };
    let yaml = |labels: &str| {
        format!("scrape_configs:\n  - job_name: node\n    scrape_interval: 1s\n    scrape_timeout: 500ms\n    static_configs:\n      - targets: ['{address}']\n        labels: {{{labels}}}\n")
    };
    let job = jobs_from_yaml(&yaml("dc: dc-1")).unwrap().remove(0);
    let (targets, _) = targets_for_job(&job);
    let scraper = Scraper::new().unwrap();
    let mut state = TargetState::default();

    *body.lock().unwrap() = uname("web-7.dc-1");
    let first = scraper.scrape(&targets[0], &job, &context(), &mut state).await;
    assert!(first.report.up, "{:?}", first.report.error);
    assert_eq!(first.rows.len(), 2 + 5);
    assert_eq!(hosts(&first), ["web-7.dc-1".to_string()].into());
    assert_eq!(first.report.placement.host, "web-7.dc-1");
    // The same body again: the cached series keep the nodename.
    let again = scraper.scrape(&targets[0], &job, &context(), &mut state).await;
    assert_eq!(hosts(&again), ["web-7.dc-1".to_string()].into());
    // Renamed (a reimaged machine): every series is placed anew.
    *body.lock().unwrap() = uname("web-8.dc-1");
    let renamed = scraper.scrape(&targets[0], &job, &context(), &mut state).await;
    assert_eq!(hosts(&renamed), ["web-8.dc-1".to_string()].into());
    assert_eq!(renamed.report.placement.host, "web-8.dc-1");
    // A body that names another host but fails on a later series (a label name given twice,
    // found when that new series' labels are read) changes nothing: its `up = 0` rows and
    // the next good scrape stay on the host named before.
    *body.lock().unwrap() = uname("web-9.dc-1") + "node_load5{a=\"1\",a=\"2\"} 1\n";
    let failed = scraper.scrape(&targets[0], &job, &context(), &mut state).await;
    assert!(!failed.report.up);
    assert!(
        failed
            .report
            .error
            .as_deref()
            .unwrap_or("")
            .contains("duplicate label name 'a'"),
        "{:?}",
        failed.report.error
    );
    assert_eq!(hosts(&failed), ["web-8.dc-1".to_string()].into());
    *body.lock().unwrap() = uname("web-8.dc-1");
    let recovered = scraper.scrape(&targets[0], &job, &context(), &mut state).await;
    assert_eq!(hosts(&recovered), ["web-8.dc-1".to_string()].into());
    // Without node_uname_info the address's host, as before.
    *body.lock().unwrap() = "# TYPE node_load1 gauge\nnode_load1 0.5\n".to_string();
    let plain = scraper
        .scrape(&targets[0], &job, &context(), &mut TargetState::default())
        .await;
    assert_eq!(hosts(&plain), ["127.0.0.1".to_string()].into());

    // A host label on the target wins over the nodename.
    *body.lock().unwrap() = uname("web-7.dc-1");
    let labelled = jobs_from_yaml(&yaml("dc: dc-1, host: rack-4-slot-2"))
        .unwrap()
        .remove(0);
    let (labelled_targets, _) = targets_for_job(&labelled);
    let outcome = scraper
        .scrape(&labelled_targets[0], &labelled, &context(), &mut TargetState::default())
        .await;
    assert_eq!(hosts(&outcome), ["rack-4-slot-2".to_string()].into());
    // Turned off, the address's host.
    let mut off = context();
    off.placement.host_from_uname = false;
    let outcome = scraper
        .scrape(&targets[0], &job, &off, &mut TargetState::default())
        .await;
    assert_eq!(hosts(&outcome), ["127.0.0.1".to_string()].into());
    // A body speaking for several hosts (two nodenames: a federation, a Pushgateway) places
    // nothing on either; neither does a job that honors the body's labels.
    *body.lock().unwrap() = format!("{}node_uname_info{{nodename=\"beta\"}} 1\n", uname("alpha"));
    let outcome = scraper
        .scrape(&targets[0], &job, &context(), &mut TargetState::default())
        .await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    assert_eq!(hosts(&outcome), ["127.0.0.1".to_string()].into());
    *body.lock().unwrap() = uname("alpha");
    let honoring = jobs_from_yaml(&format!(
        "scrape_configs:\n  - job_name: federate\n    honor_labels: true\n    static_configs:\n      - targets: ['{address}']\n"
    ))
    .unwrap()
    .remove(0);
    let (honoring_targets, _) = targets_for_job(&honoring);
    let outcome = scraper
        .scrape(&honoring_targets[0], &honoring, &context(), &mut TargetState::default())
        .await;
    assert_eq!(hosts(&outcome), ["127.0.0.1".to_string()].into());
}
