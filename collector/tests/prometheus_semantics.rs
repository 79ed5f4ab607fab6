//! Prometheus's semantics where they are the contract (issue 16, "What was measured"): each
//! test is a regression test for a defect found on 51ce296, checked against a test exporter on
//! 127.0.0.1 or against the parser, with values computed here from the bodies.
//!
//! * metric relabeling sees the target's labels (Prometheus attaches them first);
//! * the same series twice in one body keeps the first sample and counts the rest;
//! * two targets relabelled to the same labels are an error naming both, not one series
//!   alternating between their values;
//! * an exemplar that cannot be read drops the exemplar, not the scrape;
//! * torn histograms are flagged in both formats, and an OpenMetrics `+Inf` bucket listed first
//!   is not "missing";
//! * the blackbox pattern, as its documentation writes it (port-less targets), gives one
//!   series set per probed target.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use axum::routing::get;
use axum::Router;
use epicenter_collector::config::{jobs_from_yaml, Job};
use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Rule, Validation};
use epicenter_collector::scrape::{ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::{static_target_problems, targets_for_job};
use epicenter_config::Problems;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{Labels, ScrapeOutcome};

/// A body where `a` appears twice at the scrape's time, `b{x="1"}` twice (labels in another
/// order the second time), and `c` twice with labels that `labeldrop: x` makes equal.
const DUPLICATES: &str = "a 1\na 2\nb{x=\"1\",y=\"2\"} 3\nb{y=\"2\",x=\"1\"} 4\nc{x=\"1\"} 5\nc{x=\"2\"} 6\n";

/// A body whose samples are stamped around the wall clock now: 9 minutes ahead and 59
/// behind (kept), 11 minutes and ten years ahead and 61 minutes behind (refused), and one
/// without a timestamp.
fn skewed_body() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let minute = 60_000;
    let ten_years = 10 * 365 * 24 * 60 * minute;
    format!(
        "kept_ahead 1 {}\nkept_behind 2 {}\nrefused_ahead 3 {}\nrefused_far 4 {}\nrefused_old 5 {}\nnow 6\n",
        now + 9 * minute,
        now - 59 * minute,
        now + 11 * minute,
        now + ten_years,
        now - 61 * minute
    )
}

