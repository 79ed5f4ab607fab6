//! The writer: batches scrape outcomes and flushes them to the store.
//!
//! Rows are encoded as RowBinary as they arrive, so the batch's size in bytes is exact; the
//! batch is flushed when it reaches `batching.max_rows` or `batching.max_bytes`, when its
//! oldest row is `batching.max_age` old, and when the inbox closes (shutdown). A flush runs on
//! the sink's own terms (the embedded store on the blocking pool). A failed flush whose error
//! is retryable (network, server failure) is retried with exponential backoff (without a spool: 3 attempts,
//! 200 ms doubling); then, or at once for data errors, the batch is counted as failed and
//! dropped, so one bad batch cannot stall scraping. Every batch carries one
//! `insert_deduplication_token` for all its attempts in both tables (`schema::new_batch_token`),
//! so a retry after a lost answer stores it once, and two batches with the same bytes are both
//! stored. [`run_spooled_writer`] puts the on-disk
//! spool (`crate::spool`) between the batcher and the [`Sink`]: batches go to disk first and
//! are retried for as long as the spool holds them.

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
use crate::spool::{Spool, SpooledBatch};

mod wal;

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
            // The embedded engine fails the same way twice; retrying only delays other
            // batches. A cancelled insert (KILL QUERY, or a memory limit hit beside a heavy
            // question) is not the data's fault: it is tried again.
            .map_err(|error| {
                let message = error.to_string();
                let retryable = ["QUERY_WAS_CANCELLED", "MEMORY_LIMIT_EXCEEDED", "TIMEOUT_EXCEEDED"]
                    .iter()
                    .any(|name| message.contains(name));
                SinkError { message, retryable }
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
    /// `series` rows written (new series, and each series again every hour it is scraped).
    pub series_rows_written: AtomicU64,
    /// Sample rows in batches that failed after retries.
    pub sample_rows_failed: AtomicU64,
    /// Batches flushed.
    pub batches_flushed: AtomicU64,
    /// Sample rows the spool dropped to stay under `storage.spool.max_size`, `max_age` or the
    /// volume's free space (oldest batches first), or could not take (a scrape on a full disk
    /// with no older batch left to drop).
    pub spool_dropped_rows: AtomicU64,
    /// Batches waiting in the spool (the one being delivered included), as of the last
    /// change; 0 without a spool (`epicenter_spool_backlog_batches`).
    pub spool_batches: AtomicU64,
    /// Their bytes on disk (`epicenter_spool_backlog_bytes`).
    pub spool_bytes: AtomicU64,
    /// When the oldest of them was written, ms since the epoch; 0 when none waits (the age
    /// is `epicenter_spool_oldest_batch_age_seconds`, [`WriterStats::spool_oldest_age_seconds`]).
    pub spool_oldest_written_ms: std::sync::atomic::AtomicI64,
    /// Whether delivery to the store is failing now (its last insert failed and was to be
    /// retried), for the status line.
    pub delivery_failing: std::sync::atomic::AtomicBool,
}

impl WriterStats {
    /// How old the oldest batch waiting in the spool is at `now_ms` (ms since the epoch),
    /// seconds; 0 when none waits.
    pub fn spool_oldest_age_seconds(&self, now_ms: i64) -> f64 {
        match self.spool_oldest_written_ms.load(Ordering::Relaxed) {
            0 => 0.0,
            written => (now_ms - written).max(0) as f64 / 1000.0,
        }
    }

    /// Records a spool's backlog, as [`backlog_of`] reads it.
    fn note_backlog(&self, ((batches, bytes), oldest): Backlog) {
        self.spool_batches.store(batches, Ordering::Relaxed);
        self.spool_bytes.store(bytes, Ordering::Relaxed);
        let oldest_ms = oldest.map_or(0, |written| {
            written
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |since| since.as_millis().max(1) as i64)
        });
        self.spool_oldest_written_ms.store(oldest_ms, Ordering::Relaxed);
    }

    /// The backlog as a person reads it: `20 batches (1.4 MiB), the oldest 95 s old`, at
    /// `now_ms` (ms since the epoch).
    pub fn describe_backlog(&self, now_ms: i64) -> String {
        let batches = self.spool_batches.load(Ordering::Relaxed);
        let bytes = self.spool_bytes.load(Ordering::Relaxed);
        if batches == 0 {
            return "no batch waiting".to_string();
        }
        format!(
            "{batches} batch{} ({}), the oldest {:.0} s old",
            if batches == 1 { "" } else { "es" },
            describe_bytes(bytes),
            self.spool_oldest_age_seconds(now_ms)
        )
    }
}

/// A spool's backlog: batches and bytes ([`Spool::backlog`]), and when the oldest was
/// written ([`Spool::oldest_written`]).
type Backlog = ((u64, u64), Option<std::time::SystemTime>);

/// `spool`'s [`Backlog`].
fn backlog_of(spool: &Spool) -> Backlog {
    (spool.backlog(), spool.oldest_written())
}

/// `812 B`, `14.2 KiB`, `1.4 MiB`, `2.0 GiB`.
pub fn describe_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The wall clock, ms since the epoch.
fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

/// How often a delivery that keeps failing is said again in the log.
pub const FAILING_SAID_EVERY: Duration = Duration::from_secs(60);

