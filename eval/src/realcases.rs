//! Real incidents scored (`epicenter eval --dataset sockshop|nezha DIR`, `--cases FILE`):
//! labelled faults ([`crate::cases`]) replayed from a Prometheus server through the product's
//! replay path ([`crate::prometheus::Source`] windows, [`crate::replay::Replayer`]: the same
//! detector as live and as `epicenter replay --prometheus`), each fault matched to the
//! incident that opened for it, beside the naive robust z-score ([`crate::naive`]) computed
//! from the same windows.
//!
//! **Method** ([`run_set`], then [`score`]), per set of cases:
//! - **Period.** From [`WARM_UP_MS`] (1 h) before the first case to [`AFTER_MS`] (30 min)
//!   after the last: the first hour is the detector's baseline warm-up (the data may start
//!   later: then from its first sample). Cases more than [`APART_MS`] (24 h) apart are
//!   replayed as separate periods, each with a fresh detector.
//! - **Read once.** Every metric name the server holds in the period, in 30-minute windows
//!   of `{__name__=~"…"}[30m]`; the series the rules name go to the replay (the server's `up`
//!   among them, silence not judged: [`crate::prometheus::replay_settings`]), every series but
//!   `up` to the naive reference.
//! - **Matching, one to one.** Cases in start order; a case's incident is the first incident
//!   *opened* in `[start, end + one scrape interval]` and not already matched. Every incident
//!   matched to no case is a false verdict. An incident is scored as it opened (what paged):
//!   its kind, its service (the placement service of its first named instance, as the
//!   replayed series placed it), its first host.
//! - **Quiet gaps.** Between consecutive cases, from the end of one plus [`SETTLE_MS`]
//!   (10 min) to the start of the next (none when that is empty): a gap is clean for the
//!   detector when no false verdict opened in it, for the naive reference when no series
//!   scored above its threshold.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use epicenter_detector::engine::Dependency;
use epicenter_detector::live::rule_metrics;
use epicenter_detector::rules::Rule;
use epicenter_detector::{Assessment, VerdictEvent};
use epicenter_store::config::PlacementConfig;
use serde::Serialize;

use crate::cases::Case;
use crate::naive::{self, CaseScores, GapScore, Scored};
use crate::prometheus::{batches, Progress, Source};
use crate::replay::Replayer;

/// How long before the first case the replay starts: the baselines' warm-up (1 h).
pub const WARM_UP_MS: i64 = 60 * 60 * 1000;

/// How long after the last case the replay goes on (30 min).
pub const AFTER_MS: i64 = 30 * 60 * 1000;

/// Time after a case's end before the quiet gap to the next starts (10 min).
pub const SETTLE_MS: i64 = 10 * 60 * 1000;

/// Cases further apart than this (24 h) are replayed as separate periods.
pub const APART_MS: i64 = 24 * 60 * 60 * 1000;

/// The window of one read, ms (as `epicenter replay --prometheus` reads).
const WINDOW_MS: i64 = 30 * 60 * 1000;

/// An incident the detector opened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Incident {
    /// Its id.
    pub id: String,
    /// When it opened, ms.
    pub opened_ms: i64,
    /// Its kind as it opened.
    pub kind: String,
    /// The placement service of its first named instance (else the verdict's service).
    pub service: String,
    /// Its first host (empty when it names none).
    pub host: String,
    /// Its first named instance.
    pub instance: String,
}

/// What one set's run read and judged, for [`score`].
#[derive(Debug, Clone)]
pub struct SetRun {
    /// The set's name.
    pub set: String,
    /// Its cases, in start order.
    pub cases: Vec<Case>,
    /// The periods replayed, ms.
    pub periods: Vec<(i64, i64)>,
    /// The first and last sample read, ms.
    pub data_ms: Option<(i64, i64)>,
    /// The scrape interval the replay found, ms.
    pub interval_ms: Option<i64>,
    /// Distinct series read (all of them, the naive reference's).
    pub series: usize,
    /// Samples read.
    pub samples: usize,
    /// Instances (placement) with a series in the read.
    pub instances_seen: BTreeSet<String>,
    /// The incidents the detector opened, in opening order.
    pub incidents: Vec<Incident>,
    /// The naive reference per case (same order as `cases`).
    pub naive_cases: Vec<CaseScores>,
    /// The naive reference per quiet gap ([`quiet_gaps`] of `cases`).
    pub naive_gaps: Vec<GapScore>,
}

/// The inputs of a run: the detector's rules and service dependencies, and the placement of
/// the series.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Signal rules.
    pub rules: Vec<Rule>,
    /// Service dependencies.
    pub dependencies: Vec<Dependency>,
    /// How series are placed (instance, host, service labels).
    pub placement: PlacementConfig,
}

/// The cases grouped by [`Case::set`] (sets in the order they first appear; each in start
/// order).
pub fn sets(cases: Vec<Case>) -> Vec<(String, Vec<Case>)> {
    let mut sets: Vec<(String, Vec<Case>)> = Vec::new();
    for case in cases {
        match sets.iter_mut().find(|(name, _)| *name == case.set) {
            Some((_, list)) => list.push(case),
            None => sets.push((case.set.clone(), vec![case])),
        }
    }
    for (_, list) in &mut sets {
        list.sort_by_key(|case| (case.start_ms, case.end_ms));
    }
    sets
}

