//! Intake: samples in, signals out. Each series a rule names feeds one signal per instance
//! (its peer and labels but `le` and `quantile` in the key); [`Detector::observe_series`] works a
//! series' signals out once. The instances' placement and when each was last seen are kept here.

use super::*;
use crate::rules::Aggregate;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Value,
    Sum,
    Count,
}

#[derive(Debug)]
pub(super) struct SignalEntry {
    pub(super) rule: usize,
    pub(super) instance: String,
    pub(super) peer: Option<String>,
    pub(super) signal: Signal,
    pub(super) pending: Option<(i64, f64, f64, bool, bool)>,
    /// The series' labels (`__name__` and `le` left out), for the evidence; an aggregate's are
    /// the labels every series it sums shares.
    pub(super) labels: BTreeMap<String, String>,
    /// For one series of an aggregate rule (`aggregate: sum`): the aggregate's signal, which is
    /// judged on the sum of its series' interval values; this entry only turns its series'
    /// readings into interval values.
    pub(super) into: Option<usize>,
    /// For an aggregate's signal: the entries of the series it sums.
    pub(super) feeders: Vec<usize>,
    /// For one series of an aggregate: its latest interval value and when it was read (ms).
    pub(super) latest: Option<(i64, f64)>,
    /// When a sample last reached this signal (samples' clock, ms; for an aggregate, its
    /// newest series' reading); `i64::MIN` before the first. [`Detector::evict_stale`] reads it.
    pub(super) seen_ms: i64,
}

impl SignalEntry {
    /// Takes one sample (a value, or a mean's `_sum` or `_count`) observed at `time_ms` into the
    /// reading pending for the next `assess`.
    pub(super) fn take(&mut self, time_ms: i64, part: Part, value: f64) {
        self.seen_ms = self.seen_ms.max(time_ms);
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

impl Detector {
    /// Turns the readings pending for the series of aggregate rules into interval values and
    /// gives each aggregate its sum as its reading: the latest interval value of every series
    /// it sums that was read within two intervals of the newest (a series that stopped leaves
    /// the sum then), stamped with the newest reading's time.
    pub(super) fn sum_aggregates(&mut self) {
        let mut touched = Vec::new();
        for index in 0..self.signals.len() {
            let entry = &mut self.signals[index];
            let Some(into) = entry.into else { continue };
            let Some((observed_ms, value, count, has_value, has_count)) = entry.pending.take() else {
                continue;
            };
            if !(has_value && has_count) {
                continue;
            }
            if let Some(interval_value) = entry.signal.interval_value(observed_ms, value, count) {
                entry.latest = Some((observed_ms, interval_value));
                touched.push(into);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        let stale_ms = 2 * self.interval_ms.max(1);
        for aggregate in touched {
            let feeders = &self.signals[aggregate].feeders;
            let newest = feeders
                .iter()
                .filter_map(|&feeder| self.signals[feeder].latest.map(|(time_ms, _)| time_ms))
                .max();
            let Some(newest) = newest else { continue };
            let sum: f64 = feeders
                .iter()
                .filter_map(|&feeder| self.signals[feeder].latest)
                .filter(|(time_ms, _)| newest - time_ms < stale_ms)
                .map(|(_, value)| value)
                .sum();
            self.signals[aggregate].pending = Some((newest, sum, 0.0, true, true));
            self.signals[aggregate].seen_ms = self.signals[aggregate].seen_ms.max(newest);
        }
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
            let (seen_ms, feeds) = match by_series.entry(series.id) {
                std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
                std::collections::hash_map::Entry::Vacant(new) => {
                    let mut feeds = Vec::new();
                    self.feeds(instance, &series.name, &series.labels, &mut key, &mut feeds);
                    new.insert((time_ms, feeds))
                }
            };
            *seen_ms = (*seen_ms).max(time_ms);
            for &(index, part) in feeds.iter() {
                self.signals[index].take(time_ms, part, *value);
            }
        }
        self.series_feeds.insert(instance.name.clone(), by_series);
    }

    pub(super) fn take<'a, L: std::borrow::Borrow<BTreeMap<String, String>>>(
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
    pub(super) fn place(&mut self, time_ms: i64, instance: &InstanceInfo, own: bool) {
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
    pub(super) fn feeds(
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
            let series_labels: BTreeMap<String, String> = labels
                .iter()
                .filter(|(name, _)| name.as_str() != "le" && name.as_str() != "__name__")
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            // An aggregate rule's series each feed one signal of the instance (and peer), which
            // is judged on their sum.
            let into = if rule.spec.aggregate == Some(Aggregate::Sum) {
                let aggregate_key = format!("{:?}|{rule_index}|aggregate|{peer:?}", instance.name);
                let index = match self.signal_index.get(&aggregate_key) {
                    Some(&index) => {
                        // Its labels are what every series it sums shares.
                        self.signals[index]
                            .labels
                            .retain(|name, value| series_labels.get(name) == Some(value));
                        index
                    }
                    None => {
                        self.signals.push(SignalEntry {
                            rule: rule_index,
                            instance: instance.name.clone(),
                            peer: peer.clone(),
                            signal: resource_scaled(
                                Signal::new(ValueKind::Gauge, rule.spec.bad, rule.spec.floor),
                                rule,
                            ),
                            pending: None,
                            labels: series_labels.clone(),
                            into: None,
                            feeders: Vec::new(),
                            latest: None,
                            seen_ms: i64::MIN,
                        });
                        let index = self.signals.len() - 1;
                        self.signal_index.insert(aggregate_key, index);
                        index
                    }
                };
                Some(index)
            } else {
                None
            };
            let rule = &self.rules[rule_index];
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
                signal: resource_scaled(
                    Signal::new(rule.spec.kind, rule.spec.bad, rule.spec.floor)
                        .with_counter_glitch(self.settings.counter_glitch),
                    rule,
                ),
                pending: None,
                labels: series_labels,
                into,
                feeders: Vec::new(),
                latest: None,
                seen_ms: i64::MIN,
            });
            let index = self.signals.len() - 1;
            if let Some(aggregate) = into {
                self.signals[aggregate].feeders.push(index);
            }
            self.signal_index.insert(key.clone(), index);
            feeds.push((index, part));
        }
    }
}

/// `signal` with no floor relative to its level when `rule` measures a resource (`resource:`):
/// its scale follows its own noise, down to the rule's floor in the family's unit. An
/// availability rule's signal never takes a lasting loss into its baseline
/// ([`Signal::never_normal`]): a dead node stays lost until it answers again.
fn resource_scaled(signal: Signal, rule: &Rule) -> Signal {
    let signal = if rule.spec.class == Class::Availability {
        signal.never_normal()
    } else {
        signal
    };
    if rule.spec.resource.is_some() {
        signal.absolute()
    } else {
        signal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::*;

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
}
