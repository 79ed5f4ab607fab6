//! The rows epicenter stores: what the collector hands the writer (a scrape's sample rows and
//! its health report) and what the detector hands the store (anomalies, verdict events).
//!
//! A [`Series`] is built once per target and series (name, final labels, id, placement, and
//! its RowBinary-encoded columns) and shared by every [`SampleRow`] of it. Series ids are
//! FNV-1a (64 bits, the `fnv` crate) over the name and the labels in name order, stable across
//! runs and builds (docs/schema.md, `series_id`).

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use fnv::FnvHasher;

use crate::config::PlacementConfig;
use crate::rowbinary;

/// A series' labels, by name (sorted, as Prometheus keeps them).
pub type Labels = BTreeMap<String, String>;

/// FNV-1a, 64 bits, of `bytes`: stable across runs and builds (schedule offsets, target
/// identities and series ids must not change when the binary is rebuilt).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = FnvHasher::default();
    hash.write(bytes);
    hash.finish()
}

/// Stable id of a series: FNV-1a over its name and its labels in name order, as
/// `name \0 label=value \0 label=value …`.
pub fn series_id(name: &str, labels: &Labels) -> u64 {
    let mut hash = FnvHasher::default();
    hash.write(name.as_bytes());
    for (label, value) in labels {
        hash.write(b"\0");
        hash.write(label.as_bytes());
        hash.write(b"=");
        hash.write(value.as_bytes());
    }
    hash.finish()
}

/// Which instance a series belongs to and where it runs, from the placement labels: the
/// `instance`, `dc`, `host` and `service` columns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// Instance (`placement.instance_label`, else the `instance` label), empty when unknown.
    pub instance: String,
    /// Datacenter (`placement.dc_label`), empty when unknown.
    pub dc: String,
    /// Host (`placement.host_label`, else the host part of `instance`).
    pub host: String,
    /// Service (`placement.service_label`), empty when unknown.
    pub service: String,
}

impl Placement {
    /// Reads the placement of a series from its labels: the configured label names (the
    /// instance falling back to the `instance` label), and the host part of `instance` when
    /// there is no host label, `placement.host_from_instance` is set and `instance` is a
    /// `host:port` address ([`host_of_address`]). An `instance` of another shape (a pod's
    /// name, as a federated or converted series may carry) leaves the host empty, unknown:
    /// it never becomes a host of its own.
    pub fn of(labels: &Labels, config: &PlacementConfig) -> Placement {
        Placement::placed(labels, config, None)
    }

    /// [`Placement::of`] for a target whose exposition names the host it runs on
    /// (`nodename`: node_exporter's `node_uname_info{nodename}`): without a host label, the
    /// host is `nodename` when `placement.host_from_uname` is set, before the host part of
    /// `instance`. So a host's node_exporter, scraped at its IP, and the containers a
    /// relabeling placed on the node's name meet at the name.
    pub fn placed(labels: &Labels, config: &PlacementConfig, nodename: Option<&str>) -> Placement {
        let get = |name: &str| labels.get(name).cloned().unwrap_or_default();
        let instance = labels
            .get(&config.instance_label)
            .filter(|value| !value.is_empty())
            .or_else(|| labels.get("instance"))
            .cloned()
            .unwrap_or_default();
        let mut host = get(&config.host_label);
        if let Some(nodename) = nodename.filter(|name| host.is_empty() && config.host_from_uname && !name.is_empty()) {
            host = nodename.to_string();
        }
        if host.is_empty() && config.host_from_instance {
            if let Some(address_host) = labels.get("instance").and_then(|instance| host_of_address(instance)) {
                host = address_host.to_string();
            }
        }
        Placement {
            instance,
            dc: get(&config.dc_label),
            host,
            service: get(&config.service_label),
        }
    }
}

