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

use crate::rules::{Class, Role, Rule, ValueKind};
use crate::signal::{Signal, Tuning};

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
    /// three scores and `score`.
    pub fn probability(&self, share: f64, score: f64, kind: &str) -> f64 {
        let unknown = if kind == "unknown" { 1.0 } else { 0.0 };
        let z = self.intercept + self.share * share + self.log_score * score.max(1e-3).ln() + self.unknown * unknown;
        1.0 / (1.0 + (-z).exp())
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
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Value,
    Sum,
    Count,
}

#[derive(Debug)]
struct SignalEntry {
    rule: usize,
    instance: String,
    peer: Option<String>,
    signal: Signal,
    pending: Option<(i64, f64, f64, bool, bool)>,
}

impl SignalEntry {
    /// Takes one sample (a value, or a mean's `_sum` or `_count`) observed at `time_ms` into the
    /// reading pending for the next `assess`.
    fn take(&mut self, time_ms: i64, part: Part, value: f64) {
        let (mut sum, mut count, mut has_sum, mut has_count) = (0.0, 0.0, false, false);
        if let Some((_, pending_sum, pending_count, pending_has_sum, pending_has_count)) = self.pending {
            (sum, count, has_sum, has_count) = (pending_sum, pending_count, pending_has_sum, pending_has_count);
        }
        match part {
            Part::Value | Part::Sum => {
                sum = value;
                has_sum = true;
            }
            Part::Count => {
                count = value;
                has_count = true;
            }
        }
        if part == Part::Value {
            has_count = true;
        }
        self.pending = Some((time_ms, sum, count, has_sum, has_count));
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

/// One open incident: its verdict as last judged, the instance leading its evidence and for
/// how many rounds, its quiet rounds, and its own instance's score this round.
#[derive(Debug, Clone)]
struct Incident {
    verdict: Verdict,
    leader: Option<(String, u32)>,
    quiet_rounds: u32,
    own_score: f64,
}

/// Where the evidence an incident explains may come from: the instances it names (any
/// anomaly of theirs, and any caller's towards them), the instances that call them directly
/// or through others (their latency, errors, saturation and traffic: a fault spreads to its
/// callers), and the instances they call (their traffic: load spreads to callees; for a
/// retry storm, also their latency, errors and saturation). A restart or a lost target is
/// never a consequence of another instance's fault.
///
/// A caller's own trouble is explained only while it does not stand out among the callers of
/// its service the incident reaches: its strongest own anomaly under twice their median (so
/// a retry storm in dc-2, whose API instances suffer far more than every other datacenter's,
/// is not explained by a Redis node every backend calls, while a slow database's callers in
/// its datacenter, all suffering alike, are explained by it). A direct caller of what the
/// incident names is compared with the other direct callers of its service only (a starved
/// host's backend slows the API instances of its own datacenter, which call it, and not the
/// other datacenters' API instances, which the host reaches only through Redis).
#[derive(Debug, Default)]
struct Scope {
    named: BTreeSet<String>,
    upstream: BTreeSet<String>,
    downstream: BTreeSet<String>,
    load: bool,
    /// Upstream instances that stand out among the upstream instances of their service.
    standing_out: BTreeSet<String>,
    /// The hosts' own exporters under what a database or cache incident names, and until when
    /// (ms) their anomalies may have begun to be its: a stalled disk under a slow database
    /// shows in both at once. Later trouble of the host is its own.
    host_exporters: (BTreeSet<String>, i64),
}

impl Scope {
    /// Whether `anomaly` is explained by the incident this scope belongs to.
    fn explains(&self, anomaly: &Anomaly) -> bool {
        if self.named.contains(&anomaly.instance) {
            return true;
        }
        let (exporters, until_ms) = &self.host_exporters;
        if anomaly.peer.is_none() && exporters.contains(&anomaly.instance) && anomaly.onset_ms <= *until_ms {
            return true;
        }
        let up = self.upstream.contains(&anomaly.instance) && !self.standing_out.contains(&anomaly.instance);
        let down = self.downstream.contains(&anomaly.instance);
        match &anomaly.peer {
            Some(peer) => {
                self.named.contains(peer)
                    || (up && self.upstream.contains(peer))
                    || (self.load && down && self.downstream.contains(peer))
            }
            None => match anomaly.class {
                Class::Restart | Class::Availability => false,
                Class::Traffic => up || down,
                Class::Latency | Class::Errors | Class::Saturation => up || (self.load && down),
            },
        }
    }
}

/// The callers and the callees (instance names) of the slowed or failing calls from one
/// datacenter to another.
type CallersAndCallees<'a> = (BTreeSet<&'a str>, BTreeSet<&'a str>);

/// Caller service → callee service edges, with whether every call seen stays within a
/// datacenter.
type ServiceEdges = BTreeMap<(String, String), bool>;

/// At most this many new incidents open in one round (each needs its own leader, explained
/// by none of the others).
const NEW_INCIDENTS_PER_ROUND: usize = 8;

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
    /// series is first observed through [`Detector::observe_series`]. A known series then
    /// costs one integer lookup per sample instead of rule matching and a key built from its
    /// labels.
    series_feeds: HashMap<String, FxHashMap<u64, Vec<(usize, Part)>>>,
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

    /// Instance-level edges observed in client series: (caller instance, peer instance) for
    /// every series whose rule names a peer that resolves to a known instance.
    pub fn peer_edges(&self) -> BTreeSet<(String, String)> {
        self.peer_links
            .iter()
            .filter_map(|(instance, peer)| Some((instance.clone(), self.resolve(peer)?)))
            .collect()
    }

    /// A number that changes whenever what [`Detector::observed_edges`] and the instances
    /// would show changes (an instance seen or re-placed, a link observed): a graph built at
    /// one value stands until it moves.
    pub fn graph_generation(&self) -> u64 {
        self.graph_generation
    }

    /// Every instance-level call edge the series show: [`Detector::peer_edges`], and for each
    /// server series that names its calling service (`caller` in its rule: a mesh's
    /// destination-side series), an edge from each instance of that service in the callee's
    /// datacenter (from every instance of it when none runs there; a caller no scraped
    /// instance belongs to, such as an ingress gateway, gives none). What `/api/v1/graph`
    /// shows as `observed`.
    pub fn observed_edges(&self) -> BTreeSet<(String, String)> {
        let mut edges = self.peer_edges();
        if self.caller_links.is_empty() {
            return edges;
        }
        let mut by_service: HashMap<&str, Vec<&InstanceInfo>> = HashMap::new();
        for info in self.instances.values() {
            by_service.entry(info.service.as_str()).or_default().push(info);
        }
        for (caller, callee) in &self.caller_links {
            let (Some(callers), Some(callee_info)) = (by_service.get(caller.as_str()), self.instances.get(callee))
            else {
                continue;
            };
            let local = callers.iter().any(|info| info.dc == callee_info.dc);
            for info in callers {
                if info.name != *callee && (!local || info.dc == callee_info.dc) {
                    edges.insert((info.name.clone(), callee.clone()));
                }
            }
        }
        edges
    }

    /// Whether the rounds judged from now on are judged while the detector is behind (its own
    /// rounds run late: the machine it shares with what it watches is starved). While behind,
    /// [`Detector::assess`] opens no verdict and lets no other instance take an open one over
    /// (see the module docs); an open verdict goes on being updated or fading as usual.
    pub fn set_behind(&mut self, behind: bool) {
        self.behind = behind;
    }

    /// Records that scrapes up to `time_ms` (samples' clock, ms) were lost on epicenter's
    /// side: skipped, timed out while it was starved, or dropped on the way to the detector.
    /// For two intervals after it, an instance whose samples stopped is not judged to have
    /// stopped answering (its scrape may be what was lost); one still silent after that is.
    pub fn note_lost_input(&mut self, time_ms: i64) {
        self.lost_input_ms = self.lost_input_ms.max(time_ms);
    }

    /// Feeds one scrape of `instance` at `time_ms`: `(metric, labels, value)` per sample.
    pub fn observe<'a>(
        &mut self,
        time_ms: i64,
        instance: &InstanceInfo,
        samples: impl IntoIterator<Item = (&'a str, BTreeMap<String, String>, f64)>,
    ) {
        self.take(time_ms, instance, samples, true);
    }

    /// Feeds samples that another target reported about `instance` at `time_ms` (cAdvisor's
    /// per-container series, scraped from the node's kubelet and placed on their pod): its
    /// evidence like its own, but a placement already learnt from its own scrapes stands
    /// (`instance` places it only while nothing else has), and it is not counted as seen, so
    /// its own target going silent is still noticed.
    pub fn observe_reported<'a>(
        &mut self,
        time_ms: i64,
        instance: &InstanceInfo,
        samples: impl IntoIterator<Item = (&'a str, BTreeMap<String, String>, f64)>,
    ) {
        self.take(time_ms, instance, samples, false);
    }

    /// [`Detector::observe`] and [`Detector::observe_reported`] (`own` false) for samples that
    /// carry their series ([`epicenter_store::rows::Series`], as a scrape's rows do): the same
    /// judgement, but each series' signals are worked out once per instance and found again by
    /// the series' id.
    pub fn observe_series(&mut self, time_ms: i64, instance: &InstanceInfo, samples: &[(Arc<Series>, f64)], own: bool) {
        self.place(time_ms, instance, own);
        // Taken out while `feeds` borrows the detector, put back after.
        let mut by_series = self.series_feeds.remove(&instance.name).unwrap_or_default();
        let mut key = String::new();
        for (series, value) in samples {
            let feeds = match by_series.entry(series.id) {
                std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
                std::collections::hash_map::Entry::Vacant(new) => {
                    let mut feeds = Vec::new();
                    self.feeds(instance, &series.name, &series.labels, &mut key, &mut feeds);
                    new.insert(feeds)
                }
            };
            for &(index, part) in feeds.iter() {
                self.signals[index].take(time_ms, part, *value);
            }
        }
        self.series_feeds.insert(instance.name.clone(), by_series);
    }

    fn take<'a, L: std::borrow::Borrow<BTreeMap<String, String>>>(
        &mut self,
        time_ms: i64,
        instance: &InstanceInfo,
        samples: impl IntoIterator<Item = (&'a str, L, f64)>,
        own: bool,
    ) {
        self.place(time_ms, instance, own);
        let mut key = String::with_capacity(128);
        let mut feeds = Vec::new();
        for (metric, labels, value) in samples {
            feeds.clear();
            self.feeds(instance, metric, labels.borrow(), &mut key, &mut feeds);
            for &(index, part) in &feeds {
                self.signals[index].take(time_ms, part, value);
            }
        }
    }

    /// Records `instance` and its placement as of a scrape at `time_ms`; `own`: its own
    /// target's scrape, which also says it answers.
    fn place(&mut self, time_ms: i64, instance: &InstanceInfo, own: bool) {
        // The latest placement holds: a target's host can be learnt after its first scrape
        // (node_exporter's `node_uname_info`, a relabeling changed).
        match self.instances.get_mut(&instance.name) {
            Some(known) if own && known != instance => {
                *known = instance.clone();
                self.graph_generation += 1;
            }
            Some(_) => {}
            None => {
                self.instances.insert(instance.name.clone(), instance.clone());
                self.graph_generation += 1;
            }
        }
        if own {
            match self.last_seen.get_mut(&instance.name) {
                Some(seen) => *seen = time_ms,
                None => {
                    self.last_seen.insert(instance.name.clone(), time_ms);
                }
            }
        }
    }

    /// The signals a series of `instance` named `metric` with `labels` feeds, pushed onto
    /// `feeds` as (index into `signals`, part); a signal seen for the first time is created,
    /// with the peer, caller and role its rule reads from the labels. `key` is scratch space.
    fn feeds(
        &mut self,
        instance: &InstanceInfo,
        metric: &str,
        labels: &BTreeMap<String, String>,
        key: &mut String,
        feeds: &mut Vec<(usize, Part)>,
    ) {
        let Some(targets) = self.by_metric.get(metric) else {
            return;
        };
        for &(rule_index, part) in targets {
            let rule = &self.rules[rule_index];
            if !rule.matches(labels) {
                continue;
            }
            // Values quoted (Debug escapes `"` and `\`): label sets holding `,` or `=` in
            // their values never share a key. Written into a reused buffer: a series
            // already known costs no allocation.
            key.clear();
            let _ = write!(key, "{:?}|{rule_index}|", instance.name);
            for (name, value) in labels {
                if name != "le" && name != "quantile" {
                    let _ = write!(key, "{name}={value:?},");
                }
            }
            if let Some(&index) = self.signal_index.get(key.as_str()) {
                feeds.push((index, part));
                continue;
            }
            let peer = rule.peer(labels);
            if let Some(peer) = &peer {
                if self.peer_links.insert((instance.name.clone(), peer.clone())) {
                    self.graph_generation += 1;
                }
            }
            if let Some(caller) = rule.caller(labels) {
                if self.caller_links.insert((caller, instance.name.clone())) {
                    self.graph_generation += 1;
                }
            }
            if let Some(role) = rule.spec.role {
                let holder = match (&rule.spec.peer, &peer) {
                    (Some(_), Some(peer)) => Some(peer.clone()),
                    (Some(_), None) => None,
                    (None, _) => Some(instance.name.clone()),
                };
                if let Some(holder) = holder {
                    self.roles.entry(holder).or_default().insert(role);
                }
            }
            self.signals.push(SignalEntry {
                rule: rule_index,
                instance: instance.name.clone(),
                peer,
                signal: Signal::new(rule.spec.kind, rule.spec.bad, rule.spec.floor)
                    .with_counter_glitch(self.settings.counter_glitch),
                pending: None,
            });
            let index = self.signals.len() - 1;
            self.signal_index.insert(key.clone(), index);
            feeds.push((index, part));
        }
    }

    /// Judges everything observed since the last call and ranks candidates at `time_ms`.
    pub fn assess(&mut self, time_ms: i64) -> Assessment {
        let tuning = self.settings.tuning;
        let mut anomalies = Vec::new();
        for entry in &mut self.signals {
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
                });
            }
        }
        // A target that stopped answering is an availability anomaly of its own, unless
        // epicenter itself lost scrapes in the last two intervals (its silence may be ours).
        let lost_lately = time_ms.saturating_sub(self.lost_input_ms) < 2 * self.interval_ms;
        for (name, seen) in &self.last_seen {
            if time_ms - seen >= 2 * self.interval_ms && !lost_lately {
                anomalies.push(Anomaly {
                    instance: name.clone(),
                    metric: "up".to_string(),
                    class: Class::Availability,
                    peer: None,
                    score: 10.0,
                    onset_ms: seen + self.interval_ms,
                    rounds: ((time_ms - seen) / self.interval_ms.max(1)) as u32,
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

    /// Whether `instance`'s service is called by no other service (where load enters).
    fn is_entry(&self, instance: &str) -> bool {
        self.instances.get(instance).is_some_and(|info| {
            !self.dependencies.is_empty()
                && !self
                    .dependencies
                    .iter()
                    .any(|dependency| dependency.callee == info.service)
        })
    }

    /// Whether `own` (one instance's anomalies) holds throttling of its container (a rule
    /// `role: container`) that began no more than an interval after any other of its own
    /// anomalies.
    fn throttled_first(&self, own: &[&Anomaly]) -> bool {
        let since = own
            .iter()
            .filter(|a| {
                a.peer.is_none() && a.class == Class::Saturation && self.rule_role(&a.metric) == Some(Role::Container)
            })
            .map(|a| a.onset_ms)
            .min();
        since.is_some_and(|since| {
            !own.iter()
                .any(|a| a.peer.is_none() && a.onset_ms.saturating_add(self.interval_ms) < since)
        })
    }

    /// The role of the rules reading `metric` (the first that has one).
    fn rule_role(&self, metric: &str) -> Option<Role> {
        self.rules
            .iter()
            .filter(|rule| rule.spec.metric == metric)
            .find_map(|rule| rule.spec.role)
    }

    /// Every role the rules gave `instance`: from its own series, and from peers' series whose
    /// peer value resolves to it (see [`Detector::resolve`]).
    fn roles_of(&self, instance: &str) -> BTreeSet<Role> {
        self.roles
            .iter()
            .filter(|(holder, _)| holder.as_str() == instance || self.resolve(holder).as_deref() == Some(instance))
            .flat_map(|(_, roles)| roles.iter().copied())
            .collect()
    }

    fn resolve(&self, peer: &str) -> Option<String> {
        if self.instances.contains_key(peer) {
            return Some(peer.to_string());
        }
        let host = peer.rsplit_once(':').map_or(peer, |(host, _)| host);
        self.instances.contains_key(host).then(|| host.to_string())
    }

    /// Scores every instance that has evidence (see the module docs).
    pub fn rank(&self, anomalies: &[Anomaly]) -> Vec<Candidate> {
        let mut own: BTreeMap<&str, (f64, BTreeSet<Class>, i64)> = BTreeMap::new();
        let mut pointed: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
        let mut pointed_onset: BTreeMap<&str, i64> = BTreeMap::new();
        for anomaly in anomalies {
            let strength = (anomaly.score / 10.0).clamp(0.5, 1.0);
            match (&anomaly.peer, anomaly.class) {
                (Some(peer), Class::Errors | Class::Latency | Class::Saturation | Class::Availability) => {
                    let per_caller = pointed.entry(peer.as_str()).or_default();
                    *per_caller.entry(anomaly.instance.as_str()).or_default() += 2.0 * strength;
                    let onset = pointed_onset.entry(peer.as_str()).or_insert(anomaly.onset_ms);
                    *onset = (*onset).min(anomaly.onset_ms);
                }
                (Some(_), _) => {}
                (None, class) => {
                    let weight = match class {
                        Class::Availability => 4.0,
                        Class::Saturation => 2.0,
                        Class::Restart => 1.5,
                        Class::Latency | Class::Errors => 1.5,
                        // Load spreads to callees: a surge is a consequence, except where load
                        // enters the fleet (a service nobody calls), which has no upstream.
                        Class::Traffic if self.is_entry(&anomaly.instance) => 2.0,
                        Class::Traffic => 0.5,
                    };
                    let entry =
                        own.entry(anomaly.instance.as_str())
                            .or_insert((0.0, BTreeSet::new(), anomaly.onset_ms));
                    entry.0 += weight * strength;
                    entry.1.insert(class);
                    entry.2 = entry.2.min(anomaly.onset_ms);
                }
            }
        }
        let mut names: BTreeSet<&str> = own.keys().copied().collect();
        names.extend(pointed.keys().copied());
        let mut candidates = Vec::new();
        for name in names {
            let Some(info) = self.instances.get(name) else { continue };
            let (own_score, classes, own_onset) = own.get(name).cloned().unwrap_or((0.0, BTreeSet::new(), i64::MAX));
            // Own evidence shared by most siblings points elsewhere (upstream or downstream).
            let siblings: Vec<&InstanceInfo> = self
                .instances
                .values()
                .filter(|other| other.service == info.service && other.name != info.name)
                .collect();
            let similar = siblings
                .iter()
                .filter(|other| {
                    own.get(other.name.as_str())
                        .is_some_and(|(_, other_classes, _)| other_classes.iter().any(|class| classes.contains(class)))
                })
                .count();
            let sibling_share = if siblings.is_empty() {
                0.0
            } else {
                similar as f64 / siblings.len() as f64
            };
            // One host or a few are specific; most of the service is not.
            let specificity = 1.0 - 0.7 * ((sibling_share - 0.3).max(0.0) / 0.7);
            // Callers' evidence: each caller counts up to 4.
            let callers_score: f64 = pointed
                .get(name)
                .map_or(0.0, |callers| callers.values().map(|score| score.min(4.0)).sum());
            let score = own_score * specificity + callers_score;
            if score <= 0.0 {
                continue;
            }
            let onset = own_onset.min(pointed_onset.get(name).copied().unwrap_or(i64::MAX));
            candidates.push(Candidate {
                instance: name.to_string(),
                dc: info.dc.clone(),
                host: info.host.clone(),
                service: info.service.clone(),
                score,
                onset_ms: onset,
            });
        }
        // Earlier onsets win near-ties: a 10 % bonus per interval of lead over the latest.
        let latest = candidates
            .iter()
            .map(|c| c.onset_ms)
            .filter(|&o| o != i64::MAX)
            .max()
            .unwrap_or(0);
        for candidate in &mut candidates {
            if candidate.onset_ms != i64::MAX && self.interval_ms > 0 {
                let lead = ((latest - candidate.onset_ms) / self.interval_ms).clamp(0, 3) as f64;
                candidate.score *= 1.0 + 0.1 * lead;
            }
        }
        candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.instance.cmp(&b.instance)));
        candidates
    }

    /// Judges every open incident on the evidence it explains (oldest first: evidence two
    /// incidents could explain goes to the older), then opens new incidents from what none
    /// explains: each needs a leader of its own that leads for `confirm_rounds` (or
    /// `weak_rounds` on weaker evidence), and a new root takes an open incident over only when
    /// it relates to it and the incident's own instance has lost its strong evidence.
    fn lifecycle(&mut self, assessment: &mut Assessment) {
        let time_ms = assessment.time_ms;
        self.strength.clear();
        self.restarted = assessment
            .anomalies
            .iter()
            .filter(|anomaly| anomaly.class == Class::Restart)
            .map(|anomaly| anomaly.instance.clone())
            .collect();
        for anomaly in &assessment.anomalies {
            if anomaly.peer.is_none() && !matches!(anomaly.class, Class::Restart | Class::Availability) {
                let entry = self.strength.entry(anomaly.instance.clone()).or_default();
                *entry = entry.max(anomaly.score);
            }
        }
        let edges = if assessment.anomalies.is_empty() {
            ServiceEdges::new()
        } else {
            self.service_edges()
        };
        let mut claimed = vec![false; assessment.anomalies.len()];
        let mut open = Vec::new();
        for mut incident in std::mem::take(&mut self.incidents) {
            let scope = self.scope(&incident.verdict, &edges);
            let mut explained = Vec::new();
            for (index, anomaly) in assessment.anomalies.iter().enumerate() {
                if !claimed[index] && scope.explains(anomaly) {
                    claimed[index] = true;
                    explained.push(anomaly.clone());
                }
            }
            let candidates = self.rank(&explained);
            assessment.tie_broken_by_name |= tied(&candidates);
            if self.judge(&mut incident, &explained, &candidates, time_ms) {
                open.push(incident);
            } else {
                assessment.resolved.push(incident.verdict);
            }
        }
        // Evidence no open incident explains: new incidents, one leader at a time.
        let mut rest: Vec<Anomaly> = assessment
            .anomalies
            .iter()
            .zip(&claimed)
            .filter(|(_, claimed)| !**claimed)
            .map(|(anomaly, _)| anomaly.clone())
            .collect();
        let weak = self.settings.min_score * self.settings.weak_score;
        let mut pending = BTreeMap::new();
        for _ in 0..NEW_INCIDENTS_PER_ROUND {
            let candidates = self.rank(&rest);
            let Some(leader) = candidates.first().filter(|leader| leader.score >= weak) else {
                break;
            };
            assessment.tie_broken_by_name |= tied(&candidates);
            let rounds = self.pending.get(&leader.instance).map_or(1, |rounds| rounds + 1);
            pending.insert(leader.instance.clone(), rounds);
            let kind = self.kind(&rest, &candidates);
            // A host's instances together are the evidence against the host.
            let mut evidence = leader.clone();
            if kind.as_deref().is_some_and(is_host_kind) {
                let on_host = self.co_located(&rest, &candidates);
                evidence.score = candidates
                    .iter()
                    .filter(|c| on_host.contains(&c.instance))
                    .map(|c| c.score)
                    .sum();
            }
            let confirmed = self.confirmed(&rest, &evidence, rounds, kind.as_deref());
            let kind = kind.unwrap_or_else(|| "unknown".to_string());
            let mut verdict = self.verdict(&rest, &candidates, time_ms, kind, None);
            let scope = self.scope(&verdict, &edges);
            // The same kind at a sibling of what an open incident names (same service and
            // datacenter) is that incident, spreading: it joins it.
            let joined = open.iter().position(|incident| {
                let open = &incident.verdict;
                open.kind == verdict.kind
                    && !matches!(
                        open.kind.as_str(),
                        "dc_degradation" | "link_degradation" | "host_saturation" | "host_network"
                    )
                    && open.service == leader.service
                    && open.dc == leader.dc
            });
            // A fault at an instance on the same host as an instance of another service an open
            // incident names: the host, not either service, is what fails.
            let host_of = |name: &String| self.instances.get(name).map(|info| info.host.as_str());
            let neighbour = open.iter().position(|incident| {
                let open = &incident.verdict;
                (host_may_explain(&open.kind) || is_host_kind(&open.kind))
                    && open.service != leader.service
                    && open
                        .instances
                        .iter()
                        .any(|name| host_of(name) == Some(leader.host.as_str()))
            });
            let joined = match (joined, neighbour) {
                (None, Some(index)) if confirmed => {
                    let open = &mut open[index].verdict;
                    open.kind = if is_host_kind(&verdict.kind) {
                        verdict.kind.clone()
                    } else {
                        "host_saturation".to_string()
                    };
                    open.service = "host".to_string();
                    open.instances
                        .retain(|name| host_of(name) == Some(leader.host.as_str()));
                    open.hosts = vec![leader.host.clone()];
                    Some(index)
                }
                (joined, _) => joined,
            };
            if let Some(index) = joined.filter(|_| confirmed) {
                let open = &mut open[index].verdict;
                if !open.instances.contains(&leader.instance) {
                    open.instances.push(leader.instance.clone());
                    if !open.hosts.contains(&leader.host) {
                        open.hosts.push(leader.host.clone());
                    }
                }
                let named = self.scope(open, &edges);
                rest.retain(|anomaly| !named.explains(anomaly));
                continue;
            }
            if confirmed {
                let info = self.instances.get(&leader.instance);
                let taken = open.iter_mut().find(|incident| {
                    incident.own_score < self.settings.min_score
                        && info.is_some_and(|info| self.may_take_over(&incident.verdict, info))
                });
                match taken {
                    Some(incident) => {
                        verdict.id = incident.verdict.id.clone();
                        verdict.opened_ms = incident.verdict.opened_ms;
                        verdict.onset_ms = verdict.onset_ms.min(incident.verdict.onset_ms);
                        incident.verdict = verdict;
                        incident.leader = Some((leader.instance.clone(), rounds));
                        incident.quiet_rounds = 0;
                        incident.own_score = leader.score;
                    }
                    None => {
                        assessment.opened.push(verdict.id.clone());
                        open.push(Incident {
                            verdict,
                            leader: Some((leader.instance.clone(), rounds)),
                            quiet_rounds: 0,
                            own_score: leader.score,
                        });
                    }
                }
            }
            let before = rest.len();
            rest.retain(|anomaly| !scope.explains(anomaly));
            if rest.len() == before {
                break;
            }
        }
        self.pending = pending;
        assessment.incidents = open.iter().map(|incident| incident.verdict.clone()).collect();
        self.incidents = open;
    }

    /// Whether `instance` may take the incident of `verdict` over: it is one the incident names
    /// or a sibling (same service) of one (the first verdict named the wrong node of a
    /// service). A caller or a callee is another incident's root, never this one's.
    fn may_take_over(&self, verdict: &Verdict, instance: &InstanceInfo) -> bool {
        verdict.instances.iter().any(|name| {
            name == &instance.name
                || self
                    .instances
                    .get(name)
                    .is_some_and(|named| named.service == instance.service)
        })
    }

    /// Whether `leader` has led long enough, on `anomalies`, to open an incident of `kind`:
    /// strong evidence for `confirm_rounds` (`latency_rounds` when it is one instance's latency
    /// alone, what a starved or paused process shows for a second or two), weaker evidence for
    /// `weak_rounds`; never a `transient` restart, never while the detector is behind.
    fn confirmed(&self, anomalies: &[Anomaly], leader: &Candidate, rounds: u32, kind: Option<&str>) -> bool {
        let name = leader.instance.as_str();
        let latency_only = anomalies
            .iter()
            .filter(|a| a.instance == name || a.peer.as_deref() == Some(name))
            .all(|a| a.class == Class::Latency);
        // Latency at instances of two services on one host at once is not one process's
        // pause: a host's saturation confirms like any other fault.
        let lone_latency = latency_only && !kind.is_some_and(is_host_kind);
        let enough = if leader.score >= self.settings.min_score {
            rounds
                >= self
                    .settings
                    .confirm_rounds
                    .max(if lone_latency { self.settings.latency_rounds } else { 0 })
        } else {
            rounds >= self.settings.weak_rounds
        };
        enough && kind != Some("transient") && !self.behind
    }

    /// One round of an open incident on the evidence it explains: renewed while its own
    /// instance leads (its kind kept, only sharpened), taken over by another instance of its
    /// scope only on evidence that would open an incident by itself once its own instance has
    /// lost its strong evidence, and otherwise standing or fading. Returns whether it is still
    /// open.
    fn judge(&self, incident: &mut Incident, anomalies: &[Anomaly], candidates: &[Candidate], time_ms: i64) -> bool {
        let weak = self.settings.min_score * self.settings.weak_score;
        let open_instance = incident.verdict.instances.first().cloned().unwrap_or_default();
        // A host's saturation is led by whichever of its instances leads.
        let open_host = is_host_kind(&incident.verdict.kind)
            .then(|| incident.verdict.hosts.first().cloned())
            .flatten();
        // A datacenter's or a link's degradation is led by any instance of its datacenters.
        let network = matches!(incident.verdict.kind.as_str(), "dc_degradation" | "link_degradation");
        let open_dcs = incident.verdict.dcs.clone();
        // A deploy names every restarted instance it took in: any of them leading is the
        // deploy's own evidence (the real JVM deploy test saw the second host take the
        // incident over and rename it `unknown` once its restart evidence had faded).
        let deploy = (incident.verdict.kind == "cold_start").then(|| incident.verdict.instances.clone());
        let its_own = |candidate: &Candidate| {
            candidate.instance == open_instance
                || open_host.as_ref() == Some(&candidate.host)
                || (network && open_dcs.contains(&candidate.dc))
                || deploy.as_ref().is_some_and(|named| named.contains(&candidate.instance))
        };
        let own = candidates
            .iter()
            .filter(|candidate| its_own(candidate))
            .map(|candidate| candidate.score)
            .fold(0.0, f64::max);
        incident.own_score = own;
        let Some(leader) = candidates.first().filter(|leader| leader.score >= weak) else {
            incident.leader = None;
            return Self::fade(incident, false, self.settings.resolve_rounds);
        };
        incident.quiet_rounds = 0;
        let rounds = match &incident.leader {
            Some((previous, rounds)) if *previous == leader.instance => rounds + 1,
            _ => 1,
        };
        incident.leader = Some((leader.instance.clone(), rounds));
        let kind = self.kind(anomalies, candidates);
        if !its_own(leader) {
            let confirmed = self.confirmed(anomalies, leader, rounds, kind.as_deref());
            // A host's exporter whose stalls this incident explains does not take it over.
            let exporter = !is_host_kind(&incident.verdict.kind)
                && !self.host_roles(anomalies, &leader.instance, i64::MAX).is_empty();
            if !confirmed || exporter || own >= self.settings.min_score {
                return Self::fade(incident, own >= weak, self.settings.resolve_rounds);
            }
        }
        // An open incident keeps its kind while the same instance leads: recovery (a
        // restarted node's reconnections, say) must not rename the failure. It only sharpens:
        // a `slow_node` or `unknown` becomes `node_hang` or `node_loss` once the node's own
        // availability is seen lost (a hung node's callers wait a round before its exporter's
        // scrape times out).
        let open = &incident.verdict;
        let same = its_own(leader);
        let sharpened = kind.as_deref().is_some_and(|new| sharpens(&open.kind, new));
        let kind = if same && !sharpened {
            open.kind.clone()
        } else {
            kind.unwrap_or_else(|| "unknown".to_string())
        };
        let mut verdict = self.verdict(anomalies, candidates, time_ms, kind, Some(open));
        verdict.id = open.id.clone();
        verdict.opened_ms = open.opened_ms;
        verdict.onset_ms = verdict.onset_ms.min(open.onset_ms);
        incident.verdict = verdict;
        true
    }

    /// A round in which an open incident is not renewed: it stands while its own instance
    /// keeps weak evidence (`supported`), and resolves after `resolve_rounds` quiet rounds.
    /// Returns whether it is still open.
    fn fade(incident: &mut Incident, supported: bool, resolve_rounds: u32) -> bool {
        if supported {
            incident.quiet_rounds = 0;
        } else {
            incident.quiet_rounds += 1;
        }
        incident.quiet_rounds < resolve_rounds
    }

    /// Caller → callee service edges: the configured dependencies, the calls client series
    /// show (a series whose peer label resolves to a known instance), and the callers server
    /// series name (a mesh's destination side; calls taken to stay in a datacenter when the
    /// caller service runs in the callee's, as [`Detector::observed_edges`] draws them).
    fn service_edges(&self) -> ServiceEdges {
        let mut edges = ServiceEdges::new();
        for dependency in &self.dependencies {
            let same = edges
                .entry((dependency.caller.clone(), dependency.callee.clone()))
                .or_insert(dependency.same_dc);
            *same &= dependency.same_dc;
        }
        for (caller, callee) in self.peer_edges() {
            let (Some(caller), Some(callee)) = (self.instances.get(&caller), self.instances.get(&callee)) else {
                continue;
            };
            if caller.service == callee.service {
                continue;
            }
            let same = edges
                .entry((caller.service.clone(), callee.service.clone()))
                .or_insert(true);
            *same &= caller.dc == callee.dc;
        }
        if !self.caller_links.is_empty() {
            let placed: BTreeSet<(&str, &str)> = self
                .instances
                .values()
                .map(|info| (info.service.as_str(), info.dc.as_str()))
                .collect();
            let services: BTreeSet<&str> = placed.iter().map(|(service, _)| *service).collect();
            for (caller, callee) in &self.caller_links {
                let Some(callee) = self.instances.get(callee) else {
                    continue;
                };
                if *caller == callee.service || !services.contains(caller.as_str()) {
                    continue;
                }
                let same = edges.entry((caller.clone(), callee.service.clone())).or_insert(true);
                *same &= placed.contains(&(caller.as_str(), callee.dc.as_str()));
            }
        }
        edges
    }

    /// The instances that reach `start` through `edges` in at most `hops` calls (callers,
    /// directly or through others, when `upward`; callees otherwise), keeping to a datacenter
    /// along edges whose calls stay within one. `usize::MAX` hops: everything reachable.
    fn reach(&self, start: &[&InstanceInfo], edges: &ServiceEdges, upward: bool, hops: usize) -> BTreeSet<String> {
        let mut seen: BTreeSet<(String, Option<String>)> = BTreeSet::new();
        let mut frontier: Vec<(String, Option<String>)> = start
            .iter()
            .map(|info| (info.service.clone(), Some(info.dc.clone())))
            .collect();
        for _ in 0..hops {
            let mut next_frontier = Vec::new();
            for (service, dc) in frontier {
                for ((caller, callee), same_dc) in edges {
                    let (from, to) = if upward { (callee, caller) } else { (caller, callee) };
                    if *from != service {
                        continue;
                    }
                    let next = (to.clone(), if *same_dc { dc.clone() } else { None });
                    if seen.insert(next.clone()) {
                        next_frontier.push(next);
                    }
                }
            }
            if next_frontier.is_empty() {
                break;
            }
            frontier = next_frontier;
        }
        self.instances
            .values()
            .filter(|info| {
                seen.contains(&(info.service.clone(), None))
                    || seen.contains(&(info.service.clone(), Some(info.dc.clone())))
            })
            .map(|info| info.name.clone())
            .collect()
    }

    /// The evidence an incident explains ([`Scope`]): a datacenter or link degradation names
    /// every instance of its datacenters, a host's saturation every instance of the host, a cold
    /// start (a deploy) also every instance of its service that restarts this round.
    fn scope(&self, verdict: &Verdict, edges: &ServiceEdges) -> Scope {
        let named: BTreeSet<String> = if matches!(verdict.kind.as_str(), "dc_degradation" | "link_degradation") {
            self.instances
                .values()
                .filter(|info| verdict.dcs.contains(&info.dc))
                .map(|info| info.name.clone())
                .collect()
        } else if is_host_kind(&verdict.kind) {
            self.instances
                .values()
                .filter(|info| verdict.hosts.contains(&info.host))
                .map(|info| info.name.clone())
                .collect()
        } else if verdict.kind == "cold_start" {
            // A deploy rolls on: an instance of the same service restarting while the deploy's
            // incident is open is that deploy (in any datacenter), not an incident of its own
            // (a second host restarted a round later was left out of the verdict).
            let mut named: BTreeSet<String> = verdict.instances.iter().cloned().collect();
            named.extend(
                self.restarted
                    .iter()
                    .filter(|name| {
                        self.instances
                            .get(*name)
                            .is_some_and(|info| info.service == verdict.service)
                    })
                    .cloned(),
            );
            named
        } else {
            verdict.instances.iter().cloned().collect()
        };
        // A slow database's or cache's host reports its stalled disk at the same time: those
        // anomalies are the incident's (they neither open an incident of their own nor rename
        // this one); what the host reports later is its own trouble.
        let host_exporters = if matches!(verdict.kind.as_str(), "pool_exhaustion" | "slow_node") {
            let hosts: BTreeSet<&str> = named
                .iter()
                .filter_map(|name| self.instances.get(name))
                .map(|info| info.host.as_str())
                .collect();
            let exporters = self
                .instances
                .values()
                .filter(|info| hosts.contains(info.host.as_str()))
                .filter(|info| {
                    self.roles_of(&info.name)
                        .iter()
                        .any(|role| matches!(role, Role::Host | Role::Network))
                })
                .map(|info| info.name.clone())
                .collect();
            (exporters, verdict.onset_ms.saturating_add(self.interval_ms))
        } else {
            (BTreeSet::new(), i64::MIN)
        };
        let infos: Vec<&InstanceInfo> = named.iter().filter_map(|name| self.instances.get(name)).collect();
        let upstream = self.reach(&infos, edges, true, usize::MAX);
        // A direct caller of what the incident names is compared with the other direct callers
        // of its service (they all call the same failing thing); a more distant caller with
        // every upstream instance of its service.
        let direct = self.reach(&infos, edges, true, 1);
        // Per group, the median strength of its instances (no trouble counts 0).
        let mut by_group: BTreeMap<(&str, bool), Vec<f64>> = BTreeMap::new();
        for name in &upstream {
            if let Some(info) = self.instances.get(name) {
                let strength = self.strength.get(name).copied().unwrap_or(0.0);
                by_group
                    .entry((info.service.as_str(), direct.contains(name)))
                    .or_default()
                    .push(strength);
                if direct.contains(name) {
                    // A direct caller also counts among its service's whole upstream.
                    by_group
                        .entry((info.service.as_str(), false))
                        .or_default()
                        .push(strength);
                }
            }
        }
        let medians: BTreeMap<(&str, bool), f64> = by_group
            .into_iter()
            .map(|(service, mut values)| {
                values.sort_by(f64::total_cmp);
                let middle = values.len() / 2;
                let median = if values.len() % 2 == 1 {
                    values[middle]
                } else {
                    (values[middle - 1] + values[middle]) / 2.0
                };
                (service, median)
            })
            .collect();
        let standing_out = upstream
            .iter()
            .filter(|name| {
                let strength = self.strength.get(*name).copied().unwrap_or(0.0);
                let typical = self
                    .instances
                    .get(*name)
                    .and_then(|info| medians.get(&(info.service.as_str(), direct.contains(*name))))
                    .copied()
                    .unwrap_or(0.0);
                strength > 0.0 && strength >= 2.0 * typical
            })
            .cloned()
            .collect();
        Scope {
            downstream: self.reach(&infos, edges, false, usize::MAX),
            load: verdict.kind == "retry_storm",
            named,
            upstream,
            standing_out,
            host_exporters,
        }
    }

    /// The failure kind, from the leader's roles (what its series and its callers' series say
    /// it is, [`Role`]) and its evidence; `transient` for a restart whose trouble has not
    /// lasted (a warm deploy).
    fn kind(&self, anomalies: &[Anomaly], candidates: &[Candidate]) -> Option<String> {
        let leader = candidates.first()?;
        if let Some((one, other)) = self.degraded_link(anomalies) {
            if leader.dc == one || leader.dc == other {
                return Some("link_degradation".to_string());
            }
        }
        if let Some(dc) = self.degraded_dc(anomalies) {
            if dc == leader.dc {
                return Some("dc_degradation".to_string());
            }
        }
        let own: Vec<&Anomaly> = anomalies.iter().filter(|a| a.instance == leader.instance).collect();
        let has = |class: Class| own.iter().any(|a| a.class == class && a.peer.is_none());
        let roles = self.roles_of(&leader.instance);
        let is = |role: Role| roles.contains(&role);
        if (is(Role::Host) || is(Role::Network)) && !self.host_roles(anomalies, &leader.instance, i64::MAX).is_empty() {
            // The host's own exporter leads on its own signals (steal, pressure stall, OOM
            // kills, retransmits): whatever runs on it suffers from it. An exporter that only
            // went unanswered (`up`) says nothing about its host.
            return Some(self.host_kind(anomalies, &leader.host).to_string());
        }
        let kind = if is(Role::Cache) {
            // The node's exporter could not even be scraped in time (`up` down, while a dead
            // node's exporter still answers `redis_up 0`): the node accepts connections but
            // does not answer (SIGSTOP, CLIENT PAUSE ALL, a stuck host).
            if own.iter().any(|a| a.metric == "up" && a.class == Class::Availability) {
                "node_hang"
            } else if has(Class::Availability) {
                "node_loss"
            } else {
                "slow_node"
            }
        } else if is(Role::Database) {
            "pool_exhaustion"
        } else if is(Role::Entry) && (has(Class::Traffic) || has(Class::Errors)) {
            "retry_storm"
        } else if is(Role::Mailbox) && has(Class::Saturation) {
            "mailbox_overload"
        } else if is(Role::Session) {
            "session_loss"
        } else if has(Class::Restart) {
            // A cold start is trouble that outlasts the restart: still at least twice the
            // baseline four rounds on (score 10 on a 10 %-of-median scale). A pre-warmed
            // deploy's blip is over by then.
            let lasting = own.iter().any(|a| {
                matches!(a.class, Class::Latency | Class::Saturation | Class::Errors)
                    && a.rounds >= 4
                    && a.score >= 10.0
            });
            if lasting {
                "cold_start"
            } else {
                "transient"
            }
        } else {
            "unknown"
        };
        // The leader's container is throttled by its CPU quota, and that is where its trouble
        // began: its limit is what slows it, whatever it is (a Redis node, a database, a
        // mailbox). Not when more work came first: a surge of traffic (a retry storm at the
        // entry, which the chain above names, or load spreading to a callee) or a restart (a
        // cold JVM compiling) throttles a container that was fine at its usual load. A starved
        // host does not raise a container's throttling (steal is not charged to the cgroup).
        let kind = if matches!(kind, "unknown" | "slow_node" | "pool_exhaustion" | "mailbox_overload")
            && !has(Class::Traffic)
            && self.throttled_first(&own)
        {
            "cpu_throttling"
        } else {
            kind
        };
        // A starved host slows what runs on it; it does not kill, restart or drop sessions. The
        // host's exporter beside the leader makes it the host's, except under a database: a
        // stalled disk under a database shows in node_exporter too, and is still that
        // database's pool exhaustion (its I/O and the host's CPU are not told apart yet).
        let exporter = kind != "pool_exhaustion";
        if host_may_explain(kind) && self.co_located_with(anomalies, candidates, exporter).len() >= 2 {
            return Some(self.host_kind(anomalies, &leader.host).to_string());
        }
        Some(kind.to_string())
    }

    /// The kind of a host's trouble: `host_network` when the host's own exporter (rules with
    /// `role: host` or `role: network` on `host`) shows anomalies and every one of them is of
    /// a `role: network` rule (interface errors and drops, TCP retransmits), else
    /// `host_saturation` (CPU, memory, I/O; or no word from the host's exporter, only its
    /// instances' slowness).
    fn host_kind(&self, anomalies: &[Anomaly], host: &str) -> &'static str {
        let on_host = |name: &str| self.instances.get(name).is_some_and(|info| info.host == host);
        let roles = self.exporter_roles(anomalies, &on_host, i64::MAX);
        if roles.len() == 1 && roles.contains(&Role::Network) {
            "host_network"
        } else {
            "host_saturation"
        }
    }

    /// The roles (`host`, `network`) of the rules behind `instance`'s own anomalies of class
    /// saturation or errors that began by `by_ms`: what a host's exporter says about its host
    /// (its `up` and traffic say nothing). Empty for an instance that is no host's exporter.
    fn host_roles(&self, anomalies: &[Anomaly], instance: &str, by_ms: i64) -> BTreeSet<Role> {
        self.exporter_roles(anomalies, &|name| name == instance, by_ms)
    }

    /// [`Detector::host_roles`] over every instance `of` accepts.
    fn exporter_roles(&self, anomalies: &[Anomaly], of: &dyn Fn(&str) -> bool, by_ms: i64) -> BTreeSet<Role> {
        let mut roles = BTreeSet::new();
        for anomaly in anomalies.iter().filter(|a| {
            a.peer.is_none()
                && a.onset_ms <= by_ms
                && matches!(a.class, Class::Saturation | Class::Errors)
                && of(&a.instance)
        }) {
            for rule in self.rules.iter().filter(|rule| rule.spec.metric == anomaly.metric) {
                if let Some(role @ (Role::Host | Role::Network)) = rule.spec.role {
                    roles.insert(role);
                }
            }
        }
        roles
    }

    /// The leader's host's instances that suffer on their own, the leader first, when they
    /// belong to at least two services: one host starving every instance placed on it (CPU
    /// steal, memory pressure), not one service's fault. What counts is slowness, failure or
    /// loss (latency, errors, availability), never load (traffic, saturation: a surge upstream
    /// keeps its callees busy). The leader must show it (its own or its callers' towards it);
    /// another instance on the host counts when its own strongest such anomaly is at least
    /// twice the strongest of any instance of its service in its datacenter: a caller that
    /// suffers like its siblings suffers from what they all call. The host's own exporter
    /// (rules with `role: host` or `role: network`, node_exporter) on that host counts, as a
    /// second service, when its own signals ([`Detector::host_roles`]) began no later than an
    /// interval after the leader's trouble: a host that reports its own steal or stalls needs
    /// only one service suffering beside it, or none when it leads. Empty otherwise.
    fn co_located(&self, anomalies: &[Anomaly], candidates: &[Candidate]) -> Vec<String> {
        self.co_located_with(anomalies, candidates, true)
    }

    /// [`Detector::co_located`], counting the host's exporter beside the leader only when
    /// `exporter`.
    fn co_located_with(&self, anomalies: &[Anomaly], candidates: &[Candidate], exporter: bool) -> Vec<String> {
        let Some(leader) = candidates.first() else {
            return Vec::new();
        };
        let trouble =
            |anomaly: &&Anomaly| matches!(anomaly.class, Class::Latency | Class::Errors | Class::Availability);
        // The host's own exporter on the leader's host says itself that it suffers (steal,
        // stalls, OOM kills, retransmits), from before the leader's trouble or with it.
        // From the leader's trouble (its own or its callers' slowness, errors or loss towards
        // it), not from any older anomaly of it (a traffic change an hour before).
        let trouble_onset = anomalies
            .iter()
            .filter(trouble)
            .filter(|a| {
                (a.peer.is_none() && a.instance == leader.instance)
                    || a.peer.as_deref() == Some(leader.instance.as_str())
            })
            .map(|a| a.onset_ms)
            .min()
            .unwrap_or(leader.onset_ms);
        let by_ms = trouble_onset.saturating_add(self.interval_ms);
        let host_says = |candidate: &Candidate| {
            candidate.host == leader.host && !self.host_roles(anomalies, &candidate.instance, by_ms).is_empty()
        };
        let leader_is_host = !self.host_roles(anomalies, &leader.instance, i64::MAX).is_empty();
        let leader_troubled = leader_is_host
            || anomalies.iter().filter(trouble).any(|a| {
                (a.peer.is_none() && a.instance == leader.instance)
                    || a.peer.as_deref() == Some(leader.instance.as_str())
            });
        if !leader_troubled {
            return Vec::new();
        }
        let mut strongest: BTreeMap<&str, f64> = BTreeMap::new();
        for anomaly in anomalies.iter().filter(trouble).filter(|a| a.peer.is_none()) {
            let entry = strongest.entry(anomaly.instance.as_str()).or_default();
            *entry = entry.max(anomaly.score);
        }
        let own = |name: &str| strongest.get(name).copied().unwrap_or(0.0);
        let stands_out = |candidate: &Candidate| {
            let siblings = self
                .instances
                .values()
                .filter(|other| {
                    other.service == candidate.service && other.dc == candidate.dc && other.name != candidate.instance
                })
                .map(|other| own(&other.name))
                .fold(0.0, f64::max);
            own(&candidate.instance) > 0.0 && own(&candidate.instance) >= 2.0 * siblings
        };
        let mut on_host = vec![leader];
        on_host.extend(
            candidates
                .iter()
                .skip(1)
                .filter(|c| c.host == leader.host && (stands_out(c) || (exporter && host_says(c)))),
        );
        let services: BTreeSet<&str> = on_host.iter().map(|c| c.service.as_str()).collect();
        if services.len() >= 2 || leader_is_host {
            on_host.iter().map(|c| c.instance.clone()).collect()
        } else {
            Vec::new()
        }
    }

    /// Two datacenters whose calls to each other slowed or failed in both directions (each
    /// way two or more callers towards two or more instances) while no third datacenter's
    /// calls into either did: the link between them, not either datacenter, is degraded.
    /// Sorted; `None` with fewer than three datacenters (a whole datacenter degraded looks
    /// the same from the only other one).
    fn degraded_link(&self, anomalies: &[Anomaly]) -> Option<(String, String)> {
        let mut calls: BTreeMap<(&str, &str), CallersAndCallees<'_>> = BTreeMap::new();
        for (caller, callee) in self.slow_calls_across_datacenters(anomalies) {
            let entry = calls.entry((caller.dc.as_str(), callee.dc.as_str())).or_default();
            entry.0.insert(caller.name.as_str());
            entry.1.insert(callee.name.as_str());
        }
        let dcs: BTreeSet<&str> = self.instances.values().map(|info| info.dc.as_str()).collect();
        if dcs.len() < 3 {
            return None;
        }
        let degraded = |from: &str, to: &str| {
            calls
                .get(&(from, to))
                .is_some_and(|(callers, callees)| callers.len() >= 2 && callees.len() >= 2)
        };
        for &one in &dcs {
            for &other in dcs.iter().filter(|&&other| other > one) {
                let third_sees = dcs
                    .iter()
                    .filter(|&&third| third != one && third != other)
                    .any(|&third| degraded(third, one) || degraded(third, other));
                if degraded(one, other) && degraded(other, one) && !third_sees {
                    return Some((one.to_string(), other.to_string()));
                }
            }
        }
        None
    }

    /// (caller, callee) of every anomaly that shows a call from one datacenter to another
    /// slowed or failing (latency or errors towards a peer in another datacenter).
    fn slow_calls_across_datacenters<'a>(
        &'a self,
        anomalies: &'a [Anomaly],
    ) -> impl Iterator<Item = (&'a InstanceInfo, &'a InstanceInfo)> + 'a {
        anomalies
            .iter()
            .filter(|anomaly| matches!(anomaly.class, Class::Latency | Class::Errors))
            .filter_map(|anomaly| {
                let caller = self.instances.get(&anomaly.instance)?;
                let callee = self.instances.get(anomaly.peer.as_ref()?)?;
                (caller.dc != callee.dc).then_some((caller, callee))
            })
    }

    /// A datacenter whose calls from other datacenters slowed or failed towards two or more
    /// of its instances while its own instances' calls outwards did too.
    fn degraded_dc(&self, anomalies: &[Anomaly]) -> Option<String> {
        let mut inbound: BTreeMap<&str, CallersAndCallees<'_>> = BTreeMap::new();
        let mut outbound: BTreeMap<&str, usize> = BTreeMap::new();
        for (caller, callee) in self.slow_calls_across_datacenters(anomalies) {
            let entry = inbound.entry(callee.dc.as_str()).or_default();
            entry.0.insert(caller.name.as_str());
            entry.1.insert(callee.name.as_str());
            *outbound.entry(caller.dc.as_str()).or_default() += 1;
        }
        inbound
            .into_iter()
            .filter(|(dc, (callers, callees))| {
                callers.len() >= 2 && callees.len() >= 2 && outbound.get(dc).copied().unwrap_or(0) >= 2
            })
            .max_by_key(|(_, (callers, _))| callers.len())
            .map(|(dc, _)| dc.to_string())
    }

    /// The verdict of `kind` on `anomalies` and their `candidates` (the leader first, at least
    /// one), judged at `time_ms`; `previous` is the incident's verdict before this round, if
    /// it is open.
    fn verdict(
        &self,
        anomalies: &[Anomaly],
        candidates: &[Candidate],
        time_ms: i64,
        kind: String,
        previous: Option<&Verdict>,
    ) -> Verdict {
        let leader = &candidates[0];
        let top: f64 = candidates.iter().take(3).map(|c| c.score).sum();
        let share = if top > 0.0 { leader.score / top } else { 0.0 };
        let link = if kind == "link_degradation" {
            self.degraded_link(anomalies).or_else(|| {
                previous.and_then(|previous| Some((previous.dcs.first()?.clone(), previous.dcs.get(1)?.clone())))
            })
        } else {
            None
        };
        let (service, instances) = if kind == "dc_degradation" {
            let in_dc: Vec<String> = candidates
                .iter()
                .filter(|c| c.dc == leader.dc)
                .map(|c| c.instance.clone())
                .collect();
            ("network".to_string(), in_dc)
        } else if let Some((one, other)) = &link {
            let at_either_end: Vec<String> = candidates
                .iter()
                .filter(|c| &c.dc == one || &c.dc == other)
                .map(|c| c.instance.clone())
                .collect();
            ("network".to_string(), at_either_end)
        } else if is_host_kind(&kind) {
            // Every strong candidate on the leader's host, and what the incident named there
            // while it is still a candidate.
            let mut on_host = self.co_located(anomalies, candidates);
            if on_host.is_empty() {
                on_host.push(leader.instance.clone());
            }
            for name in previous.map_or(&[][..], |previous| &previous.instances[..]) {
                let there = candidates.iter().any(|c| &c.instance == name && c.host == leader.host);
                if there && !on_host.contains(name) {
                    on_host.push(name.clone());
                }
            }
            ("host".to_string(), on_host)
        } else if kind == "cold_start" {
            // A deploy restarts several instances: name every restarted instance of the
            // leader's service that is a candidate, and only those. A restart's own evidence
            // fades before its slowness does, so an open cold start keeps naming the
            // instances it named while they are still candidates; it never names nobody.
            let named_before = |instance: &str| {
                previous
                    .is_some_and(|open| open.kind == "cold_start" && open.instances.iter().any(|name| name == instance))
            };
            let mut restarted: Vec<String> = candidates
                .iter()
                .filter(|c| {
                    c.service == leader.service
                        && (named_before(&c.instance)
                            || anomalies
                                .iter()
                                .any(|a| a.instance == c.instance && a.class == Class::Restart))
                })
                .map(|c| c.instance.clone())
                .collect();
            if restarted.is_empty() {
                restarted.push(leader.instance.clone());
            }
            (leader.service.clone(), restarted)
        } else if kind == "cpu_throttling" {
            // A limit set too low reaches every container a deploy rolled it to: name each
            // candidate of the leader's service whose own throttling is anomalous, and keep
            // naming what the incident named while it is still a candidate.
            let named_before = |instance: &str| {
                previous.is_some_and(|open| open.kind == kind && open.instances.iter().any(|name| name == instance))
            };
            let mut throttled = vec![leader.instance.clone()];
            for candidate in candidates.iter().filter(|c| c.service == leader.service) {
                let own_throttling = anomalies.iter().any(|a| {
                    a.instance == candidate.instance
                        && a.peer.is_none()
                        && a.class == Class::Saturation
                        && self.rule_role(&a.metric) == Some(Role::Container)
                });
                if (own_throttling || named_before(&candidate.instance)) && !throttled.contains(&candidate.instance) {
                    throttled.push(candidate.instance.clone());
                }
            }
            (leader.service.clone(), throttled)
        } else {
            // An incident of one kind across several instances of one service (a retry storm
            // at every API instance of a datacenter, two nodes lost together) keeps naming the
            // siblings it named while they are candidates.
            let mut named = vec![leader.instance.clone()];
            for name in previous
                .filter(|previous| previous.kind == kind)
                .map_or(&[][..], |p| &p.instances[..])
            {
                let sibling = candidates
                    .iter()
                    .any(|c| &c.instance == name && c.service == leader.service && c.dc == leader.dc);
                if sibling && !named.contains(name) {
                    named.push(name.clone());
                }
            }
            (leader.service.clone(), named)
        };
        let mut hosts: Vec<String> = Vec::new();
        for instance in &instances {
            if let Some(candidate) = candidates.iter().find(|c| &c.instance == instance) {
                if !hosts.contains(&candidate.host) {
                    hosts.push(candidate.host.clone());
                }
            }
        }
        let relevant: Vec<Anomaly> = anomalies
            .iter()
            .filter(|a| a.instance == leader.instance || a.peer.as_deref() == Some(leader.instance.as_str()))
            .take(12)
            .cloned()
            .collect();
        let dcs = match &link {
            Some((one, other)) => vec![one.clone(), other.clone()],
            None => {
                let mut dcs: Vec<String> = instances
                    .iter()
                    .filter_map(|name| self.instances.get(name))
                    .map(|info| info.dc.clone())
                    .collect();
                dcs.push(leader.dc.clone());
                dcs.sort();
                dcs.dedup();
                dcs
            }
        };
        let confidence = self.settings.confidence.probability(share, leader.score, &kind);
        Verdict {
            id: format!("{time_ms}-{}", instances.first().map_or("", String::as_str)),
            kind,
            dc: leader.dc.clone(),
            dcs,
            hosts,
            service,
            instances,
            // Three decimals: a share, not a measurement (`0.92`, never `0.9198606271777003`
            // in the tables, the API and alerts).
            confidence: (confidence * 1000.0).round() / 1000.0,
            leader_share: (share * 1000.0).round() / 1000.0,
            candidates: candidates.iter().take(5).cloned().collect(),
            evidence: relevant,
            onset_ms: candidates.iter().take(1).map(|c| c.onset_ms).min().unwrap_or(time_ms),
            opened_ms: time_ms,
        }
    }
}

