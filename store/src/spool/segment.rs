//! The spool's write-ahead segments: the file each scrape is appended to as the writer accepts
//! it, and the record format shared by open and sealed segments.
//!
//! A segment is `EPSPOOL3` (8 bytes), then one record per scrape: the CRC-32 (IEEE, as
//! `crc32fast` computes it; little-endian u32) of the rest of the record, the sample, series
//! and scrape row counts and byte lengths (six little-endian u64), and the three RowBinary
//! payloads (`sample_values`, `series`, `scrapes` rows). RowBinary rows concatenate, so a
//! segment read whole is one batch: each payload is its records' payloads end to end.
//!
//! Following Prometheus's `tsdb/wlog` (records with a CRC-32, written to the operating system
//! as each commit ends, the log cut at the first broken record on repair) and Vector's disk
//! buffer v2 (checksummed records, a torn last record detected when the writer starts again):
//! a record is written with one `write(2)` call as it is accepted, so it is in the page cache
//! and survives a `kill -9` of epicenter; it is synced on a timer and when the segment is
//! sealed. A crash leaves at most a torn last record, which [`scan`] leaves out.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::SpooledBatch;

/// The magic of a segment file (spool format 3).
pub(super) const SEGMENT_MAGIC: &[u8; 8] = b"EPSPOOL3";
/// Bytes before a record's payloads: the CRC-32 and the six counts and lengths.
pub(super) const RECORD_HEADER: usize = 4 + 48;

/// One scrape (or any group of rows) as a record: RowBinary rows for the three tables.
pub(crate) fn encode_record(batch: &SpooledBatch) -> Vec<u8> {
    let payloads = [&batch.samples[..], &batch.series[..], &batch.scrapes[..]];
    let mut record = Vec::with_capacity(RECORD_HEADER + payloads.iter().map(|payload| payload.len()).sum::<usize>());
    record.extend_from_slice(&[0; 4]);
    for number in [
        batch.sample_rows,
        batch.samples.len() as u64,
        batch.series_rows,
        batch.series.len() as u64,
        batch.scrape_rows,
        batch.scrapes.len() as u64,
    ] {
        record.extend_from_slice(&number.to_le_bytes());
    }
    payloads.iter().for_each(|payload| record.extend_from_slice(payload));
    let crc = crc32fast::hash(&record[4..]);
    record[..4].copy_from_slice(&crc.to_le_bytes());
    record
}

/// What [`scan`] found in a segment's bytes.
#[derive(Debug, Default)]
pub(super) struct Scanned {
    /// The whole records, as one batch (sequence 0: the caller sets it).
    pub(super) batch: SpooledBatch,
    /// Whole records read.
    pub(super) records: u64,
    /// Bytes of the file that hold the magic and the whole records: where a torn or broken
    /// tail starts (the file's length when there is none).
    pub(super) valid_len: u64,
    /// Why reading stopped before the end, if it did: a torn or damaged record.
    pub(super) broken: Option<&'static str>,
}

/// Reads the records of a segment (`bytes`, magic included) up to the end or up to the first
/// torn or damaged record. `None` when the bytes do not start with [`SEGMENT_MAGIC`].
pub(super) fn scan(bytes: &[u8]) -> Option<Scanned> {
    if bytes.len() < SEGMENT_MAGIC.len() || &bytes[..SEGMENT_MAGIC.len()] != SEGMENT_MAGIC {
        return None;
    }
    let mut scanned = Scanned {
        valid_len: SEGMENT_MAGIC.len() as u64,
        ..Scanned::default()
    };
    let mut at = SEGMENT_MAGIC.len();
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < RECORD_HEADER {
            scanned.broken = Some("a torn record (its header is cut short)");
            break;
        }
        let number = |index: usize| {
            let mut field = [0u8; 8];
            field.copy_from_slice(&rest[4 + 8 * index..12 + 8 * index]);
            usize::try_from(u64::from_le_bytes(field)).unwrap_or(usize::MAX)
        };
        let lengths = [number(1), number(3), number(5)];
        let total = lengths
            .iter()
            .try_fold(RECORD_HEADER, |sum, length| sum.checked_add(*length));
        let Some(total) = total.filter(|total| *total <= rest.len()) else {
            scanned.broken = Some("a torn record (shorter than its lengths say)");
            break;
        };
        let crc = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if crc32fast::hash(&rest[4..total]) != crc {
            scanned.broken = Some("a damaged record (checksum mismatch)");
            break;
        }
        let samples_end = RECORD_HEADER + lengths[0];
        let series_end = samples_end + lengths[1];
        let batch = &mut scanned.batch;
        batch.sample_rows += number(0) as u64;
        batch.samples.extend_from_slice(&rest[RECORD_HEADER..samples_end]);
        batch.series_rows += number(2) as u64;
        batch.series.extend_from_slice(&rest[samples_end..series_end]);
        batch.scrape_rows += number(4) as u64;
        batch.scrapes.extend_from_slice(&rest[series_end..total]);
        scanned.records += 1;
        at += total;
        scanned.valid_len = at as u64;
    }
    Some(scanned)
}

/// The segment being written: `<sequence>.open` in the spool's directory, until the spool
/// seals it ([`super::Spool::seal`]). Owned by the writer's batcher, not by the spool, so a
/// scrape's record never waits for delivery reading a batch back. Blocking file I/O.
#[derive(Debug)]
pub struct Segment {
    pub(super) sequence: u64,
    pub(super) path: PathBuf,
    file: fs::File,
    /// Bytes of whole records written (the magic included): a failed write is cut back to it.
    pub(super) len: u64,
    /// Records written.
    pub(super) records: u64,
    /// Whether bytes were written since the last sync.
    dirty: bool,
}

