//! The write-ahead step of [`super::run_spooled_writer`]: each scrape the writer accepts is
//! appended to the spool's open segment before it joins the batch in memory, so a `kill -9`
//! loses only what had not reached the writer yet. A scrape that finds the spool's disk full
//! first makes room by dropping the oldest batches waiting ([`Spool::make_room`]); only when
//! nothing is left to drop is the scrape itself dropped (counted, logged at most every
//! [`FULL_DISK_SAID_EVERY`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{with_shared, Batch, Shared, WriterStats};
use crate::rows::{self, ScrapeOutcome, Series};
use crate::spool::{segment, Segment, SpoolError, SpooledBatch};

/// How often the log repeats that scrapes are dropped for want of disk.
pub(super) const FULL_DISK_SAID_EVERY: Duration = Duration::from_secs(10);

/// Free bytes asked beyond a record when the disk is full: the next few records fit too.
const ROOM_BEYOND_THE_RECORD: u64 = 64 << 10;

/// The writer's side of the write-ahead spool: the open segment, and what the log last said
/// of scrapes dropped on a full disk.
#[derive(Default)]
pub(super) struct WriteAhead {
    /// The segment this batch's scrapes are appended to; `None` until the batch's first.
    pub(super) segment: Option<Segment>,
    /// Scrapes dropped since the log last said so, and when it did.
    dropped_unsaid: u64,
    said_at: Option<Instant>,
}

/// One scrape as a record: its rows for the three tables, and the series whose `series` rows
/// it holds.
fn encode_scrape(outcome: &ScrapeOutcome) -> (SpooledBatch, Vec<Arc<Series>>) {
    let mut record = SpooledBatch::default();
    let mut noted = Vec::new();
    record.series_rows =
        rows::encode_samples_noting(&outcome.rows, &mut record.samples, &mut record.series, &mut noted);
    record.sample_rows = outcome.rows.len() as u64;
    rows::encode_scrapes(std::slice::from_ref(&outcome.report), &mut record.scrapes);
    record.scrape_rows = 1;
    (record, noted)
}

impl WriteAhead {
    /// Appends `outcome` to the open segment (begun if there is none), then to `batch`. On a
    /// full disk the oldest batches waiting are dropped to make room and the write is tried
    /// once more; a scrape that still cannot be written is dropped, its series re-armed.
    pub(super) async fn log(
        &mut self,
        shared: &Arc<std::sync::Mutex<Shared>>,
        outcome: &ScrapeOutcome,
        batch: &mut Batch,
        stats: &WriterStats,
    ) {
        let (record, noted) = encode_scrape(outcome);
        let bytes = Arc::new(segment::encode_record(&record));
        let mut result = self.write(shared, bytes.clone()).await;
        if let Err(error) = &result {
            let needed = bytes.len() as u64 + ROOM_BEYOND_THE_RECORD;
            let dropped = with_shared(shared, move |shared| {
                let dropped = shared.spool.make_room(needed);
                dropped.iter().for_each(|(sequence, _)| shared.rearm(*sequence));
                (dropped, super::backlog_of(&shared.spool))
            })
            .await;
            if let Some((dropped, backlog)) = dropped {
                stats.note_backlog(backlog);
                for (sequence, rows) in &dropped {
                    stats.spool_dropped_rows.fetch_add(*rows, Ordering::Relaxed);
                    tracing::error!(
                        sequence,
                        rows,
                        cause = %error,
                        "the spool's disk is full: its oldest waiting batch was dropped to make room for new scrapes"
                    );
                }
                if !dropped.is_empty() {
                    result = self.write(shared, bytes).await;
                }
            }
        }
        match result {
            Ok(()) => batch.extend(record, noted),
            Err(error) => {
                noted.iter().for_each(|series| series.forget_series_row());
                stats
                    .spool_dropped_rows
                    .fetch_add(record.sample_rows, Ordering::Relaxed);
                stats
                    .sample_rows_failed
                    .fetch_add(record.sample_rows, Ordering::Relaxed);
                self.dropped_unsaid += 1;
                let now = Instant::now();
                if self
                    .said_at
                    .is_none_or(|said| now.duration_since(said) >= FULL_DISK_SAID_EVERY)
                {
                    tracing::error!(
                        %error,
                        scrapes = self.dropped_unsaid,
                        "cannot spool the scrape and no older batch is left to drop (disk full?): it is dropped"
                    );
                    self.dropped_unsaid = 0;
                    self.said_at = Some(now);
                }
            }
        }
    }

    /// Writes one record to the open segment, beginning one when there is none (on the
    /// blocking pool; the segment is moved there and back).
    async fn write(&mut self, shared: &Arc<std::sync::Mutex<Shared>>, record: Arc<Vec<u8>>) -> Result<(), SpoolError> {
        let segment = match self.segment.take() {
            Some(segment) => segment,
            None => with_shared(shared, |shared| shared.spool.begin())
                .await
                .unwrap_or_else(|| Err(lock_lost()))?,
        };
        let (segment, written) = tokio::task::spawn_blocking(move || {
            let mut segment = segment;
            let written = segment.append(&record);
            (segment, written)
        })
        .await
        .map_err(|_| lock_lost())?;
        let path = format!("segment {}", segment.sequence());
        self.segment = Some(segment);
        written.map_err(|error| SpoolError {
            path,
            message: error.to_string(),
        })
    }

    /// Syncs the open segment (the `storage.spool.sync_interval` timer), logging a failure.
    pub(super) async fn sync(&mut self) {
        let Some(segment) = self.segment.take() else { return };
        let synced = tokio::task::spawn_blocking(move || {
            let mut segment = segment;
            let synced = segment.sync();
            (segment, synced)
        })
        .await;
        match synced {
            Ok((segment, synced)) => {
                if let Err(error) = synced {
                    tracing::warn!(%error, sequence = segment.sequence(), "cannot sync the spool's open segment");
                }
                self.segment = Some(segment);
            }
            Err(error) => tracing::error!(%error, "the spool's sync task failed"),
        }
    }
}

fn lock_lost() -> SpoolError {
    SpoolError {
        path: "spool".to_string(),
        message: "the spool's lock is poisoned, or its task failed".to_string(),
    }
}
