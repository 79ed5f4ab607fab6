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

/// What the detector says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Failure kind (`node_loss`, `node_hang`, `slow_node`, `cold_start`, `pool_exhaustion`,
    /// `retry_storm`, `mailbox_overload`, `session_loss`, `dc_degradation`, `unknown`).
    pub kind: String,
    /// Datacenter of the root cause.
    pub dc: String,
    /// Hosts of the instances named, in their order, each once: the answer, never a host of
    /// an alternative. Ranked alternatives are in `candidates` ([`Verdict::ranked_hosts`]).
    pub hosts: Vec<String>,
    /// Service of the root cause (`network` for a datacenter degradation).
    pub service: String,
    /// Instances named.
    pub instances: Vec<String>,
    /// 0..1: the leader's share of the top three candidates' scores, to three decimals.
    pub confidence: f64,
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
    /// paused process shows a second or two of latency and nothing else. Default 3.
    pub latency_rounds: u32,
    /// A counter falling by less than this fraction of its value is a glitch, not a reset
    /// ([`crate::signal::COUNTER_GLITCH`], 0.1; 0 reads every decrease as a reset).
    pub counter_glitch: f64,
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
    /// Candidates, best first.
    pub candidates: Vec<Candidate>,
    /// The open verdict, if any (new, updated or continuing).
    pub verdict: Option<Verdict>,
    /// Whether the verdict was opened this round.
    pub opened: bool,
    /// Whether an open verdict resolved this round.
    pub resolved: bool,
    /// Whether this round was judged while the detector was behind ([`Detector::set_behind`]):
    /// no verdict opened and none was taken over.
    pub held: bool,
}

