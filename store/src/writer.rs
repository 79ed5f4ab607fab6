//! The writer: batches scrape outcomes and flushes them to the store.
//!
//! Rows are encoded as RowBinary as they arrive, so the batch's size in bytes is exact; the
//! batch is flushed when it reaches `batching.max_rows` or `batching.max_bytes`, when its
//! oldest row is `batching.max_age` old, and when the inbox closes (shutdown). A flush runs on
//! the sink's own terms (the embedded store on the blocking pool). A failed flush whose error
//! is retryable (network, server failure) is retried with exponential backoff (3 attempts,
//! 200 ms doubling); then, or at once for data errors, the batch is counted as failed and
//! dropped, so one bad batch cannot stall scraping. Every batch carries one
//! `insert_deduplication_token` for all its attempts in both tables (`schema::new_batch_token`),
//! so a retry after a lost answer stores it once, and two batches with the same bytes are both
//! stored. The seam for the on-disk spool of a later issue is
//! [`Sink`]: the batcher hands it finished batches.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::clickhouse::ClickHouseStore;
use crate::config::BatchingConfig;
use crate::embedded::EmbeddedStore;
use crate::rows::{self, ScrapeOutcome};
use crate::schema::Table;

/// Where finished batches go: the embedded store, a ClickHouse server, and next the spool.
pub trait Sink: Send + Sync + 'static {
    /// Writes RowBinary-encoded rows to `table`, idempotently under `token` (the batch's
    /// identity, sent as `insert_deduplication_token`: the same batch written twice is stored
    /// once). Errors say whether a retry can help.
    fn write(
        self: Arc<Self>,
        table: Table,
        data: Arc<Vec<u8>>,
        token: Arc<str>,
    ) -> impl Future<Output = Result<u64, SinkError>> + Send;
}

/// A failed write.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkError {
    /// What went wrong.
    pub message: String,
    /// Whether trying again can help (network trouble, server failures) or not (bad data).
    pub retryable: bool,
}

impl Sink for EmbeddedStore {
    async fn write(self: Arc<Self>, table: Table, data: Arc<Vec<u8>>, token: Arc<str>) -> Result<u64, SinkError> {
        tokio::task::spawn_blocking(move || self.insert_encoded(table, &data, &token))
            .await
            .map_err(|error| SinkError {
                message: format!("writer task failed: {error}"),
                retryable: false,
            })?
            // The embedded engine fails the same way twice; retrying only delays other batches.
            .map_err(|error| SinkError {
                message: error.to_string(),
                retryable: false,
            })
    }
}

impl Sink for ClickHouseStore {
    async fn write(self: Arc<Self>, table: Table, data: Arc<Vec<u8>>, token: Arc<str>) -> Result<u64, SinkError> {
        self.insert_encoded(table, &data, &token)
            .await
            .map_err(|error| SinkError {
                message: error.to_string(),
                retryable: error.retryable,
            })
    }
}

/// Counters the writer keeps (read at collection time by `epicenter-web`'s telemetry as
/// `epicenter_sink_rows_written_total`, `epicenter_sink_rows_failed_total`,
/// `epicenter_writer_batches_flushed_total`).
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Sample rows written.
    pub sample_rows_written: AtomicU64,
    /// Scrape rows written.
    pub scrape_rows_written: AtomicU64,
    /// Sample rows in batches that failed after retries.
    pub sample_rows_failed: AtomicU64,
    /// Batches flushed.
    pub batches_flushed: AtomicU64,
}

/// A batch being filled.
#[derive(Default)]
struct Batch {
    samples: Vec<u8>,
    sample_rows: u64,
    scrapes: Vec<u8>,
    scrape_rows: u64,
    oldest: Option<Instant>,
}

impl Batch {
    fn add(&mut self, outcome: &ScrapeOutcome) {
        rows::encode_samples(&outcome.rows, &mut self.samples);
        self.sample_rows += outcome.rows.len() as u64;
        rows::encode_scrapes(std::slice::from_ref(&outcome.report), &mut self.scrapes);
        self.scrape_rows += 1;
        self.oldest.get_or_insert_with(Instant::now);
    }

    fn is_full(&self, limits: &BatchingConfig) -> bool {
        self.sample_rows + self.scrape_rows >= limits.max_rows
            || (self.samples.len() + self.scrapes.len()) as u64 >= limits.max_bytes.0
    }
}

/// Receives outcomes until `inbox` closes, flushing batches to `sink`; flushes what is left
/// before returning.
pub async fn run_writer<S: Sink>(
    sink: Arc<S>,
    limits: BatchingConfig,
    mut inbox: mpsc::Receiver<ScrapeOutcome>,
    stats: Arc<WriterStats>,
) {
    let mut batch = Batch::default();
    loop {
        let deadline = batch.oldest.map(|oldest| oldest + limits.max_age.0);
        tokio::select! {
            received = inbox.recv() => match received {
                Some(outcome) => {
                    batch.add(&outcome);
                    if batch.is_full(&limits) {
                        flush(&sink, std::mem::take(&mut batch), &stats).await;
                    }
                }
                None => {
                    flush(&sink, std::mem::take(&mut batch), &stats).await;
                    return;
                }
            },
            _ = sleep_until_or_forever(deadline) => {
                flush(&sink, std::mem::take(&mut batch), &stats).await;
            }
        }
    }
}

