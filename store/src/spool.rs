//! The on-disk spool, a write-ahead log: every scrape the writer accepts is appended to the
//! open segment as it arrives (in the page cache at once, synced every `sync_interval`), each
//! batch for the store is the segment sealed when the batch is due, and a batch stays on disk
//! until the store has acknowledged its inserts (series, samples, scrapes). A ClickHouse outage
//! loses nothing accepted, and a `kill -9` of epicenter only the scrapes still in flight (not
//! yet through the writer's inbox).
//!
//! Layout (`storage.spool.path`): `<sequence>.open`, the segment being written (at most one;
//! the format is in [`segment`]), and `<sequence>.batch`, the sealed ones waiting (20 digits,
//! so name order is arrival order): a segment is synced (`fsync: true`, the default), renamed
//! and the directory synced when sealed. At open, a segment a crash left open is cut after its
//! last whole record and sealed, so its scrapes are delivered. `spool.id` holds the spool's
//! identity, which with the sequence and the table makes each insert's
//! `insert_deduplication_token` ([`Spool::token`]): distinct per table and the same across
//! restarts. `<sequence>.acked` lists the tables whose insert of that batch the store
//! acknowledged, so a replay after a crash sends only the others. Batches of an older
//! epicenter are read too: `EPSPOOL2` (one record of the three payloads) and `EPSPOOL1`
//! (before schema 3: wide `samples` rows, split into values and series on the way). A batch
//! that fails its checksum is set aside as `<sequence>.corrupt` with a log line, never sent.
//!
//! The spool's budget is `max_size` bytes and the volume's free space: when a batch is sealed
//! the oldest waiting batches are dropped while the spool is past `max_size`, while the oldest
//! is past `max_age`, or while the volume has less free space than the batch just sealed took
//! (room for the next); a scrape that finds the disk full drops the oldest waiting batches
//! until it fits ([`Spool::make_room`]). Never the newest, nor the one being delivered; each
//! drop is logged and counted (`epicenter_spool_dropped_rows_total`), never silent.
//! Blocking file I/O: call it from the blocking pool.

use std::fs;
use std::path::{Path, PathBuf};

use std::time::{Duration, SystemTime};

use epicenter_config::{ByteSize, Problems, PromDuration};
use serde::Deserialize;

use crate::schema::Table;

pub mod segment;

pub use segment::Segment;

/// `storage.spool`, as written in the config: on unless `enabled: false`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpoolSettings {
    /// Whether batches go through the spool. Default true; false sends each batch straight
    /// to the store with 3 attempts, so an outage longer than a second loses data.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Directory of the spool (created if missing). Default `spool` inside
    /// `storage.embedded.path` (`./data/spool`), whichever store is used.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Most bytes the spool holds; past it the oldest batches are dropped. Default `1GiB`.
    #[serde(default = "default_max_size")]
    pub max_size: ByteSize,
    /// Oldest batch kept; older ones are dropped (counted, logged). Default `24h`: an outage
    /// over a night is replayed, one over days is not held for ever.
    #[serde(default = "default_max_age")]
    pub max_age: PromDuration,
    /// Sync the open segment every `sync_interval`, and each batch (and the directory) when it
    /// is sealed. Default true; false leaves it to the kernel (a power loss may then take the
    /// last seconds; a `kill -9` of epicenter takes nothing either way: written is in the page
    /// cache).
    #[serde(default = "default_true")]
    pub fsync: bool,
    /// How often the open segment is synced to disk (with `fsync: true`), as Prometheus's WAL
    /// bounds what a power loss takes. Default `1s`.
    #[serde(default = "default_sync_interval")]
    pub sync_interval: PromDuration,
}

impl Default for SpoolSettings {
    fn default() -> Self {
        SpoolSettings {
            enabled: true,
            path: None,
            max_size: default_max_size(),
            max_age: default_max_age(),
            fsync: true,
            sync_interval: default_sync_interval(),
        }
    }
}

impl SpoolSettings {
    /// Records a zero `max_size` or `max_age` (keys `storage.spool.max_size`, `.max_age`).
    pub fn problems(&self, problems: &mut Problems) {
        if self.max_size.0 == 0 {
            problems.push("storage.spool.max_size", "must be greater than 0");
        }
        if self.max_age.0.is_zero() {
            problems.push("storage.spool.max_age", "must be greater than 0");
        }
        if self.sync_interval.0.is_zero() {
            problems.push("storage.spool.sync_interval", "must be greater than 0");
        }
    }

    /// The spool to open, its path resolved against `default_path` (None when disabled).
    pub fn resolve(&self, default_path: &Path) -> Option<SpoolConfig> {
        self.enabled.then(|| SpoolConfig {
            path: self.path.clone().unwrap_or_else(|| default_path.to_path_buf()),
            max_size: self.max_size,
            max_age: self.max_age.0,
            fsync: self.fsync,
            sync_interval: self.sync_interval.0,
        })
    }
}