impl Segment {
    /// Creates `path` (segment `sequence`) with its magic.
    pub(super) fn create(path: PathBuf, sequence: u64) -> std::io::Result<Segment> {
        let mut file = fs::OpenOptions::new().create_new(true).write(true).open(&path)?;
        if let Err(error) = file.write_all(SEGMENT_MAGIC) {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(error);
        }
        Ok(Segment {
            sequence,
            path,
            file,
            len: SEGMENT_MAGIC.len() as u64,
            records: 0,
            dirty: true,
        })
    }

    /// The segment's position in the spool (its batch's sequence once sealed).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// Whole records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Appends one record ([`encode_record`]'s bytes) with one write call: once it returns
    /// the record is in the page cache. A failed write (disk full) is cut back off the file,
    /// so the segment holds only whole records, and the error is returned.
    pub fn append(&mut self, record: &[u8]) -> std::io::Result<()> {
        match self.file.write_all(record) {
            Ok(()) => {
                self.len += record.len() as u64;
                self.records += 1;
                self.dirty = true;
                Ok(())
            }
            Err(error) => {
                let _ = self.file.set_len(self.len);
                // The file position stays past the cut; put it back at the end.
                let _ = std::io::Seek::seek(&mut self.file, std::io::SeekFrom::Start(self.len));
                Err(error)
            }
        }
    }

    /// Syncs what was written since the last sync (`fdatasync`); nothing when nothing was.
    pub fn sync(&mut self) -> std::io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// Turns a segment left open by a crash (`path`, segment `sequence`) into what it holds: its
/// whole records, the file cut after them. Returns the records found and why the tail was cut
/// (a torn last record after a `kill -9`), or an error naming the file.
pub(super) fn recover(path: &Path) -> std::io::Result<(u64, Option<&'static str>)> {
    let bytes = fs::read(path)?;
    let Some(scanned) = scan(&bytes) else {
        // Not even the magic: created and killed at once.
        return Ok((0, Some("no segment header")));
    };
    if scanned.valid_len < bytes.len() as u64 {
        let file = fs::OpenOptions::new().write(true).open(path)?;
        file.set_len(scanned.valid_len)?;
        file.sync_all()?;
    }
    Ok((scanned.records, scanned.broken))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(fill: u8) -> SpooledBatch {
        SpooledBatch {
            sequence: 0,
            sample_rows: 2,
            samples: vec![fill; 10],
            series_rows: 1,
            series: vec![fill ^ 1; 3],
            scrape_rows: 1,
            scrapes: vec![fill ^ 2; 5],
        }
    }

    /// Records concatenate into one batch; a torn or damaged tail is left out and said, and
    /// the valid length is where it starts.
    #[test]
    fn a_segment_reads_as_its_whole_records_end_to_end() {
        let mut bytes = SEGMENT_MAGIC.to_vec();
        let records = [encode_record(&scrape(1)), encode_record(&scrape(7))];
        records.iter().for_each(|record| bytes.extend_from_slice(record));
        let whole = scan(&bytes).unwrap();
        assert_eq!(whole.records, 2);
        assert_eq!(whole.broken, None);
        assert_eq!(whole.valid_len, bytes.len() as u64);
        assert_eq!(whole.batch.sample_rows, 4);
        assert_eq!(whole.batch.samples, [vec![1; 10], vec![7; 10]].concat());
        assert_eq!(whole.batch.series, [vec![0; 3], vec![6; 3]].concat());
        assert_eq!(whole.batch.scrapes, [vec![3; 5], vec![5; 5]].concat());
        assert_eq!((whole.batch.series_rows, whole.batch.scrape_rows), (2, 2));
        // Every cut inside the second record leaves the first whole.
        let first_end = SEGMENT_MAGIC.len() + records[0].len();
        for cut in first_end + 1..bytes.len() {
            let torn = scan(&bytes[..cut]).unwrap();
            assert_eq!((torn.records, torn.valid_len), (1, first_end as u64), "cut at {cut}");
            assert!(torn.broken.unwrap().contains("torn"), "cut at {cut}");
        }
        let mut damaged = bytes.clone();
        *damaged.last_mut().unwrap() ^= 0x40;
        let read = scan(&damaged).unwrap();
        assert_eq!(
            (read.records, read.broken),
            (1, Some("a damaged record (checksum mismatch)"))
        );
        assert!(scan(b"EPSPOOL2........").is_none());
    }

    /// A crash's open segment is cut back to its whole records on disk.
    #[test]
    fn recovery_cuts_a_torn_tail_off_the_file() {
        let dir = std::env::temp_dir().join(format!("epicenter-segment-recover-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("00000000000000000004.open");
        let mut segment = Segment::create(path.clone(), 4).unwrap();
        segment.append(&encode_record(&scrape(1))).unwrap();
        let whole = segment.len;
        let second = encode_record(&scrape(2));
        segment.append(&second[..second.len() - 3]).unwrap();
        drop(segment);
        assert_eq!(
            recover(&path).unwrap(),
            (1, Some("a torn record (shorter than its lengths say)"))
        );
        assert_eq!(fs::metadata(&path).unwrap().len(), whole);
        assert_eq!(recover(&path).unwrap(), (1, None), "recovery is idempotent");
        let _ = fs::remove_dir_all(&dir);
    }
}