/// The host of `address` when it has the `host:port` shape of a scraped target's
/// `instance` (what Prometheus puts there: `__address__`, a port always present after
/// relabeling): a host without `:`, `/`, `@` or white space, or an IPv6 literal in brackets
/// (returned without them), then `:` and a port of digits. `None` for anything else: a pod's
/// name (`carts-5d8f7`), a URL, an address without a port, a bare IPv6 literal (`::1`).
pub fn host_of_address(address: &str) -> Option<&str> {
    let (host, port) = address.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    if let Some(inside) = host.strip_prefix('[') {
        let literal = inside.strip_suffix(']')?;
        // Hex groups and `:` (`::ffff:10.0.0.1` has dots), a zone after `%` (`fe80::1%eth0`).
        let is_ipv6 = literal.contains(':')
            && literal
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b":.%".contains(&byte));
        return is_ipv6.then_some(literal);
    }
    let is_host = !host.is_empty()
        && !host
            .chars()
            .any(|character| matches!(character, ':' | '/' | '@' | '[' | ']') || character.is_whitespace());
    is_host.then_some(host)
}

/// A series as stored: name, final labels, id and placement, computed once per target and
/// shared by every sample of the series (the collector's scrape cache keeps it between
/// scrapes). Its `series` row is written with the first sample a writer encodes and again
/// every [`SERIES_REFRESH_MS`] of sample time, so the `series` table's `last_seen` is at most
/// that stale and its TTL keeps series that are still scraped.
#[derive(Debug)]
pub struct Series {
    /// Metric (sample) name.
    pub name: String,
    /// All labels of the series except the name, including `job`, `instance` and placement.
    pub labels: Labels,
    /// [`series_id`] of the series.
    pub id: u64,
    /// Datacenter, host and service of the series.
    pub placement: Placement,
    /// The `series` columns from `metric` to `labels`, RowBinary-encoded once.
    encoded: Box<[u8]>,
    /// Length of the encoded `metric` column at the start of `encoded`.
    metric_len: usize,
    /// Sample time (ms since the epoch) of the last `series` row encoded for it;
    /// `i64::MIN` before the first.
    row_written_ms: AtomicI64,
}

impl Clone for Series {
    fn clone(&self) -> Series {
        Series {
            name: self.name.clone(),
            labels: self.labels.clone(),
            id: self.id,
            placement: self.placement.clone(),
            encoded: self.encoded.clone(),
            metric_len: self.metric_len,
            row_written_ms: AtomicI64::new(self.row_written_ms.load(Ordering::Relaxed)),
        }
    }
}

/// Series are equal when their name, labels, id and placement are (whether a `series` row
/// was written for them is not part of it).
impl PartialEq for Series {
    fn eq(&self, other: &Series) -> bool {
        self.id == other.id
            && self.name == other.name
            && self.labels == other.labels
            && self.placement == other.placement
    }
}

/// How often a series still scraped has its `series` row written again, in milliseconds of
/// sample time (one hour): the bound on how stale `series.last_seen` is.
pub const SERIES_REFRESH_MS: i64 = 3_600_000;

impl Series {
    /// Builds a series from its name and final labels: id, placement and encoding.
    pub fn new(name: String, labels: Labels, placement: &PlacementConfig) -> Series {
        Series::placed(name, labels, placement, None)
    }

    /// [`Series::new`] on a target whose exposition names its host (`nodename`, see
    /// [`Placement::placed`]).
    pub fn placed(name: String, labels: Labels, placement: &PlacementConfig, nodename: Option<&str>) -> Series {
        let id = series_id(&name, &labels);
        let placement = Placement::placed(&labels, placement, nodename);
        let encoded = rowbinary::series_columns(
            &name,
            &labels,
            &placement.instance,
            &placement.dc,
            &placement.host,
            &placement.service,
        )
        .into_boxed_slice();
        let mut metric_len = Vec::new();
        rowbinary::string(&name, &mut metric_len);
        Series {
            name,
            labels,
            id,
            placement,
            encoded,
            metric_len: metric_len.len(),
            row_written_ms: AtomicI64::new(i64::MIN),
        }
    }

    /// RowBinary of the `series` columns `metric, job, instance, dc, host, service, labels`.
    pub fn encoded_columns(&self) -> &[u8] {
        &self.encoded
    }

    /// RowBinary of the `metric` column alone.
    pub fn encoded_metric(&self) -> &[u8] {
        &self.encoded[..self.metric_len]
    }

    /// Forgets that a `series` row was encoded for this series (the batch that held it was
    /// lost), so its next sample writes one again.
    pub fn forget_series_row(&self) {
        self.row_written_ms.store(i64::MIN, Ordering::Relaxed);
    }