/// The spool to open: [`SpoolSettings`] with its path resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct SpoolConfig {
    /// Directory of the spool.
    pub path: PathBuf,
    /// Most bytes held (past it the oldest batches are dropped).
    pub max_size: ByteSize,
    /// Oldest batch held (older ones are dropped when the next batch is appended).
    pub max_age: Duration,
    /// Sync the open segment on a timer and each batch and the directory when sealed.
    pub fsync: bool,
    /// How often the open segment is synced (with `fsync`).
    pub sync_interval: Duration,
}

fn default_max_size() -> ByteSize {
    ByteSize(1 << 30)
}

fn default_max_age() -> PromDuration {
    PromDuration(Duration::from_secs(24 * 3600))
}

fn default_sync_interval() -> PromDuration {
    PromDuration(Duration::from_secs(1))
}

fn default_true() -> bool {
    true
}

/// One batch as spooled: RowBinary rows for `sample_values`, `series` and `scrapes`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpooledBatch {
    /// Position in the spool (arrival order).
    pub sequence: u64,
    /// Sample rows in `sample_values`.
    pub sample_rows: u64,
    /// RowBinary of the sample rows (`schema::SAMPLE_VALUE_COLUMNS`).
    pub samples: Vec<u8>,
    /// Rows in `series`.
    pub series_rows: u64,
    /// RowBinary of the series rows (`schema::SERIES_COLUMNS`).
    pub series: Vec<u8>,
    /// Scrape rows in `scrapes`.
    pub scrape_rows: u64,
    /// RowBinary of the scrape rows.
    pub scrapes: Vec<u8>,
}

/// Batches of epicenter before the write-ahead spool: one record of three payloads.
const MAGIC_V2: &[u8; 8] = b"EPSPOOL2";
const HEADER_V2: usize = 8 + 4 + 48;
/// Records of epicenter before schema 3: two payloads, wide `samples` rows and scrapes.
const MAGIC_V1: &[u8; 8] = b"EPSPOOL1";
const HEADER_V1: usize = 8 + 4 + 32;

/// A batch waiting: its sequence, bytes on disk and when it was written.
type Queued = (u64, u64, SystemTime);

/// An open spool directory.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    id: String,
    fsync: bool,
    max_size: u64,
    max_age: Duration,
    sync_interval: Duration,
    /// Sealed batches on disk, oldest first.
    queued: std::collections::VecDeque<Queued>,
    /// The exclusive lock on `spool.lock`, held while the spool is open.
    _lock: nix::fcntl::Flock<fs::File>,
    bytes: u64,
    next: u64,
    /// The batch delivery is sending ([`Spool::claim_front`]): not dropped for `max_size` or
    /// `max_age` while it is (the spool may exceed `max_size` by it), so what a retry through
    /// an outage finally stores is never also counted dropped, and its `series` rows arrive.
    delivering: Option<u64>,
    /// Tests: the volume's size, holding nothing but the spool's batches (free space is what
    /// they leave).
    #[cfg(test)]
    volume: Option<u64>,
}