/// The periods a set's cases (in start order) are replayed over (module doc).
pub fn periods(cases: &[Case]) -> Vec<(i64, i64)> {
    let mut periods: Vec<(i64, i64, i64)> = Vec::new(); // (from, last end, to)
    for case in cases {
        match periods.last_mut() {
            Some((_, last_end, to)) if case.start_ms - *last_end <= APART_MS => {
                *last_end = (*last_end).max(case.end_ms);
                *to = *last_end + AFTER_MS;
            }
            _ => periods.push((case.start_ms - WARM_UP_MS, case.end_ms, case.end_ms + AFTER_MS)),
        }
    }
    periods.into_iter().map(|(from, _, to)| (from, to)).collect()
}

/// The quiet gaps between consecutive cases (in start order) of one period: from a case's
/// end plus [`SETTLE_MS`] to the next one's start, when that is not empty.
pub fn quiet_gaps(cases: &[Case]) -> Vec<(i64, i64)> {
    let mut gaps = Vec::new();
    let mut latest_end: Option<i64> = None;
    for case in cases {
        if let Some(end) = latest_end {
            let from = end + SETTLE_MS;
            if case.start_ms > from && case.start_ms - end <= APART_MS {
                gaps.push((from, case.start_ms));
            }
        }
        latest_end = Some(latest_end.map_or(case.end_ms, |end| end.max(case.end_ms)));
    }
    gaps
}

/// Reads and judges one set (`cases` in start order): per period, every series the server
/// holds, window by window, the rule series replayed and all of them kept for the naive
/// reference. `progress` gets a line per window read (and a warning when the server has no
/// metadata); `trace`, when given, a line per round with anomalies.
///
/// # Errors
/// The server cannot be read (the URL and why).
pub async fn run_set(
    source: &Source,
    set: &str,
    cases: Vec<Case>,
    settings: &RunSettings,
    progress: &mut dyn FnMut(String),
    trace: Option<std::sync::Arc<dyn Fn(String)>>,
) -> Result<SetRun, String> {
    let periods = periods(&cases);
    let gaps = quiet_gaps(&cases);
    // The names first: an unreachable server fails here, before the metadata's warning.
    let mut names = Vec::new();
    for period in &periods {
        names.push(source.metric_names(*period).await?);
    }
    let counters = match source.counter_families().await {
        Ok(counters) => counters,
        Err(error) => {
            progress(format!(
                "eval: {set}: no metadata ({error}): counters are the names ending in _total"
            ));
            Default::default()
        }
    };
    let mut keep: Vec<(i64, i64)> = cases
        .iter()
        .map(|case| (case.start_ms - naive::BASELINE_MS, case.end_ms))
        .collect();
    keep.extend(gaps.iter().map(|(from, to)| (from - naive::BASELINE_MS, *to)));
    let mut collector = naive::Collector::new(keep, counters, settings.placement.clone());
    let rule_names: BTreeSet<String> = rule_metrics(&settings.rules).into_iter().collect();
    let mut run = SetRun {
        set: set.to_string(),
        cases: Vec::new(),
        periods: periods.clone(),
        data_ms: None,
        interval_ms: None,
        series: 0,
        samples: 0,
        instances_seen: BTreeSet::new(),
        incidents: Vec::new(),
        naive_cases: Vec::new(),
        naive_gaps: Vec::new(),
    };
    let mut services: HashMap<String, String> = HashMap::new();
    let mut events: Vec<VerdictEvent> = Vec::new();
    for (&(from, to), names) in periods.iter().zip(&names) {
        let mut replayer = Replayer::with_settings(
            settings.rules.clone(),
            settings.dependencies.clone(),
            crate::prometheus::replay_settings(),
        );
        if let Some(trace) = trace.clone() {
            replayer.on_round(Box::new(move |assessment: &Assessment| {
                if !assessment.anomalies.is_empty() {
                    trace(round_line(assessment));
                }
            }));
        }
        let mut read = Progress {
            windows_read: 0,
            windows: 0,
            series: 0,
            samples: 0,
        };
        let mut each = |found: Vec<crate::prometheus::RawSeries>, now: Progress| {
            progress(format!(
                "eval: {set}: read {}/{} windows: {} series, {} samples",
                now.windows_read, now.windows, now.series, now.samples
            ));
            read = now;
            for series in &found {
                if let (Some(first), Some(last)) = (series.samples.first(), series.samples.last()) {
                    run.data_ms = Some(match run.data_ms {
                        Some((low, high)) => (low.min(first.0), high.max(last.0)),
                        None => (first.0, last.0),
                    });
                }
            }
            // The naive reference reads the families as before, `up` aside.
            let (up, found): (Vec<_>, Vec<_>) = found
                .into_iter()
                .partition(|series| series.labels.get("__name__").is_some_and(|name| name == "up"));
            collector.add(&found);
            let found: Vec<_> = found.into_iter().chain(up).collect();
            let rule_series: Vec<_> = found
                .into_iter()
                .filter(|series| {
                    series
                        .labels
                        .get("__name__")
                        .is_some_and(|name| rule_names.contains(name))
                })
                .collect();
            let scrapes = batches(rule_series, &settings.placement);
            for scrape in &scrapes {
                if !services.contains_key(&scrape.instance.name) {
                    services.insert(scrape.instance.name.clone(), scrape.instance.service.clone());
                }
            }
            replayer.feed(scrapes);
        };
        source.read(names, (from, to), WINDOW_MS, &mut each).await?;
        run.series += read.series;
        run.samples += read.samples;
        if run.interval_ms.is_none() {
            run.interval_ms = replayer.interval_ms();
        }
        events.extend(replayer.finish());
    }
    let series = collector.finish();
    run.instances_seen = series.iter().map(|one| one.instance.clone()).collect();
    for one in &series {
        if !one.service.is_empty() && !services.contains_key(&one.instance) {
            services.insert(one.instance.clone(), one.service.clone());
        }
    }
    run.naive_cases = cases
        .iter()
        .map(|case| naive::case_scores(&series, (case.start_ms, case.end_ms)))
        .collect();
    run.naive_gaps = gaps.iter().map(|gap| naive::gap_score(&series, *gap)).collect();
    run.incidents = incidents(&events, &services);
    run.cases = cases;
    Ok(run)
}