    /// Whether a `series` row is due with a sample at `timestamp_ms`: none was encoded yet,
    /// or the last one is [`SERIES_REFRESH_MS`] older; when due, it counts as encoded now.
    fn series_row_due(&self, timestamp_ms: i64) -> bool {
        let last = self.row_written_ms.load(Ordering::Relaxed);
        if last != i64::MIN && timestamp_ms.abs_diff(last) < SERIES_REFRESH_MS as u64 {
            return false;
        }
        self.row_written_ms
            .compare_exchange(last, timestamp_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// How far after its scrape's time a sample may be stamped, ms: 10 minutes. A sample stamped
/// later is refused ([`OutOfBounds::TooFarAhead`]), as Prometheus's scrape loop refuses it
/// (`scrape/target.go`, `timeLimitAppender`: `maxAheadTime` of 10 minutes after the time the
/// scrape's samples are appended, `storage.ErrOutOfBounds`; its remote-write handler has the
/// same bound). Room for an exporter whose clock runs a little ahead, never for one that
/// would move the detector's clock into another year.
pub const MAX_AHEAD_MS: i64 = 10 * 60 * 1000;

/// How far before its scrape's time a sample may be stamped, ms: one hour. An older sample is
/// refused ([`OutOfBounds::TooOld`]), as Prometheus's TSDB head refuses a sample older than
/// half a block (the default block is 2 h) before the newest time it holds
/// (`tsdb/head_append.go`, `appendableMinValidTime`: `storage.ErrOutOfBounds`, or
/// `storage.ErrTooOldSample` once `storage.tsdb.out_of_order_time_window` is set, which is
/// 0 by default). epicenter has no head block: the scrape's own time stands for its newest.
pub const MAX_BEHIND_MS: i64 = 60 * 60 * 1000;

/// Why a sample was refused ([`sample_bounds`]); the label values of
/// `epicenter_scrape_samples_out_of_bounds_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfBounds {
    /// Stamped more than [`MAX_AHEAD_MS`] after its scrape's time.
    TooFarAhead,
    /// Stamped more than [`MAX_BEHIND_MS`] before its scrape's time.
    TooOld,
}

impl OutOfBounds {
    /// Both reasons, in the order of [`ScrapeReport::samples_out_of_bounds`].
    pub const ALL: [OutOfBounds; 2] = [OutOfBounds::TooFarAhead, OutOfBounds::TooOld];

    /// The reason as a label value: `too_far_ahead` or `too_old`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutOfBounds::TooFarAhead => "too_far_ahead",
            OutOfBounds::TooOld => "too_old",
        }
    }

    /// Its index in [`ScrapeReport::samples_out_of_bounds`].
    pub fn index(self) -> usize {
        match self {
            OutOfBounds::TooFarAhead => 0,
            OutOfBounds::TooOld => 1,
        }
    }
}

/// Whether a sample stamped `sample_ms` may be taken from a scrape made at `scrape_ms` (both
/// ms since the epoch, on the scrape's clock, which is a simulation's for a simulated fleet):
/// `None` when it lies within [`MAX_BEHIND_MS`] before and [`MAX_AHEAD_MS`] after, else why
/// not. The collector refuses such samples; the live detector skips any that reach it.
pub fn sample_bounds(sample_ms: i64, scrape_ms: i64) -> Option<OutOfBounds> {
    if sample_ms > scrape_ms.saturating_add(MAX_AHEAD_MS) {
        Some(OutOfBounds::TooFarAhead)
    } else if sample_ms < scrape_ms.saturating_sub(MAX_BEHIND_MS) {
        Some(OutOfBounds::TooOld)
    } else {
        None
    }
}

/// One stored sample: a point of a [`Series`].
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow {
    /// Sample time in milliseconds since the epoch (the exposition's timestamp when
    /// `honor_timestamps`, else the scrape's start).
    pub timestamp_ms: i64,
    /// The value.
    pub value: f64,
    /// The series the sample belongs to.
    pub series: Arc<Series>,
}

