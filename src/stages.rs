//! The tasks `serve` puts between the pipeline's crates: the observer between the targets
//! and the writer (epicenter's own metrics, target health, the detector's batches), the
//! store follower that feeds `epicenter detect`'s detector instead, and the publisher after
//! each detector round (web state, store, stdout, notifiers).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use epicenter_detector::follow::{self, Follower};
use epicenter_detector::live::{self, Batch, Round};
use epicenter_store::{ScrapeOutcome, Store};
use epicenter_web::AppState;
use tokio::sync::{mpsc, watch};

/// Between the targets and the writer: epicenter's own metrics, target health, and the
/// samples a rule names for the detector (dropped when its queue is full, and counted in
/// `to_detector`'s counter, which the detector reads).
pub(crate) async fn observe(
    mut scraped: mpsc::Receiver<ScrapeOutcome>,
    to_writer: mpsc::Sender<ScrapeOutcome>,
    (to_detector, dropped): (mpsc::Sender<Batch>, Arc<AtomicU64>),
    rule_metrics: live::MetricNames,
    state: Arc<AppState>,
) {
    while let Some(outcome) = scraped.recv().await {
        state.telemetry.observe(&outcome);
        state.targets.observe(&outcome);
        if !rule_metrics.is_empty() {
            for batch in live::extract(&outcome, &rule_metrics) {
                // A slow detector never holds scraping up: batches beyond its queue drop, counted
                // for the detector (which holds its verdicts meanwhile).
                if to_detector.try_send(batch).is_err() {
                    dropped.fetch_add(1, Ordering::Relaxed);
                    state.telemetry.detector_batches_dropped_total.inc();
                }
            }
        }
        state
            .telemetry
            .writer_queue_depth
            .set((to_writer.max_capacity() - to_writer.capacity()) as i64);
        if to_writer.send(outcome).await.is_err() {
            break;
        }
    }
}

/// The least time a poll's query may take before the poll counts as failed (four polls when
/// that is longer).
const POLL_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the store follower says that polls fail, at most.
const POLL_FAILURE_SAID_EVERY: Duration = Duration::from_secs(60);

/// `epicenter detect`'s input: every half `tick` (at least 100 ms), the samples the rules name
/// (`metrics`) and the scrapes' health read back from `store`, which collectors write (jobs
/// scraped at most every `longest_interval`, flushed within `flush_age`), turned into
/// batches by a [`Follower`] (`epicenter_detector::follow`) that starts now, and fed to the
/// live detector in time order.
/// A poll that fails (the store down, or no answer within [`POLL_TIMEOUT`] or four polls) is
/// lost input: a late batch, so that no round judges the silence it makes; said in the log at
/// most once a minute. Should the follower ever panic, the log says that the detector gets no
/// more data.
pub(crate) async fn follow_store(
    (store, state): (Store, Arc<AppState>),
    metrics: live::MetricNames,
    (tick, longest_interval, flush_age): (Duration, Duration, Duration),
    to_detector: mpsc::Sender<Batch>,
    shutdown: watch::Receiver<bool>,
) {
    state.telemetry.follow().activate();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64);
    let poll = (tick / 2).max(Duration::from_millis(100));
    let follower = Follower::new(
        now_ms,
        longest_interval.as_millis() as i64,
        flush_age.as_millis() as i64,
        poll.as_millis() as i64,
    );
    let task = tokio::spawn(follow((store, state), metrics, follower, poll, to_detector, shutdown));
    if let Err(error) = task.await {
        if error.is_panic() {
            crate::style::clear_status();
            eprintln!("epicenter: the store follower stopped ({error}): the detector gets no more data; restart epicenter detect");
        }
    }
}

