//! The detector: samples in, anomalies, ranked root-cause candidates and verdicts out.
//!
//! Each scrape round feeds every instance's samples ([`Detector::observe`]); then
//! [`Detector::assess`] turns the matching series into interval values (rules/signals/signals.yml),
//! judges them against robust baselines ([`crate::signal`]), and ranks candidates:
//! - faults spread to callers: a caller's errors, latency and pool saturation towards a peer
//!   (named by the rule's peer label) are evidence against that peer;
//! - load spreads to callees: traffic surges (requests, new connections) are weak evidence,
//!   and never against the peer they point at;
//! - an instance's own availability, restart, saturation, latency and errors are evidence
//!   against it, discounted when most of its siblings (same service) show the same;
//! - earlier onsets win ties.
//!
//! A verdict is opened once the same candidate leads for `confirm_rounds` rounds; its kind
//! follows from the candidate's service and evidence (node loss, slow node, cold start after
//! deploy, pool exhaustion, retry storm, mailbox overload, session loss, datacenter
//! degradation). It resolves after `resolve_rounds` quiet rounds.
//!
//! The stages live in child modules, each with its tests: [`observe`] (samples into signals),
//! [`rank`] (candidates), [`graph`] (call edges and reach), [`scope`] (what an open incident
//! explains), [`kind`] (what failed), [`lifecycle`] (opening, renewing, taking over and resolving
//! incidents) and [`verdict`] (what a verdict names).
//!
//! While the detector is behind (its caller says so with [`Detector::set_behind`]: on a
//! starved machine the monitored processes and epicenter starve together, and a second of
//! everyone's latency is not a root cause), no verdict opens and none is taken over; the
//! leader's rounds still count, so evidence that outlasts the starvation opens as soon as the
//! detector keeps time again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use epicenter_store::rows::Series;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::rules::{Class, Resource, Role, Rule, ValueKind};
use crate::signal::{Signal, Tuning};

mod evict;
mod graph;
mod kind;
mod lifecycle;
mod observe;
mod rank;
mod scope;
mod verdict;

use graph::ServiceEdges;
use kind::{host_may_explain, is_host_kind, sharpens};
use lifecycle::Incident;
use observe::{Part, SignalEntry};
use rank::tied;

/// Where an instance runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceInfo {
    /// Instance name (the label `placement.instance_label` names, else `instance`).
    pub name: String,
    /// Datacenter.
    pub dc: String,
    /// Host.
    pub host: String,
    /// Service.
    pub service: String,
}

/// A service-level dependency: `caller` calls `callee`, in the same datacenter only or in
/// any (from `detector.dependencies` in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// Calling service.
    pub caller: String,
    /// Called service.
    pub callee: String,
    /// Whether calls stay within the caller's datacenter.
    pub same_dc: bool,
}

/// One anomalous signal at one instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Anomaly {
    /// The instance the series belongs to.
    pub instance: String,
    /// The metric family.
    pub metric: String,
    /// What it shows.
    pub class: Class,
    /// The peer the series talks to, resolved to an instance name, if any.
    pub peer: Option<String>,
    /// Score: scales away from the baseline in the bad direction.
    pub score: f64,
    /// Onset, ms since the epoch.
    pub onset_ms: i64,
    /// Rounds in a row it has been anomalous.
    pub rounds: u32,
    /// The series' labels (`__name__` and `le` left out): which CPU mode, which quantile, which
    /// peer; an aggregate's (`aggregate: sum`) are those all the series it sums share.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The interval's value, in the signal's unit (per second for counters).
    pub value: f64,
    /// The baseline's median it was judged against, same unit.
    pub baseline: f64,
    /// How far the value moved from the baseline in the bad direction, same unit (bytes,
    /// cores, seconds): positive for trouble whichever way is bad.
    pub deviation: f64,
    /// Which resource of the instance the family measures, from its rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<Resource>,
    /// Whether the series measures calls the instance makes (its rule's `outbound`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub outbound: bool,
}