/// One scrape's health, as the `scrapes` table stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeReport {
    /// Scrape start, milliseconds since the epoch.
    pub timestamp_ms: i64,
    /// Job name.
    pub job: String,
    /// `instance` label.
    pub instance: String,
    /// Target placement.
    pub placement: Placement,
    /// Whether the scrape succeeded.
    pub up: bool,
    /// Wall time of the scrape, seconds.
    pub duration_seconds: f64,
    /// Samples in the body.
    pub samples_scraped: u64,
    /// Samples kept after `metric_relabel_configs`.
    pub samples_post_metric_relabeling: u64,
    /// Series not present in the target's previous scrape.
    pub series_added: u64,
    /// Samples dropped because their series already had a sample at that time or later in the
    /// same body (Prometheus keeps the first and counts the rest in
    /// `prometheus_target_scrapes_sample_duplicate_timestamp_total`). Counted in
    /// `epicenter_scrape_samples_duplicate_total`; not stored in `scrapes`.
    pub samples_duplicate: u64,
    /// Samples refused because their timestamp lies too far from the scrape's time
    /// ([`sample_bounds`]): more than [`MAX_AHEAD_MS`] after it, or more than
    /// [`MAX_BEHIND_MS`] before it. Counted in `epicenter_scrape_samples_out_of_bounds_total`
    /// (by [`OutOfBounds`] reason, the first field ahead, the second behind); they count
    /// in `samples_post_metric_relabeling` (as Prometheus counts them) but are neither stored
    /// nor given to the detector; not stored in `scrapes`.
    pub samples_out_of_bounds: [u64; 2],
    /// Why the scrape failed.
    pub error: Option<String>,
    /// Identity of the scraped target (the collector's `Target::identity`; not stored, for
    /// target health).
    pub target_identity: u64,
    /// This report stands for a scheduled scrape that never ran: epicenter itself was
    /// behind (the previous scrape of the target overran its slot, or the process was starved
    /// of CPU) and the slot passed. It has no samples (so no synthetic `up` sample: the
    /// detector sees no availability change), `up` is false and `error` gives the reason and
    /// how late epicenter was; it is stored as a `scrapes` row like any other, so every
    /// scheduled scrape is either stored or recorded. Counted in
    /// `epicenter_scrapes_skipped_total`; a target's health is not changed by it.
    pub skipped: bool,
    /// This scrape timed out while epicenter itself was starved (its runtime woke at least a
    /// quarter of the timeout late during it; the collector's `lag` module measures it):
    /// `up` is false and `error` starts with `starved:`, but the detector reads nothing from
    /// it (no availability anomaly from epicenter's own lateness) and it is counted in
    /// `epicenter_scrapes_starved_total` besides `epicenter_scrapes_total{result="down"}`.
    pub starved: bool,
}

impl ScrapeReport {
    /// The instance this scrape is of, as every table names it: the placement's instance
    /// (`placement.instance_label`), else the `instance` label.
    pub fn instance_name(&self) -> &str {
        if self.placement.instance.is_empty() {
            &self.instance
        } else {
            &self.placement.instance
        }
    }
}

/// What one scrape produced: its rows (including the synthetic series) and its report. The
/// collector sends these to the writer ([`crate::writer::run_writer`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeOutcome {
    /// Sample rows, body samples first, then the five synthetic series.
    pub rows: Vec<SampleRow>,
    /// Health of the scrape.
    pub report: ScrapeReport,
}

/// One row of the `anomalies` table: a signal that left its baseline (docs/schema.md).
#[derive(Debug, Clone, PartialEq)]
pub struct AnomalyRow {
    /// The detector round that first saw it, ms since the epoch (the samples' clock).
    pub time_ms: i64,
    /// Instance the signal belongs to.
    pub instance: String,
    /// Its datacenter, host and service (empty when unknown).
    pub placement: Placement,
    /// The signal's metric family.
    pub metric: String,
    /// Signal class, lowercase (`availability`, `errors`, `latency`, `saturation`, `traffic`,
    /// `restart`).
    pub class: String,
    /// The peer the signal is about (a client metric's server), empty when none.
    pub peer: String,
    /// Robust score (deviations from the baseline, in MAD units); non-finite scores are 0.
    pub score: f64,
    /// When the signal left its baseline, ms since the epoch.
    pub onset_ms: i64,
}