/// The incidents `events` opened, in opening order, each once, placed by `services`
/// (instance → service).
pub fn incidents(events: &[VerdictEvent], services: &HashMap<String, String>) -> Vec<Incident> {
    let opened = events
        .iter()
        .filter(|event| event.state == "opened")
        .map(|event| Opened {
            time_ms: event.time_ms,
            id: &event.verdict.id,
            kind: &event.verdict.kind,
            service: &event.verdict.service,
            instances: &event.verdict.instances,
            hosts: &event.verdict.hosts,
        });
    incidents_of(opened, services)
}

/// What [`incidents`] reads of an `opened` event.
struct Opened<'a> {
    time_ms: i64,
    id: &'a str,
    kind: &'a str,
    service: &'a str,
    instances: &'a [String],
    hosts: &'a [String],
}

fn incidents_of<'a>(opened: impl Iterator<Item = Opened<'a>>, services: &HashMap<String, String>) -> Vec<Incident> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for verdict in opened {
        if !seen.insert(verdict.id.to_string()) {
            continue;
        }
        let instance = verdict.instances.first().cloned().unwrap_or_default();
        found.push(Incident {
            id: verdict.id.to_string(),
            opened_ms: verdict.time_ms,
            kind: verdict.kind.to_string(),
            service: services
                .get(&instance)
                .filter(|service| !service.is_empty())
                .cloned()
                .unwrap_or_else(|| verdict.service.to_string()),
            host: verdict.hosts.first().cloned().unwrap_or_default(),
            instance,
        });
    }
    found.sort_by_key(|incident| incident.opened_ms);
    found
}

/// A round with anomalies, for `--trace`: its time, the leading candidates, the open
/// incidents and the strongest anomalies.
fn round_line(assessment: &Assessment) -> String {
    let leaders: Vec<String> = assessment
        .candidates
        .iter()
        .take(3)
        .map(|c| format!("{} {:.1}", c.instance, c.score))
        .collect();
    let incidents: Vec<String> = assessment
        .incidents
        .iter()
        .map(|v| format!("{} {}", v.kind, v.hosts.first().cloned().unwrap_or_default()))
        .collect();
    let anomalies: Vec<String> = assessment
        .anomalies
        .iter()
        .take(8)
        .map(|a| format!("{}:{} {:.0}", a.instance, a.metric, a.score))
        .collect();
    format!(
        "  {} leaders [{}] incidents {} | {}",
        time(assessment.time_ms),
        leaders.join(", "),
        if incidents.is_empty() {
            "-".to_string()
        } else {
            incidents.join(" + ")
        },
        anomalies.join(" ")
    )
}

/// `ms` as an RFC 3339 UTC time to the second.
fn time(ms: i64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64))
        .to_string()
}

// === Scoring ===

/// One set scored (`--json`: one element of `sets`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetReport {
    /// The set's name.
    pub set: String,
    /// The periods replayed, ms.
    pub periods: Vec<Period>,
    /// The first sample read, ms (`null`: none).
    pub data_from_ms: Option<i64>,
    /// The last sample read, ms.
    pub data_to_ms: Option<i64>,
    /// The scrape interval the replay found, ms.
    pub scrape_interval_ms: Option<i64>,
    /// Distinct series read.
    pub series: usize,
    /// Samples read.
    pub samples: usize,
    /// Per case.
    pub cases: Vec<CaseRow>,
    /// The incidents matched to no case.
    pub false_verdicts: Vec<Incident>,
    /// The quiet gaps.
    pub gaps: Vec<GapRow>,
    /// The whole set.
    pub summary: Summary,
    /// Per fault type, in name order.
    pub by_fault_type: Vec<Summary>,
}