/// A candidate root cause with its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Instance name.
    pub instance: String,
    /// Its datacenter, host and service.
    pub dc: String,
    /// Host.
    pub host: String,
    /// Service.
    pub service: String,
    /// Evidence score (higher = more likely the root cause).
    pub score: f64,
    /// Earliest onset among its evidence, ms.
    pub onset_ms: i64,
}

/// What the detector says about one incident.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Stable id of the incident, `<opened ms>-<first instance named when it opened>` (the
    /// `verdicts.id` column and Alertmanager's `verdict_id` annotation); kept when another
    /// root takes the incident over.
    pub id: String,
    /// Failure kind (`node_loss`, `node_hang`, `slow_node`, `cold_start`, `pool_exhaustion`,
    /// `retry_storm`, `mailbox_overload`, `session_loss`, `host_saturation`,
    /// `host_network`, `dc_degradation`, `link_degradation`, `unknown`).
    pub kind: String,
    /// Datacenter of the root cause (for a link, the end its leader is in).
    pub dc: String,
    /// Every datacenter the verdict names, sorted: the datacenters of its instances; both
    /// ends of a degraded link.
    pub dcs: Vec<String>,
    /// Hosts of the instances named, in their order, each once: the answer, never a host of
    /// an alternative. Ranked alternatives are in `candidates` ([`Verdict::ranked_hosts`]).
    pub hosts: Vec<String>,
    /// Service of the root cause (`network` for a datacenter or link degradation, `host` for
    /// a host whose instances of several services all suffer).
    pub service: String,
    /// Instances named.
    pub instances: Vec<String>,
    /// 0..1: the probability that the named root (host and kind) is right, from the
    /// calibrated model ([`ConfidenceModel`]) over the leader's share and score, to three
    /// decimals.
    pub confidence: f64,
    /// 0..1: the leader's share of the top three candidates' scores, to three decimals (what
    /// `confidence` was before it was calibrated; one of its inputs).
    pub leader_share: f64,
    /// Ranked candidates, the leader first (at most 5).
    pub candidates: Vec<Candidate>,
    /// The anomalies behind it, strongest first (at most 12).
    pub evidence: Vec<Anomaly>,
    /// Onset of the incident (earliest evidence), ms.
    pub onset_ms: i64,
    /// When it was first opened, ms.
    pub opened_ms: i64,
}

impl Verdict {
    /// Hosts most likely first, for AC@k: the hosts named ([`Verdict::hosts`]), then the
    /// other candidates' hosts in rank order, each once.
    pub fn ranked_hosts(&self) -> Vec<String> {
        let mut ranked = self.hosts.clone();
        for candidate in &self.candidates {
            if !ranked.contains(&candidate.host) {
                ranked.push(candidate.host.clone());
            }
        }
        ranked
    }
}

/// Detector settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Spike detection tuning.
    pub tuning: Tuning,
    /// Rounds the same leader must lead before a verdict opens. Default 2.
    pub confirm_rounds: u32,
    /// Quiet rounds after which an open verdict resolves. Default 6.
    pub resolve_rounds: u32,
    /// Smallest leader score that opens a verdict after `confirm_rounds`. Default 4.
    pub min_score: f64,
    /// Weaker evidence, from this fraction of `min_score`, opens a verdict once the same
    /// leader has led for `weak_rounds`. Default 0.6.
    pub weak_score: f64,
    /// Rounds weaker evidence must last. Default 6.
    pub weak_rounds: u32,
    /// Rounds a leader whose evidence is latency alone must lead: a starved or briefly
    /// paused process shows a second or two of latency and nothing else. Default 3. Not for
    /// `host_saturation`, whose latency is corroborated by two services' instances.
    pub latency_rounds: u32,
    /// A counter falling by less than this fraction of its value is a glitch, not a reset
    /// ([`crate::signal::COUNTER_GLITCH`], 0.1; 0 reads every decrease as a reset).
    pub counter_glitch: f64,
    /// How a verdict's evidence becomes its confidence.
    pub confidence: ConfidenceModel,
    /// Whether an instance whose samples stop for two intervals is judged to have stopped
    /// answering (an availability anomaly, `up`). True where every scrape reaches the
    /// detector (live, `detect`, replay of epicenter's own store); false where a gap in the
    /// samples says nothing about the target (a Prometheus server's series: a backfill's
    /// missing cells, a series that had nothing to report), whose own `up` series, when the
    /// server has them, say it instead. Default true.
    pub judge_silence: bool,
}