/// What the log says of the spool's delivery through an outage ([`DeliveryNotice::failed`],
/// [`DeliveryNotice::delivered`]): a line when delivery starts failing, one a minute
/// ([`FAILING_SAID_EVERY`]) while it fails, and one when it recovers, each with the backlog.
#[derive(Debug, Default)]
pub struct DeliveryNotice {
    /// When the current run of failures started, and when it was last said.
    failing: Option<(Instant, Instant)>,
}

impl DeliveryNotice {
    /// An insert failed (to be retried) at `now` with `error`; `backlog` describes what
    /// waits. The line to log, if one is due: the first failure of a run, then one a
    /// minute.
    pub fn failed(&mut self, now: Instant, error: &str, backlog: &str) -> Option<String> {
        match &mut self.failing {
            None => {
                self.failing = Some((now, now));
                Some(format!(
                    "delivery to the store is failing ({error}); batches stay spooled and are retried: {backlog} waiting"
                ))
            }
            Some((since, said)) if now.duration_since(*said) >= FAILING_SAID_EVERY => {
                *said = now;
                Some(format!(
                    "delivery to the store still failing after {} s ({error}): {backlog} waiting",
                    now.duration_since(*since).as_secs()
                ))
            }
            Some(_) => None,
        }
    }

    /// An insert succeeded at `now`: the line saying that delivery recovered, when it had
    /// been failing, with the backlog left (`backlog`).
    pub fn delivered(&mut self, now: Instant, backlog: &str) -> Option<String> {
        let (since, _) = self.failing.take()?;
        Some(format!(
            "delivery to the store recovered after {} s of failures: {backlog} still to deliver",
            now.duration_since(since).as_secs()
        ))
    }

    /// Whether delivery is failing now.
    pub fn is_failing(&self) -> bool {
        self.failing.is_some()
    }
}

/// A batch being filled.
#[derive(Default)]
struct Batch {
    samples: Vec<u8>,
    sample_rows: u64,
    series: Vec<u8>,
    series_rows: u64,
    /// The series whose `series` rows this batch holds (re-armed if the batch is lost).
    series_noted: Vec<std::sync::Arc<crate::rows::Series>>,
    scrapes: Vec<u8>,
    scrape_rows: u64,
    oldest: Option<Instant>,
}

impl Batch {
    fn add(&mut self, outcome: &ScrapeOutcome) {
        self.series_rows += rows::encode_samples_noting(
            &outcome.rows,
            &mut self.samples,
            &mut self.series,
            &mut self.series_noted,
        );
        self.sample_rows += outcome.rows.len() as u64;
        rows::encode_scrapes(std::slice::from_ref(&outcome.report), &mut self.scrapes);
        self.scrape_rows += 1;
        self.oldest.get_or_insert_with(Instant::now);
    }

    /// Adds one scrape already encoded and written ahead (`wal`): its rows, and the series
    /// whose `series` rows it holds.
    fn extend(&mut self, record: SpooledBatch, noted: Vec<Arc<crate::rows::Series>>) {
        self.samples.extend_from_slice(&record.samples);
        self.sample_rows += record.sample_rows;
        self.series.extend_from_slice(&record.series);
        self.series_rows += record.series_rows;
        self.series_noted.extend(noted);
        self.scrapes.extend_from_slice(&record.scrapes);
        self.scrape_rows += record.scrape_rows;
        self.oldest.get_or_insert_with(Instant::now);
    }

    /// Takes this batch's contents, leaving an empty batch whose buffers are already as
    /// large as these were (plus an eighth): a steady load then fills each batch without
    /// growing its buffers step by step (each step a copy into freshly mapped memory).
    fn take(&mut self) -> Batch {
        let room = |buffer: &Vec<u8>| buffer.len() + buffer.len() / 8;
        let next = Batch {
            samples: Vec::with_capacity(room(&self.samples)),
            series: Vec::with_capacity(room(&self.series)),
            scrapes: Vec::with_capacity(room(&self.scrapes)),
            ..Batch::default()
        };
        std::mem::replace(self, next)
    }

    fn is_full(&self, limits: &BatchingConfig) -> bool {
        self.sample_rows + self.scrape_rows >= limits.max_rows
            || (self.samples.len() + self.series.len() + self.scrapes.len()) as u64 >= limits.max_bytes.0
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
                        flush(&sink, batch.take(), &stats).await;
                    }
                }
                None => {
                    flush(&sink, batch.take(), &stats).await;
                    return;
                }
            },
            _ = sleep_until_or_forever(deadline) => {
                flush(&sink, batch.take(), &stats).await;
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
    // One identity for the batch's attempts, in every table.
    let token: Arc<str> = crate::schema::new_batch_token().into();
    let noted = batch.series_noted;
    // The series first, so (on one server) a sample is not stored before its labels are.
    for (table, data, rows, written) in [
        (
            Table::Series,
            batch.series,
            batch.series_rows,
            &stats.series_rows_written,
        ),
        (
            Table::SampleValues,
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
        if rows == 0 && table != Table::Scrapes {
            continue;
        }
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
                    tracing::error!(?table, rows, attempt, error = %error.message, "flush failed; these rows are dropped");
                    match table {
                        Table::SampleValues => {
                            stats.sample_rows_failed.fetch_add(rows, Ordering::Relaxed);
                        }
                        // The series' next samples write their rows again.
                        Table::Series => noted.iter().for_each(|series| series.forget_series_row()),
                        Table::Scrapes => {}
                    }
                    break;
                }
            }
        }
    }
    stats.batches_flushed.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "batch flushed");
}