/// One row of the `verdicts` table: a verdict event (docs/schema.md).
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictRow {
    /// When the event happened, ms since the epoch (the samples' clock).
    pub time_ms: i64,
    /// Verdict id: when it opened and what it first named (`<opened ms>-<instance>`).
    pub id: String,
    /// `opened`, `updated` or `resolved`.
    pub state: String,
    /// Incident kind (`node_loss`, `cold_start`, …).
    pub kind: String,
    /// Datacenter named.
    pub dc: String,
    /// Every datacenter named, sorted (both ends of a degraded link; the datacenters of
    /// the instances named otherwise).
    pub dcs: Vec<String>,
    /// Hosts named, most likely first.
    pub hosts: Vec<String>,
    /// Service named.
    pub service: String,
    /// Instances named.
    pub instances: Vec<String>,
    /// Confidence, 0..1.
    pub confidence: f64,
    /// Onset of the incident, ms since the epoch.
    pub onset_ms: i64,
    /// When the verdict opened, ms since the epoch.
    pub opened_ms: i64,
    /// The evidence chain, JSON.
    pub evidence_json: String,
}

/// One row of the `ground_truth` table: a fault a simulated run injected (docs/schema.md).
#[derive(Debug, Clone, PartialEq)]
pub struct GroundTruthRow {
    /// Scenario name.
    pub scenario: String,
    /// Incident kind the fault should be named as (`node_loss`, …).
    pub kind: String,
    /// Service of the faulty instances.
    pub service: String,
    /// Datacenters of the faulty instances.
    pub dcs: Vec<String>,
    /// Hosts of the faulty instances.
    pub hosts: Vec<String>,
    /// The faulty instances.
    pub instances: Vec<String>,
    /// When the fault started, ms since the epoch (the simulated clock).
    pub onset_ms: i64,
    /// When it ended, ms since the epoch; `None` while it lasts.
    pub end_ms: Option<i64>,
}

/// Appends `rows` to a batch: each sample to `values` in `sample_values` column order
/// ([`crate::schema::SAMPLE_VALUE_COLUMNS`]: metric, series id, time, value), and a `series`
/// row ([`crate::schema::SERIES_COLUMNS`]) to `series` for each series whose row is due
/// (its first sample here, then every [`SERIES_REFRESH_MS`]). Returns how many `series` rows
/// were appended.
pub fn encode_samples(rows: &[SampleRow], values: &mut Vec<u8>, series: &mut Vec<u8>) -> u64 {
    encode_samples_noting(rows, values, series, &mut Vec::new())
}

/// [`encode_samples`], noting in `noted` each series whose `series` row was appended, so a
/// writer that loses the batch can [`Series::forget_series_row`] them (the next sample writes
/// the row again).
pub fn encode_samples_noting(
    rows: &[SampleRow],
    values: &mut Vec<u8>,
    series: &mut Vec<u8>,
    noted: &mut Vec<Arc<Series>>,
) -> u64 {
    let mut series_rows = 0;
    values.reserve(rows.len() * 40);
    for row in rows {
        values.extend_from_slice(row.series.encoded_metric());
        values.extend_from_slice(&row.series.id.to_le_bytes());
        values.extend_from_slice(&row.timestamp_ms.to_le_bytes());
        values.extend_from_slice(&row.value.to_le_bytes());
        if row.series.series_row_due(row.timestamp_ms) {
            encode_series_row(&row.series, row.timestamp_ms, series);
            noted.push(row.series.clone());
            series_rows += 1;
        }
    }
    series_rows
}

/// Appends one `series` row for `series`, seen at `timestamp_ms` (its `first_seen` and
/// `last_seen`; the table keeps the least and the greatest of each series' rows).
pub fn encode_series_row(series: &Series, timestamp_ms: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(series.encoded_columns());
    out.extend_from_slice(&series.id.to_le_bytes());
    out.extend_from_slice(&timestamp_ms.to_le_bytes());
    out.extend_from_slice(&timestamp_ms.to_le_bytes());
}

