//! Bounds against bad samples (issue 39): one sample stamped 10 years ahead in a healthy fleet
//! is counted, refused (neither stored nor read by the detector), opens no verdict and leaves
//! every detector round's time where the same fleet without it puts them.
//!
//! The simulated fleet is stepped by the test (no wall-clock pacing): each round the test
//! steps it 15 simulated seconds, serves every instance's exposition on 127.0.0.1 (a port each), scrapes it
//! with epicenter's own scraper on a clock the test holds at the fleet's time, and hands the
//! batches to the live detector on a paused tokio clock, one tick per round. The same run is
//! made twice, without and with the bad sample, and compared.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use epicenter_collector::config::{jobs_from_yaml, Job};
use epicenter_collector::scrape::{Clock, ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::{targets_for_job, Target};
use epicenter_detector::live::{self, Batch, Pacing, Round};
use epicenter_detector::{rules, Settings};
use epicenter_fleet::scenario::Scenario;
use epicenter_fleet::serve::ServedInstance;
use epicenter_fleet::Fleet;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{ScrapeOutcome, MAX_AHEAD_MS};
use epicenter_store::writer::WriterStats;
use epicenter_web::Telemetry;
use tokio::sync::{mpsc, watch};

/// Simulated seconds between scrape rounds (the healthy scenario's `scrape_interval`).
const INTERVAL_SECONDS: u64 = 15;
/// Scrape rounds in a run: 40 simulated minutes.
const ROUNDS: usize = 160;
/// The round whose scrape of one target carries the bad sample (30 simulated minutes in,
/// long after the detector knows the interval and has baselines).
const BAD_ROUND: usize = 120;
/// Ten years, ms.
const TEN_YEARS_MS: i64 = 10 * 365 * 24 * 3600 * 1000;

/// What one run of the fleet gave.
struct Run {
    /// Every scrape's outcome, round by round.
    outcomes: Vec<Vec<ScrapeOutcome>>,
    /// The simulated time of each round's scrapes, ms.
    round_ms: Vec<i64>,
}

/// Steps a healthy fleet for [`ROUNDS`] rounds, scraping every instance each round; with
/// `bad_at`, the body of the first target at round [`BAD_ROUND`] also carries one sample
/// stamped `bad_at` ms after the fleet's time.
async fn scrape_fleet(bad_at: Option<i64>) -> Run {
    let scenario = Scenario::load("healthy").unwrap();
    let start_ms = 1_790_000_000_000;
    let mut fleet = Fleet::new(&scenario, start_ms);
    let instances = fleet.instances().to_vec();
    let bodies = Arc::new(Mutex::new(vec![String::new(); instances.len()]));
    // Every instance on a port of its own, as the demo's fleet serves it.
    let mut served = Vec::with_capacity(instances.len());
    for (index, instance) in instances.iter().enumerate() {
        let app = Router::new()
            .route(
                "/metrics",
                get(move |State(bodies): State<Arc<Mutex<Vec<String>>>>| async move {
                    bodies.lock().unwrap()[index].clone()
                }),
            )
            .with_state(bodies.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        served.push(ServedInstance {
            instance: instance.clone(),
            address,
        });
    }
    // The demo's collector configuration (jobs per service, placement labels).
    let yaml = epicenter_eval::demo::collector_config(
        &scenario,
        &served,
        Duration::from_secs(INTERVAL_SECONDS),
        std::path::Path::new("unused"),
    );
    let scrape_part = yaml.split("storage:\n").next().unwrap();
    let jobs: Vec<Job> = jobs_from_yaml(scrape_part).unwrap();
    let targets: Vec<(usize, Target)> = jobs
        .iter()
        .enumerate()
        .flat_map(|(job_index, job)| {
            targets_for_job(job)
                .0
                .into_iter()
                .map(move |target| (job_index, target))
        })
        .collect();
    assert_eq!(targets.len(), instances.len(), "one target per instance");
    let scraper = Scraper::new().unwrap();
    let mut states: Vec<TargetState> = targets.iter().map(|_| TargetState::default()).collect();
    let mut run = Run {
        outcomes: Vec::new(),
        round_ms: Vec::new(),
    };
    for round in 0..ROUNDS {
        for _ in 0..INTERVAL_SECONDS {
            fleet.step();
        }
        let now_ms = fleet.now_ms();
        {
            let mut bodies = bodies.lock().unwrap();
            for (index, body) in bodies.iter_mut().enumerate() {
                *body = fleet.render(index);
            }
            if let (Some(ahead), true) = (bad_at, round == BAD_ROUND) {
                let address = targets[0].1.url.split('/').nth(2).unwrap();
                let index = served.iter().position(|served| served.address == address).unwrap();
                bodies[index].push_str(&format!("# TYPE clock_probe gauge\nclock_probe 1 {}\n", now_ms + ahead));
            }
        }
        // The scrape's clock held at the fleet's time: the test drives simulated time.
        let context = ScrapeContext {
            placement: PlacementConfig {
                instance_label: "pod".to_string(),
                ..PlacementConfig::default()
            },
            clock: Clock::Simulated {
                // From now, a millisecond of simulated time takes 10^12 wall ones: it holds.
                wall_start_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as i64,
                start_ms: now_ms,
                speed: 1e-12,
                end_ms: now_ms + 1,
            },
            ..ScrapeContext::default()
        };
        let mut outcomes = Vec::with_capacity(targets.len());
        for ((job_index, target), state) in targets.iter().zip(states.iter_mut()) {
            let outcome = scraper.scrape(target, &jobs[*job_index], &context, state).await;
            assert!(outcome.report.up, "{}: {:?}", target.url, outcome.report.error);
            assert_eq!(outcome.report.timestamp_ms, now_ms);
            outcomes.push(outcome);
        }
        run.outcomes.push(outcomes);
        run.round_ms.push(now_ms);
    }
    run
}

/// Feeds `run`'s scrapes to the live detector (shipped rules, the fleet's dependencies,
/// `run`'s wiring: arrival pacing, one tick per interval) on a paused clock, one round of
/// scrapes per tick; every round it sent.
async fn detect(run: &Run) -> Vec<Round> {
    let rules = rules::parse(rules::SHIPPED).unwrap();
    let metrics = live::rule_metrics(&rules);
    let tick = Duration::from_secs(INTERVAL_SECONDS);
    let (batches, inbox) = mpsc::channel::<Batch>(1 << 16);
    let (out, mut rounds) = mpsc::channel::<Round>(1 << 16);
    let (_stop, shutdown) = watch::channel(false);
    let detector = tokio::spawn(live::run(
        rules,
        epicenter_eval::scenarios::fleet_dependencies(),
        Settings::default(),
        (tick, Pacing::Arrival),
        inbox,
        Arc::default(),
        out,
        shutdown,
    ));
    let mut seen = Vec::new();
    // Sends fall half a tick off the detector's ticks (at 0, 15 s, 30 s, … of paused time):
    // each tick judges exactly the round of scrapes sent before it.
    tokio::time::sleep(tick / 2).await;
    for outcomes in &run.outcomes {
        for outcome in outcomes {
            for batch in live::extract(outcome, &metrics) {
                batches.send(batch).await.unwrap();
            }
        }
        // The detector takes every batch sent before its next tick fires (paused time
        // advances only once the runtime is idle, when it has).
        tokio::time::sleep(tick).await;
        while let Ok(round) = rounds.try_recv() {
            seen.push(round);
        }
    }
    drop(batches);
    detector.await.unwrap();
    while let Some(round) = rounds.recv().await {
        seen.push(round);
    }
    seen
}

/// The value of `name{labels}` in a Prometheus text body, if present.
fn metric_value(body: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    body.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(|value| value.trim().parse().unwrap())
}

#[test]
fn a_sample_ten_years_ahead_is_counted_refused_and_moves_no_verdict() {
    let io = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let clean = io.block_on(scrape_fleet(None));
    let bad = io.block_on(scrape_fleet(Some(TEN_YEARS_MS)));
    // The bad scrape: up, the sample refused and counted (one, too far ahead), not stored.
    let bad_outcome = &bad.outcomes[BAD_ROUND][0];
    let clean_outcome = &clean.outcomes[BAD_ROUND][0];
    assert!(bad_outcome.report.up);
    assert_eq!(bad_outcome.report.samples_out_of_bounds, [1, 0]);
    assert_eq!(
        bad_outcome.report.samples_scraped,
        clean_outcome.report.samples_scraped + 1
    );
    // Prometheus counts a refused sample as kept by relabeling.
    assert_eq!(
        bad_outcome.report.samples_post_metric_relabeling,
        clean_outcome.report.samples_post_metric_relabeling + 1
    );
    let round_ms = bad.round_ms[BAD_ROUND];
    assert!(bad_outcome.rows.iter().all(|row| row.series.name != "clock_probe"));
    assert!(
        bad.outcomes
            .iter()
            .flatten()
            .flat_map(|outcome| &outcome.rows)
            .all(|row| row.timestamp_ms <= round_ms.max(*bad.round_ms.last().unwrap()) + MAX_AHEAD_MS),
        "a stored row lies beyond the bound"
    );
    assert!(clean
        .outcomes
        .iter()
        .flatten()
        .all(|outcome| outcome.report.samples_out_of_bounds == [0, 0]));
    // Counted in epicenter's own metrics, under the target's job and the reason.
    let telemetry = Telemetry::new(Arc::new(WriterStats::default())).unwrap();
    for outcome in bad.outcomes.iter().flatten() {
        telemetry.observe(outcome);
    }
    let body = telemetry.render().unwrap();
    let job = &bad_outcome.report.job;
    assert_eq!(
        metric_value(
            &body,
            "epicenter_scrape_samples_out_of_bounds_total",
            &format!("job=\"{job}\",reason=\"too_far_ahead\"")
        ),
        Some(1.0),
        "{body}"
    );
    // The detector: no verdict, and every round where the clean run has it.
    let paused = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
    };
    let clean_rounds = paused().block_on(detect(&clean));
    let bad_rounds = paused().block_on(detect(&bad));
    let times = |rounds: &[Round]| rounds.iter().map(|round| round.time_ms).collect::<Vec<_>>();
    assert!(clean_rounds.len() > ROUNDS / 2, "{} rounds", clean_rounds.len());
    assert_eq!(times(&bad_rounds), times(&clean_rounds));
    let last_scrape_ms = *bad.round_ms.last().unwrap();
    assert!(bad_rounds.iter().all(|round| round.time_ms <= last_scrape_ms));
    let events = |rounds: &[Round]| rounds.iter().flat_map(|round| round.events.clone()).collect::<Vec<_>>();
    assert!(
        events(&clean_rounds).is_empty(),
        "the healthy fleet alone: {:?}",
        events(&clean_rounds)
    );
    assert!(events(&bad_rounds).is_empty(), "{:?}", events(&bad_rounds));
    assert!(bad_rounds.iter().all(|round| round.open.is_empty()));
}