/// A period replayed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Period {
    /// Start, ms.
    pub from_ms: i64,
    /// End, ms.
    pub to_ms: i64,
}

/// One case scored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseRow {
    /// The case (truth: period, service, instance, host, fault type, kinds).
    pub case: Case,
    /// Whether any series read is placed at the case's instance.
    pub instance_seen: bool,
    /// The detector's answer.
    pub detector: DetectorAnswer,
    /// The naive reference's answer.
    pub naive: NaiveAnswer,
}

/// The detector on one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DetectorAnswer {
    /// The incident matched (`null`: missed).
    pub incident: Option<Incident>,
    /// Minutes from the fault's start to the incident's opening.
    pub minutes_to_detect: Option<f64>,
    /// The incident's service is the case's.
    pub service_right: bool,
    /// Its first host is the case's (`null`: the case's host is unknown).
    pub host_right: Option<bool>,
    /// Its kind is one of the case's kinds.
    pub kind_right: bool,
}

/// The naive reference on one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NaiveAnswer {
    /// The top services (at most 5), highest first.
    pub services: Vec<Scored>,
    /// The top hosts (at most 5), highest first.
    pub hosts: Vec<Scored>,
    /// Series scored.
    pub series_scored: usize,
    /// The top service is the case's.
    pub service_right: bool,
    /// The top host is the case's (`null`: unknown host).
    pub host_right: Option<bool>,
}

/// One quiet gap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapRow {
    /// Start, ms.
    pub from_ms: i64,
    /// End, ms.
    pub to_ms: i64,
    /// False verdicts that opened in it.
    pub false_verdicts: usize,
    /// The naive reference on it.
    pub naive: GapScore,
}

/// The figures of a set or of one fault type in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The fault type (`null`: the whole set).
    pub fault_type: Option<String>,
    /// Cases.
    pub cases: usize,
    /// Cases matched to an incident.
    pub matched: usize,
    /// Share of cases whose incident names the right service (a miss is wrong).
    pub service_top1: f64,
    /// Cases with a known host.
    pub cases_with_host: usize,
    /// Share of those whose incident's first host is right (`null`: none has a host).
    pub host_ac1: Option<f64>,
    /// Share of cases whose incident's kind is right.
    pub kind_accuracy: f64,
    /// Median minutes to detect over the matched cases (`null`: none matched).
    pub median_minutes_to_detect: Option<f64>,
    /// Slowest of them.
    pub max_minutes_to_detect: Option<f64>,
    /// Incidents matched to no case (`null` per fault type: a false verdict has none).
    pub false_verdicts: Option<usize>,
    /// Quiet gaps (`null` per fault type).
    pub gaps: Option<usize>,
    /// Quiet gaps in which a false verdict opened.
    pub gaps_with_false_verdicts: Option<usize>,
    /// Share of quiet gaps without one (`null`: no gap).
    pub quiet_gap_share_clean: Option<f64>,
    /// The naive reference's figures.
    pub naive: NaiveSummary,
}

/// The naive reference's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NaiveSummary {
    /// Share of cases whose top service is right.
    pub service_top1: f64,
    /// Share of cases with a host whose top host is right.
    pub host_ac1: Option<f64>,
    /// Quiet gaps in which some series scored above the threshold (`null` per fault type).
    pub gaps_alarmed: Option<usize>,
    /// Share of quiet gaps without (`null`: no gap).
    pub quiet_gap_share_clean: Option<f64>,
}

