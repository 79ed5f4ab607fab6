//! The fleet-wide detector's input (`epicenter detect`): when several collectors share the
//! targets (`epicenter run --shard I/N --no-detector`) and write one store, one detector reads
//! back, every poll, the samples its rules name and judges the whole fleet. This module is
//! the pure half: the SQL of a poll, and the [`Follower`] that turns its rows into the same
//! [`Batch`]es [`crate::live::extract`] makes from scrape outcomes, each scrape once however
//! often the overlapping windows read it. The binary runs the queries and feeds the batches
//! to [`crate::live::run`]; `epicenter replay` groups stored rows with [`scrape_batches`] too.
//!
//! What reading the store changes, and how it is kept from becoming evidence:
//! - **Delay and order**: a scrape reaches the store once its collector has flushed it
//!   (`batching.max_age`, 5 s by default), and collectors flush at their own moments. So a
//!   scrape is fed only once it lies a hold ([`Follower::hold_ms`]: a scrape interval, at least
//!   the flush age and a poll) behind the newest sample read: each round then sees every
//!   collector's scrapes up to its time, not those of whichever flushed last (which made a
//!   caller that happened to be read first look like a root of its own). A window starts
//!   where the least-fed instance stands ([`Follower::samples_from`]), at most
//!   [`Follower::lookback_ms`] back, so a flush that comes late is still read; a scrape older
//!   than that when it arrives (a spool replaying a long outage) is not fed (its rounds were
//!   judged). Time to detect grows by about the hold.
//! - **The synthetic `up`** carries the scrape's wall time, while a target may stamp its own
//!   samples (`honor_timestamps`; a simulated fleet does). Where the clocks agree (most
//!   exporters print no timestamps) a scrape's `up` and samples share their time and form one
//!   batch, as on the scrape path. Where they do not, an `up` of 1 without samples at its time
//!   is left out (the scrape's samples stand for it) and an `up` of 0 is a batch of its own at
//!   the scrape's time, as [`crate::live::extract`] makes it for a failed scrape; the
//!   availability signal then lacks the history of 1s the scrape path gives it, and a target
//!   that stops answering is named from its silence ([`crate::engine::Detector`]'s own
//!   availability anomaly, two intervals on) and its callers.
//! - **epicenter's own losses**: a scrape a collector skipped or had time out while starved
//!   (`scrapes.error` starting `skipped:` or `starved:`) becomes a [`Batch::late`], as on the
//!   scrape path. A collector that writes later than the others holds the rounds back until
//!   its scrapes are in (while its targets are up). A target whose collector stopped writing
//!   `scrapes` rows while the others go on (the collector died, its store writes fail) is
//!   silent because of epicenter, not of itself: after [`MIN_SILENCE_ALLOWED_MS`] at least it
//!   is kept as seen ([`Follower::take`]), so no round judges that silence. When the store
//!   stops answering, nothing new is read and the samples' clock (and with it every silence)
//!   stands still; the binary holds the rounds of a failed poll.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::Series;

use crate::engine::InstanceInfo;
use crate::live::{Batch, MetricNames};

/// The least a window reaches back before the newest sample read, ms of sample time.
pub const MIN_LOOKBACK_MS: i64 = 30_000;
/// A window reaches back this many scrape intervals before the newest sample read (when more
/// than [`MIN_LOOKBACK_MS`]).
pub const LOOKBACK_INTERVALS: i64 = 4;
/// How long an instance whose scrapes stopped reaching the store is reported lost before it
/// is forgotten (ms, wall clock): a target removed from the configuration is not waited for
/// after that, and its silence is the detector's to judge again.
pub const FORGET_AFTER_MS: i64 = 10 * 60_000;
/// The least time (ms, wall clock) an instance's collector may stay quiet, while the others
/// write, before its instances are kept as seen ([`Follower::take`]): meanwhile the rounds wait
/// for it. Short scrape intervals would otherwise count a collector that is merely slower
/// than the others (a busy machine) as gone.
pub const MIN_SILENCE_ALLOWED_MS: i64 = 10_000;
/// The most a samples window spans, in lookbacks ([`Follower::samples_to`]).
pub const WINDOW_LOOKBACKS: i64 = 4;
/// Gaps between one instance's scrapes that fix the interval the lookback is measured in.
const INTERVAL_GAPS: usize = 30;

/// `'name'` for SQL: a quoted string literal.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The query that reads the samples of `metrics` (the rules' names, [`crate::live::rule_metrics`])
/// from `samples` with `from_ms <= time <= to_ms` (ms since the epoch, either bound open), as
/// JSONEachRow rows of `t` (ms), `metric`, `labels`, `value`, `instance`, `dc`, `host`,
/// `service`, in time order: what [`scrape_batches`] reads. The synthetic `up` is read only
/// `with_up` (see the module; replay leaves it out).
pub fn samples_query(metrics: &MetricNames, from_ms: Option<i64>, to_ms: Option<i64>, with_up: bool) -> String {
    let mut names: Vec<&str> = metrics
        .iter()
        .map(String::as_str)
        .filter(|metric| with_up || !matches!(*metric, "up" | "up_sum" | "up_count"))
        .collect();
    names.sort_unstable();
    let list: Vec<String> = names.iter().map(|name| quoted(name)).collect();
    let mut conditions = vec![format!("metric IN ({})", list.join(", "))];
    if let Some(from) = from_ms {
        conditions.push(format!("time >= fromUnixTimestamp64Milli({from})"));
    }
    if let Some(to) = to_ms {
        conditions.push(format!("time <= fromUnixTimestamp64Milli({to})"));
    }
    format!(
        "SELECT toUnixTimestamp64Milli(time) AS t, metric, labels, value, instance, dc, host, service FROM samples WHERE {} ORDER BY t",
        conditions.join(" AND ")
    )
}

/// The query that reads, per instance, the scrapes stored since `from_ms` (wall clock, ms
/// since the epoch): its placement, its newest scrape's time `t` (ms), `up` (1 or 0) of its
/// newest scrape that epicenter made on time (0 when there is none in the window), and the
/// times `late` (ms) of the scrapes epicenter skipped or had time out while starved.
/// JSONEachRow.
pub fn scrapes_query(from_ms: i64) -> String {
    format!(
        "SELECT instance, any(dc) AS dc, any(host) AS host, any(service) AS service, \
         toUnixTimestamp64Milli(max(time)) AS t, \
         argMaxIf(up, time, NOT (startsWith(error, 'skipped:') OR startsWith(error, 'starved:'))) AS up, \
         groupArrayIf(toUnixTimestamp64Milli(time), startsWith(error, 'skipped:') OR startsWith(error, 'starved:')) AS late \
         FROM scrapes WHERE time >= fromUnixTimestamp64Milli({from_ms}) GROUP BY instance ORDER BY instance"
    )
}

/// A JSON number that ClickHouse may print as a string (64-bit integers are quoted by default).
fn millis(value: &serde_json::Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|text| text.parse().ok()))
}