/// How long one insert may take before it is abandoned and tried again (spooled writer).
pub const INSERT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a spooled writer that is stopping keeps trying to deliver what the spool holds;
/// what is left then is delivered at the next start.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// [`run_writer`] with the spool (`storage.spool`), a write-ahead log: each scrape is
/// appended to the spool's open segment as it is accepted (`wal`; synced every
/// `storage.spool.sync_interval`), and when the batch is due its segment is sealed
/// ([`Spool::seal`]; scraping never waits for the store). A delivery task sends the spool's
/// batches in order, each table's insert under its own spool token ([`Spool::token`]: stored
/// once however often it is sent), skipping the inserts a run before a crash had seen
/// acknowledged ([`Spool::acknowledged`]; the batch spooled last is taken from memory when it
/// is next, older ones are read back from disk), retrying a retryable failure with exponential backoff and jitter (200 ms doubling
/// to 10 s) for as long as the spool holds it (the spool does not drop the batch being delivered); every insert has [`INSERT_TIMEOUT`]. A batch
/// leaves the spool when all its inserts succeeded, or when the store refused it as bad data
/// (counted failed). When `inbox` closes, the last batch is spooled and delivery goes on for
/// at most [`DRAIN_TIMEOUT`].
pub async fn run_spooled_writer<S: Sink>(
    sink: Arc<S>,
    limits: BatchingConfig,
    mut inbox: mpsc::Receiver<ScrapeOutcome>,
    stats: Arc<WriterStats>,
    spool: Spool,
) {
    // What an earlier run left waits first, and counts in the backlog from the start.
    stats.note_backlog(backlog_of(&spool));
    let sync_every = spool.sync_interval();
    let mut sync_tick = tokio::time::interval(sync_every.unwrap_or(Duration::from_secs(3600)));
    sync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ahead = wal::WriteAhead::default();
    let shared = Arc::new(std::sync::Mutex::new(Shared {
        spool,
        last: None,
        noted: std::collections::HashMap::new(),
    }));
    let wake = Arc::new(tokio::sync::Notify::new());
    let (closing, closed) = tokio::sync::watch::channel(false);
    let delivery = tokio::spawn(deliver(sink, shared.clone(), wake.clone(), closed, stats.clone()));
    let mut batch = Batch::default();
    loop {
        let deadline = batch.oldest.map(|oldest| oldest + limits.max_age.0);
        let open = tokio::select! {
            received = inbox.recv() => match received {
                Some(outcome) => {
                    ahead.log(&shared, &outcome, &mut batch, &stats).await;
                    true
                }
                None => false,
            },
            _ = sleep_until_or_forever(deadline) => true,
            _ = sync_tick.tick(), if sync_every.is_some() && ahead.segment.is_some() => {
                ahead.sync().await;
                true
            }
        };
        let due = !open || batch.is_full(&limits) || deadline.is_some_and(|deadline| Instant::now() >= deadline);
        if due && batch.sample_rows + batch.scrape_rows > 0 {
            spool_batch(&shared, batch.take(), ahead.segment.take(), &stats).await;
            wake.notify_one();
        }
        if !open {
            break;
        }
    }
    let _ = closing.send(true);
    wake.notify_one();
    let _ = delivery.await;
}

/// What the batcher and the delivery task of [`run_spooled_writer`] share, under one lock
/// (taken on the blocking pool: the spool does file I/O).
struct Shared {
    spool: Spool,
    /// The batch spooled last, kept in memory as well while at most one other batch waits
    /// before it: when it is the next to deliver, delivery takes it from here instead of
    /// reading back from disk what was just written. Behind a longer backlog none is kept (it
    /// is read from disk when its turn comes); the disk copy is the one that counts until
    /// acknowledged.
    last: Option<SpooledBatch>,
    /// Per spooled batch (by sequence) still waiting, the series whose `series` rows it holds:
    /// a batch the spool drops, or whose `series` rows the store refuses, re-arms them, so the
    /// series' next samples carry their rows again (as [`run_writer`] does for a lost batch).
    /// Not kept across restarts, after which every series writes its row again anyway.
    noted: std::collections::HashMap<u64, Vec<Arc<crate::rows::Series>>>,
}

impl Shared {
    /// Re-arms the series batch `sequence` held `series` rows for (see [`Shared::noted`]).
    fn rearm(&mut self, sequence: u64) {
        for series in self.noted.remove(&sequence).unwrap_or_default() {
            series.forget_series_row();
        }
    }
}