/// The detector's state.
#[derive(Debug)]
pub struct Detector {
    rules: Vec<Rule>,
    by_metric: FxHashMap<String, Vec<(usize, Part)>>,
    settings: Settings,
    instances: BTreeMap<String, InstanceInfo>,
    dependencies: Vec<Dependency>,
    signals: HashMap<String, SignalEntry>,
    /// Roles rules gave an instance (keyed by its name) or a peer (keyed by the peer value as
    /// the label carries it, resolved when read): learned when a series is first seen.
    roles: HashMap<String, BTreeSet<Role>>,
    last_seen: HashMap<String, i64>,
    interval_ms: i64,
    leader: Option<(String, u32)>,
    open: Option<Verdict>,
    quiet_rounds: u32,
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
            signals: HashMap::new(),
            roles: HashMap::new(),
            last_seen: HashMap::new(),
            interval_ms,
            leader: None,
            open: None,
            quiet_rounds: 0,
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
        self.signals
            .values()
            .filter_map(|entry| {
                let peer = entry.peer.as_deref().and_then(|peer| self.resolve(peer))?;
                Some((entry.instance.clone(), peer))
            })
            .collect()
    }

    /// Whether the rounds judged from now on are judged while the detector is behind (its own
    /// rounds run late: the machine it shares with what it watches is starved). While behind,
    /// [`Detector::assess`] opens no verdict and lets no other instance take an open one over
    /// (see the module docs); an open verdict goes on being updated or fading as usual.
    pub fn set_behind(&mut self, behind: bool) {
        self.behind = behind;
    }

    /// Feeds one scrape of `instance` at `time_ms`: `(metric, labels, value)` per sample.
    pub fn observe<'a>(
        &mut self,
        time_ms: i64,
        instance: &InstanceInfo,
        samples: impl IntoIterator<Item = (&'a str, BTreeMap<String, String>, f64)>,
    ) {
        self.instances
            .entry(instance.name.clone())
            .or_insert_with(|| instance.clone());
        self.last_seen.insert(instance.name.clone(), time_ms);
        let mut key = String::with_capacity(128);
        for (metric, labels, value) in samples {
            let Some(targets) = self.by_metric.get(metric) else {
                continue;
            };
            for &(rule_index, part) in targets {
                let rule = &self.rules[rule_index];
                if !rule.matches(&labels) {
                    continue;
                }
                // Values quoted (Debug escapes `"` and `\`): label sets holding `,` or `=` in
                // their values never share a key. Written into a reused buffer: a series
                // already known costs no allocation.
                key.clear();
                let _ = write!(key, "{:?}|{rule_index}|", instance.name);
                for (name, value) in &labels {
                    if name != "le" && name != "quantile" {
                        let _ = write!(key, "{name}={value:?},");
                    }
                }
                // One lookup for a known series; a new one is created, then taken up below.
                if let Some(entry) = self.signals.get_mut(key.as_str()) {
                    entry.take(time_ms, part, value);
                    continue;
                }
                let peer = rule.peer(&labels);
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
                let mut entry = SignalEntry {
                    rule: rule_index,
                    instance: instance.name.clone(),
                    peer,
                    signal: Signal::new(rule.spec.kind, rule.spec.bad, rule.spec.floor)
                        .with_counter_glitch(self.settings.counter_glitch),
                    pending: None,
                };
                entry.take(time_ms, part, value);
                self.signals.insert(key.clone(), entry);
            }
        }
    }

    /// Judges everything observed since the last call and ranks candidates at `time_ms`.
    pub fn assess(&mut self, time_ms: i64) -> Assessment {
        let tuning = self.settings.tuning;
        let mut anomalies = Vec::new();
        for entry in self.signals.values_mut() {
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
        // A target that stopped answering is an availability anomaly of its own.
        for (name, seen) in &self.last_seen {
            if time_ms - seen >= 2 * self.interval_ms {
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
            verdict: None,
            opened: false,
            resolved: false,
            held: self.behind,
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

    fn lifecycle(&mut self, assessment: &mut Assessment) {
        let leader = assessment.candidates.first().cloned();
        // Strong evidence opens after `confirm_rounds`; weaker evidence (from `weak_score`)
        // must persist for `weak_rounds` with the same leader.
        let weak = self.settings.min_score * self.settings.weak_score;
        let strong = leader.as_ref().is_some_and(|leader| leader.score >= weak);
        let leader_score = leader.as_ref().map_or(0.0, |leader| leader.score);
        if strong {
            self.quiet_rounds = 0;
            let name = leader
                .as_ref()
                .map(|leader| leader.instance.clone())
                .unwrap_or_default();
            let rounds = match &self.leader {
                Some((previous, rounds)) if *previous == name => rounds + 1,
                _ => 1,
            };
            self.leader = Some((name.clone(), rounds));
            let kind = self.kind(&assessment.anomalies, &assessment.candidates);
            // Latency alone (no errors, saturation or lost availability anywhere on the
            // leader's evidence) is what a starved or paused process shows for a second or
            // two: it must last `latency_rounds`.
            let latency_only = assessment
                .anomalies
                .iter()
                .filter(|a| a.instance == name || a.peer.as_deref() == Some(name.as_str()))
                .all(|a| a.class == Class::Latency);
            let enough = if leader_score >= self.settings.min_score {
                rounds
                    >= self
                        .settings
                        .confirm_rounds
                        .max(if latency_only { self.settings.latency_rounds } else { 0 })
            } else {
                rounds >= self.settings.weak_rounds
            };
            let confirmed = enough && kind.as_deref() != Some("transient") && !self.behind;
            // Another instance takes an open verdict over only on evidence that would open
            // one by itself, and only once the open verdict's own instance has lost its
            // strong evidence (an instance restarted during an incident shows the incident's
            // symptoms); until then the open verdict stands or fades on its own evidence.
            let open_instance = self.open.as_ref().and_then(|open| open.instances.first().cloned());
            if let Some(open_instance) = open_instance.filter(|open| *open != name) {
                let own = assessment
                    .candidates
                    .iter()
                    .find(|candidate| candidate.instance == open_instance)
                    .map_or(0.0, |candidate| candidate.score);
                if !confirmed || own >= self.settings.min_score {
                    self.fade(assessment, own >= weak);
                    return;
                }
            }
            if confirmed || self.open.is_some() {
                // An open verdict keeps its kind while the same instance leads: recovery
                // (a restarted node's reconnections, say) must not rename the failure. It
                // only sharpens: a `slow_node` or `unknown` verdict becomes `node_hang` or
                // `node_loss` once the node's own availability is seen lost (a hung node's
                // callers wait a round before its exporter's scrape times out).
                let kept = self.open.as_ref().and_then(|open| {
                    let same = leader
                        .as_ref()
                        .is_some_and(|leader| open.instances.first() == Some(&leader.instance));
                    let sharpened = kind.as_deref().is_some_and(|new| sharpens(&open.kind, new));
                    (same && open.kind != "dc_degradation" && !sharpened).then(|| open.kind.clone())
                });
                let kind = kept.or(kind).unwrap_or_else(|| "unknown".to_string());
                let mut verdict = self.verdict(assessment, kind);
                if let Some(open) = &self.open {
                    verdict.opened_ms = open.opened_ms;
                    verdict.onset_ms = verdict.onset_ms.min(open.onset_ms);
                } else {
                    assessment.opened = true;
                }
                self.open = Some(verdict.clone());
                assessment.verdict = Some(verdict);
            }
        } else {
            self.leader = None;
            self.fade(assessment, false);
        }
    }

    /// A round in which the open verdict (if any) is not renewed: it stands while its own
    /// instance keeps weak evidence (`supported`), and resolves after `resolve_rounds` quiet
    /// rounds.
    fn fade(&mut self, assessment: &mut Assessment, supported: bool) {
        if self.open.is_none() {
            return;
        }
        if supported {
            self.quiet_rounds = 0;
        } else {
            self.quiet_rounds += 1;
        }
        if self.quiet_rounds >= self.settings.resolve_rounds {
            self.open = None;
            assessment.resolved = true;
        } else {
            assessment.verdict = self.open.clone();
        }
    }

    /// The failure kind, from the leader's roles (what its series and its callers' series say
    /// it is, [`Role`]) and its evidence; `transient` for a restart whose trouble has not
    /// lasted (a warm deploy).
    fn kind(&self, anomalies: &[Anomaly], candidates: &[Candidate]) -> Option<String> {
        let leader = candidates.first()?;
        if let Some(dc) = self.degraded_dc(anomalies) {
            if dc == leader.dc {
                return Some("dc_degradation".to_string());
            }
        }
        let own: Vec<&Anomaly> = anomalies.iter().filter(|a| a.instance == leader.instance).collect();
        let has = |class: Class| own.iter().any(|a| a.class == class && a.peer.is_none());
        let roles = self.roles_of(&leader.instance);
        let is = |role: Role| roles.contains(&role);
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
        Some(kind.to_string())
    }

    /// A datacenter whose calls from other datacenters slowed or failed towards two or more
    /// of its instances while its own instances' calls outwards did too.
    fn degraded_dc(&self, anomalies: &[Anomaly]) -> Option<String> {
        let mut inbound: BTreeMap<&str, (BTreeSet<&str>, BTreeSet<&str>)> = BTreeMap::new();
        let mut outbound: BTreeMap<&str, usize> = BTreeMap::new();
        for anomaly in anomalies {
            let Some(peer) = &anomaly.peer else { continue };
            if !matches!(anomaly.class, Class::Latency | Class::Errors) {
                continue;
            }
            let (Some(caller), Some(callee)) = (self.instances.get(&anomaly.instance), self.instances.get(peer)) else {
                continue;
            };
            if caller.dc != callee.dc {
                let entry = inbound.entry(callee.dc.as_str()).or_default();
                entry.0.insert(caller.name.as_str());
                entry.1.insert(callee.name.as_str());
                *outbound.entry(caller.dc.as_str()).or_default() += 1;
            }
        }
        inbound
            .into_iter()
            .filter(|(dc, (callers, callees))| {
                callers.len() >= 2 && callees.len() >= 2 && outbound.get(dc).copied().unwrap_or(0) >= 2
            })
            .max_by_key(|(_, (callers, _))| callers.len())
            .map(|(dc, _)| dc.to_string())
    }

    fn verdict(&self, assessment: &Assessment, kind: String) -> Verdict {
        let candidates = &assessment.candidates;
        let leader = &candidates[0];
        let top: f64 = candidates.iter().take(3).map(|c| c.score).sum();
        let (service, instances) = if kind == "dc_degradation" {
            let in_dc: Vec<String> = candidates
                .iter()
                .filter(|c| c.dc == leader.dc)
                .map(|c| c.instance.clone())
                .collect();
            ("network".to_string(), in_dc)
        } else if kind == "cold_start" {
            // A deploy restarts several instances: name every restarted instance of the
            // leader's service that is a candidate, and only those. A restart's own evidence
            // fades before its slowness does, so an open cold start keeps naming the
            // instances it named while they are still candidates; it never names nobody.
            let named_before = |instance: &str| {
                self.open
                    .as_ref()
                    .is_some_and(|open| open.kind == "cold_start" && open.instances.iter().any(|name| name == instance))
            };
            let mut restarted: Vec<String> = candidates
                .iter()
                .filter(|c| {
                    c.service == leader.service
                        && (named_before(&c.instance)
                            || assessment
                                .anomalies
                                .iter()
                                .any(|a| a.instance == c.instance && a.class == Class::Restart))
                })
                .map(|c| c.instance.clone())
                .collect();
            if restarted.is_empty() {
                restarted.push(leader.instance.clone());
            }
            (leader.service.clone(), restarted)
        } else {
            (leader.service.clone(), vec![leader.instance.clone()])
        };
        let mut hosts: Vec<String> = Vec::new();
        for instance in &instances {
            if let Some(candidate) = candidates.iter().find(|c| &c.instance == instance) {
                if !hosts.contains(&candidate.host) {
                    hosts.push(candidate.host.clone());
                }
            }
        }
        let relevant: Vec<Anomaly> = assessment
            .anomalies
            .iter()
            .filter(|a| a.instance == leader.instance || a.peer.as_deref() == Some(leader.instance.as_str()))
            .take(12)
            .cloned()
            .collect();
        Verdict {
            kind,
            dc: leader.dc.clone(),
            hosts,
            service,
            instances,
            // Three decimals: a share, not a measurement (`0.92`, never `0.9198606271777003`
            // in the tables, the API and alerts).
            confidence: if top > 0.0 {
                (leader.score / top * 1000.0).round() / 1000.0
            } else {
                0.0
            },
            candidates: candidates.iter().take(5).cloned().collect(),
            evidence: relevant,
            onset_ms: candidates
                .iter()
                .take(1)
                .map(|c| c.onset_ms)
                .min()
                .unwrap_or(assessment.time_ms),
            opened_ms: assessment.time_ms,
        }
    }
}

/// Whether an open verdict of kind `open` is renamed `new` while its instance still leads:
/// only a vaguer kind (`slow_node`, `unknown`) gives way to a lost node (`node_hang`,
/// `node_loss`); every other rename waits for a new verdict.
fn sharpens(open: &str, new: &str) -> bool {
    matches!(open, "slow_node" | "unknown") && matches!(new, "node_hang" | "node_loss")
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
            verdict: None,
            opened: false,
            resolved: false,
            held: detector.behind,
        }
    }

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
        for (name, dc, host, service) in [
            ("b1", "dc-1", "h1", "backend"),
            ("b2", "dc-2", "h2", "backend"),
            ("b3", "dc-3", "h3", "backend"),
            ("r1", "dc-1", "h4", "redis"),
            ("r2", "dc-2", "h5", "redis"),
        ] {
            detector.observe(0, &info(name, dc, host, service), Vec::new());
        }
        detector
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
        let assessment = Assessment {
            time_ms: 10_000,
            anomalies,
            candidates: candidates.clone(),
            verdict: None,
            opened: false,
            resolved: false,
            held: false,
        };
        let verdict = detector.verdict(&assessment, "slow_node".to_string());
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
        let mut detector = detector();
        let slow = |instance: &str| anomaly(instance, Class::Latency, None, 0);
        let restarted = |instance: &str| anomaly(instance, Class::Restart, None, 0);
        let assessment = |anomalies: Vec<Anomaly>, detector: &Detector| ranked(detector, anomalies);
        let first = assessment(
            vec![slow("b1"), slow("b2"), restarted("b1"), restarted("b2")],
            &detector,
        );
        let verdict = detector.verdict(&first, "cold_start".to_string());
        let mut named = verdict.instances.clone();
        named.sort();
        assert_eq!(named, ["b1", "b2"]);
        detector.open = Some(verdict);
        // Rounds later: still slow, no restart anomaly any more.
        let later = assessment(vec![slow("b1"), slow("b2")], &detector);
        let verdict = detector.verdict(&later, "cold_start".to_string());
        let mut named = verdict.instances.clone();
        named.sort();
        assert_eq!(named, ["b1", "b2"], "{verdict:?}");
        let mut hosts = verdict.hosts.clone();
        hosts.sort();
        assert_eq!(hosts, ["h1", "h2"]);
        // Without an open verdict to go on, the leader is named rather than nobody.
        detector.open = None;
        let verdict = detector.verdict(&later, "cold_start".to_string());
        assert_eq!(verdict.instances.len(), 1, "{verdict:?}");
        assert_eq!(verdict.hosts.len(), 1, "{verdict:?}");
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
        assert!(round(&mut on_time, "r2").verdict.is_none());
        assert!(round(&mut on_time, "r2").opened);

        detector.set_behind(true);
        for _ in 0..4 {
            let held = round(&mut detector, "r2");
            assert!(held.held && held.verdict.is_none() && !held.opened, "{held:?}");
        }
        detector.set_behind(false);
        let opened = round(&mut detector, "r2");
        assert!(opened.opened && !opened.held, "{opened:?}");
        assert_eq!(opened.verdict.as_ref().unwrap().instances, ["r2"]);

        // Behind again, r1's evidence (strong enough to take over once r2's is gone) waits.
        detector.set_behind(true);
        for _ in 0..3 {
            let held = round(&mut detector, "r1");
            assert_eq!(
                held.verdict.as_ref().map(|v| v.instances.clone()),
                Some(vec!["r2".to_string()])
            );
        }
        detector.set_behind(false);
        let taken = round(&mut detector, "r1");
        assert_eq!(taken.verdict.as_ref().unwrap().instances, ["r1"], "{taken:?}");
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
            assessment.verdict.map(|verdict| (verdict.instances, verdict.kind))
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