/// Appends `reports` in `scrapes` column order ([`crate::schema::SCRAPE_COLUMNS`]).
pub fn encode_scrapes(reports: &[ScrapeReport], out: &mut Vec<u8>) {
    for report in reports {
        out.extend_from_slice(&report.timestamp_ms.to_le_bytes());
        rowbinary::string(&report.job, out);
        // The placement's instance (`placement.instance_label`), as in `samples`.
        rowbinary::string(report.instance_name(), out);
        rowbinary::string(&report.placement.dc, out);
        rowbinary::string(&report.placement.host, out);
        rowbinary::string(&report.placement.service, out);
        out.push(u8::from(report.up));
        out.extend_from_slice(&report.duration_seconds.to_le_bytes());
        out.extend_from_slice(&report.samples_scraped.to_le_bytes());
        out.extend_from_slice(&report.samples_post_metric_relabeling.to_le_bytes());
        out.extend_from_slice(&report.series_added.to_le_bytes());
        rowbinary::string(report.error.as_deref().unwrap_or(""), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_comes_from_labels_or_instance() {
        let config = PlacementConfig::default();
        let labels: Labels = [("dc", "dc-1"), ("instance", "redis-7.dc-1:9121"), ("service", "redis")]
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        let placement = Placement::of(&labels, &config);
        assert_eq!(
            placement,
            Placement {
                instance: "redis-7.dc-1:9121".into(),
                dc: "dc-1".into(),
                host: "redis-7.dc-1".into(),
                service: "redis".into()
            }
        );
        // Named by another label (Kubernetes' `pod`), falling back to `instance` without it.
        let by_pod = PlacementConfig {
            instance_label: "pod".into(),
            ..PlacementConfig::default()
        };
        let mut with_pod = labels.clone();
        with_pod.insert("pod".into(), "redis-7".into());
        assert_eq!(Placement::of(&with_pod, &by_pod).instance, "redis-7");
        assert_eq!(Placement::of(&labels, &by_pod).instance, "redis-7.dc-1:9121");
        let ipv6: Labels = [("instance".to_string(), "[::1]:9100".to_string())]
            .into_iter()
            .collect();
        assert_eq!(Placement::of(&ipv6, &config).host, "::1");
    }

    /// Issue 38: only an `instance` of the `host:port` shape gives a host; a pod's name (a
    /// converted or federated series' `instance`) leaves it unknown rather than becoming a
    /// host of its own.
    /// The bounds hold to the millisecond: 10 minutes ahead and an hour behind are taken,
    /// one millisecond further is not; far-off and extreme times are refused without overflow.
    #[test]
    fn samples_far_from_their_scrape_are_out_of_bounds() {
        let scrape = 1_790_000_000_000;
        assert_eq!(sample_bounds(scrape, scrape), None);
        assert_eq!(sample_bounds(scrape + 600_000, scrape), None);
        assert_eq!(sample_bounds(scrape + 600_001, scrape), Some(OutOfBounds::TooFarAhead));
        assert_eq!(sample_bounds(scrape - 3_600_000, scrape), None);
        assert_eq!(sample_bounds(scrape - 3_600_001, scrape), Some(OutOfBounds::TooOld));
        let ten_years = 10 * 365 * 24 * 3_600_000;
        assert_eq!(
            sample_bounds(scrape + ten_years, scrape),
            Some(OutOfBounds::TooFarAhead)
        );
        assert_eq!(sample_bounds(i64::MAX, i64::MAX - 1), None);
        assert_eq!(sample_bounds(i64::MIN, scrape), Some(OutOfBounds::TooOld));
        assert_eq!(sample_bounds(i64::MAX, scrape), Some(OutOfBounds::TooFarAhead));
        assert_eq!(
            OutOfBounds::ALL.map(|reason| (reason.index(), reason.as_str())),
            [(0, "too_far_ahead"), (1, "too_old")]
        );
    }

    #[test]
    fn only_a_host_and_port_instance_gives_a_host() {
        let config = PlacementConfig::default();
        let host_of = |instance: &str| {
            let labels: Labels = [("instance".to_string(), instance.to_string())].into_iter().collect();
            Placement::of(&labels, &config).host
        };
        for (instance, host) in [
            ("10.0.3.7:9100", "10.0.3.7"),
            ("redis-7.dc-1:9121", "redis-7.dc-1"),
            ("[::1]:9100", "::1"),
            ("[fe80::1%eth0]:9100", "fe80::1%eth0"),
            ("carts-5d8f7b9c4-x2k9q", ""),
            ("carts", ""),
            ("[::1]", ""),
            ("::1", ""),
            ("a:b:9100", ""),
            ("http://db-1:8080", ""),
            ("db-1:", ""),
            ("db-1:http", ""),
            (":9100", ""),
            ("[]:9100", ""),
        ] {
            assert_eq!(host_of(instance), host, "{instance}");
        }
        // A host label still wins, and the rule can be turned off.
        let labels: Labels = [("instance", "10.0.3.7:9100"), ("host", "node-3")]
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        assert_eq!(Placement::of(&labels, &config).host, "node-3");
        let off = PlacementConfig {
            host_from_instance: false,
            ..PlacementConfig::default()
        };
        let labels: Labels = [("instance".to_string(), "10.0.3.7:9100".to_string())]
            .into_iter()
            .collect();
        assert_eq!(Placement::of(&labels, &off).host, "");
    }

    fn sample(series: &Arc<Series>, timestamp_ms: i64, value: f64) -> SampleRow {
        SampleRow {
            timestamp_ms,
            value,
            series: series.clone(),
        }
    }

    /// A sample is its metric, id, time and value; a series' row goes with its first sample
    /// and again an hour of sample time later, and splitting schema 2's wide rows gives the
    /// same bytes.
    #[test]
    fn samples_are_thin_and_a_series_row_goes_once_an_hour() {
        let labels: Labels = [("instance", "a:1"), ("job", "redis"), ("pool", "p")]
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        let series = Arc::new(Series::new("pool_waiting".into(), labels, &PlacementConfig::default()));
        let (mut values, mut rows) = (Vec::new(), Vec::new());
        let t0 = 1_764_000_000_000;
        let written = encode_samples(
            &[sample(&series, t0, 1.0), sample(&series, t0 + 1000, 2.0)],
            &mut values,
            &mut rows,
        );
        assert_eq!(written, 1);
        // Metric as a RowBinary string (length 12), the id, the time, the value.
        let mut expected = vec![12u8];
        expected.extend_from_slice(b"pool_waiting");
        expected.extend_from_slice(&series.id.to_le_bytes());
        expected.extend_from_slice(&t0.to_le_bytes());
        expected.extend_from_slice(&1.0_f64.to_le_bytes());
        assert_eq!(&values[..expected.len()], &expected[..]);
        assert_eq!(values.len(), 2 * expected.len());
        let mut series_row = series.encoded_columns().to_vec();
        series_row.extend_from_slice(&series.id.to_le_bytes());
        series_row.extend_from_slice(&t0.to_le_bytes());
        series_row.extend_from_slice(&t0.to_le_bytes());
        assert_eq!(rows, series_row);
        // Within the hour: no row; an hour later: one again.
        let (mut more, mut more_rows) = (Vec::new(), Vec::new());
        let hour = t0 + SERIES_REFRESH_MS - 1;
        assert_eq!(
            encode_samples(&[sample(&series, hour, 3.0)], &mut more, &mut more_rows),
            0
        );
        assert_eq!(
            encode_samples(&[sample(&series, hour + 1, 3.0)], &mut more, &mut more_rows),
            1
        );
        // Schema 2's wide rows (time, the series' columns, value, id) split into the same.
        let mut wide = Vec::new();
        for (time, value) in [(t0, 1.0_f64), (t0 + 1000, 2.0)] {
            wide.extend_from_slice(&i64::to_le_bytes(time));
            wide.extend_from_slice(series.encoded_columns());
            wide.extend_from_slice(&value.to_le_bytes());
            wide.extend_from_slice(&series.id.to_le_bytes());
        }
        assert_eq!(rowbinary::split_wide_samples(&wide), Some((values, series_row, 1)));
        assert_eq!(
            rowbinary::split_wide_samples(&wide[..wide.len() - 3]),
            None,
            "a cut row is refused"
        );
    }

    #[test]
    fn series_ids_hash_name_and_sorted_labels() {
        let labels: Labels = [("b".to_string(), "2".to_string()), ("a".to_string(), "1".to_string())]
            .into_iter()
            .collect();
        assert_eq!(series_id("up", &labels), fnv1a(b"up\0a=1\0b=2"));
        assert_ne!(series_id("up", &labels), series_id("down", &labels));
        // The published FNV-1a 64 test vector ("a"), so ids match other FNV-1a implementations.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