/// The rows of [`samples_query`] grouped into one [`Batch`] per (instance, sample time): one
/// scrape each, ordered by time then instance. An `up` sample joins the batch of its time; one
/// alone at its time (the target stamps its own samples) is left out when 1 and is a batch of
/// its own when 0 (see the module). The `instance` column is the placement's instance, as the
/// live detector names it (its `instance` label when empty). Errors name the line (1-based)
/// that is not such a row.
pub fn scrape_batches(rows: &str) -> Result<Vec<Batch>, String> {
    #[derive(serde::Deserialize)]
    struct Row {
        t: serde_json::Value,
        metric: String,
        labels: BTreeMap<String, String>,
        /// ClickHouse writes NaN and ±Inf as `null` in JSON: read as NaN (a summary quantile
        /// without observations is NaN, and so is a stale gauge some exporters print).
        value: Option<f64>,
        #[serde(default)]
        instance: String,
        dc: String,
        host: String,
        service: String,
    }
    // By source too: a kubelet's rows about a pod are its scrape, not the pod's own.
    let mut scrapes: BTreeMap<(i64, String, String), Batch> = BTreeMap::new();
    for (index, line) in rows.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(line).map_err(|error| format!("samples row {}: {error}", index + 1))?;
        let time_ms = millis(&row.t).ok_or_else(|| format!("samples row {}: `t` is not a time in ms", index + 1))?;
        let name = if row.instance.is_empty() {
            row.labels.get("instance").cloned().unwrap_or_default()
        } else {
            row.instance
        };
        let source = row.labels.get("instance").cloned().unwrap_or_else(|| name.clone());
        let batch = scrapes.entry((time_ms, name.clone(), source)).or_insert_with(|| Batch {
            time_ms,
            instance: InstanceInfo {
                name,
                dc: row.dc,
                host: row.host,
                service: row.service,
            },
            samples: Vec::new(),
            late: false,
            reported: false,
        });
        batch.samples.push((
            Arc::new(Series::new(row.metric, row.labels, &PlacementConfig::default())),
            row.value.unwrap_or(f64::NAN),
        ));
    }
    // An instance's own target is the one whose `up` it carries (a target's `up` is placed
    // on the target): rows another target wrote about it (a kubelet's, about a pod) are
    // reported. Without `up` rows in the read (a replay leaves them out) nothing is.
    let mut own_sources: std::collections::HashMap<&str, std::collections::HashSet<&str>> =
        std::collections::HashMap::new();
    for ((_, name, source), batch) in &scrapes {
        if batch.samples.iter().any(|(series, _)| series.name == "up") {
            own_sources.entry(name.as_str()).or_default().insert(source.as_str());
        }
    }
    let reported: std::collections::HashSet<(String, String)> = scrapes
        .keys()
        .filter(|(_, name, source)| {
            own_sources
                .get(name.as_str())
                .is_some_and(|own| !own.contains(source.as_str()))
        })
        .map(|(_, name, source)| (name.clone(), source.clone()))
        .collect();
    // An `up` of 1 alone at its time, of a target whose samples carry times of their own, says
    // nothing the scrape's samples do not.
    let stamped: std::collections::HashSet<(String, String)> = scrapes
        .iter()
        .filter(|(_, batch)| !is_up_only(batch))
        .map(|((_, name, source), _)| (name.clone(), source.clone()))
        .collect();
    scrapes.retain(|(_, name, source), batch| {
        !(is_up_only(batch)
            && stamped.contains(&(name.clone(), source.clone()))
            && batch.samples.iter().all(|(_, value)| *value >= 1.0))
    });
    Ok(scrapes
        .into_iter()
        .map(|((_, name, source), mut batch)| {
            batch.reported = reported.contains(&(name, source));
            batch
        })
        .collect())
}

/// Whether `batch` holds only the synthetic `up`.
fn is_up_only(batch: &Batch) -> bool {
    batch.samples.iter().all(|(series, _)| series.name == "up")
}

/// One instance's scrapes as [`scrapes_query`] reads them.
#[derive(Debug, serde::Deserialize)]
struct ScrapesRow {
    instance: String,
    dc: String,
    host: String,
    service: String,
    t: serde_json::Value,
    late: Vec<serde_json::Value>,
    /// The newest scrape's `up` (1 or 0; absent counts as up).
    #[serde(default)]
    up: serde_json::Value,
}

/// What the detector has been fed so far, and where the next poll's windows start.
#[derive(Debug)]
pub struct Follower {
    /// Per instance, the newest scrape fed (sample time, ms); of an instance that more than
    /// one target reports (a pod and its node's kubelet), the oldest of their newest.
    fed: HashMap<String, i64>,
    /// Per instance, per source ([`Batch::source`]), the newest scrape fed (sample time, ms).
    source_fed: HashMap<String, HashMap<String, i64>>,
    /// Per instance, the newest batch of only `up` fed (its time, on whichever clock).
    up_fed: HashMap<String, i64>,
    /// Per instance, the newest late scrape taken (wall clock, ms).
    late_fed: HashMap<String, i64>,
    /// Late scrapes waiting for the horizon to pass them.
    late_pending: Vec<Batch>,
    /// Per instance, its placement, the newest stored scrape seen (wall clock, ms) and whether
    /// the newest scrape that epicenter made on time was up.
    scraped: HashMap<String, (InstanceInfo, i64, bool)>,
    /// Per instance, the newest sample time read (fed or held back; its samples' clock) and
    /// the last gap between two of them (its own scrape interval, once seen).
    read: HashMap<String, (i64, Option<i64>)>,
    /// Instances whose collector went quiet, as of the last poll.
    lost: std::collections::HashSet<String>,
    /// Instances whose `up` rows lie on another clock than their samples (they stamp their
    /// own): their window must reach both.
    own_clock: std::collections::HashSet<String>,
    /// Whether the last window read nothing newer than what was fed: the next is open-ended.
    open_window: bool,
    /// The newest sample time fed.
    newest_ms: Option<i64>,
    /// The least a scrape is held back behind the newest sample read (ms): the collectors'
    /// flush age plus a poll, the time by which every collector has written what it scraped.
    hold_floor_ms: i64,
    /// The longest scrape interval of the collectors' jobs (ms).
    longest_interval_ms: i64,
    /// Where the first windows start (wall clock when following began, ms).
    start_ms: i64,
    /// The first gaps between one instance's scrapes (sample time, ms).
    gaps: Vec<i64>,
    /// How far (wall clock) a live instance's newest stored scrape may lie behind the newest
    /// any collector stored: two of the longest scrape interval, plus the collectors' flush
    /// age and a poll, at least [`MIN_SILENCE_ALLOWED_MS`].
    silence_allowed_ms: i64,
}

impl Follower {
    /// A follower that starts reading at `start_ms` (wall clock, ms since the epoch; the
    /// moment following begins: the detector starts cold, as `epicenter run`'s does), for
    /// collectors that scrape at most every `scrape_interval_ms` and flush within
    /// `flush_age_ms`, polled every `poll_ms`.
    pub fn new(start_ms: i64, scrape_interval_ms: i64, flush_age_ms: i64, poll_ms: i64) -> Follower {
        let hold_floor_ms = flush_age_ms.max(0) + poll_ms.max(0);
        let longest_interval_ms = scrape_interval_ms.max(1);
        Follower {
            fed: HashMap::new(),
            source_fed: HashMap::new(),
            up_fed: HashMap::new(),
            late_fed: HashMap::new(),
            late_pending: Vec::new(),
            scraped: HashMap::new(),
            read: HashMap::new(),
            lost: std::collections::HashSet::new(),
            own_clock: std::collections::HashSet::new(),
            open_window: false,
            newest_ms: None,
            hold_floor_ms,
            longest_interval_ms,
            start_ms,
            gaps: Vec::new(),
            silence_allowed_ms: (2 * longest_interval_ms + hold_floor_ms).max(MIN_SILENCE_ALLOWED_MS),
        }
    }

