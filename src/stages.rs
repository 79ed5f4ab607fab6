//! The two tasks `serve` puts between the pipeline's crates: the observer between the targets
//! and the writer (epicenter's own metrics, target health, the detector's batches), and the
//! publisher after each detector round (web state, store, stdout, notifiers).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use epicenter_detector::live::{self, Batch, Round};
use epicenter_store::{ScrapeOutcome, Store};
use epicenter_web::AppState;
use tokio::sync::mpsc;

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
            if let Some(batch) = live::extract(&outcome, &rule_metrics) {
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