/// Scores a run (module doc).
pub fn score(run: &SetRun) -> SetReport {
    let interval_ms = run.interval_ms.unwrap_or(0);
    let mut taken = vec![false; run.incidents.len()];
    let mut rows = Vec::new();
    for (at, case) in run.cases.iter().enumerate() {
        let window = (case.start_ms, case.end_ms + interval_ms);
        let found = run
            .incidents
            .iter()
            .enumerate()
            .find(|(index, incident)| !taken[*index] && (window.0..=window.1).contains(&incident.opened_ms));
        let incident = found.map(|(index, incident)| {
            taken[index] = true;
            incident.clone()
        });
        let host_right = |host: Option<&str>| case.host.as_ref().map(|truth| host == Some(truth.as_str()));
        let detector = DetectorAnswer {
            minutes_to_detect: incident
                .as_ref()
                .map(|incident| (incident.opened_ms - case.start_ms) as f64 / 60_000.0),
            service_right: incident
                .as_ref()
                .is_some_and(|incident| incident.service == case.service),
            host_right: host_right(incident.as_ref().map(|incident| incident.host.as_str())),
            kind_right: incident
                .as_ref()
                .is_some_and(|incident| case.kinds.contains(&incident.kind)),
            incident,
        };
        let scores = run.naive_cases.get(at).cloned().unwrap_or(CaseScores {
            services: Vec::new(),
            hosts: Vec::new(),
            series_scored: 0,
        });
        let naive = NaiveAnswer {
            service_right: scores.services.first().is_some_and(|top| top.name == case.service),
            host_right: host_right(scores.hosts.first().map(|top| top.name.as_str())),
            services: scores.services,
            hosts: scores.hosts,
            series_scored: scores.series_scored,
        };
        rows.push(CaseRow {
            case: case.clone(),
            instance_seen: run.instances_seen.contains(&case.instance),
            detector,
            naive,
        });
    }
    let false_verdicts: Vec<Incident> = run
        .incidents
        .iter()
        .zip(&taken)
        .filter(|(_, taken)| !**taken)
        .map(|(incident, _)| incident.clone())
        .collect();
    let gaps: Vec<GapRow> = quiet_gaps(&run.cases)
        .into_iter()
        .enumerate()
        .map(|(at, (from_ms, to_ms))| GapRow {
            from_ms,
            to_ms,
            false_verdicts: false_verdicts
                .iter()
                .filter(|incident| (from_ms..to_ms).contains(&incident.opened_ms))
                .count(),
            naive: run.naive_gaps.get(at).cloned().unwrap_or(GapScore {
                alarm: false,
                max_score: None,
                series: None,
                series_above: 0,
            }),
        })
        .collect();
    let mut summary = summarize(None, &rows);
    let share = |clean: usize| (!gaps.is_empty()).then(|| clean as f64 / gaps.len() as f64);
    let with_false = gaps.iter().filter(|gap| gap.false_verdicts > 0).count();
    let alarmed = gaps.iter().filter(|gap| gap.naive.alarm).count();
    summary.false_verdicts = Some(false_verdicts.len());
    summary.gaps = Some(gaps.len());
    summary.gaps_with_false_verdicts = Some(with_false);
    summary.quiet_gap_share_clean = share(gaps.len() - with_false);
    summary.naive.gaps_alarmed = Some(alarmed);
    summary.naive.quiet_gap_share_clean = share(gaps.len() - alarmed);
    let types: BTreeSet<&str> = rows.iter().map(|row| row.case.fault_type.as_str()).collect();
    let by_fault_type = types
        .into_iter()
        .map(|fault_type| {
            let of: Vec<CaseRow> = rows
                .iter()
                .filter(|row| row.case.fault_type == fault_type)
                .cloned()
                .collect();
            summarize(Some(fault_type), &of)
        })
        .collect();
    SetReport {
        set: run.set.clone(),
        periods: run
            .periods
            .iter()
            .map(|&(from_ms, to_ms)| Period { from_ms, to_ms })
            .collect(),
        data_from_ms: run.data_ms.map(|(from, _)| from),
        data_to_ms: run.data_ms.map(|(_, to)| to),
        scrape_interval_ms: run.interval_ms,
        series: run.series,
        samples: run.samples,
        cases: rows,
        false_verdicts,
        gaps,
        summary,
        by_fault_type,
    }
}

/// The case figures of `rows` (the gap and false-verdict figures are the set's, filled by
/// [`score`]).
fn summarize(fault_type: Option<&str>, rows: &[CaseRow]) -> Summary {
    let share = |count: usize, of: usize| if of == 0 { 0.0 } else { count as f64 / of as f64 };
    let count = |right: &dyn Fn(&CaseRow) -> bool| rows.iter().filter(|row| right(row)).count();
    let with_host = count(&|row| row.case.host.is_some());
    let host_share = |right: usize| (with_host > 0).then(|| right as f64 / with_host as f64);
    let mut minutes: Vec<f64> = rows.iter().filter_map(|row| row.detector.minutes_to_detect).collect();
    let max = minutes.iter().copied().reduce(f64::max);
    let median = (!minutes.is_empty()).then(|| naive::median(&mut minutes));
    Summary {
        fault_type: fault_type.map(str::to_string),
        cases: rows.len(),
        matched: count(&|row| row.detector.incident.is_some()),
        service_top1: share(count(&|row| row.detector.service_right), rows.len()),
        cases_with_host: with_host,
        host_ac1: host_share(count(&|row| row.detector.host_right == Some(true))),
        kind_accuracy: share(count(&|row| row.detector.kind_right), rows.len()),
        median_minutes_to_detect: median,
        max_minutes_to_detect: max,
        false_verdicts: None,
        gaps: None,
        gaps_with_false_verdicts: None,
        quiet_gap_share_clean: None,
        naive: NaiveSummary {
            service_top1: share(count(&|row| row.naive.service_right), rows.len()),
            host_ac1: host_share(count(&|row| row.naive.host_right == Some(true))),
            gaps_alarmed: None,
            quiet_gap_share_clean: None,
        },
    }
}

// === Report ===