    /// Whether `batch` (of only `up`) lies on another clock than its instance's samples fed
    /// so far: before the newest of them.
    fn stamped(&self, batch: &Batch) -> bool {
        self.fed
            .get(&batch.instance.name)
            .is_some_and(|fed| batch.time_ms <= *fed)
    }

    /// The scrape interval (ms of sample time): the median gap between one instance's
    /// scrapes, once a gap is known.
    fn interval_ms(&self) -> Option<i64> {
        if self.gaps.is_empty() {
            return None;
        }
        let mut sorted = self.gaps.clone();
        sorted.sort_unstable();
        Some(sorted[sorted.len() / 2])
    }

    /// How long a scrape is held back behind the newest sample read before it is fed (ms of
    /// sample time): a scrape interval, at least the collectors' flush age plus a poll. Every
    /// round then sees each collector's scrapes up to its time, not the scrapes of whichever
    /// collector flushed last (the scrape path sees every target's scrape as it comes).
    pub fn hold_ms(&self) -> i64 {
        self.interval_ms().unwrap_or(0).max(self.hold_floor_ms)
    }

    /// How far before the newest sample fed a window reaches (ms of sample time):
    /// [`LOOKBACK_INTERVALS`] scrape intervals, at least [`MIN_LOOKBACK_MS`], three holds and
    /// two of the longest job interval.
    pub fn lookback_ms(&self) -> i64 {
        let intervals = self.interval_ms().map_or(0, |interval| LOOKBACK_INTERVALS * interval);
        intervals
            .max(MIN_LOOKBACK_MS)
            .max(3 * self.hold_ms())
            .max(2 * self.longest_interval_ms)
    }

    /// Where the next samples window starts (sample time, ms): the oldest of the newest
    /// scrapes fed of the instances collectors store (what none of them has been fed yet lies
    /// after it), and at most [`Follower::lookback_ms`] before the newest sample fed. So a poll
    /// reads about a hold and a poll of samples, not the whole lookback, once every instance
    /// is fed; the whole lookback while an instance whose collector writes was never fed, or
    /// was fed only before the lookback (a new target, a collector back from a silence: call
    /// [`Follower::note_scrapes`] before asking, so that it counts as back). A quiet
    /// collector's instances ([`Follower::lost`]) hold the window back to their newest scrape
    /// fed while it lies within the lookback, so that a spool replaying a short outage is
    /// read; what lies further back is not fed (its rounds were judged). A self-stamping
    /// target ([`Follower::take`] on `up`) that is down holds it back to its `up` rows (the
    /// only rows it gets).
    pub fn samples_from(&self) -> i64 {
        let Some(newest) = self.newest_ms else {
            return self.start_ms;
        };
        let whole = newest.saturating_sub(self.lookback_ms());
        let mut oldest_fed: Option<i64> = None;
        for (name, (_, _, up)) in &self.scraped {
            // A self-stamping target that is down: only its `up` rows come, on the scrapes'
            // clock (while it is up, its `up` rows are left out and its samples stand).
            let fed = if self.own_clock.contains(name) && !up {
                self.up_fed.get(name).copied()
            } else {
                self.fed.get(name).copied()
            };
            match fed {
                Some(fed) if fed >= whole => oldest_fed = Some(oldest_fed.map_or(fed, |oldest| oldest.min(fed))),
                _ if self.lost.contains(name) => {}
                _ => return whole,
            }
        }
        oldest_fed.map_or(whole, |oldest| oldest.max(whole))
    }

    /// Where the next samples window ends (sample time, ms, inclusive): [`WINDOW_LOOKBACKS`]
    /// lookbacks after [`Follower::samples_from`]. A detector that fell behind (a starved
    /// machine, a store that stalled) catches up in windows of that span instead of reading
    /// everything since it stood at every poll, which made each poll longer and the detector
    /// later still. `None` (open) after a window that read nothing newer than what was read
    /// before:
    /// the store holds a gap longer than the window (collectors down for minutes, or started
    /// after `detect`), which an open window steps over.
    pub fn samples_to(&self) -> Option<i64> {
        (!self.open_window).then(|| {
            self.samples_from()
                .saturating_add(WINDOW_LOOKBACKS.saturating_mul(self.lookback_ms()))
        })
    }

    /// Where the next scrapes window starts (wall clock, ms): far enough back to see every
    /// live instance's newest scrape.
    pub fn scrapes_from(&self, now_ms: i64) -> i64 {
        now_ms
            .saturating_sub(2 * self.silence_allowed_ms)
            .max(self.start_ms.saturating_sub(self.silence_allowed_ms))
    }

    /// The batches to feed from one poll at `now_ms` (wall clock): `samples` (rows of
    /// [`samples_query`] from [`Follower::samples_from`]) and `scrapes` (rows of
    /// [`scrapes_query`] from [`Follower::scrapes_from`]), in time order.
    ///
    /// Each scrape is fed once: a batch not newer than its instance's last one is left out.
    /// A batch (and a skipped or starved scrape's [`Batch::late`]) waits for a later poll
    /// while it is newer than the horizon: the newest sample read less [`Follower::hold_ms`],
    /// and no later than where each instance whose target is up has nothing due yet (its
    /// newest sample read plus its interval). So a collector that writes late delays the
    /// rounds instead of leaving its targets out of them; a target that is down does not hold
    /// anyone, nor one whose collector keeps writing while its samples lie more than the
    /// lookback behind (an exporter stamping old times). An instance whose newest stored
    /// scrape lies further behind the newest any collector stored than the silence allowed
    /// holds the rounds no more: its collector went quiet, so it gets an empty batch (no
    /// samples) at the newest time fed at every poll, for at most [`FORGET_AFTER_MS`], and is
    /// kept as seen, its silence not judged ([`Follower::lost`] names them). Errors name the
    /// row that could not be read; nothing is marked fed then.
    pub fn take(&mut self, samples: &str, scrapes: &str, now_ms: i64) -> Result<Vec<Batch>, String> {
        let read = scrape_batches(samples)?;
        let newest_stored = self.note_scrapes(scrapes, now_ms)?;
        // A window that read nothing newer than what was read before (the store holds a gap longer
        // than the window: collectors down for minutes, or started after `detect`): the next
        // one is left open, or the follower would ask for the same empty window forever.
        let read_before = self.read.values().map(|(read, _)| *read).max();
        self.open_window = read
            .iter()
            .all(|batch| read_before.is_some_and(|before| batch.time_ms <= before));
        self.take_read(read, newest_stored, now_ms)
    }