/// A logistic model of the probability that a verdict names the right root (host and kind):
/// `1 / (1 + e^−(intercept + share × leader_share + log_score × ln(leader score) + unknown ×
/// [kind is unknown]))`, fitted by `epicenter eval --calibrate` (maximum likelihood, Newton's
/// method) on the random scenario corpus's calibration seeds and checked on seeds never fitted
/// on (docs/detector.md, "Confidence"). An `unknown` verdict names no kind, so it is right
/// only as far as its host is; its own term says how much less often that holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfidenceModel {
    /// Log-odds at a share of 0 and a leader score of 1.
    pub intercept: f64,
    /// Log-odds per unit of the leader's share of the top three scores.
    pub share: f64,
    /// Log-odds per unit of the natural logarithm of the leader's score.
    pub log_score: f64,
    /// Log-odds added when the verdict's kind is `unknown`.
    pub unknown: f64,
}

impl ConfidenceModel {
    /// The probability, 0..1, for a verdict of `kind` whose leader has `share` of the top
    /// three scores and `score`. The `unknown` term applies to `unknown` and to the kinds read
    /// from request symptoms alone, with no role and no resource behind them (`code_defect`,
    /// `network_delay`, [`ConfidenceModel::names_no_cause`]).
    pub fn probability(&self, share: f64, score: f64, kind: &str) -> f64 {
        let unknown = if Self::names_no_cause(kind) { 1.0 } else { 0.0 };
        let z = self.intercept + self.share * share + self.log_score * score.max(1e-3).ln() + self.unknown * unknown;
        1.0 / (1.0 + (-z).exp())
    }
}

impl ConfidenceModel {
    /// Whether a verdict of `kind` names no cause the rules vouch for: `unknown`, and the kinds
    /// read from an instance's requests alone (`code_defect`: its own errors or latency;
    /// `network_delay`: only its calls slowed), where nothing says what the instance is or
    /// which of its resources ran short. On the simulated fleet such a verdict's kind was
    /// right in none of the calibration corpus' cases (a starved host's backend, slow with
    /// nothing else to show, is named `code_defect`), so they share `unknown`'s term.
    pub fn names_no_cause(kind: &str) -> bool {
        matches!(kind, "unknown" | "code_defect" | "network_delay")
    }
}

impl Default for ConfidenceModel {
    /// Fitted on 2026-12-04 by `epicenter eval --random 800 --seed 0 --calibrate` (the
    /// calibration seeds 0–799; 1,014 incidents, in-sample Brier score 0.017): a verdict
    /// that names a kind is right about 98 % of the time whatever its score (the score and
    /// share separate little among them), an `unknown` one never names the kind.
    fn default() -> Self {
        ConfidenceModel {
            intercept: 3.2946,
            share: 1.7634,
            log_score: -0.1514,
            unknown: -9.5977,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tuning: Tuning::default(),
            confirm_rounds: 2,
            resolve_rounds: 6,
            min_score: 4.0,
            weak_score: 0.6,
            weak_rounds: 6,
            latency_rounds: 3,
            counter_glitch: crate::signal::COUNTER_GLITCH,
            confidence: ConfidenceModel::default(),
            judge_silence: true,
        }
    }
}

/// What one round produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assessment {
    /// Round time, ms.
    pub time_ms: i64,
    /// Anomalous signals now.
    pub anomalies: Vec<Anomaly>,
    /// Candidates over every anomaly of the round, best first (the incidents rank only the
    /// evidence each explains; this is the whole round's ranking, for the reference methods).
    pub candidates: Vec<Candidate>,
    /// Every incident open after this round (new, updated or continuing), oldest first.
    pub incidents: Vec<Verdict>,
    /// Ids of the incidents opened this round.
    pub opened: Vec<String>,
    /// Incidents that resolved this round, as they were last open.
    pub resolved: Vec<Verdict>,
    /// Whether this round was judged while the detector was behind ([`Detector::set_behind`]):
    /// no incident opened and none was taken over.
    pub held: bool,
    /// Whether a leader (of an open incident's evidence or of evidence none explains) was
    /// chosen this round over a candidate of the same score, by name: the incidents then
    /// depend on names, not only on evidence.
    pub tie_broken_by_name: bool,
}

