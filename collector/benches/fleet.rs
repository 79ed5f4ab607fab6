//! Fleet benchmark (issue 3 acceptance): 200 local targets with 500 series each, scraped every
//! second for 60 s into the embedded store.
//!
//! The targets run in a child process (this binary re-executed with `EPICENTER_FLEET_SERVE`),
//! so the CPU time measured here — user + system time of this process from /proc/self/stat,
//! chDB's threads included — is epicenter's alone. A tap between the targets and the writer (as
//! `epicenter run` has) counts what the scrapes produced; at the end the benchmark checks that
//! the writer wrote exactly the rows the scrapes imply (500 body samples + 5 synthetic series
//! each, one `scrapes` row per scrape or skipped slot), that the store holds them (not with
//! the null sink), that every scrape was up or recorded as skipped, and that the `scrapes` rows
//! match the schedule (one per target per interval from its offset).
//!
//! Run: `cargo bench -p epicenter-collector --bench fleet` (needs `scripts/setup`).
//! `EPICENTER_FLEET_SINK=clickhouse` writes through the ClickHouse server sink to the
//! ClickHouse HTTP interface this process serves over the same engine; `=null` discards.
//! Storage experiments (for whoever tunes the engine's CPU next):
//! `EPICENTER_FLEET_BATCH_AGE=10s` (batch age, no row/byte limit). (The thin-layout
//! experiments of 2026-12-04 became the schema, and the rollup was dropped: docs/schema.md,
//! Cost.)
//! `EPICENTER_FLEET_SECONDS`, `EPICENTER_FLEET_TARGETS`, `EPICENTER_FLEET_SERIES` shrink it.

#![allow(clippy::unwrap_used, reason = "benchmark: a panic is a failed run")]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use epicenter_collector::config::jobs_from_yaml;
use epicenter_collector::scrape::{run_target, schedule_offset, ScrapeContext, Scraper};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::clickhouse::ClickHouseStore;
use epicenter_store::config::{ClickHouseConfig, PlacementConfig};
use epicenter_store::writer::{run_writer, Sink, SinkError, WriterStats};
use epicenter_store::{EmbeddedStore, Table};

/// Discards batches: with `EPICENTER_FLEET_SINK=null`, measures epicenter without chDB.
struct NullSink;

impl Sink for NullSink {
    async fn write(self: Arc<Self>, _table: Table, data: Arc<Vec<u8>>, _token: Arc<str>) -> Result<u64, SinkError> {
        std::hint::black_box(data);
        Ok(0)
    }
}
use tokio::sync::{mpsc, watch};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The body target `index` serves: `series` gauges with 4 labels, in text 0.0.4.
fn body(index: usize, series: usize) -> String {
    let mut text = String::with_capacity(series * 110);
    text.push_str(
        "# HELP fleet_pool_active_connections Connections in use\n# TYPE fleet_pool_active_connections gauge\n",
    );
    for number in 0..series {
        text.push_str(&format!(
            "fleet_pool_active_connections{{pool=\"pool-{}\",upstream=\"redis-{}:6379\",shard=\"{}\",target=\"{index}\"}} {}\n",
            number % 16,
            number % 12,
            number,
            (index * 7 + number * 13) % 97
        ));
    }
    text
}

/// Child mode: serve `targets` bodies on 127.0.0.1, print the ports, exit when stdin closes.
fn serve(targets: usize, series: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut ports = Vec::new();
        for index in 0..targets {
            let text = Arc::new(body(index, series));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            ports.push(listener.local_addr().unwrap().port().to_string());
            let app = axum::Router::new().route(
                "/metrics",
                axum::routing::get(move || {
                    let text = text.clone();
                    async move {
                        (
                            [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                            (*text).clone(),
                        )
                    }
                }),
            );
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        }
        println!("PORTS {}", ports.join(","));
        std::io::stdout().flush().unwrap();
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        })
        .await
        .unwrap();
    });
}

/// User + system CPU seconds of this process so far (/proc/self/stat fields 14 and 15).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    let ticks_per_second: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0);
    ticks / ticks_per_second
}