/// Seals `segment`, which holds `batch`'s scrapes, as the newest batch of the spool on the
/// blocking pool and keeps `batch` as the last spooled; counts and logs what the spool drops.
async fn spool_batch(
    shared: &Arc<std::sync::Mutex<Shared>>,
    batch: Batch,
    segment: Option<crate::spool::Segment>,
    stats: &WriterStats,
) {
    let Some(segment) = segment else {
        // Every scrape of the batch failed to be written ahead: each was dropped and counted.
        return;
    };
    let noted = batch.series_noted;
    let mut spooled = SpooledBatch {
        sequence: 0,
        sample_rows: batch.sample_rows,
        samples: batch.samples,
        series_rows: batch.series_rows,
        series: batch.series,
        scrape_rows: batch.scrape_rows,
        scrapes: batch.scrapes,
    };
    // The series noted go in with the batch, under the same lock: delivery may take it the
    // moment the lock is released.
    let kept = noted.clone();
    let appended = with_shared(shared, move |shared| {
        spooled.sequence = segment.sequence();
        let dropped = shared.spool.seal(segment).map_err(|error| error.to_string())?;
        if !kept.is_empty() {
            shared.noted.insert(spooled.sequence, kept);
        }
        dropped.iter().for_each(|(sequence, _)| shared.rearm(*sequence));
        // Kept when it is next or the one after (delivery is busy with one at most):
        // behind a longer backlog it would wait in memory for the whole outage.
        shared.last = (shared.spool.backlog().0 <= 2).then_some(spooled);
        Ok((dropped, backlog_of(&shared.spool)))
    })
    .await
    .unwrap_or_else(|| Err("the spool's lock is poisoned, or its task failed".to_string()));
    match appended {
        Ok((dropped, backlog)) => {
            stats.note_backlog(backlog);
            for (sequence, dropped_rows) in dropped {
                stats.spool_dropped_rows.fetch_add(dropped_rows, Ordering::Relaxed);
                tracing::error!(
                    sequence,
                    rows = dropped_rows,
                    "spool over storage.spool.max_size, short of free disk space, or its oldest batch past max_age: that batch was dropped"
                );
            }
        }
        Err(error) => {
            // The segment stays on disk, open: the next start seals and delivers it. The
            // series' next samples write their rows again meanwhile.
            noted.iter().for_each(|series| series.forget_series_row());
            tracing::error!(%error, "cannot seal the spool's segment: its scrapes are delivered at the next start");
        }
    }
}

/// Runs `operation` on the locked shared state on the blocking pool (None: the lock is
/// poisoned or the task failed).
async fn with_shared<T: Send + 'static>(
    shared: &Arc<std::sync::Mutex<Shared>>,
    operation: impl FnOnce(&mut Shared) -> T + Send + 'static,
) -> Option<T> {
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || shared.lock().ok().map(|mut shared| operation(&mut shared)))
        .await
        .ok()
        .flatten()
}