/// A spool failure, naming the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("spool {path}: {message}")]
pub struct SpoolError {
    /// The file or directory.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

fn error_at(path: &Path, error: impl std::fmt::Display) -> SpoolError {
    SpoolError {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

/// The file of batch `sequence` in `dir` with `extension`.
fn file_in(dir: &Path, sequence: u64, extension: &str) -> PathBuf {
    dir.join(format!("{sequence:020}.{extension}"))
}

impl Spool {
    /// Opens (creating) the spool in `config.path` and lists the batches it holds from an
    /// earlier run, which come first. A segment a crash left open is cut after its last whole
    /// record and sealed (logged with what it held); leftover `.tmp` files of an older
    /// epicenter are removed.
    ///
    /// # Errors
    /// The directory cannot be created or read, another process holds it, or a segment left
    /// open cannot be recovered: the error names the file.
    pub fn open(config: &SpoolConfig) -> Result<Spool, SpoolError> {
        let dir = config.path.clone();
        fs::create_dir_all(&dir).map_err(|error| error_at(&dir, error))?;
        let lock_path = dir.join("spool.lock");
        let lock_file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|error| error_at(&lock_path, error))?;
        let lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
            error_at(
                &dir,
                "in use by another epicenter process (each process needs a spool of its own: set storage.spool.path)",
            )
        })?;
        let mut queued = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|error| error_at(&dir, error))? {
            let entry = entry.map_err(|error| error_at(&dir, error))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp") {
                let _ = fs::remove_file(&path);
                continue;
            }
            let (stem, sealed) = match (name.strip_suffix(".batch"), name.strip_suffix(".open")) {
                (Some(stem), _) => (stem, true),
                (None, Some(stem)) => (stem, false),
                (None, None) => continue,
            };
            let Ok(sequence) = stem.parse::<u64>() else { continue };
            if !sealed && !Spool::recover_open(&dir, &path, sequence)? {
                continue;
            }
            let path = file_in(&dir, sequence, "batch");
            let metadata = fs::metadata(&path).ok();
            let size = metadata.as_ref().map_or(0, fs::Metadata::len);
            let written = metadata
                .and_then(|metadata| metadata.modified().ok())
                .unwrap_or_else(SystemTime::now);
            queued.push((sequence, size, written));
        }
        queued.sort_unstable();
        let next = queued.last().map_or(0, |(sequence, _, _)| sequence + 1);
        // The id names the tokens of the batches on disk, so a batch replayed after a
        // crash is stored once. An empty spool has none to replay, and its sequence starts
        // again at 0: it gets a new id, or its batches would carry the tokens of the last
        // run's and the store would drop them as duplicates (a restart lost every batch
        // inside the deduplication window).
        let id_path = dir.join("spool.id");
        let kept_id = fs::read_to_string(&id_path)
            .ok()
            .map(|text| text.trim().to_string())
            .filter(|id| !id.is_empty() && !queued.is_empty());
        let id = match kept_id {
            Some(id) => id,
            None => {
                let id = crate::schema::new_batch_token().replace('-', "");
                let temporary = dir.join("spool.id.tmp");
                fs::write(&temporary, format!("{id}\n"))
                    .and_then(|()| fs::rename(&temporary, &id_path))
                    .map_err(|error| error_at(&id_path, error))?;
                id
            }
        };
        // Acknowledgements of batches no longer spooled (a crash between the two removals).
        for entry in fs::read_dir(&dir).map_err(|error| error_at(&dir, error))?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let sequence = name.strip_suffix(".acked").and_then(|stem| stem.parse::<u64>().ok());
            if sequence.is_some_and(|sequence| !queued.iter().any(|(queued, _, _)| *queued == sequence)) {
                let _ = fs::remove_file(entry.path());
            }
        }
        let bytes = queued.iter().map(|(_, size, _)| size).sum();
        Ok(Spool {
            dir,
            id,
            fsync: config.fsync,
            max_size: config.max_size.0,
            max_age: config.max_age,
            sync_interval: config.sync_interval,
            queued: queued.into(),
            _lock: lock,
            bytes,
            next,
            delivering: None,
            #[cfg(test)]
            volume: None,
        })
    }

    /// Seals the segment `path` (sequence `sequence`) a crash left open: cut after its last
    /// whole record, then renamed to `.batch`; one without records is removed. Whether a
    /// batch came of it.
    fn recover_open(dir: &Path, path: &Path, sequence: u64) -> Result<bool, SpoolError> {
        let (records, broken) = segment::recover(path).map_err(|error| error_at(path, error))?;
        if records == 0 {
            let _ = fs::remove_file(path);
            return Ok(false);
        }
        fs::rename(path, file_in(dir, sequence, "batch")).map_err(|error| error_at(path, error))?;
        tracing::warn!(
            sequence,
            scrapes = records,
            cut = broken.unwrap_or("nothing"),
            "spool: the segment being written when epicenter stopped is recovered and will be delivered"
        );
        Ok(true)
    }

    /// The `insert_deduplication_token` of batch `sequence`'s insert into `table`: distinct
    /// per table (one table's insert is never taken for another's), the same across restarts
    /// (a replayed insert that had landed is stored once).
    pub fn token(&self, sequence: u64, table: Table) -> String {
        format!("spool-{}-{sequence}-{}", self.id, table.name())
    }

    /// How often the open segment is to be synced ([`Segment::sync`]; with `fsync` only).
    pub fn sync_interval(&self) -> Option<Duration> {
        self.fsync.then_some(self.sync_interval)
    }

    /// Batches waiting, and their bytes on disk.
    pub fn backlog(&self) -> (u64, u64) {
        (self.queued.len() as u64, self.bytes)
    }

    /// When the oldest batch waiting was written (its file's modification time for a batch
    /// of an earlier run); `None` when none waits.
    pub fn oldest_written(&self) -> Option<SystemTime> {
        self.queued.front().map(|(_, _, written)| *written)
    }

    fn file(&self, sequence: u64, extension: &str) -> PathBuf {
        file_in(&self.dir, sequence, extension)
    }

    /// Starts the next segment (`<sequence>.open`), which scrapes are appended to until
    /// [`Spool::seal`].
    ///
    /// # Errors
    /// The file cannot be created (disk full, permissions); the sequence is not used up.
    pub fn begin(&mut self) -> Result<Segment, SpoolError> {
        let path = self.file(self.next, "open");
        let segment = Segment::create(path.clone(), self.next).map_err(|error| error_at(&path, error))?;
        self.next += 1;
        Ok(segment)
    }

    /// Seals `segment` as the newest batch waiting (synced first with `fsync`, renamed, the
    /// directory synced), then keeps the budget: returns the sequences and sample rows of the
    /// batches dropped for `max_size`, `max_age` or the volume's free space (oldest first,
    /// never the one sealed nor the one being delivered). A segment without records is
    /// removed instead.
    ///
    /// # Errors
    /// The sync or the rename failed; the segment's file stays `.open` and is recovered at
    /// the next start.
    pub fn seal(&mut self, mut segment: Segment) -> Result<Vec<(u64, u64)>, SpoolError> {
        if segment.records == 0 {
            let _ = fs::remove_file(&segment.path);
            return Ok(Vec::new());
        }
        let sealed = self.file(segment.sequence, "batch");
        let done = (|| {
            if self.fsync {
                segment.sync()?;
            }
            fs::rename(&segment.path, &sealed)?;
            if self.fsync {
                fs::File::open(&self.dir)?.sync_all()?;
            }
            Ok::<(), std::io::Error>(())
        })();
        done.map_err(|error| error_at(&segment.path, error))?;
        let now = SystemTime::now();
        self.queued.push_back((segment.sequence, segment.len, now));
        self.bytes += segment.len;
        Ok(self.keep_budget(now, segment.len))
    }

    /// Appends a whole batch as a segment of one record and seals it ([`Spool::begin`],
    /// [`Segment::append`], [`Spool::seal`]): `batch.sequence` is set; returns what the
    /// budget dropped.
    ///
    /// # Errors
    /// As [`Spool::begin`] and [`Spool::seal`]; a failed write leaves the spool as it was.
    pub fn append(&mut self, batch: &mut SpooledBatch) -> Result<Vec<(u64, u64)>, SpoolError> {
        let mut segment = self.begin()?;
        batch.sequence = segment.sequence;
        if let Err(error) = segment.append(&segment::encode_record(batch)) {
            let _ = fs::remove_file(&segment.path);
            return Err(error_at(&segment.path, error));
        }
        self.seal(segment)
    }

    /// Free bytes of the spool's volume for an unprivileged writer (`statvfs`); `None` when
    /// it cannot be read.
    fn free_space(&self) -> Option<u64> {
        #[cfg(test)]
        if let Some(volume) = self.volume {
            return Some(volume.saturating_sub(self.bytes));
        }
        let stats = nix::sys::statvfs::statvfs(&self.dir).ok()?;
        Some((stats.blocks_available() as u64).saturating_mul(stats.fragment_size() as u64))
    }

    /// Drops the oldest batches waiting (never the newest nor the one delivered) while the
    /// spool is past `max_size`, the oldest is past `max_age` at `now`, or the volume has less
    /// than `reserve` bytes free.
    fn keep_budget(&mut self, now: SystemTime, reserve: u64) -> Vec<(u64, u64)> {
        let max_age = self.max_age;
        let too_old = |written: SystemTime| now.duration_since(written).is_ok_and(|age| age > max_age);
        let mut dropped = Vec::new();
        let mut at = 0;
        while at + 1 < self.queued.len() {
            let (sequence, _, written) = self.queued[at];
            if self.delivering == Some(sequence) {
                at += 1;
                continue;
            }
            let short_of_space = self.free_space().is_some_and(|free| free < reserve);
            if self.bytes <= self.max_size && !too_old(written) && !short_of_space {
                break;
            }
            dropped.push(self.drop_batch(sequence));
        }
        dropped
    }

    /// Makes room for `needed` bytes on a full volume: drops the oldest batches waiting (not
    /// the one being delivered) until that much is free or none is left to drop. Returns
    /// what it dropped, oldest first (empty: nothing could go).
    pub fn make_room(&mut self, needed: u64) -> Vec<(u64, u64)> {
        let mut dropped = Vec::new();
        let mut at = 0;
        while at < self.queued.len() && self.free_space().is_none_or(|free| free < needed) {
            let (sequence, _, _) = self.queued[at];
            if self.delivering == Some(sequence) {
                at += 1;
                continue;
            }
            dropped.push(self.drop_batch(sequence));
        }
        dropped
    }

    /// Removes batch `sequence` for the budget: its sequence and sample rows.
    fn drop_batch(&mut self, sequence: u64) -> (u64, u64) {
        let rows = self.read(sequence).map_or(0, |batch| batch.sample_rows);
        self.remove(sequence);
        (sequence, rows)
    }

    /// The sequence of the oldest batch waiting, marked as the one being delivered: until it
    /// is removed it is not dropped for `max_size` or `max_age`.
    pub fn claim_front(&mut self) -> Option<u64> {
        let (front, _, _) = *self.queued.front()?;
        self.delivering = Some(front);
        Some(front)
    }

    /// The oldest batch waiting, read and checked. A batch that fails its checksum is set
    /// aside (`.corrupt`) and reported as the error; the next call goes on with the next.
    pub fn oldest(&mut self) -> Option<Result<SpooledBatch, SpoolError>> {
        let (sequence, _, _) = *self.queued.front()?;
        match self.read(sequence) {
            Ok(batch) => Some(Ok(batch)),
            Err(error) => {
                let _ = fs::rename(self.file(sequence, "batch"), self.file(sequence, "corrupt"));
                self.forget(sequence);
                Some(Err(error))
            }
        }
    }

    fn read(&self, sequence: u64) -> Result<SpooledBatch, SpoolError> {
        let path = self.file(sequence, "batch");
        let record = fs::read(&path).map_err(|error| error_at(&path, error))?;
        let broken = |message: &str| error_at(&path, message);
        if let Some(scanned) = segment::scan(&record) {
            if let Some(why) = scanned.broken {
                return Err(broken(&format!("{why} after {} whole records", scanned.records)));
            }
            return Ok(SpooledBatch {
                sequence,
                ..scanned.batch
            });
        }
        let version_1 = record.len() >= HEADER_V1 && &record[..8] == MAGIC_V1;
        if !version_1 && (record.len() < HEADER_V2 || &record[..8] != MAGIC_V2) {
            return Err(broken("not a spool record (bad header)"));
        }
        let crc = u32::from_le_bytes([record[8], record[9], record[10], record[11]]);
        if crc32fast::hash(&record[12..]) != crc {
            return Err(broken("checksum mismatch: the record is damaged"));
        }
        let number = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&record[at..at + 8]);
            usize::try_from(u64::from_le_bytes(bytes)).unwrap_or(usize::MAX)
        };
        if version_1 {
            let (sample_rows, samples_len, scrape_rows, scrapes_len) = (number(12), number(20), number(28), number(36));
            let samples_end = HEADER_V1.saturating_add(samples_len);
            if samples_end.saturating_add(scrapes_len) != record.len() {
                return Err(broken("lengths do not match the record's size"));
            }
            let (samples, series, series_rows) = crate::rowbinary::split_wide_samples(&record[HEADER_V1..samples_end])
                .ok_or_else(|| broken("its samples are not schema 2's `samples` rows"))?;
            return Ok(SpooledBatch {
                sequence,
                sample_rows: sample_rows as u64,
                samples,
                series_rows,
                series,
                scrape_rows: scrape_rows as u64,
                scrapes: record[samples_end..].to_vec(),
            });
        }
        let lengths = [number(20), number(36), number(52)];
        let samples_end = HEADER_V2.saturating_add(lengths[0]);
        let series_end = samples_end.saturating_add(lengths[1]);
        if series_end.saturating_add(lengths[2]) != record.len() {
            return Err(broken("lengths do not match the record's size"));
        }
        Ok(SpooledBatch {
            sequence,
            sample_rows: number(12) as u64,
            samples: record[HEADER_V2..samples_end].to_vec(),
            series_rows: number(28) as u64,
            series: record[samples_end..series_end].to_vec(),
            scrape_rows: number(44) as u64,
            scrapes: record[series_end..].to_vec(),
        })
    }

    /// Notes that the store acknowledged batch `sequence`'s insert into `table`
    /// (`<sequence>.acked`, one table name a line; in the page cache, which a `kill -9` keeps),
    /// so a replay after a crash does not send it again.
    pub fn acknowledge(&self, sequence: u64, table: Table) {
        use std::io::Write;
        let path = self.file(sequence, "acked");
        let written = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(format!("{}\n", table.name()).as_bytes()));
        if let Err(error) = written {
            // Only a replay's work grows: the insert is sent again under its token.
            tracing::debug!(path = %path.display(), %error, "cannot note an acknowledged insert");
        }
    }

    /// Whether the store acknowledged batch `sequence`'s insert into `table`
    /// ([`Spool::acknowledge`]).
    pub fn acknowledged(&self, sequence: u64, table: Table) -> bool {
        fs::read_to_string(self.file(sequence, "acked")).is_ok_and(|text| text.lines().any(|line| line == table.name()))
    }

    /// Removes batch `sequence` (acknowledged by the store, or dropped).
    pub fn remove(&mut self, sequence: u64) {
        let _ = fs::remove_file(self.file(sequence, "batch"));
        let _ = fs::remove_file(self.file(sequence, "acked"));
        self.forget(sequence);
    }

    fn forget(&mut self, sequence: u64) {
        if self.delivering == Some(sequence) {
            self.delivering = None;
        }
        if let Some(at) = self.queued.iter().position(|(queued, _, _)| *queued == sequence) {
            if let Some((_, size, _)) = self.queued.remove(at) {
                self.bytes -= size;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of a batch of one record besides its payloads: the segment magic and the record header.
    const HEADER: usize = 8 + segment::RECORD_HEADER;

    /// An empty folder for one test's spool: `epicenter-spool-NAME-PID` under the temporary
    /// directory, whatever an earlier run left there removed.
    fn fresh_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("epicenter-spool-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn config(dir: &Path, max_size: u64) -> SpoolConfig {
        SpoolConfig {
            path: dir.to_path_buf(),
            max_size: ByteSize(max_size),
            max_age: Duration::from_secs(3600),
            fsync: true,
            sync_interval: Duration::from_secs(1),
        }
    }

    fn batch(fill: u8, size: usize) -> SpooledBatch {
        SpooledBatch {
            sequence: 0,
            sample_rows: size as u64,
            samples: vec![fill; size],
            series_rows: 0,
            series: Vec::new(),
            scrape_rows: 1,
            scrapes: vec![fill ^ 0xff; 7],
        }
    }

    #[test]
    fn batches_survive_a_restart_in_order_with_stable_tokens() {
        let dir = fresh_dir("order");
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        for fill in 1..=3 {
            assert!(spool.append(&mut batch(fill, 100)).unwrap().is_empty());
        }
        let token = spool.token(1, crate::schema::Table::Series);
        fs::write(dir.join("00000000000000000009.tmp"), b"half a record").unwrap();
        drop(spool);
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        assert_eq!(
            spool.token(1, crate::schema::Table::Series),
            token,
            "tokens survive a restart"
        );
        assert_eq!(spool.backlog(), (3, 3 * (HEADER as u64 + 107)));
        assert!(!dir.join("00000000000000000009.tmp").exists());
        let mut seen = Vec::new();
        while let Some(next) = spool.oldest() {
            let next = next.unwrap();
            assert_eq!(next.samples, vec![next.sequence as u8 + 1; 100]);
            assert_eq!(next.scrapes, vec![(next.sequence as u8 + 1) ^ 0xff; 7]);
            seen.push(next.sequence);
            spool.remove(next.sequence);
        }
        assert_eq!(seen, vec![0, 1, 2]);
        // New batches continue the sequence (no token is reused).
        let mut more = batch(4, 10);
        spool.append(&mut more).unwrap();
        assert_eq!(more.sequence, 3);
        let _ = fs::remove_dir_all(&dir);
    }

    /// The batch on disk, byte for byte as the format says (module doc, [`segment`]): the
    /// segment magic, then one record: CRC-32 of the rest, the six counts and lengths, the
    /// three payloads.
    #[test]
    fn a_batch_is_laid_out_as_documented() {
        let dir = fresh_dir("layout");
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        let mut spooled = SpooledBatch {
            sequence: 0,
            sample_rows: 2,
            samples: b"samples!".to_vec(),
            series_rows: 1,
            series: b"series".to_vec(),
            scrape_rows: 3,
            scrapes: b"scr".to_vec(),
        };
        spool.append(&mut spooled).unwrap();
        let mut rest = Vec::new();
        for number in [2u64, 8, 1, 6, 3, 3] {
            rest.extend_from_slice(&number.to_le_bytes());
        }
        rest.extend_from_slice(b"samples!seriesscr");
        let mut expected = b"EPSPOOL3".to_vec();
        expected.extend_from_slice(&crc32fast::hash(&rest).to_le_bytes());
        expected.extend_from_slice(&rest);
        assert_eq!(fs::read(dir.join("00000000000000000000.batch")).unwrap(), expected);
        assert_eq!(spool.backlog(), (1, expected.len() as u64));
        let _ = fs::remove_dir_all(&dir);
    }

    /// A batch of an epicenter before the write-ahead spool (`EPSPOOL2`: one record of the
    /// three payloads) is read as it was written.
    #[test]
    fn a_batch_spooled_before_the_write_ahead_spool_is_read() {
        let dir = fresh_dir("v2");
        fs::create_dir_all(&dir).unwrap();
        let mut rest = Vec::new();
        for number in [2u64, 8, 1, 6, 3, 3] {
            rest.extend_from_slice(&number.to_le_bytes());
        }
        rest.extend_from_slice(b"samples!seriesscr");
        let mut record = MAGIC_V2.to_vec();
        record.extend_from_slice(&crc32fast::hash(&rest).to_le_bytes());
        record.extend_from_slice(&rest);
        fs::write(dir.join("00000000000000000005.batch"), &record).unwrap();
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        let batch = spool.oldest().unwrap().unwrap();
        assert_eq!(
            (
                batch.sequence,
                batch.sample_rows,
                batch.samples,
                batch.series_rows,
                batch.series,
                batch.scrape_rows,
                batch.scrapes
            ),
            (5, 2, b"samples!".to_vec(), 1, b"series".to_vec(), 3, b"scr".to_vec())
        );
        let _ = fs::remove_dir_all(&dir);
    }

    /// A batch an epicenter before schema 3 spooled (`EPSPOOL1`: wide `samples` rows and
    /// scrapes) is read as values, series and scrapes, so an upgrade loses nothing spooled.
    #[test]
    fn a_batch_spooled_before_schema_3_is_split_on_the_way_out() {
        use crate::rows::{encode_samples, SampleRow, Series};
        let dir = fresh_dir("v1");
        fs::create_dir_all(&dir).unwrap();
        let labels = [("instance".to_string(), "a:1".to_string())].into_iter().collect();
        let series = std::sync::Arc::new(Series::new("up".into(), labels, &Default::default()));
        let rows: Vec<SampleRow> = (0..3)
            .map(|at| SampleRow {
                timestamp_ms: 1_764_000_000_000 + at * 1000,
                value: 1.0,
                series: series.clone(),
            })
            .collect();
        let mut wide = Vec::new();
        for row in &rows {
            wide.extend_from_slice(&row.timestamp_ms.to_le_bytes());
            wide.extend_from_slice(series.encoded_columns());
            wide.extend_from_slice(&row.value.to_le_bytes());
            wide.extend_from_slice(&series.id.to_le_bytes());
        }
        let scrapes = vec![7u8; 5];
        let mut record = MAGIC_V1.to_vec();
        record.extend_from_slice(&[0; 4]);
        for number in [3, wide.len() as u64, 1, scrapes.len() as u64] {
            record.extend_from_slice(&number.to_le_bytes());
        }
        record.extend_from_slice(&wide);
        record.extend_from_slice(&scrapes);
        let crc = crc32fast::hash(&record[12..]);
        record[8..12].copy_from_slice(&crc.to_le_bytes());
        fs::write(dir.join(format!("{:020}.batch", 0)), &record).unwrap();
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        let batch = spool.oldest().unwrap().unwrap();
        let (mut values, mut series_rows) = (Vec::new(), Vec::new());
        encode_samples(&rows, &mut values, &mut series_rows);
        assert_eq!(
            (
                batch.sample_rows,
                batch.samples,
                batch.series_rows,
                batch.series,
                batch.scrape_rows,
                batch.scrapes
            ),
            (3, values, 1, series_rows, 1, scrapes)
        );
        let _ = fs::remove_dir_all(&dir);
    }

    /// Every batch delivered, then a restart: the sequence starts at 0 again, so the tokens
    /// must not be the last run's (the store would drop the new batches as duplicates).
    #[test]
    fn an_emptied_spool_reopens_with_tokens_never_used_before() {
        let dir = fresh_dir("reuse");
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        let mut used = std::collections::HashSet::new();
        for _ in 0..3 {
            let mut next = batch(1, 10);
            spool.append(&mut next).unwrap();
            used.insert(spool.token(next.sequence, crate::schema::Table::Series));
            spool.remove(next.sequence);
        }
        drop(spool);
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        for _ in 0..3 {
            let mut next = batch(2, 10);
            spool.append(&mut next).unwrap();
            let token = spool.token(next.sequence, crate::schema::Table::Series);
            assert!(used.insert(token.clone()), "token {token} of the last run reused");
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_record_is_set_aside_and_the_rest_go_on() {
        let dir = fresh_dir("damage");
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        spool.append(&mut batch(1, 50)).unwrap();
        spool.append(&mut batch(2, 50)).unwrap();
        let first = dir.join("00000000000000000000.batch");
        let mut bytes = fs::read(&first).unwrap();
        bytes[HEADER + 3] ^= 1;
        fs::write(&first, bytes).unwrap();
        let error = spool.oldest().unwrap().unwrap_err();
        assert!(error.to_string().contains("checksum mismatch"), "{error}");
        assert!(dir.join("00000000000000000000.corrupt").exists());
        assert_eq!(spool.oldest().unwrap().unwrap().sequence, 1);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn past_max_size_the_oldest_batches_are_dropped_and_reported() {
        let dir = fresh_dir("full");
        let record = HEADER as u64 + 1_007;
        let mut spool = Spool::open(&config(&dir, 3 * record)).unwrap();
        for fill in 0..3 {
            assert!(spool.append(&mut batch(fill, 1_000)).unwrap().is_empty());
        }
        assert_eq!(spool.append(&mut batch(3, 1_000)).unwrap(), vec![(0, 1_000)]);
        assert_eq!(
            spool.append(&mut batch(4, 2_000)).unwrap(),
            vec![(1, 1_000), (2, 1_000)]
        );
        assert_eq!(spool.oldest().unwrap().unwrap().sequence, 3);
        assert_eq!(spool.backlog().0, 2);
        let _ = fs::remove_dir_all(&dir);
    }

    /// The write-ahead part: scrapes appended to the open segment and never sealed (a `kill
    /// -9`) are a batch at the next start, a torn last record cut off; the sequence goes on
    /// after it.
    #[test]
    fn scrapes_appended_before_a_crash_are_recovered_as_a_batch() {
        let dir = fresh_dir("wal");
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        spool.append(&mut batch(9, 10)).unwrap();
        let mut segment = spool.begin().unwrap();
        assert_eq!(segment.sequence(), 1);
        for fill in 1..=3 {
            segment.append(&segment::encode_record(&batch(fill, 4))).unwrap();
        }
        let torn = segment::encode_record(&batch(4, 4));
        segment.append(&torn[..torn.len() / 2]).unwrap();
        // The crash: neither the segment nor the spool is closed in order.
        std::mem::forget(segment);
        drop(spool);
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        assert_eq!(spool.backlog().0, 2);
        assert!(!dir.join("00000000000000000001.open").exists());
        let first = spool.oldest().unwrap().unwrap();
        spool.remove(first.sequence);
        let recovered = spool.oldest().unwrap().unwrap();
        assert_eq!(recovered.sequence, 1);
        assert_eq!((recovered.sample_rows, recovered.scrape_rows), (12, 3));
        assert_eq!(recovered.samples, [vec![1u8; 4], vec![2u8; 4], vec![3u8; 4]].concat());
        assert_eq!(
            recovered.scrapes,
            [vec![!1u8; 7], vec![!2u8; 7], vec![!3u8; 7]].concat()
        );
        assert_eq!(spool.begin().unwrap().sequence(), 2);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Each table's insert of a batch has its own token, the same after a restart; an
    /// acknowledged insert is remembered until the batch leaves.
    #[test]
    fn tokens_are_per_table_and_acknowledgements_survive_a_restart() {
        let dir = fresh_dir("acked");
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        spool.append(&mut batch(1, 10)).unwrap();
        let tables = [Table::Series, Table::SampleValues, Table::Scrapes];
        let tokens: Vec<String> = tables.iter().map(|table| spool.token(0, *table)).collect();
        assert_eq!(
            tokens.iter().collect::<std::collections::HashSet<_>>().len(),
            3,
            "{tokens:?}"
        );
        spool.acknowledge(0, Table::Series);
        spool.acknowledge(0, Table::SampleValues);
        drop(spool);
        let mut spool = Spool::open(&config(&dir, 1 << 20)).unwrap();
        let again: Vec<String> = tables.iter().map(|table| spool.token(0, *table)).collect();
        assert_eq!(again, tokens);
        let acked: Vec<bool> = tables.iter().map(|table| spool.acknowledged(0, *table)).collect();
        assert_eq!(acked, [true, true, false]);
        spool.remove(0);
        assert!(!dir.join("00000000000000000000.acked").exists());
        let _ = fs::remove_dir_all(&dir);
    }

    /// On a volume smaller than `max_size` the free space is the budget: a sealed batch that
    /// leaves less free than it took drops the oldest waiting, and a scrape that finds the
    /// disk full makes room by dropping the oldest, never the one being delivered.
    #[test]
    fn a_small_volume_drops_the_oldest_waiting_batches_first() {
        let dir = fresh_dir("volume");
        let record = HEADER as u64 + 1_007;
        let mut spool = Spool::open(&config(&dir, 1 << 30)).unwrap();
        spool.volume = Some(record * 7 / 2);
        assert!(spool.append(&mut batch(0, 1_000)).unwrap().is_empty());
        assert!(spool.append(&mut batch(1, 1_000)).unwrap().is_empty());
        // Half a batch free after the third: the oldest goes.
        assert_eq!(spool.append(&mut batch(2, 1_000)).unwrap(), vec![(0, 1_000)]);
        assert_eq!(spool.backlog().0, 2);
        // Batch 1 is being delivered: room for two batches drops batch 2, the oldest waiting.
        assert_eq!(spool.claim_front(), Some(1));
        assert_eq!(spool.make_room(2 * record), vec![(2, 1_000)]);
        assert_eq!(spool.make_room(3 * record), vec![], "the delivered batch stays");
        assert_eq!(spool.oldest().unwrap().unwrap().sequence, 1);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn batches_older_than_max_age_are_dropped_and_reported() {
        let dir = fresh_dir("age");
        let mut settings = config(&dir, 1 << 20);
        settings.max_age = Duration::from_millis(200);
        let mut spool = Spool::open(&settings).unwrap();
        assert!(spool.append(&mut batch(1, 10)).unwrap().is_empty());
        assert!(
            spool.append(&mut batch(2, 20)).unwrap().is_empty(),
            "nothing is old yet"
        );
        std::thread::sleep(Duration::from_millis(300));
        // Both earlier batches are past max_age now; the new one stays.
        assert_eq!(spool.append(&mut batch(3, 30)).unwrap(), vec![(0, 10), (1, 20)]);
        assert_eq!(spool.backlog().0, 1);
        assert_eq!(spool.oldest().unwrap().unwrap().sequence, 2);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn one_spool_serves_one_process() {
        let dir = fresh_dir("lock");
        let first = Spool::open(&config(&dir, 1 << 20)).unwrap();
        let error = Spool::open(&config(&dir, 1 << 20)).unwrap_err();
        assert!(
            error.to_string().contains("in use by another epicenter process"),
            "{error}"
        );
        assert!(error.to_string().contains("storage.spool.path"), "{error}");
        drop(first);
        assert!(
            Spool::open(&config(&dir, 1 << 20)).is_ok(),
            "the lock goes with the spool"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_spool_is_on_by_default_inside_the_data_directory() {
        let settings = SpoolSettings::default();
        let resolved = settings.resolve(Path::new("./data/spool")).unwrap();
        assert_eq!(resolved.path, PathBuf::from("./data/spool"));
        assert_eq!(
            (
                resolved.max_size,
                resolved.max_age,
                resolved.fsync,
                resolved.sync_interval
            ),
            (
                ByteSize(1 << 30),
                Duration::from_secs(86_400),
                true,
                Duration::from_secs(1)
            )
        );
        let off = SpoolSettings {
            enabled: false,
            ..SpoolSettings::default()
        };
        assert_eq!(off.resolve(Path::new("x")), None);
    }
}