fn main() {
    if let Ok(spec) = std::env::var("EPICENTER_FLEET_SERVE") {
        let (targets, series) = spec.split_once(',').unwrap();
        serve(targets.parse().unwrap(), series.parse().unwrap());
        return;
    }
    if std::env::args().any(|argument| argument == "--list") {
        return; // `cargo test --benches` asks for a list
    }
    let targets = env_number("EPICENTER_FLEET_TARGETS", 200) as usize;
    let series = env_number("EPICENTER_FLEET_SERIES", 500) as usize;
    let seconds = env_number("EPICENTER_FLEET_SECONDS", 60);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("EPICENTER_FLEET_SERVE", format!("{targets},{series}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first_line)
        .unwrap();
    let ports: Vec<&str> = first_line.trim().strip_prefix("PORTS ").unwrap().split(',').collect();
    assert_eq!(ports.len(), targets);

    let target_list: Vec<String> = ports.iter().map(|port| format!("'127.0.0.1:{port}'")).collect();
    let yaml = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 900ms}}\nscrape_configs:\n  - job_name: fleet\n    static_configs:\n      - targets: [{}]\n        labels: {{dc: dc-1, service: pool}}\n",
        target_list.join(", ")
    );
    let job = Arc::new(jobs_from_yaml(&yaml).unwrap().remove(0));
    let data = std::env::temp_dir().join(format!("epicenter-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let store = Arc::new(EmbeddedStore::open(&data, "fleet").expect("embedded store (run scripts/setup)"));
    store.migrate(Duration::from_secs(86_400)).unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (targets_built, _) = targets_for_job(&job);
    let offsets: Vec<Duration> = targets_built
        .iter()
        .map(|target| schedule_offset(target.identity, job.interval))
        .collect();
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let stats = Arc::new(WriterStats::default());
    let tap = Arc::new(Tap::default());
    let elapsed = runtime.block_on(async {
        // Targets -> tap -> writer, as in `epicenter run` (its `observe` step between them):
        // the tap counts what the scrapes produced, so a null sink is checked as fully as a
        // store.
        let (sender, mut scraped) = mpsc::channel::<epicenter_store::ScrapeOutcome>(1024);
        let (to_writer, inbox) = mpsc::channel(1024);
        let tap_counts = tap.clone();
        let tap_task = tokio::spawn(async move {
            while let Some(outcome) = scraped.recv().await {
                tap_counts.note(&outcome);
                if to_writer.send(outcome).await.is_err() {
                    break;
                }
            }
        });
        let (stop, shutdown) = watch::channel(false);
        let null_sink = std::env::var("EPICENTER_FLEET_SINK").is_ok_and(|sink| sink == "null");
        let mut batching = epicenter_store::config::BatchingConfig::default();
        if let Ok(age) = std::env::var("EPICENTER_FLEET_BATCH_AGE") {
            batching.max_age = epicenter_config::PromDuration(epicenter_config::parse_duration(&age).unwrap());
            batching.max_rows = 10_000_000;
            batching.max_bytes = epicenter_config::ByteSize(1 << 30);
        }
        let sink = std::env::var("EPICENTER_FLEET_SINK").unwrap_or_default();
        let writer = if null_sink {
            tokio::spawn(run_writer(Arc::new(NullSink), batching.clone(), inbox, stats.clone()))
        } else if sink == "clickhouse" {
            // The ClickHouse server sink, over the ClickHouse HTTP interface served by this
            // process on the same engine (store::http): the HTTP path runs end to end.
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let router = epicenter_store::http::router(store.clone());
            tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
            let config = ClickHouseConfig {
                url,
                database: "fleet".into(),
                user: "default".into(),
                password_env: None,
                password_file: None,
                tls: None,
                cluster: None,
            };
            let server = Arc::new(ClickHouseStore::new(&config, None).unwrap());
            server.migrate(Duration::from_secs(86_400)).await.unwrap();
            tokio::spawn(run_writer(server, batching.clone(), inbox, stats.clone()))
        } else {
            tokio::spawn(run_writer(store.clone(), batching.clone(), inbox, stats.clone()))
        };
        let context = Arc::new(ScrapeContext {
            placement: PlacementConfig::default(),
            external_labels: Default::default(),
            ..Default::default()
        });
        let scraper = Scraper::new().unwrap();
        let begin = Instant::now();
        let tasks: Vec<_> = targets_built
            .into_iter()
            .map(|target| {
                tokio::spawn(run_target(
                    target,
                    job.clone(),
                    scraper.clone(),
                    context.clone(),
                    sender.clone(),
                    shutdown.clone(),
                ))
            })
            .collect();
        drop(sender);
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let ran_for = begin.elapsed();
        stop.send(true).unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        tap_task.await.unwrap();
        writer.await.unwrap();
        ran_for
    });
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    drop(child.stdin.take());
    let _ = child.wait();

    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let (scrapes, up, skipped, body_samples) = (
        load(&tap.scrapes),
        load(&tap.up),
        load(&tap.skipped),
        load(&tap.body_samples),
    );
    // What the writer says it wrote; for the stores, what they hold as well.
    let written = (load(&stats.scrape_rows_written), load(&stats.sample_rows_written));
    let sink_name = std::env::var("EPICENTER_FLEET_SINK").unwrap_or_else(|_| "embedded".to_string());
    let stored = (sink_name != "null").then(|| {
        let query = |sql: &str| String::from_utf8(store.query(sql, "TabSeparated").unwrap()).unwrap();
        let scrape_rows: u64 = query("SELECT count() FROM fleet.scrapes").trim().parse().unwrap();
        let sample_rows: u64 = query("SELECT count() FROM fleet.sample_values").trim().parse().unwrap();
        // Parts as the run leaves them (merges still pending), in `sample_values` and `series`.
        let sample_bytes: u64 = query(
            "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = 'fleet' AND table IN ('sample_values', 'series')",
        )
        .trim()
        .parse()
        .unwrap_or(0);
        (scrape_rows, sample_rows, sample_bytes)
    });
    let expected_samples = body_samples + 5 * (scrapes - skipped);
    // The schedule: ticks at offset, offset + 1 s, … before the stop.
    let scheduled: u64 = offsets
        .iter()
        .map(|offset| {
            if *offset <= elapsed {
                ((elapsed - *offset).as_nanos() / job.interval.as_nanos()) as u64 + 1
            } else {
                0
            }
        })
        .sum();
    let _ = std::fs::remove_dir_all(&data);

    println!("== fleet: {targets} targets x {series} series, every 1 s for {seconds} s, sink {sink_name} ==");
    println!(
        "scrapes:          {scrapes} rows ({up} up, {skipped} skipped: epicenter behind its schedule), {scheduled} scheduled by the offsets"
    );
    println!(
        "samples:          {} rows written, expected {expected_samples} (body samples + 5 synthetic per scrape)",
        written.1
    );
    if let Some((scrape_rows, sample_rows, sample_bytes)) = stored {
        println!(
            "store holds:      {scrape_rows} scrapes rows, {sample_rows} samples rows in {sample_bytes} bytes ({:.2} bytes per sample as left)",
            sample_bytes as f64 / sample_rows.max(1) as f64
        );
    }
    println!("epicenter CPU:    {cpu:.2} s over {wall:.2} s wall = {:.3} cores (scrape + parse + relabel + encode + {sink_name} sink)", cpu / wall);
    println!("throughput:       {:.0} samples/s written", written.1 as f64 / wall);
    let failed = stats.sample_rows_failed.load(Ordering::Relaxed);
    println!("writer:           {failed} sample rows failed");
    assert_eq!(
        written,
        (scrapes, expected_samples),
        "the writer wrote every row the scrapes produced"
    );
    if let Some((scrape_rows, sample_rows, _)) = stored {
        assert_eq!(
            (scrape_rows, sample_rows),
            written,
            "the store holds exactly what the writer wrote"
        );
    }
    assert_eq!(
        up + skipped,
        scrapes,
        "every scrape of a healthy local target is up (or recorded as skipped)"
    );
    // Every slot is a row; a tick within a few milliseconds of the stop may land either side.
    assert!(
        scrapes.abs_diff(scheduled) <= (targets as u64) / 20 + 1,
        "scrapes {scrapes} vs scheduled {scheduled}"
    );
}

/// Counts of what the scrapes produced, taken between the targets and the writer.
#[derive(Default)]
struct Tap {
    /// Outcomes, one per `scrapes` row (skipped slots included).
    scrapes: AtomicU64,
    /// Outcomes of scrapes that succeeded.
    up: AtomicU64,
    /// Records of slots that passed while epicenter was behind.
    skipped: AtomicU64,
    /// Samples kept from targets' bodies (without the 5 synthetic series).
    body_samples: AtomicU64,
}

impl Tap {
    fn note(&self, outcome: &epicenter_store::ScrapeOutcome) {
        let report = &outcome.report;
        self.scrapes.fetch_add(1, Ordering::Relaxed);
        self.up.fetch_add(u64::from(report.up), Ordering::Relaxed);
        self.skipped.fetch_add(u64::from(report.skipped), Ordering::Relaxed);
        self.body_samples
            .fetch_add(report.samples_post_metric_relabeling, Ordering::Relaxed);
    }
}