/// The delivery task of [`run_spooled_writer`].
async fn deliver<S: Sink>(
    sink: Arc<S>,
    shared: Arc<std::sync::Mutex<Shared>>,
    wake: Arc<tokio::sync::Notify>,
    mut closed: tokio::sync::watch::Receiver<bool>,
    stats: Arc<WriterStats>,
) {
    let mut give_up_at: Option<Instant> = None;
    let mut notice = DeliveryNotice::default();
    loop {
        let oldest = |shared: &mut Shared| {
            let front = shared.spool.claim_front()?;
            let batch = match shared.last.take_if(|batch| batch.sequence == front) {
                Some(batch) => Ok(batch),
                None => shared.spool.oldest()?,
            };
            let sequence = batch.as_ref().map_or(0, |batch| batch.sequence);
            let tables = [Table::Series, Table::SampleValues, Table::Scrapes];
            let tokens = tables.map(|table| {
                (
                    shared.spool.token(sequence, table),
                    shared.spool.acknowledged(sequence, table),
                )
            });
            Some((batch, tokens))
        };
        let Some(next) = with_shared(&shared, oldest).await else {
            return;
        };
        let batch = match next {
            None if *closed.borrow() => return,
            None => {
                tokio::select! {
                    _ = wake.notified() => {}
                    // The batcher gone without saying so (its task ended): nothing more comes.
                    changed = closed.changed() => if changed.is_err() { return; },
                }
                continue;
            }
            Some((Err(error), _)) => {
                tracing::error!(%error, "a spooled batch is damaged: set aside as .corrupt, not sent");
                continue;
            }
            Some((Ok(batch), tokens)) => (batch, tokens),
        };
        let (batch, [series_token, samples_token, scrapes_token]) = batch;
        let parts = [
            (
                Table::Series,
                batch.series,
                batch.series_rows,
                &stats.series_rows_written,
                series_token,
            ),
            (
                Table::SampleValues,
                batch.samples,
                batch.sample_rows,
                &stats.sample_rows_written,
                samples_token,
            ),
            (
                Table::Scrapes,
                batch.scrapes,
                batch.scrape_rows,
                &stats.scrape_rows_written,
                scrapes_token,
            ),
        ];
        for (table, data, rows, written, (token, acknowledged)) in parts {
            if rows == 0 {
                continue;
            }
            if acknowledged {
                // Stored before a crash, which came before the batch left the spool.
                written.fetch_add(rows, Ordering::Relaxed);
                continue;
            }
            let token: Arc<str> = token.into();
            let sequence = batch.sequence;
            let data = Arc::new(data);
            let mut delay = Duration::from_millis(200);
            let mut attempt = 1u64;
            loop {
                let result =
                    tokio::time::timeout(INSERT_TIMEOUT, sink.clone().write(table, data.clone(), token.clone()))
                        .await
                        .unwrap_or_else(|_| {
                            Err(SinkError {
                                message: format!("insert timed out after {} s", INSERT_TIMEOUT.as_secs()),
                                retryable: true,
                            })
                        });
                match result {
                    Ok(_) => {
                        written.fetch_add(rows, Ordering::Relaxed);
                        with_shared(&shared, move |shared| shared.spool.acknowledge(sequence, table)).await;
                        if let Some(line) = notice.delivered(Instant::now(), &stats.describe_backlog(wall_ms())) {
                            stats.delivery_failing.store(false, Ordering::Relaxed);
                            tracing::warn!("{line}");
                        }
                        if attempt > 1 {
                            tracing::info!(
                                ?table,
                                attempt,
                                sequence = batch.sequence,
                                "spooled batch delivered after retries"
                            );
                        }
                        break;
                    }
                    Err(error) if !error.retryable => {
                        tracing::error!(?table, rows, sequence = batch.sequence, error = %error.message, "the store refused a spooled batch; it is dropped");
                        match table {
                            Table::SampleValues => {
                                stats.sample_rows_failed.fetch_add(rows, Ordering::Relaxed);
                            }
                            Table::Series => {
                                let sequence = batch.sequence;
                                with_shared(&shared, move |shared| shared.rearm(sequence)).await;
                            }
                            _ => {}
                        }
                        break;
                    }
                    Err(error) => {
                        if *closed.borrow()
                            && Instant::now() >= *give_up_at.get_or_insert_with(|| Instant::now() + DRAIN_TIMEOUT)
                        {
                            tracing::warn!(
                                sequence = batch.sequence,
                                "stopping with batches still spooled: they are sent at the next start"
                            );
                            return;
                        }
                        // When delivery starts failing, then once a minute, with the backlog:
                        // an outage is neither a flood nor silent.
                        stats.delivery_failing.store(true, Ordering::Relaxed);
                        if let Some(line) =
                            notice.failed(Instant::now(), &error.message, &stats.describe_backlog(wall_ms()))
                        {
                            tracing::warn!(?table, attempt, sequence = batch.sequence, "{line}");
                        }
                        let jitter = rand::random_range(0.0..0.5);
                        tokio::time::sleep(delay.mul_f64(1.0 + jitter)).await;
                        delay = (delay * 2).min(Duration::from_secs(10));
                        attempt += 1;
                    }
                }
            }
        }
        stats.batches_flushed.fetch_add(1, Ordering::Relaxed);
        let sequence = batch.sequence;
        if let Some(backlog) = with_shared(&shared, move |shared| {
            shared.noted.remove(&sequence);
            shared.spool.remove(sequence);
            backlog_of(&shared.spool)
        })
        .await
        {
            stats.note_backlog(backlog);
        }
    }
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
        outcome_of(
            &Arc::new(Series::new("up".into(), Default::default(), &Default::default())),
            rows,
        )
    }

    /// An outcome of `rows` samples of `series` (the same `Arc`, as a scrape cache gives).
    fn outcome_of(series: &Arc<Series>, rows: usize) -> ScrapeOutcome {
        let row = SampleRow {
            timestamp_ms: 1,
            value: 1.0,
            series: series.clone(),
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
                samples_duplicate: 0,
                samples_out_of_bounds: [0, 0],
                error: None,
                target_identity: 0,
                skipped: false,
                starved: false,
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

    /// Refuses every `series` insert as bad data; records the rest.
    #[derive(Default)]
    struct RefusesSeries {
        writes: Mutex<Vec<(Table, usize)>>,
    }

    impl Sink for RefusesSeries {
        async fn write(self: Arc<Self>, table: Table, data: Arc<Vec<u8>>, _token: Arc<str>) -> Result<u64, SinkError> {
            self.writes.lock().unwrap().push((table, data.len()));
            if table == Table::Series {
                return Err(SinkError {
                    message: "refused".to_string(),
                    retryable: false,
                });
            }
            Ok(0)
        }
    }

    /// Writes one scrape's outcome twice (the same series), one batch each, through `sink`.
    async fn the_same_scrape_twice<S: Sink>(sink: Arc<S>, stats: &Arc<WriterStats>) {
        let (sender, inbox) = mpsc::channel(16);
        let writer = tokio::spawn(run_writer(sink, limits(1, 1000), inbox, stats.clone()));
        let first = outcome(3);
        let again = ScrapeOutcome {
            rows: first.rows.clone(),
            report: first.report.clone(),
        };
        sender.send(first).await.unwrap();
        sender.send(again).await.unwrap();
        drop(sender);
        writer.await.unwrap();
    }

    /// A batch whose `series` rows were refused re-arms its series: the next batch carries
    /// their rows again (one per series), and without the refusal a series' row goes once.
    #[tokio::test(start_paused = true)]
    async fn a_lost_series_row_is_written_again_with_the_next_batch() {
        let sink = Arc::new(RefusesSeries::default());
        let stats = Arc::new(WriterStats::default());
        the_same_scrape_twice(sink.clone(), &stats).await;
        let series_writes: Vec<usize> = sink
            .writes
            .lock()
            .unwrap()
            .iter()
            .filter(|(table, _)| *table == Table::Series)
            .map(|(_, bytes)| *bytes)
            .collect();
        // The three rows share one series: one row per batch, the same bytes twice.
        assert_eq!(series_writes.len(), 2, "{series_writes:?}");
        assert_eq!(series_writes[0], series_writes[1]);
        assert_eq!(stats.series_rows_written.load(Ordering::SeqCst), 0);
        assert_eq!(stats.sample_rows_written.load(Ordering::SeqCst), 6);
        // Accepted once, a series' row is not repeated within the hour.
        let recorder = Arc::new(Recorder::default());
        the_same_scrape_twice(recorder.clone(), &stats).await;
        let tables: Vec<Table> = recorder
            .writes
            .lock()
            .unwrap()
            .iter()
            .map(|(table, _)| *table)
            .collect();
        assert_eq!(
            tables,
            [
                Table::Series,
                Table::SampleValues,
                Table::Scrapes,
                Table::SampleValues,
                Table::Scrapes
            ]
        );
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

    /// Records each accepted write with its token and bytes; fails the first `failures`.
    #[derive(Default)]
    struct TokenRecorder {
        writes: Mutex<Vec<(Table, String, usize)>>,
        failures: AtomicU64,
        attempts: AtomicU64,
    }

    impl TokenRecorder {
        /// The accepted `sample_values` writes: token and bytes, in order.
        fn sample_writes(&self) -> Vec<(String, usize)> {
            let writes = self.writes.lock().unwrap();
            let samples = writes.iter().filter(|(table, _, _)| *table == Table::SampleValues);
            samples.map(|(_, token, bytes)| (token.clone(), *bytes)).collect()
        }
    }

    impl Sink for TokenRecorder {
        async fn write(self: Arc<Self>, table: Table, data: Arc<Vec<u8>>, token: Arc<str>) -> Result<u64, SinkError> {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            if self.failures.load(Ordering::SeqCst) > 0 {
                self.failures.fetch_sub(1, Ordering::SeqCst);
                return Err(SinkError {
                    message: "injected failure".to_string(),
                    retryable: true,
                });
            }
            self.writes.lock().unwrap().push((table, token.to_string(), data.len()));
            Ok(0)
        }
    }

    /// A spooled writer under test and what a test reads back.
    struct SpooledRun {
        /// Its spool's settings (a fresh directory).
        config: crate::spool::SpoolConfig,
        /// The tokens of the spool's first batches.
        tokens: Vec<String>,
        sink: Arc<TokenRecorder>,
        stats: Arc<WriterStats>,
        sender: mpsc::Sender<ScrapeOutcome>,
        writer: tokio::task::JoinHandle<()>,
    }

    /// A spooled writer over a fresh spool in `name` (under the temp directory) of at most
    /// `max_size` bytes, flushing every outcome as a batch, writing to a [`TokenRecorder`]
    /// that fails its first `failures` writes; `tokens` holds its first `batches` tokens.
    fn spooled_writer(name: &str, max_size: u64, failures: u64, batches: u64) -> SpooledRun {
        let dir = std::env::temp_dir().join(format!("epicenter-writer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = crate::spool::SpoolConfig {
            path: dir,
            max_size: ByteSize(max_size),
            max_age: Duration::from_secs(3600),
            fsync: false,
            sync_interval: Duration::from_secs(1),
        };
        let spool = Spool::open(&config).unwrap();
        let tokens = (0..batches)
            .map(|sequence| spool.token(sequence, Table::SampleValues))
            .collect();
        let sink = Arc::new(TokenRecorder::default());
        sink.failures.store(failures, Ordering::SeqCst);
        let stats = Arc::new(WriterStats::default());
        let (sender, inbox) = mpsc::channel(16);
        let writer = tokio::spawn(run_spooled_writer(
            sink.clone(),
            limits(1, 1000),
            inbox,
            stats.clone(),
            spool,
        ));
        SpooledRun {
            config,
            tokens,
            sink,
            stats,
            sender,
            writer,
        }
    }

    /// The write-ahead spool: a scrape is on disk as soon as the writer accepted it, long
    /// before its batch is due (`max_age` a minute here); a writer that dies then (its task
    /// aborted, as a `kill -9` would end it) leaves the scrapes for the next start, which
    /// delivers them: every accepted scrape once, per table under its own token.
    #[tokio::test(start_paused = true)]
    async fn accepted_scrapes_are_on_disk_at_once_and_delivered_after_a_crash() {
        let dir = std::env::temp_dir().join(format!("epicenter-writer-ahead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = crate::spool::SpoolConfig {
            path: dir.clone(),
            max_size: ByteSize(1 << 30),
            max_age: Duration::from_secs(3600),
            fsync: true,
            sync_interval: Duration::from_millis(100),
        };
        let sink = Arc::new(TokenRecorder::default());
        let stats = Arc::new(WriterStats::default());
        let (sender, inbox) = mpsc::channel(16);
        let writer = tokio::spawn(run_spooled_writer(
            sink.clone(),
            limits(1_000_000, 60_000),
            inbox,
            stats.clone(),
            Spool::open(&config).unwrap(),
        ));
        for rows in [2, 3, 4] {
            sender.send(outcome(rows)).await.unwrap();
        }
        let open_segment = dir.join(format!("{:020}.open", 0));
        // 3 records of `up` samples (27 bytes a row) and a scrape row each.
        let started = std::time::Instant::now();
        while std::fs::metadata(&open_segment).map_or(0, |metadata| metadata.len()) < 9 * 27
            && started.elapsed() < Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(sink.writes.lock().unwrap().is_empty(), "the batch is not due yet");
        writer.abort();
        let _ = writer.await;
        drop(sender);
        // The delivery task sees the batcher gone and lets go of the spool.
        let spool = loop {
            match Spool::open(&config) {
                Ok(spool) => break spool,
                Err(_) if started.elapsed() < Duration::from_secs(10) => {
                    tokio::time::sleep(Duration::from_millis(1)).await
                }
                Err(error) => panic!("{error}"),
            }
        };
        assert_eq!(spool.backlog().0, 1, "the open segment is a batch at the next start");
        let tokens: Vec<String> = [Table::Series, Table::SampleValues, Table::Scrapes]
            .iter()
            .map(|table| spool.token(0, *table))
            .collect();
        let (sender, inbox) = mpsc::channel(16);
        drop(sender);
        let stats = Arc::new(WriterStats::default());
        run_spooled_writer(sink.clone(), limits(1_000_000, 60_000), inbox, stats.clone(), spool).await;
        let writes = sink.writes.lock().unwrap().clone();
        let row_bytes = 1 + 2 + 8 + 8 + 8;
        let written: Vec<(Table, String)> = writes.iter().map(|(table, token, _)| (*table, token.clone())).collect();
        assert_eq!(
            written,
            [
                (Table::Series, tokens[0].clone()),
                (Table::SampleValues, tokens[1].clone()),
                (Table::Scrapes, tokens[2].clone())
            ]
        );
        assert_eq!(writes[1].2, 9 * row_bytes);
        assert_eq!(stats.scrape_rows_written.load(Ordering::SeqCst), 3);
        assert_eq!(stats.sample_rows_written.load(Ordering::SeqCst), 9);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A replay after a crash sends only the inserts the store had not acknowledged: a
    /// batch whose `series` and `sample_values` inserts were acknowledged sends its `scrapes`
    /// alone.
    #[tokio::test(start_paused = true)]
    async fn a_replay_sends_only_the_inserts_not_acknowledged() {
        let run = spooled_writer("acked", 1 << 30, 0, 1);
        drop(run.sender);
        run.writer.await.unwrap();
        let config = run.config.clone();
        let mut spool = Spool::open(&config).unwrap();
        let mut batch = SpooledBatch::default();
        let record = outcome(5);
        batch.series_rows = rows::encode_samples(&record.rows, &mut batch.samples, &mut batch.series);
        batch.sample_rows = 5;
        rows::encode_scrapes(std::slice::from_ref(&record.report), &mut batch.scrapes);
        batch.scrape_rows = 1;
        spool.append(&mut batch).unwrap();
        spool.acknowledge(batch.sequence, Table::Series);
        spool.acknowledge(batch.sequence, Table::SampleValues);
        let scrapes_token = spool.token(batch.sequence, Table::Scrapes);
        let sink = Arc::new(TokenRecorder::default());
        let stats = Arc::new(WriterStats::default());
        let (sender, inbox) = mpsc::channel(16);
        drop(sender);
        run_spooled_writer(sink.clone(), limits(1, 1000), inbox, stats.clone(), spool).await;
        let writes = sink.writes.lock().unwrap().clone();
        assert_eq!(writes, [(Table::Scrapes, scrapes_token, batch.scrapes.len())]);
        assert_eq!(
            stats.sample_rows_written.load(Ordering::SeqCst),
            5,
            "counted as stored before"
        );
        assert_eq!(Spool::open(&config).unwrap().backlog(), (0, 0));
        let _ = std::fs::remove_dir_all(&config.path);
    }

    /// Delivery takes the batch spooled last from memory when it is next, and the others
    /// from disk: with a backlog (the store failing at first) and without, every batch
    /// reaches the store once, in spool order, with its own bytes.
    #[tokio::test(start_paused = true)]
    async fn spooled_batches_arrive_once_each_in_order_with_or_without_a_backlog() {
        let run = spooled_writer("order", 1 << 30, 4, 6);
        for rows in 1..=6 {
            run.sender.send(outcome(rows)).await.unwrap();
        }
        drop(run.sender);
        run.writer.await.unwrap();
        // A `sample_values` row of `up`: the metric (1-byte length, 2 bytes), the series
        // id, the time and the value (8 bytes each).
        let row_bytes = 1 + 2 + 8 + 8 + 8;
        let samples = run.sink.sample_writes();
        let expected: Vec<(String, usize)> = run
            .tokens
            .iter()
            .zip(1..=6)
            .map(|(token, rows)| (token.clone(), rows * row_bytes))
            .collect();
        assert_eq!(samples, expected);
        assert_eq!(run.stats.sample_rows_written.load(Ordering::SeqCst), 21);
        assert_eq!(
            Spool::open(&run.config).unwrap().backlog(),
            (0, 0),
            "delivered batches leave the spool"
        );
        let _ = std::fs::remove_dir_all(&run.config.path);
    }

    /// Through an outage past `max_size` the spool drops the oldest batches waiting, but not
    /// the one delivery is retrying: that one is stored when the store is back, the dropped
    /// one is not, and each is counted once (written or dropped).
    #[tokio::test(start_paused = true)]
    async fn the_batch_being_retried_is_not_dropped_and_older_waiting_ones_are() {
        // Every batch is larger than `max_size`: each append drops all it may.
        let run = spooled_writer("dropped", 1, u64::MAX, 3);
        run.sender.send(outcome(3)).await.unwrap();
        // Batch 0's first insert fails; its retry waits at least 200 ms, while the steps
        // below take a few (paused) milliseconds.
        while run.sink.attempts.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        run.sender.send(outcome(5)).await.unwrap();
        run.sender.send(outcome(7)).await.unwrap();
        while run.stats.spool_dropped_rows.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(
            run.sink.attempts.load(Ordering::SeqCst),
            1,
            "batch 1 was dropped before batch 0's retry"
        );
        run.sink.failures.store(0, Ordering::SeqCst);
        drop(run.sender);
        run.writer.await.unwrap();
        let delivered: Vec<String> = run.sink.sample_writes().into_iter().map(|(token, _)| token).collect();
        assert_eq!(delivered, [run.tokens[0].clone(), run.tokens[2].clone()]);
        assert_eq!(run.stats.sample_rows_written.load(Ordering::SeqCst), 3 + 7);
        assert_eq!(run.stats.spool_dropped_rows.load(Ordering::SeqCst), 5);
        let _ = std::fs::remove_dir_all(&run.config.path);
    }

    /// A series whose `series` row was in a batch the spool dropped writes its row again with
    /// its next sample, so its labels reach the store within the hour.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_batch_rearms_the_series_rows_it_held() {
        let series = |name: &str| Arc::new(Series::new(name.into(), Default::default(), &Default::default()));
        let (first, dropped, other) = (series("a"), series("b"), series("c"));
        let run = spooled_writer("rearm", 1, u64::MAX, 4);
        run.sender.send(outcome_of(&first, 1)).await.unwrap();
        while run.sink.attempts.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Batch 1 holds `b`'s row; batch 2's append drops it (batch 0 is being delivered).
        run.sender.send(outcome_of(&dropped, 1)).await.unwrap();
        run.sender.send(outcome_of(&other, 1)).await.unwrap();
        while run.stats.spool_dropped_rows.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // `b` again: batch 3 carries its row (batch 2, `c`, is dropped in turn).
        run.sender.send(outcome_of(&dropped, 1)).await.unwrap();
        while run.stats.spool_dropped_rows.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        run.sink.failures.store(0, Ordering::SeqCst);
        drop(run.sender);
        run.writer.await.unwrap();
        let series_rows: Vec<String> = run
            .sink
            .writes
            .lock()
            .unwrap()
            .iter()
            .filter(|(table, _, _)| *table == Table::Series)
            .map(|(_, token, _)| token.clone())
            .collect();
        // The batches' `series` inserts, each under its own table's token.
        let series_token = |batch: usize| run.tokens[batch].replace("-sample_values", "-series");
        assert_eq!(series_rows, [series_token(0), series_token(3)]);
        let _ = std::fs::remove_dir_all(&run.config.path);
    }

    /// Through an outage the log says it once when delivery starts failing, once a minute
    /// while it fails (not at every retry) and once when it recovers, each with the backlog.
    #[test]
    fn an_outage_is_said_when_it_starts_once_a_minute_and_when_it_ends() {
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut notice = DeliveryNotice::default();
        assert_eq!(notice.delivered(at(0), "no batch waiting"), None, "nothing failed");
        assert_eq!(
            notice.failed(at(1), "refused", "1 batch (8.0 KiB), the oldest 1 s old").as_deref(),
            Some("delivery to the store is failing (refused); batches stay spooled and are retried: 1 batch (8.0 KiB), the oldest 1 s old waiting")
        );
        assert!(notice.is_failing());
        for second in [2, 10, 30, 60] {
            assert_eq!(notice.failed(at(second), "refused", "x"), None, "at {second} s");
        }
        assert_eq!(
            notice.failed(at(61), "refused", "61 batches (488.0 KiB), the oldest 61 s old").as_deref(),
            Some("delivery to the store still failing after 60 s (refused): 61 batches (488.0 KiB), the oldest 61 s old waiting")
        );
        assert_eq!(notice.failed(at(120), "refused", "x"), None);
        assert!(notice.failed(at(121), "refused", "x").is_some());
        assert_eq!(
            notice.delivered(at(131), "130 batches (1.0 MiB), the oldest 130 s old").as_deref(),
            Some("delivery to the store recovered after 130 s of failures: 130 batches (1.0 MiB), the oldest 130 s old still to deliver")
        );
        assert!(!notice.is_failing());
        assert_eq!(notice.delivered(at(132), "x"), None, "said once");
        // A new outage is said anew.
        assert!(notice.failed(at(200), "refused", "x").unwrap().contains("is failing"));
        assert_eq!(describe_bytes(812), "812 B");
        assert_eq!(describe_bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
    }

    /// The spool's backlog in the writer's figures: while the store fails every batch waits
    /// (counted with its bytes on disk and the oldest one's time, delivery marked failing);
    /// once it answers, none does.
    #[tokio::test(start_paused = true)]
    async fn the_spools_backlog_is_counted_through_an_outage() {
        let run = spooled_writer("backlog", 1 << 30, u64::MAX, 3);
        let before_ms = wall_ms();
        for rows in [2, 3, 4] {
            run.sender.send(outcome(rows)).await.unwrap();
        }
        while run.stats.spool_batches.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let on_disk: u64 = std::fs::read_dir(&run.config.path)
            .unwrap()
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".batch"))
            .map(|entry| entry.metadata().unwrap().len())
            .sum();
        assert_eq!(run.stats.spool_bytes.load(Ordering::SeqCst), on_disk);
        let oldest = run.stats.spool_oldest_written_ms.load(Ordering::SeqCst);
        assert!(
            oldest >= before_ms - 1000 && oldest <= wall_ms(),
            "{oldest} vs {before_ms}"
        );
        assert!(run.stats.delivery_failing.load(Ordering::SeqCst));
        assert_eq!(run.stats.spool_oldest_age_seconds(oldest + 2_500), 2.5);
        assert!(run.stats.describe_backlog(oldest + 2_500).starts_with("3 batches ("));
        run.sink.failures.store(0, Ordering::SeqCst);
        drop(run.sender);
        run.writer.await.unwrap();
        assert_eq!(run.stats.spool_batches.load(Ordering::SeqCst), 0);
        assert_eq!(run.stats.spool_bytes.load(Ordering::SeqCst), 0);
        assert_eq!(run.stats.spool_oldest_written_ms.load(Ordering::SeqCst), 0);
        assert_eq!(run.stats.spool_oldest_age_seconds(wall_ms()), 0.0);
        assert!(!run.stats.delivery_failing.load(Ordering::SeqCst));
        assert_eq!(run.stats.sample_rows_written.load(Ordering::SeqCst), 9);
        let _ = std::fs::remove_dir_all(&run.config.path);
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