impl Assessment {
    /// The incidents opened this round.
    pub fn opened_incidents(&self) -> impl Iterator<Item = &Verdict> {
        self.incidents
            .iter()
            .filter(|verdict| self.opened.contains(&verdict.id))
    }
}

/// One series' entry in [`Detector::series_feeds`]: when it was last observed (samples'
/// clock, ms) and the signals it feeds (index into the signal table, and the part it gives).
type SeriesFeeds = (i64, Vec<(usize, Part)>);

/// The detector's state.
#[derive(Debug)]
pub struct Detector {
    rules: Vec<Rule>,
    by_metric: FxHashMap<String, Vec<(usize, Part)>>,
    settings: Settings,
    instances: BTreeMap<String, InstanceInfo>,
    dependencies: Vec<Dependency>,
    /// Every signal, in the order first seen; [`Detector::signal_index`] finds one by its key
    /// (instance, rule, labels but `le` and `quantile`).
    signals: Vec<SignalEntry>,
    signal_index: HashMap<String, usize>,
    /// Per instance name, per series id ([`epicenter_store::rows::series_id`]): the signals
    /// the series feeds (index into `signals`, and the part it gives), worked out when the
    /// series is first observed through [`Detector::observe_series`], with when the series was
    /// last observed (samples' clock, ms). A known series then costs one integer lookup per
    /// sample instead of rule matching and a key built from its labels.
    series_feeds: HashMap<String, FxHashMap<u64, SeriesFeeds>>,
    /// When [`Detector::evict_stale`] last looked (samples' clock, ms).
    evicted_ms: i64,
    /// Roles rules gave an instance (keyed by its name) or a peer (keyed by the peer value as
    /// the label carries it, resolved when read): learned when a series is first seen.
    roles: HashMap<String, BTreeSet<Role>>,
    last_seen: HashMap<String, i64>,
    /// The latest time (samples' clock, ms) at which scrapes were lost on epicenter's side
    /// ([`Detector::note_lost_input`]); `i64::MIN` when none was.
    lost_input_ms: i64,
    /// (caller instance, peer label value) of every series whose rule names a peer, recorded
    /// when the series is first seen; resolved to instances when read.
    peer_links: BTreeSet<(String, String)>,
    /// (caller service, callee instance) of every server series whose rule names its caller
    /// (a mesh's destination-side series), recorded when the series is first seen.
    caller_links: BTreeSet<(String, String)>,
    /// Changes whenever the instances, their placement or the observed links change
    /// ([`Detector::graph_generation`]).
    graph_generation: u64,
    interval_ms: i64,
    /// Leaders of evidence no open incident explains, with the rounds each has led.
    pending: BTreeMap<String, u32>,
    incidents: Vec<Incident>,
    /// This round's strongest own anomaly score per instance (no peer; neither a restart nor a
    /// lost target), for [`Scope`]: set at the start of each round's lifecycle.
    strength: BTreeMap<String, f64>,
    /// The instances with a restart anomaly this round, for [`Scope`]: set with `strength`.
    restarted: BTreeSet<String>,
    behind: bool,
}