async fn exporter() -> String {
    let app = Router::new()
        .route("/metrics", get(|| async { "m{pod=\"p-1\"} 7\nother 8\n" }))
        .route("/duplicates", get(|| async { DUPLICATES }))
        .route("/skewed", get(|| async { skewed_body() }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

fn job(address: &str, path: &str, extra: &str) -> Job {
    let yaml = format!(
        "scrape_configs:\n  - job_name: test\n    metrics_path: {path}\n    static_configs:\n      - targets: ['{address}']\n        labels: {{dc: dc-1}}\n{extra}"
    );
    jobs_from_yaml(&yaml).unwrap().remove(0)
}

async fn scrape(address: &str, path: &str, extra: &str) -> ScrapeOutcome {
    let job = job(address, path, extra);
    let (targets, _) = targets_for_job(&job);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Labels::new(),
        ..Default::default()
    };
    let outcome = Scraper::new()
        .unwrap()
        .scrape(&targets[0], &job, &context, &mut TargetState::default())
        .await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);
    outcome
}

/// A stored row as (name, labels in name order, value).
type Row = (String, Vec<(String, String)>, f64);

/// The body's rows (not the five synthetic series).
fn body_rows(outcome: &ScrapeOutcome) -> Vec<Row> {
    let synthetic = [
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
    ];
    outcome
        .rows
        .iter()
        .filter(|row| !synthetic.contains(&row.series.name.as_str()))
        .map(|row| {
            let labels = row
                .series
                .labels
                .iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            (row.series.name.clone(), labels, row.value)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_relabeling_runs_after_the_target_labels_are_attached() {
    let address = exporter().await;
    // labeldrop of instance|pod: on 51ce296 `instance` came back after the relabeling.
    let dropped = scrape(
        &address,
        "/metrics",
        "    metric_relabel_configs:\n      - {action: labeldrop, regex: 'instance|pod'}\n",
    )
    .await;
    let pairs = |labels: &[(&str, &str)]| -> Vec<(String, String)> {
        labels.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    };
    assert_eq!(
        body_rows(&dropped),
        vec![
            ("m".to_string(), pairs(&[("dc", "dc-1"), ("job", "test")]), 7.0),
            ("other".to_string(), pairs(&[("dc", "dc-1"), ("job", "test")]), 8.0),
        ]
    );
    // keep on job: on 51ce296 it dropped everything, since `job` was not there yet.
    let kept = scrape(
        &address,
        "/metrics",
        "    metric_relabel_configs:\n      - {source_labels: [job, __name__], regex: 'test;m', action: keep}\n",
    )
    .await;
    let rows = body_rows(&kept);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].0.as_str(), rows[0].2), ("m", 7.0));
    assert_eq!(kept.report.samples_scraped, 2);
    assert_eq!(kept.report.samples_post_metric_relabeling, 1);
    // Relabeling may rewrite a target label: dc from the target, renamed.
    let renamed = scrape(
        &address,
        "/metrics",
        "    metric_relabel_configs:\n      - {source_labels: [dc], target_label: zone}\n      - {action: labeldrop, regex: dc}\n",
    )
    .await;
    assert!(body_rows(&renamed).iter().all(|(_, labels, _)| labels
        .contains(&("zone".to_string(), "dc-1".to_string()))
        && !labels.iter().any(|(name, _)| name == "dc")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_series_twice_in_a_body_keeps_the_first_sample_and_counts_the_rest() {
    let address = exporter().await;
    let outcome = scrape(&address, "/duplicates", "").await;
    let rows = body_rows(&outcome);
    let value_of = |name: &str| -> Vec<f64> {
        rows.iter()
            .filter(|(row_name, _, _)| row_name == name)
            .map(|(_, _, value)| *value)
            .collect()
    };
    // First of each: a=1, b{x=1,y=2}=3; c's two label sets are two series.
    assert_eq!(value_of("a"), vec![1.0]);
    assert_eq!(value_of("b"), vec![3.0]);
    assert_eq!(value_of("c"), vec![5.0, 6.0]);
    assert_eq!(outcome.report.samples_scraped, 6);
    assert_eq!(outcome.report.samples_duplicate, 2);
    // Metric relabeling that makes c's two series one: the second becomes a duplicate too.
    let merged = scrape(
        &address,
        "/duplicates",
        "    metric_relabel_configs:\n      - {action: labeldrop, regex: x}\n",
    )
    .await;
    let merged_rows = body_rows(&merged);
    let c: Vec<f64> = merged_rows
        .iter()
        .filter(|(name, _, _)| name == "c")
        .map(|(_, _, value)| *value)
        .collect();
    assert_eq!(c, vec![5.0]);
    assert_eq!(merged.report.samples_duplicate, 3);
    // Every stored (series, timestamp) is unique.
    let mut keys: Vec<(u64, i64)> = merged
        .rows
        .iter()
        .map(|row| (row.series.id, row.timestamp_ms))
        .collect();
    let before = keys.len();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), before);
}

#[test]
fn two_targets_relabelled_to_the_same_labels_are_an_error_naming_both() {
    let yaml = "scrape_configs:
  - job_name: redis
    static_configs:
      - targets: ['10.0.0.1:9121', '10.0.0.2:9121', '10.0.0.3:9121']
    relabel_configs:
      - {source_labels: [__address__], regex: '10.0.0.[12]:9121', target_label: instance, replacement: shared}
";
    let job = jobs_from_yaml(yaml).unwrap().remove(0);
    let (targets, dropped) = targets_for_job(&job);
    let instances: Vec<&str> = targets.iter().map(|target| target.instance()).collect();
    assert_eq!(instances, vec!["shared", "10.0.0.3:9121"]);
    assert_eq!(targets[0].url, "http://10.0.0.1:9121/metrics");
    assert_eq!(dropped, 0);
    let mut problems = Problems::default();
    static_target_problems(std::slice::from_ref(&job), &mut problems);
    let errors = problems.into_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "scrape_configs[0].static_configs[0].targets[1]");
    for part in [
        "http://10.0.0.1:9121/metrics",
        "http://10.0.0.2:9121/metrics",
        "instance=\"shared\"",
    ] {
        assert!(errors[0].message.contains(part), "{part}: {}", errors[0].message);
    }
}

/// The multi-target exporter pattern: one address listed in two groups with another
/// `__param_target` each is two targets, not "listed twice".
#[test]
fn one_address_with_other_parameters_is_another_target() {
    let yaml = "scrape_configs:
  - job_name: blackbox
    metrics_path: /probe
    static_configs:
      - targets: ['127.0.0.1:9115']
        labels: {__param_target: 'a.example'}
      - targets: ['127.0.0.1:9115']
        labels: {__param_target: 'b.example'}
    relabel_configs:
      - {source_labels: [__param_target], target_label: instance}
";
    let jobs = jobs_from_yaml(yaml).unwrap_or_else(|errors| panic!("{errors:?}"));
    let mut problems = Problems::default();
    static_target_problems(&jobs, &mut problems);
    assert!(problems.is_empty(), "{:?}", problems.into_errors());
    let (targets, _) = targets_for_job(&jobs[0]);
    let urls: Vec<&str> = targets.iter().map(|target| target.url.as_str()).collect();
    assert_eq!(
        urls,
        vec![
            "http://127.0.0.1:9115/probe?target=a.example",
            "http://127.0.0.1:9115/probe?target=b.example"
        ]
    );
}

/// The blackbox pattern exactly as blackbox_exporter's documentation writes it: port-less
/// probe targets in `static_configs`, relabelled into `__param_target` and `instance`, and
/// `__address__` set to the one exporter. Three targets give three series sets, each with
/// the probe answer for its own target, and `module` sent as a parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_exporter_probed_for_three_targets_gives_three_series_sets() {
    use axum::extract::Query;
    use std::collections::HashMap;
    // The probe's answer depends on the target and module asked for.
    let status_of = |target: &str| 200 + 100 * target.len() as u32 % 7;
    let app = Router::new().route(
        "/probe",
        get(move |Query(query): Query<HashMap<String, String>>| async move {
            let target = query.get("target").cloned().unwrap_or_default();
            let module = query.get("module").cloned().unwrap_or_default();
            format!(
                "probe_success 1\nprobe_http_status_code {}\nprobe_module_info{{module=\"{module}\"}} 1\n",
                status_of(&target)
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let exporter = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let yaml = format!(
        "scrape_configs:
  - job_name: blackbox
    metrics_path: /probe
    params:
      module: [http_2xx]
    static_configs:
      - targets: [prometheus.example, 'grafana.example:3000', '[2001:db8::1]']
    relabel_configs:
      - source_labels: [__address__]
        target_label: __param_target
      - source_labels: [__param_target]
        target_label: instance
      - target_label: __address__
        replacement: '{exporter}'
"
    );
    let jobs = jobs_from_yaml(&yaml).unwrap_or_else(|errors| panic!("{errors:?}"));
    let job = &jobs[0];
    let (targets, dropped) = targets_for_job(job);
    assert_eq!((targets.len(), dropped), (3, 0));
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Labels::new(),
        ..Default::default()
    };
    let scraper = Scraper::new().unwrap();
    let mut sets = Vec::new();
    for target in &targets {
        let outcome = scraper.scrape(target, job, &context, &mut TargetState::default()).await;
        assert!(outcome.report.up, "{:?}", outcome.report.error);
        let instance = target.labels["instance"].clone();
        let status = outcome
            .rows
            .iter()
            .find(|row| row.series.name == "probe_http_status_code")
            .unwrap();
        assert_eq!(status.series.labels["instance"], instance);
        assert_eq!(status.series.labels["job"], "blackbox");
        assert_eq!(status.value, f64::from(status_of(&instance)), "{instance}");
        let module = outcome
            .rows
            .iter()
            .find(|row| row.series.name == "probe_module_info")
            .unwrap();
        assert_eq!(module.series.labels["module"], "http_2xx");
        sets.push(instance);
    }
    sets.sort();
    assert_eq!(
        sets,
        vec!["[2001:db8::1]", "grafana.example:3000", "prometheus.example"],
        "the listed targets, as listed (Prometheus adds no port to a __param_target)"
    );
    // The same job without the __address__ rewrite scrapes the listed hosts themselves,
    // with the scheme's default port added after relabeling (Prometheus 2.42).
    let direct = yaml.replace(
        &format!("      - target_label: __address__\n        replacement: '{exporter}'\n"),
        "",
    );
    let jobs = jobs_from_yaml(&direct).unwrap();
    let (targets, _) = targets_for_job(&jobs[0]);
    let mut urls: Vec<&str> = targets.iter().map(|target| target.url.as_str()).collect();
    urls.sort_unstable();
    assert_eq!(
        urls,
        vec![
            "http://[2001:db8::1]:80/probe?module=http_2xx&target=%5B2001%3Adb8%3A%3A1%5D",
            "http://grafana.example:3000/probe?module=http_2xx&target=grafana.example%3A3000",
            "http://prometheus.example:80/probe?module=http_2xx&target=prometheus.example",
        ]
    );
}

fn openmetrics(validation: Validation) -> ParseOptions {
    ParseOptions {
        format: FormatChoice::OpenMetrics,
        validation,
    }
}

#[test]
fn an_unreadable_exemplar_drops_the_exemplar_not_the_scrape() {
    let body = b"# TYPE a counter\na_total 1 # x 1\n# TYPE b counter\nb_total 2 # {id=\"7\"} 0.5\n# EOF\n";
    let exposition = parse(body, openmetrics(Validation::Prometheus)).unwrap();
    let values: Vec<(&str, f64, bool)> = exposition
        .samples
        .iter()
        .map(|sample| (sample.name.as_ref(), sample.value, sample.exemplar.is_some()))
        .collect();
    assert_eq!(values, vec![("a_total", 1.0, false), ("b_total", 2.0, true)]);
    assert_eq!(exposition.warnings.len(), 1, "{:?}", exposition.warnings);
    let warning = &exposition.warnings[0];
    assert_eq!((warning.line, warning.column, warning.rule), (2, 11, Rule::Exemplar));
    // The readable exemplar's labels are intact.
    let exemplar = exposition.samples[1].exemplar.unwrap();
    let labels = exposition.labels_in(exemplar.labels);
    assert_eq!((labels[0].name.as_ref(), labels[0].value.as_ref()), ("id", "7"));
    assert!(parse(body, openmetrics(Validation::Strict)).is_err());
}

#[test]
fn torn_histograms_are_flagged_in_both_formats() {
    // A bucket listed after +Inf, in text 0.0.4 (accepted silently on 51ce296) and OpenMetrics.
    let text = b"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_bucket{le=\"5\"} 3\nh_sum 1\nh_count 2\n";
    let om = b"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_bucket{le=\"5\"} 3\nh_sum 1\nh_count 2\n# EOF\n";
    for (format, body) in [(FormatChoice::Text, &text[..]), (FormatChoice::OpenMetrics, &om[..])] {
        let options = |validation| ParseOptions { format, validation };
        let exposition = parse(body, options(Validation::Prometheus)).unwrap();
        let torn: Vec<(u32, Rule)> = exposition
            .warnings
            .iter()
            .filter(|warning| warning.message.contains("torn histogram"))
            .map(|warning| (warning.line, warning.rule))
            .collect();
        assert_eq!(
            torn,
            vec![(4, Rule::HistogramStructure)],
            "{format:?}: {:?}",
            exposition.warnings
        );
        assert!(parse(body, options(Validation::Strict)).is_err(), "{format:?}");
    }
    // Text: a +Inf bucket that disagrees with _count, and buckets without +Inf, per metric
    // even when another metric's samples come between.
    let text = b"# TYPE h histogram\nh_bucket{p=\"a\",le=\"1\"} 1\nh_bucket{p=\"b\",le=\"1\"} 1\nh_bucket{p=\"a\",le=\"+Inf\"} 4\nh_count{p=\"a\"} 5\nh_sum{p=\"a\"} 2\n";
    let exposition = parse(
        text,
        ParseOptions {
            format: FormatChoice::Text,
            validation: Validation::Prometheus,
        },
    )
    .unwrap();
    let messages: Vec<String> = exposition.warnings.iter().map(|warning| warning.to_string()).collect();
    assert_eq!(
        messages,
        vec![
            "2:1: histogram 'h' count 5 differs from the +Inf bucket 4".to_string(),
            "3:1: histogram 'h' has no +Inf bucket".to_string(),
        ]
    );
}

#[test]
fn an_openmetrics_inf_bucket_listed_first_is_out_of_order_not_missing() {
    let body = b"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 2\n# EOF\n";
    let exposition = parse(body, openmetrics(Validation::Prometheus)).unwrap();
    let messages: Vec<String> = exposition.warnings.iter().map(|warning| warning.to_string()).collect();
    assert!(
        messages.iter().all(|message| !message.contains("no +Inf bucket")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|message| message.starts_with("3:1: buckets of 'h' out of order")),
        "{messages:?}"
    );
}

/// A sample stamped more than 10 minutes after the scrape or more than an hour before it is
/// refused and counted by reason (Prometheus's `storage.ErrOutOfBounds`), counted as kept by
/// relabeling as Prometheus counts it, and the scrape stays up; the others are stored with
/// their own timestamps.
#[tokio::test]
async fn samples_stamped_out_of_bounds_are_refused_and_counted() {
    let address = exporter().await;
    let outcome = scrape(&address, "/skewed", "").await;
    assert_eq!(outcome.report.samples_out_of_bounds, [2, 1]);
    assert_eq!(outcome.report.samples_scraped, 6);
    assert_eq!(outcome.report.samples_post_metric_relabeling, 6);
    let names: Vec<String> = body_rows(&outcome).into_iter().map(|(name, _, _)| name).collect();
    assert_eq!(names, ["kept_ahead", "kept_behind", "now"]);
    let scrape_ms = outcome.report.timestamp_ms;
    let time_of = |name: &str| {
        outcome
            .rows
            .iter()
            .find(|row| row.series.name == name)
            .unwrap()
            .timestamp_ms
    };
    assert_eq!(time_of("now"), scrape_ms);
    let ahead = time_of("kept_ahead") - scrape_ms;
    assert!((9 * 60_000..10 * 60_000).contains(&ahead), "{ahead}");
    let behind = scrape_ms - time_of("kept_behind");
    assert!((58 * 60_000..=59 * 60_000).contains(&behind), "{behind}");
}