    /// Reads the rows of [`scrapes_query`]: each instance's placement, newest stored scrape,
    /// `up` and epicenter's own late scrapes, and which collectors went quiet
    /// ([`Follower::lost`]). [`Follower::take`] does it too; calling it first (with the same
    /// rows, again in `take`: it is idempotent) lets [`Follower::samples_from`] see a
    /// collector that came back before its replayed rows are read. Returns the newest scrape
    /// any collector stored (wall clock, ms). Errors name the row that could not be read.
    pub fn note_scrapes(&mut self, scrapes: &str, now_ms: i64) -> Result<i64, String> {
        let mut placements = Vec::new();
        for (index, line) in scrapes.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let row: ScrapesRow =
                serde_json::from_str(line).map_err(|error| format!("scrapes row {}: {error}", index + 1))?;
            let newest = millis(&row.t).ok_or_else(|| format!("scrapes row {}: `t` is not a time in ms", index + 1))?;
            let late: Vec<i64> = row.late.iter().filter_map(millis).collect();
            let up = row
                .up
                .as_u64()
                .or_else(|| row.up.as_str().and_then(|up| up.parse().ok()))
                != Some(0);
            let info = InstanceInfo {
                name: row.instance,
                dc: row.dc,
                host: row.host,
                service: row.service,
            };
            placements.push((info, newest, late, up));
        }
        for (info, newest, late, up) in placements {
            let before = self.late_fed.get(&info.name).copied();
            let mut newest_late = before;
            for time_ms in late {
                if before.is_some_and(|before| time_ms <= before) {
                    continue;
                }
                newest_late = Some(newest_late.map_or(time_ms, |seen: i64| seen.max(time_ms)));
                self.late_pending.push(Batch {
                    time_ms,
                    instance: info.clone(),
                    samples: Vec::new(),
                    late: true,
                    reported: false,
                });
            }
            if let Some(newest_late) = newest_late {
                self.late_fed.insert(info.name.clone(), newest_late);
            }
            let entry = self.scraped.entry(info.name.clone()).or_insert((info, newest, up));
            if newest >= entry.1 {
                entry.1 = newest;
                entry.2 = up;
            }
        }
        // Which collectors went quiet: measured against the newest scrape any collector
        // stored, not the wall clock (when every collector is late, a starved machine, or the
        // store stalls, the samples' clock stands still with them and no silence is judged).
        let newest_stored = self
            .scraped
            .values()
            .map(|(_, newest, _)| *newest)
            .max()
            .unwrap_or(now_ms);
        self.scraped
            .retain(|_, (_, newest, _)| newest_stored.saturating_sub(*newest) <= FORGET_AFTER_MS);
        self.lost = self
            .scraped
            .iter()
            .filter(|(_, (_, newest, _))| newest_stored.saturating_sub(*newest) > self.silence_allowed_ms)
            .map(|(name, _)| name.clone())
            .collect();
        Ok(newest_stored)
    }

    /// The rest of [`Follower::take`], on the batches `read` from the samples.
    fn take_read(&mut self, read: Vec<Batch>, newest_stored: i64, now_ms: i64) -> Result<Vec<Batch>, String> {
        // A lone `up` (a failed scrape) behind its instance's samples, read now or fed before,
        // is on the scrapes' clock while the samples carry their own: counted apart, fed as
        // it comes. Where the clocks agree it comes after them and is fed in turn.
        let mut newest_sample: HashMap<&str, i64> = HashMap::new();
        for batch in read.iter().filter(|batch| !is_up_only(batch)) {
            let newest = newest_sample
                .entry(batch.instance.name.as_str())
                .or_insert(batch.time_ms);
            *newest = (*newest).max(batch.time_ms);
        }
        let own_clock: Vec<bool> = read
            .iter()
            .map(|batch| {
                is_up_only(batch)
                    && (newest_sample
                        .get(batch.instance.name.as_str())
                        .is_some_and(|newest| batch.time_ms < *newest)
                        || self.stamped(batch))
            })
            .collect();
        for (batch, _) in read.iter().zip(&own_clock).filter(|(_, own)| !**own) {
            let entry = self
                .read
                .entry(batch.instance.name.clone())
                .or_insert((batch.time_ms, None));
            if batch.time_ms > entry.0 {
                *entry = (batch.time_ms, Some(batch.time_ms - entry.0));
            }
        }
        let horizon = self.horizon(newest_stored);
        let mut batches: Vec<Batch> = Vec::new();
        for (batch, own) in read.into_iter().zip(own_clock) {
            if own {
                self.own_clock.insert(batch.instance.name.clone());
                let fed = self.up_fed.get(&batch.instance.name).copied();
                if fed.is_none_or(|fed| batch.time_ms > fed) {
                    self.up_fed.insert(batch.instance.name.clone(), batch.time_ms);
                    batches.push(batch);
                }
                continue;
            }
            // Each source on its own schedule: a kubelet's scrape of a pod's containers may lie
            // before the pod's own newest and still be new.
            let lookback = self.lookback_ms();
            let sources = self.source_fed.entry(batch.instance.name.clone()).or_default();
            let fed = sources.get(batch.source()).copied();
            if fed.is_some_and(|fed| batch.time_ms <= fed) || batch.time_ms > horizon {
                continue;
            }
            if let Some(fed) = fed {
                if self.gaps.len() < INTERVAL_GAPS {
                    self.gaps.push(batch.time_ms - fed);
                }
            }
            sources.insert(batch.source().to_string(), batch.time_ms);
            // A source that stopped speaking of the instance (its container moved) holds
            // nothing back beyond the lookback.
            let newest = sources.values().copied().max().unwrap_or(batch.time_ms);
            sources.retain(|_, fed| newest.saturating_sub(*fed) <= lookback);
            let oldest_newest = sources.values().copied().min().unwrap_or(batch.time_ms);
            self.fed.insert(batch.instance.name.clone(), oldest_newest);
            if is_up_only(&batch) {
                // Read again later it lies behind what was fed: not fed a second time.
                self.up_fed.insert(batch.instance.name.clone(), batch.time_ms);
            }
            self.newest_ms = Some(self.newest_ms.map_or(batch.time_ms, |newest| newest.max(batch.time_ms)));
            batches.push(batch);
        }
        // Late scrapes once the horizon passed them (or once they lie beyond the lookback).
        let oldest_kept = horizon.saturating_sub(self.lookback_ms());
        let (ready, waiting): (Vec<Batch>, Vec<Batch>) = std::mem::take(&mut self.late_pending)
            .into_iter()
            .partition(|batch| batch.time_ms <= horizon || batch.time_ms < oldest_kept);
        self.late_pending = waiting;
        batches.extend(ready);
        // The quiet collectors' instances: kept as seen at the newest time fed.
        let stamp = self.newest_ms.unwrap_or(now_ms);
        let mut lost: Vec<&String> = self.lost.iter().collect();
        lost.sort();
        for name in lost {
            if let Some((info, _, _)) = self.scraped.get(name) {
                batches.push(Batch {
                    time_ms: stamp,
                    instance: info.clone(),
                    samples: Vec::new(),
                    late: false,
                    reported: false,
                });
            }
        }
        // Instances neither scraped lately nor read within FORGET_AFTER_MS are forgotten.
        if let Some(newest) = self.read.values().map(|(read, _)| *read).max() {
            let scraped = &self.scraped;
            self.read.retain(|name, (read, _)| {
                scraped.contains_key(name) || newest.saturating_sub(*read) <= FORGET_AFTER_MS
            });
            let read = &self.read;
            let known = |name: &String| scraped.contains_key(name) || read.contains_key(name);
            self.fed.retain(|name, _| known(name));
            self.source_fed.retain(|name, _| known(name));
            self.up_fed.retain(|name, _| known(name));
            self.own_clock.retain(|name| known(name));
            self.late_fed.retain(|name, _| known(name));
        }
        batches.sort_by_key(|batch| batch.time_ms);
        Ok(batches)
    }

    /// Where this poll's feeding stops (sample time, ms): see [`Follower::take`].
    /// `newest_stored`: the newest scrape any collector stored (wall clock, ms).
    fn horizon(&self, newest_stored: i64) -> i64 {
        let Some(newest) = self.read.values().map(|(read, _)| *read).max() else {
            return i64::MIN;
        };
        let lookback = self.lookback_ms();
        let fallback = self.interval_ms().unwrap_or(self.hold_floor_ms);
        let slowest = self
            .read
            .iter()
            .filter(|(name, (read, _))| {
                let Some((_, stored, up)) = self.scraped.get(*name) else {
                    return false;
                };
                // A collector that keeps writing while the samples lag: the exporter's clock.
                let writing = newest_stored.saturating_sub(*stored) <= self.longest_interval_ms + self.hold_floor_ms;
                let straggler = writing && newest.saturating_sub(*read) > lookback;
                *up && !self.lost.contains(*name) && !straggler
            })
            .map(|(_, (read, gap))| read.saturating_add(gap.unwrap_or(fallback).max(1) - 1))
            .min()
            .unwrap_or(i64::MAX);
        newest.saturating_sub(self.hold_ms()).min(slowest)
    }

    /// How many instances the collectors stored scrapes of lately (as of the last poll; the
    /// quiet ones, [`Follower::lost`], included).
    pub fn instances(&self) -> usize {
        self.scraped.len()
    }

    /// The newest sample time fed (ms), once a sample was fed.
    pub fn newest_ms(&self) -> Option<i64> {
        self.newest_ms
    }

    /// Instances whose collector went quiet at the last poll (see [`Follower::take`]), sorted.
    pub fn lost(&self) -> Vec<String> {
        let mut lost: Vec<String> = self.lost.iter().cloned().collect();
        lost.sort();
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `samples_query` row as ClickHouse prints it (64-bit integers quoted).
    fn sample(t: i64, instance: &str, metric: &str, value: f64) -> String {
        format!(
            r#"{{"t":"{t}","metric":"{metric}","labels":{{"pool":"p"}},"value":{value},"instance":"{instance}","dc":"dc-1","host":"h-{instance}","service":"redis"}}"#
        )
    }

    fn scrapes(rows: &[(&str, i64, &[i64])]) -> String {
        rows.iter()
            .map(|(instance, t, late)| {
                let late: Vec<String> = late.iter().map(|time| format!("\"{time}\"")).collect();
                format!(
                    r#"{{"instance":"{instance}","dc":"dc-1","host":"h-{instance}","service":"redis","t":"{t}","late":[{}]}}"#,
                    late.join(",")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn names(batches: &[Batch]) -> Vec<(i64, String, usize, bool)> {
        batches
            .iter()
            .map(|batch| {
                (
                    batch.time_ms,
                    batch.instance.name.clone(),
                    batch.samples.len(),
                    batch.late,
                )
            })
            .collect()
    }

    #[test]
    fn the_query_names_the_rules_metrics_without_up_and_quotes_them() {
        let metrics: MetricNames = ["up", "b_total", "a'x", "upstream_errors"]
            .into_iter()
            .map(String::from)
            .collect();
        let query = samples_query(&metrics, Some(1_000), None, false);
        assert!(
            query.contains(
                "metric IN ('a\\'x', 'b_total', 'upstream_errors') AND time >= fromUnixTimestamp64Milli(1000)"
            ),
            "{query}"
        );
        assert!(!query.contains("'up'"), "{query}");
        let with_up = samples_query(&metrics, None, Some(2_000), true);
        assert!(
            with_up.contains(
                "metric IN ('a\\'x', 'b_total', 'up', 'upstream_errors') AND time <= fromUnixTimestamp64Milli(2000)"
            ),
            "{with_up}"
        );
    }

    #[test]
    fn rows_group_into_one_batch_per_instance_and_time() {
        let rows = [
            sample(2_000, "r1", "a", 1.0),
            sample(1_000, "r2", "a", 2.0),
            sample(1_000, "r1", "a", 3.0),
            sample(1_000, "r1", "b", 4.0),
        ]
        .join("\n");
        let batches = scrape_batches(&rows).unwrap();
        assert_eq!(
            names(&batches),
            [
                (1_000, "r1".to_string(), 2, false),
                (1_000, "r2".to_string(), 1, false),
                (2_000, "r1".to_string(), 1, false)
            ]
        );
        let (series, value) = &batches[0].samples[1];
        assert_eq!(
            (series.name.as_str(), &series.labels, *value),
            ("b", &[("pool".to_string(), "p".to_string())].into(), 4.0)
        );
        assert_eq!(batches[0].instance.host, "h-r1");
        let error = scrape_batches(&format!("{}\nnot json", sample(1, "r1", "a", 1.0))).unwrap_err();
        assert!(error.starts_with("samples row 2: "), "{error}");
    }

    /// Windows overlap (each reaches back before the newest sample fed): a scrape read twice
    /// is fed once; a scrape is held back until it lies a hold (the flush age and a poll, then
    /// an interval) behind the newest read, so a collector that flushes late still has its
    /// scrape judged in its round; one older than what its instance was fed is not fed.
    #[test]
    fn overlapping_windows_feed_each_scrape_once_and_in_order() {
        let mut follower = Follower::new(0, 10_000, 1_000, 1_000);
        let now = 100_000;
        let live = scrapes(&[("r1", now, &[]), ("r2", now, &[])]);
        let mut rows: Vec<String> = [(10_000, "r1"), (10_000, "r2"), (20_000, "r1"), (20_000, "r2")]
            .iter()
            .map(|(t, instance)| sample(*t, instance, "a", 1.0))
            .collect();
        // Hold 2 s (no interval known yet): up to 18 s.
        assert_eq!(
            names(&follower.take(&rows.join("\n"), &live, now).unwrap()),
            [
                (10_000, "r1".to_string(), 1, false),
                (10_000, "r2".to_string(), 1, false)
            ]
        );
        // Both fed to 10 s: the next window starts there, not a lookback back.
        assert_eq!(follower.samples_from(), 10_000);
        rows.push(sample(30_000, "r1", "a", 1.0));
        assert_eq!(
            names(&follower.take(&rows.join("\n"), &live, now).unwrap()),
            [
                (20_000, "r1".to_string(), 1, false),
                (20_000, "r2".to_string(), 1, false)
            ]
        );
        // The interval (10 s) is known now and is the hold; r2's scrape at 30 s came a poll late.
        assert_eq!(follower.hold_ms(), 10_000);
        rows.push(sample(30_000, "r2", "a", 1.0));
        rows.push(sample(40_000, "r1", "a", 1.0));
        assert_eq!(
            names(&follower.take(&rows.join("\n"), &live, now).unwrap()),
            [
                (30_000, "r1".to_string(), 1, false),
                (30_000, "r2".to_string(), 1, false)
            ]
        );
        rows.push(sample(15_000, "r1", "a", 9.0));
        assert!(follower.take(&rows.join("\n"), &live, now).unwrap().is_empty());
    }

    /// A pod's own target is the one whose `up` it carries: its rows are its own, the
    /// kubelet's rows about it are reported; without `up` rows in the read (a replay) none is.
    #[test]
    fn rows_another_target_wrote_about_an_instance_are_reported() {
        let row = |t: i64, source: &str, metric: &str| {
            format!(
                r#"{{"t":"{t}","metric":"{metric}","labels":{{"instance":"{source}"}},"value":1,"instance":"pod-1","dc":"dc-1","host":"h1","service":"web"}}"#
            )
        };
        let with_up = [
            row(10_000, "10.0.0.9:8080", "http_requests_total"),
            row(10_000, "10.0.0.9:8080", "up"),
            row(14_000, "10.0.0.5:10250", "container_cpu_cfs_throttled_periods_total"),
        ]
        .join("\n");
        let read: Vec<(i64, String, bool)> = scrape_batches(&with_up)
            .unwrap()
            .iter()
            .map(|batch| (batch.time_ms, batch.source().to_string(), batch.reported))
            .collect();
        assert_eq!(
            read,
            [
                (10_000, "10.0.0.9:8080".to_string(), false),
                (14_000, "10.0.0.5:10250".to_string(), true)
            ]
        );
        let without_up = [
            row(10_000, "10.0.0.9:8080", "http_requests_total"),
            row(14_000, "10.0.0.5:10250", "container_cpu_cfs_throttled_periods_total"),
        ]
        .join("\n");
        assert!(scrape_batches(&without_up).unwrap().iter().all(|batch| !batch.reported));
    }

    /// A pod's own scrapes (every 10 s, at :00) and its node's kubelet's scrapes of its
    /// container (every 10 s, at :04) are two sources of one instance: each is its own batch,
    /// each fed once, and neither is dropped for lying before the other's newest; the
    /// interval stays the 10 s each source keeps, not the 4 s and 6 s between them.
    #[test]
    fn a_pod_reported_by_its_kubelet_is_fed_from_both_sources() {
        let row = |t: i64, source: &str, metric: &str| {
            format!(
                r#"{{"t":"{t}","metric":"{metric}","labels":{{"instance":"{source}"}},"value":1,"instance":"pod-1","dc":"dc-1","host":"h1","service":"web"}}"#
            )
        };
        let mut follower = Follower::new(0, 10_000, 1_000, 1_000);
        let now = 200_000;
        let live = scrapes(&[("pod-1", now, &[]), ("10.0.0.5:10250", now, &[])]);
        let mut rows = Vec::new();
        for step in 0..8 {
            rows.push(row(10_000 * step, "10.0.0.9:8080", "http_requests_total"));
            rows.push(row(
                10_000 * step + 4_000,
                "10.0.0.5:10250",
                "container_cpu_cfs_throttled_periods_total",
            ));
        }
        let fed = follower.take(&rows.join("\n"), &live, now).unwrap();
        let sources: Vec<(i64, &str)> = fed.iter().map(|batch| (batch.time_ms, batch.source())).collect();
        // Held back the flush age and a poll (2 s; no interval known yet) behind the newest
        // read (74 s): up to 72 s, both sources.
        let expected: Vec<(i64, &str)> = (0..8)
            .flat_map(|step| {
                [
                    (10_000 * step, "10.0.0.9:8080"),
                    (10_000 * step + 4_000, "10.0.0.5:10250"),
                ]
            })
            .filter(|(t, _)| *t <= 72_000)
            .collect();
        assert_eq!(sources, expected);
        assert_eq!(follower.hold_ms(), 10_000);
        // Read again with one more scrape of each: held an interval (10 s) behind the newest
        // read (84 s), only the kubelet's at 74 s is new.
        rows.push(row(80_000, "10.0.0.9:8080", "http_requests_total"));
        rows.push(row(
            84_000,
            "10.0.0.5:10250",
            "container_cpu_cfs_throttled_periods_total",
        ));
        let fed = follower.take(&rows.join("\n"), &live, now).unwrap();
        let sources: Vec<(i64, &str)> = fed.iter().map(|batch| (batch.time_ms, batch.source())).collect();
        assert_eq!(sources, [(74_000, "10.0.0.5:10250")]);
    }

    /// Where a target's samples and its `up` share the scrape's time, they are one batch, and a
    /// failed scrape comes after them, in turn; where the samples carry their own (later)
    /// time, a lone `up` of 1 is left out and a lone `up` of 0 (a failed scrape) is fed once,
    /// as it comes, on its own clock.
    #[test]
    fn up_joins_its_scrape_or_stands_alone_when_the_scrape_failed() {
        // Only `up` (a target with no sample a rule reads): kept.
        assert_eq!(scrape_batches(&sample(1_000, "r9", "up", 1.0)).unwrap().len(), 1);
        let mut follower = Follower::new(0, 1_000, 0, 0);
        let same = [
            sample(1_000, "r1", "a", 1.0),
            sample(1_000, "r1", "up", 1.0),
            sample(2_000, "r1", "a", 1.0),
            sample(2_000, "r1", "up", 1.0),
            sample(3_000, "r1", "up", 0.0),
        ]
        .join("\n");
        assert_eq!(
            names(&follower.take(&same, "", 0).unwrap()),
            [
                (1_000, "r1".to_string(), 2, false),
                (2_000, "r1".to_string(), 2, false),
                (3_000, "r1".to_string(), 1, false)
            ]
        );
        assert_eq!(follower.newest_ms(), Some(3_000));
        let mut follower = Follower::new(0, 10_000, 5_000, 5_000);
        let stamped = [
            sample(500_000, "r1", "a", 1.0),
            sample(1_000, "r1", "up", 1.0),
            sample(510_000, "r1", "a", 1.0),
            sample(1_500, "r1", "up", 1.0),
            sample(2_000, "r1", "up", 0.0),
        ]
        .join("\n");
        // The failed scrape is fed as it comes; the samples wait their hold (10 s).
        let batches = follower.take(&stamped, "", 0).unwrap();
        assert_eq!(
            names(&batches),
            [
                (2_000, "r1".to_string(), 1, false),
                (500_000, "r1".to_string(), 1, false)
            ]
        );
        assert_eq!(batches[0].samples[0].1, 0.0);
        // Read again with the next failed scrape: only that one is new.
        let again = [stamped, sample(2_500, "r1", "up", 0.0)].join("\n");
        assert_eq!(
            names(&follower.take(&again, "", 0).unwrap()),
            [(2_500, "r1".to_string(), 1, false)]
        );
    }

    /// A collector that flushes later than the others holds the rounds back to its newest
    /// sample, while its targets are up; a target that is down holds nobody.
    #[test]
    fn the_slowest_live_collector_holds_the_horizon() {
        let mut follower = Follower::new(0, 10_000, 1_000, 1_000);
        let now = 100_000;
        let mut rows: Vec<String> = (1..=4).map(|k| sample(k * 10_000, "r1", "a", 1.0)).collect();
        rows.push(sample(10_000, "r2", "a", 1.0));
        rows.push(sample(20_000, "r2", "a", 1.0));
        let both_up = scrapes(&[("r1", now, &[]), ("r2", now, &[])]);
        // r1 up to 40 s, r2 only to 20 s: nothing after 20 s is fed.
        assert_eq!(
            names(&follower.take(&rows.join("\n"), &both_up, now).unwrap()),
            [
                (10_000, "r1".to_string(), 1, false),
                (10_000, "r2".to_string(), 1, false),
                (20_000, "r1".to_string(), 1, false),
                (20_000, "r2".to_string(), 1, false)
            ]
        );
        // r2's target goes down (its collector writes `up` 0): it holds nobody any more.
        let r2_down = [
            r#"{"instance":"r1","dc":"dc-1","host":"h-r1","service":"redis","t":"100000","late":[],"up":1}"#,
            r#"{"instance":"r2","dc":"dc-1","host":"h-r2","service":"redis","t":"100500","late":[],"up":0}"#,
        ]
        .join("\n");
        assert_eq!(
            names(&follower.take(&rows.join("\n"), &r2_down, now).unwrap()),
            [(30_000, "r1".to_string(), 1, false)]
        );
    }

    /// One poll as `epicenter detect` makes it against a store holding `stored` (sample
    /// time, row): the scrapes noted first, then the samples in the follower's window, then
    /// taken. Returns the batches and how many rows the window held.
    fn poll(follower: &mut Follower, stored: &[(i64, String)], scrapes: &str, now: i64) -> (Vec<Batch>, usize) {
        follower.note_scrapes(scrapes, now).unwrap();
        let (from, to) = (follower.samples_from(), follower.samples_to());
        let window: Vec<&str> = stored
            .iter()
            .filter(|(t, _)| *t >= from && to.is_none_or(|to| *t <= to))
            .map(|(_, row)| row.as_str())
            .collect();
        (follower.take(&window.join("\n"), scrapes, now).unwrap(), window.len())
    }

    /// Rows of `names` every 10 s over `seconds` (sample time, ms, and the row).
    fn every_10_s(names: &[&'static str], seconds: std::ops::RangeInclusive<i64>) -> Vec<(i64, String)> {
        seconds
            .step_by(10)
            .flat_map(|second| {
                names
                    .iter()
                    .map(move |name| (second * 1_000, sample(second * 1_000, name, "a", 1.0)))
            })
            .collect()
    }

    /// A poll reads from the oldest newest-scrape-fed of the instances collectors store: the
    /// whole lookback while one of them was never fed; a quiet collector's instance holds the
    /// window back only while what it was fed lies within the lookback.
    #[test]
    fn the_window_starts_where_the_least_fed_instance_stands() {
        let mut follower = Follower::new(0, 10_000, 1_000, 1_000);
        let now = 100_000;
        let mut stored = every_10_s(&["r1", "r2"], 10..=90);
        // r3 is scraped (a new target) but none of its samples was read yet.
        let three = scrapes(&[("r1", now, &[]), ("r2", now, &[]), ("r3", now, &[])]);
        poll(&mut follower, &stored, &three, now);
        let newest = follower.newest_ms().unwrap();
        assert_eq!(newest, 80_000, "fed up to a hold (the 10 s interval) behind 90 s");
        assert_eq!(follower.samples_from(), newest - follower.lookback_ms());
        // r3's first scrapes arrive; r2's at 90 s is late: r2 stands at 80 s.
        stored.retain(|(t, row)| !(*t == 90_000 && row.contains(r#""instance":"r2""#)));
        stored.extend(every_10_s(&["r3"], 80..=90));
        poll(&mut follower, &stored, &three, now);
        assert_eq!(follower.fed.get("r2"), Some(&80_000));
        assert_eq!(follower.samples_from(), 80_000);
        // r3's collector goes quiet (its newest stored scrape 50 s behind the others'): lost,
        // it still holds the window at its last scrape fed (90 s), within the lookback (40 s)
        // of the newest fed.
        stored.extend(every_10_s(&["r1", "r2"], 100..=120));
        let quiet = scrapes(&[("r1", now + 50_000, &[]), ("r2", now + 50_000, &[]), ("r3", now, &[])]);
        poll(&mut follower, &stored, &quiet, now + 50_000);
        assert_eq!(follower.lost(), ["r3"]);
        assert_eq!(follower.fed.get("r3"), Some(&90_000));
        assert_eq!(follower.newest_ms(), Some(110_000));
        assert_eq!(follower.samples_from(), 90_000);
        // Once r3's last scrape fed lies beyond the lookback it holds nothing.
        stored.extend(every_10_s(&["r1", "r2"], 130..=150));
        poll(&mut follower, &stored, &quiet, now + 70_000);
        assert_eq!(follower.newest_ms(), Some(140_000));
        assert_eq!(follower.samples_from(), 140_000);
    }

    /// A collector back from a short silence: its spool replays the scrapes it could not
    /// write, and every one of them is fed (the window is drawn after the scrapes showed it
    /// back, from where it stood).
    #[test]
    fn a_collector_back_from_a_silence_has_its_replay_fed() {
        let mut follower = Follower::new(0, 10_000, 1_000, 1_000);
        let mut stored = every_10_s(&["r1", "r2", "r3"], 10..=90);
        let all = |now: i64, r3: i64| scrapes(&[("r1", now, &[]), ("r2", now, &[]), ("r3", r3, &[])]);
        poll(&mut follower, &stored, &all(90_000, 90_000), 90_000);
        assert_eq!(follower.fed.get("r3"), Some(&80_000));
        // r3's collector stops writing after 90 s; r1 and r2 go on to 130 s.
        stored.extend(every_10_s(&["r1", "r2"], 100..=130));
        poll(&mut follower, &stored, &all(130_000, 90_000), 130_000);
        assert_eq!(follower.lost(), ["r3"]);
        // It comes back at 140 s and replays 100–140 s in one go.
        stored.extend(every_10_s(&["r1", "r2"], 140..=140));
        stored.extend(every_10_s(&["r3"], 100..=140));
        let mut fed_r3 = Vec::new();
        for now in [140_000, 141_000] {
            let (batches, _) = poll(&mut follower, &stored, &all(now, 140_000), now);
            fed_r3.extend(
                batches
                    .iter()
                    .filter(|batch| batch.instance.name == "r3" && !batch.samples.is_empty())
                    .map(|batch| batch.time_ms),
            );
        }
        // 90 s was fed before it came back (its collector had written it); 140 s waits for
        // the next scrape, a hold behind.
        assert_eq!(fed_r3, [100_000, 110_000, 120_000, 130_000]);
    }

    /// A gap in the store longer than a window (collectors down for minutes, or started well
    /// after `detect`) is stepped over: a window that read nothing new is followed by an open
    /// one.
    #[test]
    fn a_gap_longer_than_the_window_is_stepped_over() {
        // Started 180 s before any collector stores anything.
        let mut follower = Follower::new(0, 10_000, 1_000, 1_000);
        let mut stored = every_10_s(&["r1"], 180..=300);
        for now in [190_000, 195_000, 300_000] {
            poll(&mut follower, &stored, &scrapes(&[("r1", now, &[])]), now);
        }
        assert_eq!(follower.newest_ms(), Some(290_000));
        // The collectors stop at 300 s and resume at 700 s.
        stored.extend(every_10_s(&["r1"], 700..=800));
        for now in [700_000, 705_000, 800_000, 801_000] {
            poll(&mut follower, &stored, &scrapes(&[("r1", now, &[])]), now);
        }
        assert_eq!(follower.newest_ms(), Some(790_000));
    }

    /// A target that failed one scrape (its `up` 0 on the samples' clock) and recovered does
    /// not keep the window at the whole lookback.
    #[test]
    fn one_failed_scrape_does_not_widen_the_window_for_good() {
        let mut follower = Follower::new(0, 10_000, 1_000, 1_000);
        let mut stored = every_10_s(&["r1", "r2"], 10..=40);
        stored.push((50_000, sample(50_000, "r1", "a", 1.0)));
        stored.push((50_000, sample(50_000, "r2", "up", 0.0)));
        stored.extend(every_10_s(&["r1", "r2"], 60..=400));
        let (mut most, mut last) = (0, 0);
        for now in (100..=400).step_by(10).map(|second| second * 1_000) {
            let visible: Vec<(i64, String)> = stored.iter().filter(|(t, _)| *t <= now).cloned().collect();
            let (_, rows) = poll(
                &mut follower,
                &visible,
                &scrapes(&[("r1", now, &[]), ("r2", now, &[])]),
                now,
            );
            most = most.max(rows);
            last = rows;
        }
        assert_eq!(follower.newest_ms(), Some(390_000));
        assert_eq!(follower.samples_from(), 390_000, "lookback {}", follower.lookback_ms());
        // The last poll read two instances from the scrape fed before it (380 s) to the
        // newest (400 s): 6 rows, where the whole lookback (40 s) holds 10.
        assert_eq!(last, 6, "largest window {most}");
    }

    /// A follower ten minutes behind (the store stalled, or the machine starved it) reads
    /// bounded windows (four lookbacks: 2 minutes, then 160 s once the interval is known)
    /// and catches up in a few polls, instead of reading everything since it stood at every
    /// poll.
    #[test]
    fn a_follower_behind_catches_up_in_bounded_windows() {
        let mut follower = Follower::new(0, 10_000, 1_000, 1_000);
        let stored = every_10_s(&["r1", "r2"], 10..=600);
        let now = 600_000;
        let live = scrapes(&[("r1", now, &[]), ("r2", now, &[])]);
        let mut polls = 0;
        while follower.newest_ms() < Some(590_000) {
            let (_, rows) = poll(&mut follower, &stored, &live, now);
            // At most four lookbacks (40 s once the 10 s interval is known) of two instances
            // every 10 s, with the row at either end; reading on to the newest would be 120.
            assert!(rows <= 2 * 17, "poll {polls} read {rows} rows");
            polls += 1;
            assert!(polls <= 10, "no catching up: fed up to {:?}", follower.newest_ms());
        }
        // Each poll moves on by the window less the hold: more than one poll, fewer than ten.
        assert!(polls >= 3, "{polls}");
    }

    /// NaN and ±Inf come as `null` from ClickHouse: read as NaN, not a failed poll.
    #[test]
    fn a_null_value_is_nan() {
        let row = sample(1_000, "r1", "a", 1.0).replace("\"value\":1", "\"value\":null");
        let batches = scrape_batches(&row).unwrap();
        assert!(batches[0].samples[0].1.is_nan(), "{row}");
    }

    /// A target whose only rule metric is `up`: each scrape fed once however often read.
    #[test]
    fn an_up_only_target_is_fed_once_per_scrape() {
        let mut follower = Follower::new(0, 1_000, 0, 0);
        let rows = [sample(1_000, "r9", "up", 1.0), sample(2_000, "r9", "up", 0.0)].join("\n");
        assert_eq!(follower.take(&rows, "", 0).unwrap().len(), 2);
        assert!(follower.take(&rows, "", 0).unwrap().is_empty());
        // Once the interval (1 s) is known it is the hold: 3 s is fed when 4 s is read.
        let more = [rows, sample(3_000, "r9", "up", 0.0), sample(4_000, "r9", "up", 0.0)].join("\n");
        assert_eq!(
            names(&follower.take(&more, "", 0).unwrap()),
            [(3_000, "r9".to_string(), 1, false)]
        );
        assert!(follower.take(&more, "", 0).unwrap().is_empty());
    }

    /// A target scraped every 60 s holds the others only once its next scrape is due.
    #[test]
    fn a_slower_job_does_not_hold_the_others_between_its_scrapes() {
        let mut follower = Follower::new(0, 60_000, 1_000, 1_000);
        let now = 100_000;
        let mut rows: Vec<String> = (1..=10).map(|k| sample(k * 10_000, "r1", "a", 1.0)).collect();
        rows.push(sample(0, "r60", "a", 1.0));
        rows.push(sample(60_000, "r60", "a", 1.0));
        let live = scrapes(&[("r1", now, &[]), ("r60", 60_000, &[])]);
        let fed = names(&follower.take(&rows.join("\n"), &live, now).unwrap());
        // Held 2 s behind the newest (100 s): r1 up to 90 s, r60's two scrapes.
        assert_eq!(fed.len(), 11, "{fed:?}");
        assert_eq!(fed.last(), Some(&(90_000, "r1".to_string(), 1, false)));
    }

    #[test]
    fn the_lookback_follows_the_interval() {
        let mut follower = Follower::new(0, 60_000, 5_000, 5_000);
        let rows: Vec<String> = (1..=5).map(|k| sample(k * 60_000, "r1", "a", 1.0)).collect();
        assert_eq!(follower.take(&rows.join("\n"), "", 0).unwrap().len(), 4);
        assert_eq!(follower.hold_ms(), 60_000);
        assert_eq!(follower.lookback_ms(), 4 * 60_000);
        assert_eq!(follower.samples_from(), 4 * 60_000 - 4 * 60_000);
    }

    /// Skipped and starved scrapes become late batches once; an instance whose scrapes stop
    /// reaching the store while the others' go on is kept as seen (an empty batch at the newest
    /// sample time fed), and is forgotten after FORGET_AFTER_MS.
    #[test]
    fn epicenters_own_losses_are_late_batches() {
        let silence = 2 * 10_000 + 5_000 + 5_000;
        let mut follower = Follower::new(0, 10_000, 5_000, 5_000);
        let now = 1_000_000;
        let rows = scrapes(&[("r1", now, &[now - 55_000, now - 45_000]), ("r2", now, &[])]);
        let mut read = vec![
            sample(now - 60_000, "r2", "a", 1.0),
            sample(now - 40_000, "r2", "a", 1.0),
        ];
        // Held 10 s (flush age and poll) behind the newest read: the late scrape at -45 s waits.
        assert_eq!(
            names(&follower.take(&read.join("\n"), &rows, now).unwrap()),
            [
                (now - 60_000, "r2".to_string(), 1, false),
                (now - 55_000, "r1".to_string(), 0, true)
            ]
        );
        read.push(sample(now - 20_000, "r2", "a", 1.0));
        read.push(sample(now, "r2", "a", 1.0));
        assert_eq!(
            names(&follower.take(&read.join("\n"), &rows, now).unwrap()),
            [
                (now - 45_000, "r1".to_string(), 0, true),
                (now - 40_000, "r2".to_string(), 1, false),
                (now - 20_000, "r2".to_string(), 1, false)
            ]
        );
        assert!(
            follower.take(&read.join("\n"), &rows, now).unwrap().is_empty(),
            "late scrapes are fed once"
        );
        // Every collector behind (a starved machine, a stalled store): nobody's silence is
        // epicenter's loss of one collector, and the samples' clock stands still.
        assert!(follower.take("", &rows, now + 10 * silence).unwrap().is_empty());
        assert!(follower.lost().is_empty());
        // r1's collector stops writing; r2's goes on.
        let later = now + silence + 1;
        let rows = scrapes(&[("r2", later, &[])]);
        assert_eq!(
            names(&follower.take("", &rows, later).unwrap()),
            [(now - 20_000, "r1".to_string(), 0, false)]
        );
        assert_eq!(follower.lost(), ["r1"]);
        let much_later = now + FORGET_AFTER_MS + 1;
        let rows = scrapes(&[("r2", much_later, &[])]);
        assert!(follower.take("", &rows, much_later).unwrap().is_empty());
        assert!(follower.lost().is_empty());
        assert!(follower.scrapes_from(much_later) <= much_later - silence);
    }
}