impl Detector {
    /// A detector over `rules`, with service `dependencies`, for targets scraped every
    /// `interval_ms`.
    pub fn new(rules: Vec<Rule>, dependencies: Vec<Dependency>, interval_ms: i64, settings: Settings) -> Detector {
        let mut by_metric: FxHashMap<String, Vec<(usize, Part)>> = FxHashMap::default();
        for (index, rule) in rules.iter().enumerate() {
            if rule.spec.kind == ValueKind::Mean {
                by_metric
                    .entry(format!("{}_sum", rule.spec.metric))
                    .or_default()
                    .push((index, Part::Sum));
                by_metric
                    .entry(format!("{}_count", rule.spec.metric))
                    .or_default()
                    .push((index, Part::Count));
            } else {
                by_metric
                    .entry(rule.spec.metric.clone())
                    .or_default()
                    .push((index, Part::Value));
            }
        }
        Detector {
            rules,
            by_metric,
            settings,
            instances: BTreeMap::new(),
            dependencies,
            signals: Vec::new(),
            signal_index: HashMap::new(),
            series_feeds: HashMap::new(),
            evicted_ms: i64::MIN,
            roles: HashMap::new(),
            last_seen: HashMap::new(),
            lost_input_ms: i64::MIN,
            peer_links: BTreeSet::new(),
            caller_links: BTreeSet::new(),
            graph_generation: 0,
            interval_ms,
            pending: BTreeMap::new(),
            incidents: Vec::new(),
            strength: BTreeMap::new(),
            restarted: BTreeSet::new(),
            behind: false,
        }
    }

    /// Every instance seen so far.
    pub fn instances(&self) -> &BTreeMap<String, InstanceInfo> {
        &self.instances
    }

    /// The service dependencies.
    pub fn dependencies(&self) -> &[Dependency] {
        &self.dependencies
    }

    /// Judges everything observed since the last call and ranks candidates at `time_ms`.
    pub fn assess(&mut self, time_ms: i64) -> Assessment {
        let tuning = self.settings.tuning;
        self.evict_stale(time_ms);
        self.sum_aggregates();
        let mut anomalies = Vec::new();
        for entry in &mut self.signals {
            if entry.into.is_some() {
                continue;
            }
            let Some((observed_ms, value, count, has_value, has_count)) = entry.pending.take() else {
                continue;
            };
            if !(has_value && has_count) {
                continue;
            }
            let Some(interval_value) = entry.signal.interval_value(observed_ms, value, count) else {
                continue;
            };
            let judgement = entry.signal.judge(observed_ms, interval_value, &tuning);
            if judgement.anomalous {
                let rule = &self.rules[entry.rule];
                anomalies.push(Anomaly {
                    instance: entry.instance.clone(),
                    metric: rule.spec.metric.clone(),
                    class: rule.spec.class,
                    peer: entry.peer.clone(),
                    score: judgement.score,
                    onset_ms: entry.signal.onset_ms.unwrap_or(observed_ms),
                    rounds: entry.signal.anomalous_for,
                    labels: entry.labels.clone(),
                    value: judgement.value,
                    baseline: judgement.baseline,
                    deviation: match rule.spec.bad {
                        crate::rules::Bad::Up => judgement.value - judgement.baseline,
                        crate::rules::Bad::Down => judgement.baseline - judgement.value,
                    },
                    resource: rule.spec.resource,
                    outbound: rule.spec.outbound,
                });
            }
        }
        // A target that stopped answering is an availability anomaly of its own, unless
        // epicenter itself lost scrapes in the last two intervals (its silence may be ours).
        let lost_lately = time_ms.saturating_sub(self.lost_input_ms) < 2 * self.interval_ms;
        let silences = self.last_seen.iter().filter(|_| self.settings.judge_silence);
        for (name, seen) in silences {
            if time_ms - seen >= 2 * self.interval_ms && !lost_lately {
                anomalies.push(Anomaly {
                    instance: name.clone(),
                    metric: "up".to_string(),
                    class: Class::Availability,
                    peer: None,
                    score: 10.0,
                    onset_ms: seen + self.interval_ms,
                    rounds: ((time_ms - seen) / self.interval_ms.max(1)) as u32,
                    labels: BTreeMap::new(),
                    value: 0.0,
                    baseline: 1.0,
                    deviation: 1.0,
                    resource: None,
                    outbound: false,
                });
            }
        }
        // Resolve peers to instance names.
        for anomaly in &mut anomalies {
            if let Some(peer) = &anomaly.peer {
                anomaly.peer = self.resolve(peer);
            }
        }
        anomalies.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.instance.cmp(&b.instance)));
        let candidates = self.rank(&anomalies);
        let mut assessment = Assessment {
            time_ms,
            anomalies,
            candidates,
            incidents: Vec::new(),
            opened: Vec::new(),
            resolved: Vec::new(),
            held: self.behind,
            tie_broken_by_name: false,
        };
        self.lifecycle(&mut assessment);
        assessment
    }
}