/// Whether the first two of `candidates` (best first) have the same score, to a relative
/// 1e-9: the first leads by its name alone.
fn tied(candidates: &[Candidate]) -> bool {
    match candidates {
        [first, second, ..] => (first.score - second.score).abs() <= 1e-9 * first.score.abs().max(1.0),
        _ => false,
    }
}

/// Whether `kind` names a host rather than a service: `host_saturation` (a starved host: CPU,
/// memory) or `host_network` (its network interface or TCP stack losing packets).
fn is_host_kind(kind: &str) -> bool {
    matches!(kind, "host_saturation" | "host_network")
}

/// Whether one instance's trouble of `kind` may be its host's: slowness, a hang, exhausted
/// pools, a swollen mailbox, a surge of retries or trouble of no known kind, all of which a
/// starved host (CPU steal, memory pressure) causes. A dead process (`node_loss`, whose own
/// exporter reports it down), a restart (`cold_start`, `transient`), dropped sessions and
/// the network's kinds are never renamed `host_saturation`.
fn host_may_explain(kind: &str) -> bool {
    matches!(
        kind,
        "slow_node" | "node_hang" | "pool_exhaustion" | "mailbox_overload" | "retry_storm" | "unknown"
    )
}

/// Whether an open verdict of kind `open` is renamed `new` while its instance still leads:
/// only a vaguer kind (`slow_node`, `unknown`) gives way to a lost node (`node_hang`,
/// `node_loss`), and one instance's trouble (`slow_node`, `pool_exhaustion`, `unknown`) to its
/// host's (`host_saturation`, once other services' instances on the host suffer too); every
/// other rename waits for a new verdict.
fn sharpens(open: &str, new: &str) -> bool {
    (matches!(open, "slow_node" | "unknown") && matches!(new, "node_hang" | "node_loss"))
        || (matches!(open, "slow_node" | "pool_exhaustion" | "unknown") && is_host_kind(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, dc: &str, host: &str, service: &str) -> InstanceInfo {
        InstanceInfo {
            name: name.into(),
            dc: dc.into(),
            host: host.into(),
            service: service.into(),
        }
    }

    fn anomaly(instance: &str, class: Class, peer: Option<&str>, onset_ms: i64) -> Anomaly {
        Anomaly {
            instance: instance.into(),
            metric: "m".into(),
            class,
            peer: peer.map(str::to_string),
            score: 10.0,
            onset_ms,
            rounds: 1,
        }
    }

    /// A round at 10 s of `anomalies` ranked by `detector`, before its lifecycle step.
    fn ranked(detector: &Detector, anomalies: Vec<Anomaly>) -> Assessment {
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
    fn named(assessment: &Assessment) -> Vec<Vec<String>> {
        assessment
            .incidents
            .iter()
            .map(|verdict| verdict.instances.clone())
            .collect()
    }

    /// Three backends and two Redis nodes: (name, datacenter, host, service).
    const FIVE: [(&str, &str, &str, &str); 5] = [
        ("b1", "dc-1", "h1", "backend"),
        ("b2", "dc-2", "h2", "backend"),
        ("b3", "dc-3", "h3", "backend"),
        ("r1", "dc-1", "h4", "redis"),
        ("r2", "dc-2", "h5", "redis"),
    ];

    fn detector() -> Detector {
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

    /// Samples fed with their series ([`Detector::observe_series`], the live collector's and
    /// replay's path, which works out a series' signals once) are judged exactly as the same
    /// samples fed by metric and labels ([`Detector::observe`]): every round's assessment is
    /// equal, through a mean with a peer, a counter whose `match` keeps one of two series, a
    /// gauge and series no rule reads, while one Redis node slows and its callers' pools queue.
    #[test]
    fn samples_fed_with_their_series_are_judged_as_by_metric_and_labels() {
        let rules = crate::rules::parse(concat!(
            "signals:\n",
            "  - {metric: lat, kind: mean, class: latency, bad: up, peer: {label: remote}, floor: 0.01}\n",
            "  - {metric: errs_total, kind: counter, class: errors, bad: up, match: {outcome: error}, floor: 0.5}\n",
            "  - {metric: waiters, kind: gauge, class: saturation, bad: up, peer: {label: name}, floor: 1}\n",
        ))
        .unwrap();
        let dependencies = vec![Dependency {
            caller: "backend".into(),
            callee: "redis".into(),
            same_dc: false,
        }];
        let mut by_labels = Detector::new(rules.clone(), dependencies.clone(), 10_000, Settings::default());
        let mut by_series = Detector::new(rules, dependencies, 10_000, Settings::default());
        let placement = epicenter_store::config::PlacementConfig::default();
        let series = |name: &str, labels: &[(&str, &str)]| {
            let labels = labels
                .iter()
                .map(|(label, value)| (label.to_string(), value.to_string()))
                .collect();
            Arc::new(Series::new(name.to_string(), labels, &placement))
        };
        let mut opened = Vec::new();
        for round in 0..50_i64 {
            let time_ms = round * 10_000;
            for (name, dc, host, service) in FIVE {
                let mut samples = vec![(series("up", &[("instance", name)]), 1.0)];
                if service == "backend" {
                    let calls = 100.0 * round as f64;
                    for remote in ["r1", "r2"] {
                        // r2 answers in 2 ms, then 200 ms from round 40 on.
                        let seconds_per_call = if remote == "r2" && round >= 40 { 0.2 } else { 0.002 };
                        let spent = 0.002 * 100.0 * round.min(40) as f64
                            + seconds_per_call * 100.0 * (round - 40).max(0) as f64;
                        let labels = [("instance", name), ("remote", remote)];
                        samples.push((
                            series("lat_sum", &labels),
                            if round >= 40 { spent } else { 0.002 * calls },
                        ));
                        samples.push((series("lat_count", &labels), calls));
                        let waiting = if remote == "r2" && round >= 40 { 6.0 } else { 0.0 };
                        samples.push((series("waiters", &[("instance", name), ("name", remote)]), waiting));
                    }
                    samples.push((series("errs_total", &[("instance", name), ("outcome", "error")]), 0.0));
                    samples.push((series("errs_total", &[("instance", name), ("outcome", "ok")]), calls));
                }
                let instance = info(name, dc, host, service);
                by_labels.observe(
                    time_ms,
                    &instance,
                    samples
                        .iter()
                        .map(|(series, value)| (series.name.as_str(), series.labels.clone(), *value)),
                );
                by_series.observe_series(time_ms, &instance, &samples, true);
            }
            let expected = by_labels.assess(time_ms);
            assert_eq!(by_series.assess(time_ms), expected, "round {round}");
            opened.extend(expected.opened_incidents().map(|verdict| verdict.instances.clone()));
        }
        // Not equal by judging nothing: r2's slowness opened its incident on both.
        assert_eq!(opened, [vec!["r2".to_string()]]);
        assert_eq!(by_series.signals.len(), by_labels.signals.len());
    }

    /// A mesh's destination-side series name the calling service: with no dependencies
    /// configured, they give service edges (same-datacenter where the caller runs in the
    /// callee's datacenter) and instance edges from the caller's instances there; a caller
    /// no scraped instance belongs to (an ingress gateway) gives none.
    #[test]
    fn server_series_naming_their_caller_give_the_call_graph() {
        let rules = crate::rules::parse(
            "signals:\n  - {metric: lat, kind: gauge, class: latency, bad: up, floor: 1, caller: {label: source_workload}}\n",
        )
        .unwrap();
        let mut detector = Detector::new(rules, Vec::new(), 10_000, Settings::default());
        let series = |caller: &str| -> Vec<(&'static str, BTreeMap<String, String>, f64)> {
            vec![("lat", [("source_workload".to_string(), caller.to_string())].into(), 1.0)]
        };
        for (name, dc, service) in [
            ("api-1", "dc-1", "api"),
            ("api-2", "dc-1", "api"),
            ("api-3", "dc-2", "api"),
            ("web-1", "dc-3", "web"),
        ] {
            detector.observe(0, &info(name, dc, name, service), series("istio-ingressgateway"));
        }
        // backend-1 in dc-1 is called by api (which runs there) and by web (which does not).
        detector.observe(0, &info("backend-1", "dc-1", "h9", "backend"), series("api"));
        detector.observe(0, &info("backend-1", "dc-1", "h9", "backend"), series("web"));
        // backend-2 in dc-3: api does not run there, so every api instance may call it.
        detector.observe(0, &info("backend-2", "dc-3", "h8", "backend"), series("api"));
        let edges = detector.service_edges();
        assert_eq!(
            edges
                .iter()
                .map(|(edge, same)| (edge.0.as_str(), edge.1.as_str(), *same))
                .collect::<Vec<_>>(),
            vec![("api", "backend", false), ("web", "backend", false)]
        );
        let observed = detector.observed_edges();
        let expected: BTreeSet<(String, String)> = [
            ("api-1", "backend-1"),
            ("api-2", "backend-1"),
            ("web-1", "backend-1"),
            ("api-1", "backend-2"),
            ("api-2", "backend-2"),
            ("api-3", "backend-2"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(observed, expected);
        assert!(detector.peer_edges().is_empty());
        // Only backend-1's callers: api stays in dc-1.
        let mut local = Detector::new(
            crate::rules::parse(
                "signals:\n  - {metric: lat, kind: gauge, class: latency, bad: up, floor: 1, caller: {label: source_workload}}\n",
            )
            .unwrap(),
            Vec::new(),
            10_000,
            Settings::default(),
        );
        local.observe(0, &info("api-1", "dc-1", "h1", "api"), Vec::new());
        local.observe(0, &info("api-3", "dc-2", "h3", "api"), Vec::new());
        local.observe(0, &info("backend-1", "dc-1", "h9", "backend"), series("api"));
        assert_eq!(
            local.service_edges().get(&("api".to_string(), "backend".to_string())),
            Some(&true)
        );
        assert_eq!(
            local.observed_edges().into_iter().collect::<Vec<_>>(),
            vec![("api-1".to_string(), "backend-1".to_string())]
        );
    }

    #[test]
    fn callers_pointing_at_a_peer_outrank_the_callers_themselves() {
        let detector = detector();
        // Every backend is slow towards r2 and busy itself; r1 only sees more connections.
        let anomalies = vec![
            anomaly("b1", Class::Latency, Some("r2"), 0),
            anomaly("b2", Class::Latency, Some("r2"), 0),
            anomaly("b3", Class::Saturation, Some("r2"), 0),
            anomaly("b1", Class::Saturation, None, 0),
            anomaly("b2", Class::Saturation, None, 0),
            anomaly("b3", Class::Saturation, None, 0),
            anomaly("r1", Class::Traffic, None, 0),
            anomaly("b1", Class::Traffic, Some("r1"), 0),
        ];
        let ranked = detector.rank(&anomalies);
        assert_eq!(ranked[0].instance, "r2");
        // 3 callers x 2 each; the backends' own saturation is shared by all siblings (x0.3).
        assert!((ranked[0].score - 6.0).abs() < 1e-9, "{ranked:?}");
        let b1 = ranked.iter().find(|c| c.instance == "b1").unwrap();
        assert!((b1.score - 0.6).abs() < 1e-9, "{ranked:?}");
        // Traffic towards r1 is load, not evidence against it: only its own 0.5.
        let r1 = ranked.iter().find(|c| c.instance == "r1").unwrap();
        assert!((r1.score - 0.5).abs() < 1e-9, "{ranked:?}");
    }

    #[test]
    fn an_earlier_onset_breaks_a_tie_and_load_at_the_entry_counts() {
        let detector = detector();
        let ranked = detector.rank(&[
            anomaly("r1", Class::Saturation, None, 0),
            anomaly("r2", Class::Saturation, None, 20_000),
        ]);
        assert_eq!(ranked[0].instance, "r1");
        // Both redis nodes saturated: shared by all siblings (x0.3); r1 leads by two
        // intervals (+20 %).
        assert!((ranked[0].score - 2.0 * 0.3 * 1.2).abs() < 1e-9, "{ranked:?}");
        assert!((ranked[1].score - 2.0 * 0.3).abs() < 1e-9, "{ranked:?}");
        // backend is called by nobody here: its own traffic weighs 2, a redis node's 0.5.
        let ranked = detector.rank(&[
            anomaly("b1", Class::Traffic, None, 0),
            anomaly("r1", Class::Traffic, None, 0),
        ]);
        assert_eq!(ranked[0].instance, "b1");
        assert!(
            (ranked[0].score - 2.0).abs() < 1e-9 && (ranked[1].score - 0.5).abs() < 1e-9,
            "{ranked:?}"
        );
    }

    /// The hosts a verdict names are those of its instances, never an alternative's; the
    /// alternatives stay ranked behind them for AC@k.
    #[test]
    fn a_verdict_names_the_hosts_of_its_instances_only() {
        let detector = detector();
        let anomalies = vec![
            anomaly("b1", Class::Latency, Some("r2"), 0),
            anomaly("b2", Class::Latency, Some("r2"), 0),
            anomaly("b3", Class::Saturation, None, 0),
            anomaly("r1", Class::Traffic, None, 0),
        ];
        let candidates = detector.rank(&anomalies);
        assert_eq!(candidates[0].instance, "r2");
        assert!(candidates.len() >= 3, "{candidates:?}");
        let verdict = detector.verdict(&anomalies, &candidates, 10_000, "slow_node".to_string(), None);
        assert_eq!(verdict.instances, ["r2"]);
        assert_eq!(verdict.hosts, ["h5"]);
        let mut expected = vec!["h5".to_string()];
        for candidate in &candidates {
            if !expected.contains(&candidate.host) {
                expected.push(candidate.host.clone());
            }
        }
        assert!(expected.len() >= 3, "{expected:?}");
        assert_eq!(verdict.ranked_hosts(), expected);
    }

    /// A cold start whose restart evidence has faded (the restarts are minutes old, the
    /// slowness is not) keeps naming the restarted instances, and never names nobody.
    #[test]
    fn a_cold_start_keeps_naming_its_instances_after_the_restart_evidence_fades() {
        let detector = detector();
        let slow = |instance: &str| anomaly(instance, Class::Latency, None, 0);
        let restarted = |instance: &str| anomaly(instance, Class::Restart, None, 0);
        let judged = |anomalies: Vec<Anomaly>, previous: Option<&Verdict>| {
            let candidates = detector.rank(&anomalies);
            detector.verdict(&anomalies, &candidates, 10_000, "cold_start".to_string(), previous)
        };
        let verdict = judged(vec![slow("b1"), slow("b2"), restarted("b1"), restarted("b2")], None);
        let mut named = verdict.instances.clone();
        named.sort();
        assert_eq!(named, ["b1", "b2"]);
        // Rounds later: still slow, no restart anomaly any more.
        let later = || vec![slow("b1"), slow("b2")];
        let verdict = judged(later(), Some(&verdict));
        let mut named = verdict.instances.clone();
        named.sort();
        assert_eq!(named, ["b1", "b2"], "{verdict:?}");
        let mut hosts = verdict.hosts.clone();
        hosts.sort();
        assert_eq!(hosts, ["h1", "h2"]);
        // Without an open verdict to go on, the leader is named rather than nobody.
        let verdict = judged(later(), None);
        assert_eq!(verdict.instances.len(), 1, "{verdict:?}");
        assert_eq!(verdict.hosts.len(), 1, "{verdict:?}");
    }

    /// A deploy that reaches a second datacenter a round after the first: the open cold start
    /// names the instance restarted later too, not an incident of its own (tests/real_apps.rs
    /// named one of two deployed hosts in two runs out of three before).
    #[test]
    fn a_cold_start_takes_in_its_service_restarting_a_round_later_elsewhere() {
        let mut detector = detector();
        // Restarted and still slow four rounds on: a cold start, not a transient restart.
        let lasting = |instance: &str, class: Class| Anomaly {
            rounds: 4,
            ..anomaly(instance, class, None, 0)
        };
        let deploy = |instance: &str| {
            vec![
                anomaly(instance, Class::Restart, None, 0),
                lasting(instance, Class::Latency),
                lasting(instance, Class::Errors),
            ]
        };
        let mut round = |anomalies: Vec<Anomaly>| {
            let mut assessment = ranked(&detector, anomalies);
            detector.lifecycle(&mut assessment);
            assessment
        };
        let mut opened = round(deploy("b1"));
        for _ in 0..6 {
            if !opened.incidents.is_empty() {
                break;
            }
            opened = round(deploy("b1"));
        }
        assert_eq!(opened.incidents.len(), 1, "{opened:?}");
        assert_eq!(opened.incidents[0].kind, "cold_start", "{opened:?}");
        assert_eq!(named(&opened), [["b1"]]);
        let id = opened.incidents[0].id.clone();
        // b3 (dc-3) restarts a round later, b1 is still slow: within the rounds a new leader
        // needs to confirm (weak evidence: 6), the same incident names both (before, b3's
        // evidence was no incident's: it opened one of its own).
        let mut later = round([deploy("b3"), vec![lasting("b1", Class::Latency)]].concat());
        for _ in 0..8 {
            if later
                .incidents
                .first()
                .is_some_and(|verdict| verdict.instances.len() == 2)
            {
                break;
            }
            later = round([deploy("b3"), vec![lasting("b1", Class::Latency)]].concat());
        }
        let mut names = named(&later);
        names.iter_mut().for_each(|names| names.sort());
        assert_eq!(names, [["b1", "b3"]], "{later:?}");
        assert_eq!(later.incidents[0].id, id);
        assert_eq!(later.incidents[0].kind, "cold_start");
        let mut hosts = later.incidents[0].hosts.clone();
        hosts.sort();
        assert_eq!(hosts, ["h1", "h3"]);
    }

    /// Behind, strong evidence neither opens a verdict nor takes an open one over; the
    /// leader's rounds still count, so what outlasts the hold opens in the first round on time.
    #[test]
    fn a_detector_that_is_behind_holds_new_verdicts() {
        let mut detector = detector();
        let round = |detector: &mut Detector, target: &str| {
            // Two callers slow and one saturated towards `target`: score 6, not latency alone.
            let anomalies = vec![
                anomaly("b1", Class::Latency, Some(target), 0),
                anomaly("b2", Class::Latency, Some(target), 0),
                anomaly("b3", Class::Saturation, Some(target), 0),
            ];
            let mut assessment = ranked(detector, anomalies);
            detector.lifecycle(&mut assessment);
            assessment
        };
        // On time, the same evidence opens in its second round (confirm_rounds = 2).
        let mut on_time = self::detector();
        assert!(round(&mut on_time, "r2").incidents.is_empty());
        assert_eq!(round(&mut on_time, "r2").opened.len(), 1);

        detector.set_behind(true);
        for _ in 0..4 {
            let held = round(&mut detector, "r2");
            assert!(
                held.held && held.incidents.is_empty() && held.opened.is_empty(),
                "{held:?}"
            );
        }
        detector.set_behind(false);
        let opened = round(&mut detector, "r2");
        assert!(opened.opened.len() == 1 && !opened.held, "{opened:?}");
        assert_eq!(named(&opened), [["r2"]]);
        let id = opened.incidents[0].id.clone();

        // Behind again, r1's evidence (a sibling of r2, strong enough to take the incident
        // over once r2's is gone) waits.
        detector.set_behind(true);
        for _ in 0..3 {
            let held = round(&mut detector, "r1");
            assert_eq!(named(&held), [["r2"]], "{held:?}");
        }
        detector.set_behind(false);
        let taken = round(&mut detector, "r1");
        assert_eq!(named(&taken), [["r1"]], "{taken:?}");
        // Taken over, not a second incident: the same id, nothing opened.
        assert_eq!(taken.incidents[0].id, id);
        assert!(taken.opened.is_empty(), "{taken:?}");
    }

    /// A second fault while the first is open opens an incident of its own in the time a lone
    /// fault takes; the callers' own symptoms, explained by the open incidents, open nothing;
    /// the first resolves on its own while the second stays open.
    #[test]
    fn a_second_fault_opens_its_own_incident_and_each_resolves_on_its_own() {
        let mut detector = detector();
        let towards = |target: &str, class: Class| {
            ["b1", "b2", "b3"]
                .into_iter()
                .map(|caller| anomaly(caller, class, Some(target), 0))
                .collect::<Vec<_>>()
        };
        // The callers' own saturation: shared by every backend, a consequence.
        let busy = || {
            ["b1", "b2", "b3"]
                .into_iter()
                .map(|caller| anomaly(caller, Class::Saturation, None, 0))
                .collect::<Vec<_>>()
        };
        let round = |detector: &mut Detector, anomalies: Vec<Anomaly>| {
            let mut assessment = ranked(detector, anomalies);
            detector.lifecycle(&mut assessment);
            assessment
        };
        let first = || [towards("r2", Class::Latency), towards("r2", Class::Errors), busy()].concat();
        assert!(round(&mut detector, first()).incidents.is_empty());
        let opened = round(&mut detector, first());
        assert_eq!(named(&opened), [["r2"]]);
        let r2 = opened.incidents[0].id.clone();
        // r1 fails too, r2 still does: two rounds later, a second incident; r2's stays.
        let both = || [first(), towards("r1", Class::Saturation)].concat();
        let waiting = round(&mut detector, both());
        assert_eq!(named(&waiting), [["r2"]], "{waiting:?}");
        let second = round(&mut detector, both());
        assert_eq!(named(&second), [vec!["r2"], vec!["r1"]], "{second:?}");
        assert_eq!(second.opened.len(), 1);
        assert_eq!(second.opened_incidents().next().unwrap().instances, ["r1"]);
        assert_eq!(second.incidents[0].id, r2);
        assert_eq!(second.incidents[1].hosts, ["h4"]);
        // r2 recovers: its incident resolves after `resolve_rounds` quiet rounds, r1's stays.
        let only_r1 = || [towards("r1", Class::Saturation), busy()].concat();
        for _ in 1..Settings::default().resolve_rounds {
            let round = round(&mut detector, only_r1());
            assert_eq!(named(&round), [vec!["r2"], vec!["r1"]], "{round:?}");
        }
        let resolved = round(&mut detector, only_r1());
        assert_eq!(named(&resolved), [["r1"]], "{resolved:?}");
        assert_eq!(resolved.resolved.len(), 1);
        assert_eq!(resolved.resolved[0].id, r2);
    }

    /// Backends (3 per datacenter) calling Redis nodes (2 per datacenter) in 3 datacenters,
    /// and one database per datacenter on the second Redis node's host.
    fn three_datacenters() -> Detector {
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

    /// Calls between dc-1 and dc-2 slow both ways while dc-3's calls into both stay fine: the
    /// link, naming both datacenters. dc-3's callers slow too: dc-2 as a whole.
    #[test]
    fn a_link_is_told_from_a_datacenter_by_a_third_datacenters_calls() {
        let detector = three_datacenters();
        let slow = |caller: &str, node: &str| anomaly(caller, Class::Latency, Some(node), 0);
        let mut between = Vec::new();
        for caller in ["b11", "b12", "b13"] {
            between.push(slow(caller, "r21"));
            between.push(slow(caller, "r22"));
        }
        for caller in ["b21", "b22", "b23"] {
            between.push(slow(caller, "r11"));
            between.push(slow(caller, "r12"));
        }
        assert_eq!(detector.degraded_link(&between), Some(("dc-1".into(), "dc-2".into())));
        let candidates = detector.rank(&between);
        assert_eq!(
            detector.kind(&between, &candidates).as_deref(),
            Some("link_degradation")
        );
        let verdict = detector.verdict(&between, &candidates, 10_000, "link_degradation".into(), None);
        assert_eq!(verdict.dcs, ["dc-1", "dc-2"]);
        assert_eq!(verdict.service, "network");
        assert!(verdict
            .instances
            .iter()
            .all(|name| name.starts_with("r1") || name.starts_with("r2")));
        // dc-3's callers see dc-2 slow too: not a link any more.
        let mut whole = between.clone();
        for caller in ["b31", "b32"] {
            whole.push(slow(caller, "r21"));
            whole.push(slow(caller, "r22"));
        }
        assert_eq!(detector.degraded_link(&whole), None);
    }

    /// A Redis node and the database on one host both slow: the host. The callers of the
    /// database in its datacenter, all slow alike, are not evidence against the host; load
    /// (saturation) never is.
    #[test]
    fn a_host_is_named_when_instances_of_two_services_on_it_suffer_more_than_their_siblings() {
        // r22 and d2 share host h25; a media instance is placed there too.
        let mut detector = three_datacenters();
        detector.observe(0, &info("m25", "dc-2", "h25", "media"), Vec::new());
        let slow_node = |caller: &str| anomaly(caller, Class::Latency, Some("r22"), 0);
        let own = |instance: &str, class: Class, score: f64| Anomaly {
            score,
            ..anomaly(instance, class, None, 0)
        };
        let mut anomalies: Vec<Anomaly> = ["b11", "b21", "b31"].into_iter().map(slow_node).collect();
        anomalies.push(own("m25", Class::Latency, 30.0));
        let candidates = detector.rank(&anomalies);
        assert_eq!(candidates[0].instance, "r22");
        assert_eq!(detector.co_located(&anomalies, &candidates), ["r22", "m25"]);
        assert_eq!(
            detector.kind(&anomalies, &candidates).as_deref(),
            Some("host_saturation")
        );
        let verdict = detector.verdict(&anomalies, &candidates, 10_000, "host_saturation".into(), None);
        assert_eq!(
            (verdict.service.as_str(), verdict.hosts.as_slice()),
            ("host", &["h25".to_string()][..])
        );
        // The media instance busy, not slow: load, not the host.
        let mut busy = anomalies.clone();
        busy.retain(|a| a.instance != "m25");
        busy.push(own("m25", Class::Saturation, 30.0));
        let candidates = detector.rank(&busy);
        assert!(detector.co_located(&busy, &candidates).is_empty());
        // A backend on the same host (b24) slow like every other dc-2 backend: it suffers
        // from what they all call, not from the host. Slow alone, it stands out.
        detector.observe(0, &info("b24", "dc-2", "h25", "backend"), Vec::new());
        let mut callers: Vec<Anomaly> = ["b11", "b21", "b31"].into_iter().map(slow_node).collect();
        callers.push(own("b24", Class::Latency, 30.0));
        let candidates = detector.rank(&callers);
        assert_eq!(detector.co_located(&callers, &candidates), ["r22", "b24"]);
        for backend in ["b21", "b22", "b23"] {
            callers.push(own(backend, Class::Latency, 30.0));
        }
        let candidates = detector.rank(&callers);
        assert_eq!(candidates[0].instance, "r22");
        assert!(detector.co_located(&callers, &candidates).is_empty(), "{candidates:?}");
    }

    /// A host's own exporter (rules with `role: host` or `role: network`) speaks for its host:
    /// leading, its host is named, `host_network` when all it shows is of `role: network`
    /// rules (retransmits), `host_saturation` when anything else is in it (steal); beside a
    /// slow backend on its host, it makes that backend's trouble the host's, with the backend
    /// the only service suffering.
    #[test]
    fn a_host_s_own_exporter_names_the_host_and_the_kind_of_its_trouble() {
        let rules = crate::rules::parse(
            "signals:\n  - {metric: node_cpu_seconds_total, kind: counter, class: saturation, bad: up, match: {mode: steal}, floor: 0.05, role: host}\n  - {metric: node_netstat_Tcp_RetransSegs, kind: counter, class: errors, bad: up, floor: 5, role: network}\n",
        )
        .unwrap();
        let mut detector = Detector::new(rules, Vec::new(), 10_000, Settings::default());
        let steal_labels: BTreeMap<String, String> = [("cpu", "0"), ("mode", "steal")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        detector.observe(
            0,
            &info("node-1", "dc-1", "h1", "node"),
            [
                ("node_cpu_seconds_total", steal_labels, 1.0),
                ("node_netstat_Tcp_RetransSegs", BTreeMap::new(), 1.0),
            ],
        );
        for (name, host) in [("b1", "h1"), ("b2", "h2"), ("b3", "h3")] {
            detector.observe(0, &info(name, "dc-1", host, "backend"), Vec::new());
        }
        let of = |instance: &str, metric: &str, class: Class, score: f64| Anomaly {
            metric: metric.into(),
            score,
            ..anomaly(instance, class, None, 0)
        };
        let retransmits = of("node-1", "node_netstat_Tcp_RetransSegs", Class::Errors, 40.0);
        let steal = of("node-1", "node_cpu_seconds_total", Class::Saturation, 40.0);
        let kind = |anomalies: &[Anomaly]| {
            let candidates = detector.rank(anomalies);
            (candidates[0].instance.clone(), detector.kind(anomalies, &candidates))
        };
        assert_eq!(
            kind(std::slice::from_ref(&retransmits)),
            ("node-1".into(), Some("host_network".into()))
        );
        assert_eq!(
            kind(&[retransmits.clone(), steal.clone()]),
            ("node-1".into(), Some("host_saturation".into()))
        );
        // A slow backend leads; its host's exporter reports steal: the host's trouble, though
        // no second service on h1 suffers. Without the exporter's word it is the backend's.
        let slow = of("b1", "m", Class::Latency, 200.0);
        let mild_steal = of("node-1", "node_cpu_seconds_total", Class::Saturation, 6.0);
        assert_eq!(
            kind(&[slow.clone(), mild_steal]),
            ("b1".into(), Some("host_saturation".into()))
        );
        assert_eq!(kind(&[slow.clone(), steal]).1, Some("host_saturation".into()));
        assert_eq!(kind(std::slice::from_ref(&slow)), ("b1".into(), Some("unknown".into())));
        // The exporter's own steal began minutes after the backend's trouble: not its cause.
        let late_steal = Anomaly {
            onset_ms: 300_000,
            ..of("node-1", "node_cpu_seconds_total", Class::Saturation, 6.0)
        };
        assert_eq!(kind(&[slow, late_steal]), ("b1".into(), Some("unknown".into())));
        // An exporter that only went unanswered says nothing about its host.
        let unanswered = of("node-1", "up", Class::Availability, 40.0);
        assert_eq!(kind(&[unanswered]), ("node-1".into(), Some("unknown".into())));
    }

    /// An instance's placement is its latest batch's: a node_exporter whose first scrapes
    /// failed (placed on its address) and then named its host moves to that host.
    #[test]
    fn an_instance_moves_to_the_host_its_latest_batch_names() {
        let mut detector = Detector::new(Vec::new(), Vec::new(), 10_000, Settings::default());
        detector.observe(0, &info("node-a", "dc-1", "10.0.0.7", "node"), Vec::new());
        assert_eq!(detector.instances()["node-a"].host, "10.0.0.7");
        detector.observe(10_000, &info("node-a", "dc-1", "web-7", "node"), Vec::new());
        assert_eq!(detector.instances()["node-a"].host, "web-7");
    }

    /// A dead Redis node's caller on the node's host, slower than its siblings (on a busy
    /// machine one caller's scrape lands first): still a node loss. A starved host slows the
    /// processes on it; it does not kill one, so neither the new verdict's kind nor an open
    /// node loss turns into `host_saturation`.
    #[test]
    fn a_dead_node_is_not_blamed_on_its_host_for_a_caller_placed_beside_it() {
        let mut detector = three_datacenters();
        detector.roles.insert("r22".into(), BTreeSet::from([Role::Cache]));
        detector.observe(0, &info("b24", "dc-2", "h25", "backend"), Vec::new());
        let callers = || -> Vec<Anomaly> {
            let mut anomalies: Vec<Anomaly> = ["b11", "b21", "b31"]
                .into_iter()
                .map(|caller| anomaly(caller, Class::Latency, Some("r22"), 0))
                .collect();
            anomalies.push(Anomaly {
                metric: "redis_up".into(),
                score: 50.0,
                ..anomaly("r22", Class::Availability, None, 0)
            });
            anomalies
        };
        // The caller beside it: slow requests, errors and waiting threads, all its own.
        let mut beside = callers();
        for (metric, class) in [
            ("http_p99", Class::Latency),
            ("pool_acquire", Class::Latency),
            ("http_5xx", Class::Errors),
            ("jetty_busy", Class::Saturation),
        ] {
            beside.push(Anomaly {
                metric: metric.into(),
                score: 30.0,
                ..anomaly("b24", class, None, 0)
            });
        }
        let candidates = detector.rank(&beside);
        assert_eq!(candidates[0].instance, "r22");
        assert_eq!(detector.co_located(&beside, &candidates), ["r22", "b24"]);
        assert_eq!(detector.kind(&beside, &candidates).as_deref(), Some("node_loss"));

        // The node's verdict opens on its callers alone, then the caller beside it stands out.
        let mut kinds = Vec::new();
        for round in 0..6 {
            let anomalies = if round < 3 { callers() } else { beside.clone() };
            let mut assessment = ranked(&detector, anomalies);
            detector.lifecycle(&mut assessment);
            kinds.extend(
                assessment
                    .incidents
                    .iter()
                    .filter(|verdict| verdict.instances.contains(&"r22".to_string()))
                    .map(|verdict| verdict.kind.clone()),
            );
        }
        assert!(!kinds.is_empty());
        assert!(kinds.iter().all(|kind| kind == "node_loss"), "{kinds:?}");
        assert!(!host_may_explain("node_loss") && host_may_explain("slow_node"));
    }

    /// A target whose samples stop is an availability anomaly two intervals on, unless
    /// epicenter itself lost scrapes meanwhile (its silence may be epicenter's): then only
    /// once two intervals have passed since the loss.
    #[test]
    fn a_silent_target_is_not_judged_while_epicenter_lost_scrapes() {
        let mut detector = detector();
        let silent = |detector: &mut Detector, time_ms: i64| {
            for name in ["b1", "b2", "b3", "r1"] {
                let at = detector.instances[name].clone();
                detector.observe(time_ms, &at, Vec::new());
            }
            detector
                .assess(time_ms)
                .anomalies
                .iter()
                .filter(|a| a.metric == "up" && a.class == Class::Availability)
                .map(|a| a.instance.clone())
                .collect::<Vec<_>>()
        };
        // r2 last seen at 0: at 20 s it has missed two intervals.
        assert_eq!(silent(&mut detector, 10_000), Vec::<String>::new());
        assert_eq!(silent(&mut detector, 20_000), ["r2"]);
        // Scrapes lost on epicenter's side at 25 s: r2 is not judged at 30 s or 40 s...
        detector.note_lost_input(25_000);
        assert_eq!(silent(&mut detector, 30_000), Vec::<String>::new());
        assert_eq!(silent(&mut detector, 40_000), Vec::<String>::new());
        // ...and is again two intervals after the loss, still silent.
        assert_eq!(silent(&mut detector, 50_000), ["r2"]);
    }

    /// A hung cache node's callers wait before its own exporter's scrape times out: the
    /// verdict may open as `slow_node` and becomes `node_hang` when `up` is lost, and a lost
    /// node's verdict never goes back to `slow_node` while the node leads.
    #[test]
    fn a_slow_node_verdict_sharpens_to_a_lost_node_and_never_back() {
        let mut detector = detector();
        detector.roles.insert("r2".into(), BTreeSet::from([Role::Cache]));
        let waiting = |instance: &str| anomaly(instance, Class::Saturation, Some("r2"), 0);
        let up_lost = Anomaly {
            metric: "up".into(),
            ..anomaly("r2", Class::Availability, None, 0)
        };
        let round = |detector: &mut Detector, anomalies: Vec<Anomaly>| {
            let mut assessment = ranked(detector, anomalies);
            detector.lifecycle(&mut assessment);
            assert!(assessment.incidents.len() <= 1, "{assessment:?}");
            assessment
                .incidents
                .first()
                .map(|verdict| (verdict.instances.clone(), verdict.kind.clone()))
        };
        let callers = || vec![waiting("b1"), waiting("b2"), waiting("b3")];
        assert_eq!(round(&mut detector, callers()), None);
        let slow = Some((vec!["r2".to_string()], "slow_node".to_string()));
        assert_eq!(round(&mut detector, callers()), slow);
        let hang = Some((vec!["r2".to_string()], "node_hang".to_string()));
        let mut with_up = callers();
        with_up.push(up_lost.clone());
        assert_eq!(round(&mut detector, with_up), hang);
        // The exporter answers again while the callers still wait: the kind stays.
        assert_eq!(round(&mut detector, callers()), hang);
        assert!(sharpens("unknown", "node_loss") && !sharpens("node_loss", "slow_node"));
        assert!(!sharpens("cold_start", "node_hang") && !sharpens("node_hang", "node_loss"));
    }
}