/// The loop of [`follow_store`].
async fn follow(
    (store, state): (Store, Arc<AppState>),
    metrics: live::MetricNames,
    mut follower: Follower,
    poll: Duration,
    to_detector: mpsc::Sender<Batch>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(poll);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut said: Option<std::time::Instant> = None;
    let mut lost_said = Vec::new();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shutdown.changed() => return,
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as i64);
        // A store that hangs is a failed poll too: each query may take `limit`.
        let limit = (poll * 4).max(POLL_TIMEOUT);
        let fetch = |sql: String| {
            let store = store.clone();
            async move {
                match tokio::time::timeout(limit, store.fetch(sql, "JSONEachRow")).await {
                    Ok(result) => result,
                    Err(_) => Err(format!("no answer within {limit:?}")),
                }
            }
        };
        // The scrapes first: a collector back from a silence then counts as back when the
        // samples window is drawn, and its replay is read.
        let scrapes = fetch(follow::scrapes_query(follower.scrapes_from(now_ms)))
            .await
            .map_err(|error| format!("reading scrapes: {error}"))
            .and_then(|scrapes| {
                follower
                    .note_scrapes(&String::from_utf8_lossy(&scrapes), now_ms)
                    .map(|_| scrapes)
            });
        let samples = match &scrapes {
            Ok(_) => fetch(follow::samples_query(
                &metrics,
                Some(follower.samples_from()),
                follower.samples_to(),
                true,
            ))
            .await
            .map_err(|error| format!("reading samples: {error}")),
            Err(error) => Err(error.clone()),
        };
        let telemetry = state.telemetry.follow();
        let batches = match (samples, scrapes) {
            (Ok(samples), Ok(scrapes)) => {
                let rows = samples
                    .split(|byte| *byte == b'\n')
                    .filter(|line| !line.is_empty())
                    .count();
                telemetry.sample_rows_read_total.inc_by(rows as u64);
                follower.take(
                    &String::from_utf8_lossy(&samples),
                    &String::from_utf8_lossy(&scrapes),
                    now_ms,
                )
            }
            (Err(error), _) | (_, Err(error)) => Err(error),
        };
        if batches.is_err() {
            telemetry.polls_failed_total.inc();
        }
        let batches = batches.unwrap_or_else(|error| {
            if said.is_none_or(|at| at.elapsed() >= POLL_FAILURE_SAID_EVERY) {
                said = Some(std::time::Instant::now());
                crate::style::clear_status();
                eprintln!(
                    "epicenter: the store did not answer the detector's poll ({error}); rounds are held until it does"
                );
            }
            vec![Batch {
                time_ms: follower.newest_ms().unwrap_or(now_ms),
                instance: epicenter_detector::InstanceInfo {
                    name: String::new(),
                    dc: String::new(),
                    host: String::new(),
                    service: String::new(),
                },
                samples: Vec::new(),
                late: true,
                reported: false,
            }]
        });
        let lost = follower.lost();
        telemetry.instances.set(follower.instances() as i64);
        telemetry.instances_lost.set(lost.len() as i64);
        if let Some(newest) = follower.newest_ms() {
            telemetry.newest_sample_timestamp_seconds.set(newest as f64 / 1000.0);
        }
        if !lost.is_empty() && lost != lost_said {
            crate::style::clear_status();
            eprintln!(
                "epicenter: no scrape of {} reached the store for a while, while other collectors' did (its collector stopped, or its writes fail): kept as seen, not judged, until they do: {}",
                crate::style::count(lost.len() as u64, "instance", "instances"),
                lost.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            );
        }
        lost_said = lost;
        for batch in batches {
            if to_detector.send(batch).await.is_err() {
                return;
            }
        }
    }
}

/// After each detector round: the web state updated, anomalies and verdict events stored,
/// verdict events printed (unless `tap` takes the rounds) and handed to the notifiers.
pub(crate) async fn publish(
    mut rounds: mpsc::Receiver<Round>,
    state: Arc<AppState>,
    store: Store,
    tap: Option<mpsc::UnboundedSender<Round>>,
) {
    let mut behind = live::BehindNotice::default();
    while let Some(round) = rounds.recv().await {
        state.publish(&round);
        if let Some(line) = behind.note(&round) {
            crate::style::clear_status();
            eprintln!("epicenter: {line}");
        }
        if let Err(error) = store.write_anomalies(&round.new_anomalies).await {
            tracing::warn!(%error, "storing anomalies failed");
        }
        for event in &round.events {
            if tap.is_none() {
                crate::style::clear_status();
                println!(
                    "{}",
                    crate::style::verdict_line(&event.state, &event.verdict.describe(), crate::style::stdout_colour())
                );
            }
            state.notifiers.notify(event);
            if let Err(error) = store.write_verdict(&event.row()).await {
                tracing::warn!(%error, "storing the verdict failed");
            }
        }
        if let Some(tap) = &tap {
            let _ = tap.send(round);
        }
    }
}

/// When the run stops: every incident still open, one line each (`epicenter: VERDICT still
/// open at shutdown: …`). Stopping resolves nothing: no `resolved` event, row or
/// notification (issue 38: a `resolved` line near the end of a run was read as the run's end
/// resolving it).
pub(crate) fn say_still_open(state: &AppState) {
    let open = state.verdicts.lock().map(|book| book.open.clone()).unwrap_or_default();
    for verdict in &open {
        crate::style::clear_status();
        println!(
            "{}",
            crate::style::verdict_line(
                "still open at shutdown",
                &verdict.describe(),
                crate::style::stdout_colour()
            )
        );
    }
}