/// What the engine's tests share: placements, anomalies and small detectors.
#[cfg(test)]
mod testing {
    use super::*;

    pub(super) fn info(name: &str, dc: &str, host: &str, service: &str) -> InstanceInfo {
        InstanceInfo {
            name: name.into(),
            dc: dc.into(),
            host: host.into(),
            service: service.into(),
        }
    }

    pub(super) fn anomaly(instance: &str, class: Class, peer: Option<&str>, onset_ms: i64) -> Anomaly {
        Anomaly {
            instance: instance.into(),
            metric: "m".into(),
            class,
            peer: peer.map(str::to_string),
            score: 10.0,
            onset_ms,
            rounds: 1,
            labels: BTreeMap::new(),
            value: 0.0,
            baseline: 0.0,
            deviation: 0.0,
            resource: None,
            outbound: false,
        }
    }

    /// A round at 10 s of `anomalies` ranked by `detector`, before its lifecycle step.
    pub(super) fn ranked(detector: &Detector, anomalies: Vec<Anomaly>) -> Assessment {
        let candidates = detector.rank(&anomalies);
        Assessment {
            time_ms: 10_000,
            anomalies,
            candidates,
            incidents: Vec::new(),
            opened: Vec::new(),
            resolved: Vec::new(),
            held: detector.behind,
            tie_broken_by_name: false,
        }
    }

    /// The instances each open incident names after `assessment`, oldest first.
    pub(super) fn named(assessment: &Assessment) -> Vec<Vec<String>> {
        assessment
            .incidents
            .iter()
            .map(|verdict| verdict.instances.clone())
            .collect()
    }

    /// Three backends and two Redis nodes: (name, datacenter, host, service).
    pub(super) const FIVE: [(&str, &str, &str, &str); 5] = [
        ("b1", "dc-1", "h1", "backend"),
        ("b2", "dc-2", "h2", "backend"),
        ("b3", "dc-3", "h3", "backend"),
        ("r1", "dc-1", "h4", "redis"),
        ("r2", "dc-2", "h5", "redis"),
    ];

    pub(super) fn detector() -> Detector {
        let mut detector = Detector::new(
            Vec::new(),
            vec![Dependency {
                caller: "backend".into(),
                callee: "redis".into(),
                same_dc: false,
            }],
            10_000,
            Settings::default(),
        );
        for (name, dc, host, service) in FIVE {
            detector.observe(0, &info(name, dc, host, service), Vec::new());
        }
        detector
    }

    /// Backends (3 per datacenter) calling Redis nodes (2 per datacenter) in 3 datacenters,
    /// and one database per datacenter on the second Redis node's host.
    pub(super) fn three_datacenters() -> Detector {
        let mut detector = Detector::new(
            Vec::new(),
            vec![
                Dependency {
                    caller: "backend".into(),
                    callee: "redis".into(),
                    same_dc: false,
                },
                Dependency {
                    caller: "backend".into(),
                    callee: "db".into(),
                    same_dc: true,
                },
            ],
            10_000,
            Settings::default(),
        );
        for dc in 1..=3 {
            for n in 1..=3 {
                let name = format!("b{dc}{n}");
                detector.observe(
                    0,
                    &info(&name, &format!("dc-{dc}"), &format!("h{dc}{n}"), "backend"),
                    Vec::new(),
                );
            }
            for n in 1..=2 {
                let name = format!("r{dc}{n}");
                detector.observe(
                    0,
                    &info(&name, &format!("dc-{dc}"), &format!("h{dc}{}", n + 3), "redis"),
                    Vec::new(),
                );
            }
            detector.observe(
                0,
                &info(&format!("d{dc}"), &format!("dc-{dc}"), &format!("h{dc}5"), "db"),
                Vec::new(),
            );
        }
        detector
    }
}