async fn sleep_until_or_forever(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

async fn flush<S: Sink>(sink: &Arc<S>, batch: Batch, stats: &Arc<WriterStats>) {
    if batch.sample_rows == 0 && batch.scrape_rows == 0 {
        return;
    }
    let started = Instant::now();
    // One identity for the batch's attempts, in both tables.
    let token: Arc<str> = crate::schema::new_batch_token().into();
    for (table, data, rows, written) in [
        (
            Table::Samples,
            batch.samples,
            batch.sample_rows,
            &stats.sample_rows_written,
        ),
        (
            Table::Scrapes,
            batch.scrapes,
            batch.scrape_rows,
            &stats.scrape_rows_written,
        ),
    ] {
        let data = Arc::new(data);
        let mut delay = Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            match sink.clone().write(table, data.clone(), token.clone()).await {
                Ok(_) => {
                    written.fetch_add(rows, Ordering::Relaxed);
                    break;
                }
                Err(error) if error.retryable && attempt < 3 => {
                    tracing::warn!(?table, attempt, error = %error.message, "flush failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
                Err(error) => {
                    tracing::error!(?table, rows, attempt, error = %error.message, "flush failed; batch dropped");
                    if table == Table::Samples {
                        stats.sample_rows_failed.fetch_add(rows, Ordering::Relaxed);
                    }
                    break;
                }
            }
        }
    }
    stats.batches_flushed.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "batch flushed");
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use epicenter_config::{ByteSize, PromDuration};

    use crate::rows::{Placement, SampleRow, ScrapeReport, Series};

    /// Records what it is given; fails the first `failures` writes.
    #[derive(Default)]
    struct Recorder {
        writes: Mutex<Vec<(Table, usize)>>,
        failures: AtomicU64,
    }

    impl Sink for Recorder {
        async fn write(self: Arc<Self>, table: Table, data: Arc<Vec<u8>>, _token: Arc<str>) -> Result<u64, SinkError> {
            if self.failures.load(Ordering::SeqCst) > 0 {
                self.failures.fetch_sub(1, Ordering::SeqCst);
                return Err(SinkError {
                    message: "injected failure".to_string(),
                    retryable: true,
                });
            }
            self.writes.lock().unwrap().push((table, data.len()));
            Ok(0)
        }
    }

    fn outcome(rows: usize) -> ScrapeOutcome {
        let series = Series::new("up".into(), Default::default(), &Default::default());
        let row = SampleRow {
            timestamp_ms: 1,
            value: 1.0,
            series: Arc::new(series),
        };
        ScrapeOutcome {
            rows: vec![row; rows],
            report: ScrapeReport {
                timestamp_ms: 1,
                job: "j".into(),
                instance: "i".into(),
                placement: Placement::default(),
                up: true,
                duration_seconds: 0.1,
                samples_scraped: rows as u64,
                samples_post_metric_relabeling: rows as u64,
                series_added: 0,
                error: None,
                target_identity: 0,
            },
        }
    }

    fn limits(max_rows: u64, max_age_ms: u64) -> BatchingConfig {
        BatchingConfig {
            max_rows,
            max_bytes: ByteSize(1 << 30),
            max_age: PromDuration(Duration::from_millis(max_age_ms)),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn flushes_on_rows_on_age_and_on_close() {
        let sink = Arc::new(Recorder::default());
        let stats = Arc::new(WriterStats::default());
        let (sender, inbox) = mpsc::channel(16);
        let writer = tokio::spawn(run_writer(sink.clone(), limits(25, 1000), inbox, stats.clone()));
        // 2 outcomes of 11 rows + 1 report each = 24 rows: below 25, nothing yet.
        sender.send(outcome(11)).await.unwrap();
        sender.send(outcome(11)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(sink.writes.lock().unwrap().is_empty());
        // The third makes 36 >= 25: flushed at once (samples and scrapes).
        sender.send(outcome(11)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(stats.sample_rows_written.load(Ordering::SeqCst), 33);
        assert_eq!(stats.scrape_rows_written.load(Ordering::SeqCst), 3);
        // A lone outcome waits for max_age (1 s), not longer.
        sender.send(outcome(1)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(stats.sample_rows_written.load(Ordering::SeqCst), 33);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(stats.sample_rows_written.load(Ordering::SeqCst), 34);
        // Closing the inbox flushes the rest and ends the writer.
        sender.send(outcome(2)).await.unwrap();
        drop(sender);
        writer.await.unwrap();
        assert_eq!(stats.sample_rows_written.load(Ordering::SeqCst), 36);
        assert_eq!(stats.batches_flushed.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_sink_is_retried_then_the_batch_is_counted_failed() {
        let sink = Arc::new(Recorder::default());
        sink.failures.store(2, Ordering::SeqCst);
        let stats = Arc::new(WriterStats::default());
        let (sender, inbox) = mpsc::channel(16);
        let writer = tokio::spawn(run_writer(sink.clone(), limits(1, 1000), inbox, stats.clone()));
        sender.send(outcome(3)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Two failures, then success on the third attempt.
        assert_eq!(stats.sample_rows_written.load(Ordering::SeqCst), 3);
        sink.failures.store(10, Ordering::SeqCst);
        sender.send(outcome(4)).await.unwrap();
        drop(sender);
        writer.await.unwrap();
        assert_eq!(stats.sample_rows_failed.load(Ordering::SeqCst), 4);
    }
}