/// The text report: per set, a line per case, then the figures per fault type and for the
/// whole set, the detector's beside the naive reference's.
pub fn table(reports: &[SetReport], source: &str) -> String {
    let mut out = String::new();
    let mark = |right: Option<bool>| match right {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    };
    for report in reports {
        let periods: Vec<String> = report
            .periods
            .iter()
            .map(|period| format!("{} to {}", time(period.from_ms), time(period.to_ms)))
            .collect();
        let _ = writeln!(
            out,
            "{}: {} cases from {source}, replayed {} (data {} to {}), scrape interval {}, {} series, {} samples",
            report.set,
            report.cases.len(),
            periods.join(", "),
            report.data_from_ms.map_or("-".to_string(), time),
            report.data_to_ms.map_or("-".to_string(), time),
            report
                .scrape_interval_ms
                .map_or("unknown".to_string(), |ms| format!("{} s", ms as f64 / 1000.0)),
            report.series,
            report.samples,
        );
        let _ = writeln!(
            out,
            "  {:<20} {:<15} {:<22} {:<18} | {:<16} {:<20} {:<18} {:>5} {:>4} {:>4} {:>4} | {:<20} {:>4} {:<18} {:>4}",
            "case",
            "fault type",
            "truth service",
            "truth host",
            "detector kind",
            "service",
            "host",
            "min",
            "svc",
            "host",
            "kind",
            "naive service",
            "svc",
            "naive host",
            "host"
        );
        for row in &report.cases {
            let case = &row.case;
            let incident = row.detector.incident.as_ref();
            let naive_service = row.naive.services.first();
            let naive_host = row.naive.hosts.first();
            let _ = writeln!(
                out,
                "  {:<20} {:<15} {:<22} {:<18} | {:<16} {:<20} {:<18} {:>5} {:>4} {:>4} {:>4} | {:<20} {:>4} {:<18} {:>4}{}",
                cut(&case.id, 20),
                cut(&case.fault_type, 15),
                cut(&case.service, 22),
                cut(case.host.as_deref().unwrap_or("?"), 18),
                cut(incident.map_or("(missed)", |i| i.kind.as_str()), 16),
                cut(incident.map_or("", |i| i.service.as_str()), 20),
                cut(incident.map_or("", |i| i.host.as_str()), 18),
                row.detector.minutes_to_detect.map_or("-".to_string(), |m| format!("{m:.1}")),
                mark(Some(row.detector.service_right)),
                mark(row.detector.host_right),
                mark(Some(row.detector.kind_right)),
                cut(naive_service.map_or("-", |s| s.name.as_str()), 20),
                mark(Some(row.naive.service_right)),
                cut(naive_host.map_or("-", |s| s.name.as_str()), 18),
                mark(row.naive.host_right),
                if row.instance_seen { "" } else { "  (no series of this instance)" },
            );
        }
        let _ = writeln!(
            out,
            "  {:<20} {:>5} {:>7} {:>6} {:>13} {:>6} {:>13} {:>6} | {:>11} {:>12}",
            "fault type",
            "cases",
            "matched",
            "svc@1",
            "host@1 (of)",
            "kind",
            "TTD med (max)",
            "false",
            "naive svc@1",
            "naive host@1"
        );
        for summary in report.by_fault_type.iter().chain([&report.summary]) {
            let figure = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.2}"));
            let ttd = match (summary.median_minutes_to_detect, summary.max_minutes_to_detect) {
                (Some(median), Some(max)) => format!("{median:.1} ({max:.1})"),
                _ => "-".to_string(),
            };
            let _ = writeln!(
                out,
                "  {:<20} {:>5} {:>7} {:>6.2} {:>13} {:>6.2} {:>13} {:>6} | {:>11.2} {:>12}",
                cut(summary.fault_type.as_deref().unwrap_or("all"), 20),
                summary.cases,
                summary.matched,
                summary.service_top1,
                format!("{} ({})", figure(summary.host_ac1), summary.cases_with_host),
                summary.kind_accuracy,
                ttd,
                summary.false_verdicts.map_or(String::new(), |count| count.to_string()),
                summary.naive.service_top1,
                figure(summary.naive.host_ac1),
            );
        }
        let summary = &report.summary;
        let share = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            out,
            "  quiet gaps: {}; detector: {} with a false verdict, share clean {}; naive z > {}: {} alarmed, share clean {}\n",
            summary.gaps.unwrap_or(0),
            summary.gaps_with_false_verdicts.unwrap_or(0),
            share(summary.quiet_gap_share_clean),
            naive::THRESHOLD,
            summary.naive.gaps_alarmed.unwrap_or(0),
            share(summary.naive.quiet_gap_share_clean),
        );
    }
    let _ = writeln!(
        out,
        "svc@1: the matched incident's service (its first instance's) is the faulty pod's; host@1: its first host, over the \
         cases with a known host; kind: one of the fault type's kinds; TTD: minutes from the fault's start to the opening, \
         over matched cases. naive: the largest robust z-score of any series of the service (host) in the fault window \
         against the hour before (eval/src/naive.rs)."
    );
    out
}

fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000;

    fn case(id: &str, start_min: i64, length_min: i64, service: &str, host: Option<&str>, fault_type: &str) -> Case {
        Case {
            id: id.to_string(),
            set: "s".to_string(),
            start_ms: start_min * MINUTE,
            end_ms: (start_min + length_min) * MINUTE,
            service: service.to_string(),
            instance: format!("{service}-abc-1"),
            host: host.map(str::to_string),
            fault_type: fault_type.to_string(),
            kinds: crate::cases::kinds_for(fault_type).unwrap(),
        }
    }

    fn incident(id: &str, opened_min: f64, kind: &str, service: &str, host: &str) -> Incident {
        Incident {
            id: id.to_string(),
            opened_ms: (opened_min * MINUTE as f64) as i64,
            kind: kind.to_string(),
            service: service.to_string(),
            host: host.to_string(),
            instance: format!("{service}-abc-1"),
        }
    }

    fn scored(name: &str, score: f64) -> Scored {
        Scored {
            name: name.to_string(),
            score,
        }
    }

    fn gap(alarm: bool) -> GapScore {
        GapScore {
            alarm,
            max_score: Some(if alarm { 9.0 } else { 1.0 }),
            series: None,
            series_above: usize::from(alarm),
        }
    }

    /// Four cases, 30 minutes apart (5 min each): three quiet gaps, [15, 30), [45, 60), [75, 90).
    fn run() -> SetRun {
        let cases = vec![
            case("c1", 0, 5, "carts", Some("vm1"), "cpu-stress"),
            case("c2", 30, 5, "orders", None, "memory-stress"),
            case("c3", 60, 5, "payment", Some("vm2"), "network-delay"),
            case("c4", 90, 5, "user", None, "cpu-stress"),
        ];
        let incidents = vec![
            // c1: opened 2 min in, right service, host and kind.
            incident("i1", 2.0, "cpu_saturation", "carts", "vm1"),
            // c1 again: a second incident in its window is a false verdict (one to one).
            incident("i2", 3.0, "cpu_saturation", "carts", "vm1"),
            // In the first gap: false.
            incident("i3", 20.0, "unknown", "front-end", "vm3"),
            // c2: opened one interval (1 min) after its end: still its window; wrong kind.
            incident("i4", 36.0, "cpu_saturation", "orders", "vm2"),
            // c3: wrong service, right host.
            incident("i5", 61.5, "network_delay", "carts", "vm2"),
            // Just after c3's window (end 65 + 1 min): false, in the settle time (no gap).
            incident("i6", 66.5, "unknown", "x", "vm1"),
            // c4 missed; after the period's last case: false.
            incident("i7", 100.0, "unknown", "x", "vm1"),
        ];
        SetRun {
            set: "s".to_string(),
            periods: periods(&cases),
            naive_cases: vec![
                CaseScores {
                    services: vec![scored("carts", 40.0), scored("orders", 3.0)],
                    hosts: vec![scored("vm2", 40.0), scored("vm1", 30.0)],
                    series_scored: 10,
                },
                CaseScores {
                    services: vec![scored("orders", 8.0)],
                    hosts: vec![scored("vm1", 8.0)],
                    series_scored: 10,
                },
                CaseScores {
                    services: vec![scored("carts", 8.0), scored("payment", 7.0)],
                    hosts: vec![scored("vm2", 8.0)],
                    series_scored: 10,
                },
                CaseScores {
                    services: Vec::new(),
                    hosts: Vec::new(),
                    series_scored: 0,
                },
            ],
            naive_gaps: vec![gap(true), gap(false), gap(true)],
            instances_seen: BTreeSet::from(["carts-abc-1".to_string()]),
            cases,
            data_ms: Some((0, 100 * MINUTE)),
            interval_ms: Some(MINUTE),
            series: 10,
            samples: 1000,
            incidents,
        }
    }

    #[test]
    fn incidents_match_cases_one_to_one_within_the_case_window() {
        let report = score(&run());
        let matched: Vec<Option<&str>> = report
            .cases
            .iter()
            .map(|row| row.detector.incident.as_ref().map(|i| i.id.as_str()))
            .collect();
        assert_eq!(matched, [Some("i1"), Some("i4"), Some("i5"), None]);
        let false_ids: Vec<&str> = report.false_verdicts.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(false_ids, ["i2", "i3", "i6", "i7"]);
        let c1 = &report.cases[0].detector;
        assert_eq!(c1.minutes_to_detect, Some(2.0));
        assert!(c1.service_right && c1.kind_right);
        assert_eq!(c1.host_right, Some(true));
        let c2 = &report.cases[1].detector;
        assert_eq!(c2.minutes_to_detect, Some(6.0));
        assert!(c2.service_right && !c2.kind_right);
        assert_eq!(c2.host_right, None);
        let c3 = &report.cases[2].detector;
        assert!(!c3.service_right && c3.kind_right);
        assert_eq!(c3.host_right, Some(true));
        assert_eq!(report.cases[3].detector.host_right, None);
        assert!(report.cases[0].instance_seen && !report.cases[1].instance_seen);
    }

    #[test]
    fn the_summary_counts_by_hand() {
        let report = score(&run());
        let all = &report.summary;
        assert_eq!((all.cases, all.matched), (4, 3));
        // Service right: c1, c2 → 2 of 4.
        assert_eq!(all.service_top1, 0.5);
        // Hosts known for c1, c3; both right.
        assert_eq!((all.cases_with_host, all.host_ac1), (2, Some(1.0)));
        // Kind right: c1, c3.
        assert_eq!(all.kind_accuracy, 0.5);
        // Minutes 2, 6, 1.5: median 2, max 6.
        assert_eq!(all.median_minutes_to_detect, Some(2.0));
        assert_eq!(all.max_minutes_to_detect, Some(6.0));
        assert_eq!(all.false_verdicts, Some(4));
        // Gaps [15, 30) holds i3; [45, 60) and [75, 90) none (i6 at 66.5 is in the settle time).
        let gaps: Vec<(i64, i64, usize)> = report
            .gaps
            .iter()
            .map(|g| (g.from_ms / MINUTE, g.to_ms / MINUTE, g.false_verdicts))
            .collect();
        assert_eq!(gaps, [(15, 30, 1), (45, 60, 0), (75, 90, 0)]);
        assert_eq!(all.gaps, Some(3));
        assert_eq!(all.gaps_with_false_verdicts, Some(1));
        assert_eq!(all.quiet_gap_share_clean, Some(2.0 / 3.0));
        // Naive: services right c1, c2 (c3's top is carts; c4 has none): 0.5; hosts: c1 top vm2
        // (wrong), c3 vm2 (right): 0.5. Gaps: two alarmed of three.
        assert_eq!(all.naive.service_top1, 0.5);
        assert_eq!(all.naive.host_ac1, Some(0.5));
        assert_eq!(all.naive.gaps_alarmed, Some(2));
        assert_eq!(all.naive.quiet_gap_share_clean, Some(1.0 / 3.0));
        // Per fault type, in name order: cpu-stress (c1, c4), memory-stress, network-delay.
        let types: Vec<(&str, usize, usize, f64, Option<f64>)> = report
            .by_fault_type
            .iter()
            .map(|s| {
                (
                    s.fault_type.as_deref().unwrap(),
                    s.cases,
                    s.matched,
                    s.service_top1,
                    s.host_ac1,
                )
            })
            .collect();
        assert_eq!(
            types,
            [
                ("cpu-stress", 2, 1, 0.5, Some(1.0)),
                ("memory-stress", 1, 1, 1.0, None),
                ("network-delay", 1, 1, 0.0, Some(1.0)),
            ]
        );
        assert_eq!(report.by_fault_type[0].false_verdicts, None);
        assert_eq!(report.by_fault_type[0].median_minutes_to_detect, Some(2.0));
        let text = table(&[report], "http://prometheus:9090");
        assert!(text.contains("s: 4 cases from http://prometheus:9090"), "{text}");
        assert!(text.contains("(no series of this instance)"), "{text}");
    }

    #[test]
    fn periods_start_an_hour_before_and_split_when_cases_are_a_day_apart() {
        let cases = vec![
            case("a", 120, 5, "x", None, "cpu-stress"),
            case("b", 150, 5, "x", None, "cpu-stress"),
            case("c", 150 + 25 * 60, 5, "x", None, "cpu-stress"),
        ];
        assert_eq!(
            periods(&cases),
            [
                (60 * MINUTE, 185 * MINUTE),
                ((150 + 25 * 60 - 60) * MINUTE, (150 + 25 * 60 + 35) * MINUTE)
            ]
        );
        // No gap across the split; overlapping or close cases have none either.
        assert_eq!(quiet_gaps(&cases), [(135 * MINUTE, 150 * MINUTE)]);
        let close = vec![
            case("a", 0, 3, "x", None, "return"),
            case("b", 8, 3, "x", None, "return"),
        ];
        assert!(quiet_gaps(&close).is_empty());
    }

    #[test]
    fn an_incident_is_placed_by_its_first_instance_and_counted_once() {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (placed, unplaced, later) = (
            strings(&["carts-1-a"]),
            strings(&["unplaced"]),
            strings(&["orders-1-a"]),
        );
        let (hosts, none) = (strings(&["vm1"]), Vec::new());
        let events = vec![
            Opened {
                time_ms: 2000,
                id: "b",
                kind: "unknown",
                service: "host",
                instances: &placed,
                hosts: &hosts,
            },
            Opened {
                time_ms: 1000,
                id: "a",
                kind: "unknown",
                service: "host",
                instances: &unplaced,
                hosts: &none,
            },
            Opened {
                time_ms: 3000,
                id: "b",
                kind: "unknown",
                service: "host",
                instances: &later,
                hosts: &hosts,
            },
        ];
        let services = HashMap::from([("carts-1-a".to_string(), "carts".to_string())]);
        let found = incidents_of(events.into_iter(), &services);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].id.as_str(), found[0].service.as_str(), found[0].host.as_str()),
            ("a", "host", "")
        );
        assert_eq!(
            (
                found[1].id.as_str(),
                found[1].service.as_str(),
                found[1].opened_ms,
                found[1].host.as_str()
            ),
            ("b", "carts", 2000, "vm1")
        );
    }
}
