//! Ranking: every instance with evidence is a candidate, scored on its own anomalies and its
//! callers' anomalies towards it: by the peer label of their series, or, for a caller whose
//! series name no peer, by the call graph (docs/detector.md, "Ranking").

use super::*;

impl Detector {
    /// Whether `instance`'s service is called by no other service (where load enters).
    pub(super) fn is_entry(&self, instance: &str) -> bool {
        self.instances.get(instance).is_some_and(|info| {
            !self.dependencies.is_empty()
                && !self
                    .dependencies
                    .iter()
                    .any(|dependency| dependency.callee == info.service)
        })
    }

    /// The role of the rules reading `metric` (the first that has one).
    pub(super) fn rule_role(&self, metric: &str) -> Option<Role> {
        self.rules
            .iter()
            .filter(|rule| rule.spec.metric == metric)
            .find_map(|rule| rule.spec.role)
    }

    /// Every role the rules gave `instance`: from its own series, and from peers' series whose
    /// peer value resolves to it (see [`Detector::resolve`]).
    pub(super) fn roles_of(&self, instance: &str) -> BTreeSet<Role> {
        self.roles
            .iter()
            .filter(|(holder, _)| holder.as_str() == instance || self.resolve(holder).as_deref() == Some(instance))
            .flat_map(|(_, roles)| roles.iter().copied())
            .collect()
    }

    pub(super) fn resolve(&self, peer: &str) -> Option<String> {
        if self.instances.contains_key(peer) {
            return Some(peer.to_string());
        }
        let host = peer.rsplit_once(':').map_or(peer, |(host, _)| host);
        self.instances.contains_key(host).then(|| host.to_string())
    }

    /// Whether `instance` is waiting on a callee: the calls it makes slowed (an `outbound`
    /// latency anomaly) at least as far as its own latency did, and nothing of its own is wrong
    /// beyond latency (no resource, error, availability or restart anomaly). An instance that
    /// is slow itself shows its own latency rise more than its calls' (OnlineBoutique's
    /// currency service under CPU contention: 162 scales against 8.5); its caller, waiting on
    /// it, the other way round (the frontend: 136 against 224).
    pub(super) fn waiting_on_a_callee(anomalies: &[Anomaly], instance: &str) -> bool {
        let latency = |outbound: bool| {
            anomalies
                .iter()
                .filter(|a| {
                    a.instance == instance && a.peer.is_none() && a.outbound == outbound && a.class == Class::Latency
                })
                .map(|a| a.score)
                .fold(0.0, f64::max)
        };
        let outbound = latency(true);
        let waiting = outbound > 0.0 && outbound >= latency(false);
        let troubled_itself = anomalies.iter().any(|a| {
            a.instance == instance
                && a.peer.is_none()
                && !a.outbound
                && (a.resource.is_some() || matches!(a.class, Class::Errors | Class::Availability | Class::Restart))
        });
        waiting && !troubled_itself
    }

    /// The (host exporter, resource) pairs whose trouble another instance on the host accounts
    /// for: a host's own exporter (a rule with `role: host`) whose CPU or memory anomaly is
    /// matched, in the same unit, by at least half its deviation at an instance placed on the
    /// host or placed on no host at all (a pod whose node is not known) — busy cores by a
    /// container's cores, available bytes fallen by a working set grown. That instance's
    /// trouble is what the host shows; the host is not starving it (docs/detector.md,
    /// "Resources").
    pub(super) fn explained_by_containers<'a>(&self, anomalies: &'a [Anomaly]) -> BTreeSet<(&'a str, Resource)> {
        let mut explained = BTreeSet::new();
        for host_anomaly in anomalies.iter().filter(|a| {
            a.peer.is_none()
                && matches!(a.resource, Some(Resource::Cpu | Resource::Memory))
                && a.deviation > 0.0
                && self.roles_of(&a.instance).contains(&Role::Host)
        }) {
            let Some(host) = self
                .instances
                .get(&host_anomaly.instance)
                .map(|info| info.host.as_str())
            else {
                continue;
            };
            let accounted = anomalies.iter().any(|other| {
                other.peer.is_none()
                    && other.instance != host_anomaly.instance
                    && other.resource == host_anomaly.resource
                    && other.deviation >= 0.5 * host_anomaly.deviation
                    && !self.roles_of(&other.instance).contains(&Role::Host)
                    && self
                        .instances
                        .get(&other.instance)
                        .is_some_and(|info| info.host == host || info.host.is_empty())
            });
            if accounted {
                if let Some(resource) = host_anomaly.resource {
                    explained.insert((host_anomaly.instance.as_str(), resource));
                }
            }
        }
        explained
    }

    /// Scores every instance that has evidence (see the module docs).
    pub fn rank(&self, anomalies: &[Anomaly]) -> Vec<Candidate> {
        let mut own: BTreeMap<&str, (f64, BTreeSet<Class>, i64)> = BTreeMap::new();
        let mut pointed: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
        let mut pointed_onset: BTreeMap<&str, i64> = BTreeMap::new();
        // An instance's own evidence counts once per family (metric) and class: the strongest
        // of its series (eight CPUs' steal, a summary's two quantiles are one piece of evidence
        // each), so what a fault weighs does not grow with the exporter's cardinality.
        let mut strongest: BTreeMap<(&str, &str, Class), (f64, f64)> = BTreeMap::new();
        for anomaly in anomalies.iter().filter(|anomaly| anomaly.peer.is_none()) {
            let family = anomaly.metric.as_str();
            let entry = strongest
                .entry((anomaly.instance.as_str(), family, anomaly.class))
                .or_insert((0.0, anomaly.score));
            entry.0 = entry.0.max(strength(anomaly.score));
            entry.1 = entry.1.max(anomaly.score);
        }
        let explained = self.explained_by_containers(anomalies);
        // Per instance and class (latency, errors), what its own latency or errors counted:
        // what a callee's trouble may explain ([`Detector::callees_explaining`]).
        let mut delay: BTreeMap<(&str, Class), Delay> = BTreeMap::new();
        for anomaly in anomalies {
            if anomaly.peer.is_none()
                && anomaly
                    .resource
                    .is_some_and(|resource| explained.contains(&(anomaly.instance.as_str(), resource)))
            {
                continue;
            }
            let strength = strength(anomaly.score);
            match (&anomaly.peer, anomaly.class) {
                (Some(peer), Class::Errors | Class::Latency | Class::Saturation | Class::Availability) => {
                    let per_caller = pointed.entry(peer.as_str()).or_default();
                    *per_caller.entry(anomaly.instance.as_str()).or_default() += 2.0 * strength;
                    let onset = pointed_onset.entry(peer.as_str()).or_insert(anomaly.onset_ms);
                    *onset = (*onset).min(anomaly.onset_ms);
                }
                (Some(_), _) => {}
                // Calls the instance makes are slow: something it calls is, not it.
                (None, Class::Latency | Class::Errors) if anomaly.outbound => {}
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
                    let family = anomaly.metric.as_str();
                    // Only the family's strongest series adds (ties: the first of them).
                    let key = (anomaly.instance.as_str(), family, anomaly.class);
                    let counted = match strongest.get_mut(&key) {
                        Some((best, _)) if *best > 0.0 && (strength - *best).abs() <= 1e-12 => {
                            *best = 0.0;
                            true
                        }
                        _ => false,
                    };
                    let entry =
                        own.entry(anomaly.instance.as_str())
                            .or_insert((0.0, BTreeSet::new(), anomaly.onset_ms));
                    if counted {
                        entry.0 += weight * strength;
                        if matches!(class, Class::Latency | Class::Errors) {
                            let part = delay.entry((anomaly.instance.as_str(), class)).or_insert(Delay {
                                score: 0.0,
                                onset_ms: anomaly.onset_ms,
                                strengths: Vec::new(),
                                deviation: 0.0,
                            });
                            part.score += weight * strength;
                            part.onset_ms = part.onset_ms.min(anomaly.onset_ms);
                            part.strengths.push(strength);
                            part.deviation = part.deviation.max(anomaly.deviation);
                        }
                    }
                    entry.1.insert(class);
                    entry.2 = entry.2.min(anomaly.onset_ms);
                }
            }
        }
        // An instance whose own latency rose while the calls it makes slowed, with no resource,
        // error or availability trouble of its own, is waiting on a callee: its latency counts
        // for little (a caller's latency is its callee's delay, seen once more).
        for (name, (score, classes, _)) in own.iter_mut() {
            if Self::waiting_on_a_callee(anomalies, name)
                && classes
                    .iter()
                    .all(|class| matches!(class, Class::Latency | Class::Traffic))
            {
                *score *= WAITING_ON_A_CALLEE;
            }
        }
        // Without a series naming whom it calls, the call graph says it: a caller's latency or
        // errors that a callee's trouble explains count for little (a caller's delay is its
        // callee's, seen once more), and count for the callee as a caller's series naming it
        // would (2 per family, at most 4 per caller). A callee whose own series say it waits
        // on a peer in turn is not credited: its peer already is, through the label.
        let waiting_on_peers: BTreeSet<&str> = pointed.values().flat_map(|callers| callers.keys().copied()).collect();
        let mut discounted: BTreeSet<(&str, Class)> = BTreeSet::new();
        for (caller, class, callee, evidence) in self.callees_explaining(anomalies, &delay) {
            if discounted.insert((caller, class)) {
                if let (Some(part), Some((score, _, _))) = (delay.get(&(caller, class)), own.get_mut(caller)) {
                    *score -= part.score * (1.0 - WAITING_ON_A_CALLEE);
                }
            }
            if !waiting_on_peers.contains(callee) {
                *pointed.entry(callee).or_default().entry(caller).or_default() += evidence;
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

    /// (caller, class, callee, evidence): each caller whose own latency or errors (`class`)
    /// a callee's trouble explains through the call graph, with what that evidence weighs
    /// for the callee (2 per family, by strength, as from a series naming it as its peer).
    ///
    /// The graph is the service edges ([`Detector::service_edges`]: configured, or shown by
    /// peer or caller labels); a callee is an instance of a service the caller's service
    /// calls, in the caller's datacenter along same-datacenter edges. It explains the
    /// caller's `class` when its own trouble began no later than the caller's (a cause does
    /// not follow its effect) and is of that size: its availability lost, or its own latency
    /// (errors) risen by at least half as much as the caller's, in the family's unit (seconds,
    /// failures per second). A callee 10 ms slower does not explain a caller 30 ms slower, nor
    /// one failing request a minute a caller failing five. Not read from the graph: a caller
    /// with a series naming a peer or marked `outbound` (those say whom it waits on:
    /// [`Detector::waiting_on_a_callee`] and the callers' evidence by peer label), and a
    /// caller whose own traffic rose (it may be loading its callees: a retry storm's entry).
    fn callees_explaining<'a>(
        &self,
        anomalies: &'a [Anomaly],
        delay: &BTreeMap<(&'a str, Class), Delay>,
    ) -> Vec<(&'a str, Class, &'a str, f64)> {
        if delay.is_empty() {
            return Vec::new();
        }
        let says_whom: BTreeSet<&str> = anomalies
            .iter()
            .filter(|a| a.peer.is_some() || a.outbound || a.class == Class::Traffic)
            .map(|a| a.instance.as_str())
            .collect();
        if delay.keys().all(|(caller, _)| says_whom.contains(caller)) {
            return Vec::new();
        }
        let edges = self.service_edges();
        // Per service, the services it calls (and whether those calls stay in a datacenter).
        let mut calls: BTreeMap<&str, Vec<(&str, bool)>> = BTreeMap::new();
        for ((caller, callee), same_dc) in &edges {
            if caller != callee {
                calls
                    .entry(caller.as_str())
                    .or_default()
                    .push((callee.as_str(), *same_dc));
            }
        }
        if calls.is_empty() {
            return Vec::new();
        }
        // Per service, its instances' own trouble that may explain a caller's: (instance,
        // datacenter, [(class, onset, deviation)]).
        let mut trouble: BTreeMap<&str, Vec<Troubled<'a, '_>>> = BTreeMap::new();
        let mut of_instance: BTreeMap<&str, Vec<Trouble>> = BTreeMap::new();
        for a in anomalies.iter().filter(|a| a.peer.is_none() && !a.outbound) {
            if matches!(a.class, Class::Latency | Class::Errors | Class::Availability) {
                of_instance
                    .entry(a.instance.as_str())
                    .or_default()
                    .push((a.class, a.onset_ms, a.deviation));
            }
        }
        for (instance, troubles) in of_instance {
            if let Some(info) = self.instances.get(instance) {
                trouble
                    .entry(info.service.as_str())
                    .or_default()
                    .push((instance, info.dc.as_str(), troubles));
            }
        }
        let mut explained = Vec::new();
        for (&(caller, class), part) in delay {
            if says_whom.contains(caller) {
                continue;
            }
            let Some(info) = self.instances.get(caller) else {
                continue;
            };
            for (callee_service, same_dc) in calls.get(info.service.as_str()).into_iter().flatten() {
                for (callee, dc, troubles) in trouble.get(callee_service).into_iter().flatten() {
                    if *callee == caller || (*same_dc && *dc != info.dc) {
                        continue;
                    }
                    let explains = troubles.iter().any(|(trouble_class, onset, deviation)| {
                        *onset <= part.onset_ms
                            && (*trouble_class == Class::Availability
                                || (*trouble_class == class && *deviation >= 0.5 * part.deviation))
                    });
                    if explains {
                        let evidence = part.strengths.iter().map(|strength| 2.0 * strength).sum();
                        explained.push((caller, class, *callee, evidence));
                    }
                }
            }
        }
        explained
    }
}

/// One trouble of an instance's own: its class, onset (ms) and deviation (in the family's
/// unit: seconds, failures per second).
type Trouble = (Class, i64, f64);

/// An instance of a service with its own troubles: (instance, datacenter, troubles).
type Troubled<'a, 'b> = (&'a str, &'b str, Vec<Trouble>);

/// What an instance's own latency or errors counted in the ranking: their score, the earliest
/// onset, each family's strength, and the largest deviation (in the family's unit: seconds,
/// failures per second).
#[derive(Debug, Clone)]
struct Delay {
    score: f64,
    onset_ms: i64,
    strengths: Vec<f64>,
    deviation: f64,
}

/// Whether the first two of `candidates` (best first) have the same score, to a relative
/// 1e-9: the first leads by its name alone.
pub(super) fn tied(candidates: &[Candidate]) -> bool {
    match candidates {
        [first, second, ..] => (first.score - second.score).abs() <= 1e-9 * first.score.abs().max(1.0),
        _ => false,
    }
}

/// What the latency of an instance waiting on a callee (its outbound calls slowed with it, and
/// nothing of its own is wrong) still counts.
pub(super) const WAITING_ON_A_CALLEE: f64 = 0.3;

/// How much one anomaly of `score` scales weighs in the ranking: from half (a score at the
/// threshold's lower reach) to one (10 scales and more). Ranking weighs how many kinds of
/// trouble an instance shows and where; how strong one deviation is decides paging instead
/// ([`super::lifecycle::STRONG_SCORE`]).
pub(super) fn strength(score: f64) -> f64 {
    (score / 10.0).clamp(0.5, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::*;

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

    /// Issue 38, cause 2: eight per-CPU series of one family in trouble weigh what one does
    /// (the strongest counts), while two families still add up: the evidence does not grow
    /// with the exporter's cardinality. (On 1f55c1b the eight counted eight times: 16 vs 2.)
    #[test]
    fn series_of_one_family_count_once() {
        let detector = detector();
        let steal = |cpu: usize, score: f64| Anomaly {
            metric: "node_cpu_seconds_total".into(),
            labels: [
                ("cpu".to_string(), cpu.to_string()),
                ("mode".to_string(), "steal".to_string()),
            ]
            .into(),
            score,
            ..anomaly("r1", Class::Saturation, None, 0)
        };
        let one = detector.rank(&[steal(0, 12.0)]);
        let eight: Vec<Anomaly> = (0..8).map(|cpu| steal(cpu, 6.0 + cpu as f64)).collect();
        let many = detector.rank(&eight);
        // Saturation weighs 2; the strongest of the eight is 13 scales: strength 1.
        assert!((one[0].score - 2.0).abs() < 1e-9, "{one:?}");
        assert!((many[0].score - 2.0).abs() < 1e-9, "{many:?}");
        // A second family beside it adds its own weight.
        let mut two = eight.clone();
        two.push(Anomaly {
            metric: "node_pressure_cpu_waiting_seconds_total".into(),
            ..anomaly("r1", Class::Saturation, None, 0)
        });
        assert!((detector.rank(&two)[0].score - 4.0).abs() < 1e-9);
    }

    /// Issue 38, cause 6: without a call graph, an instance whose latency rose together with
    /// the calls it makes (its outbound series), with nothing wrong of its own, is waiting on a
    /// callee: it ranks below an instance whose own latency and CPU rose. (On 1f55c1b there
    /// was no outbound series: the caller, slower in more families, led.)
    #[test]
    fn a_caller_waiting_on_its_callee_ranks_below_the_callee() {
        let mut detector = Detector::new(Vec::new(), Vec::new(), 60_000, Settings::default());
        for (name, service) in [("frontend-1", "frontend"), ("currency-1", "currency")] {
            detector.observe(0, &info(name, "dc-1", name, service), Vec::new());
        }
        let of = |instance: &str, metric: &str, class: Class, score: f64| Anomaly {
            metric: metric.into(),
            score,
            ..anomaly(instance, class, None, 0)
        };
        let anomalies = vec![
            // The caller: its own requests and its calls out both slow, very slow.
            of(
                "frontend-1",
                "http_server_request_duration_seconds",
                Class::Latency,
                300.0,
            ),
            Anomaly {
                outbound: true,
                ..of(
                    "frontend-1",
                    "http_client_request_duration_seconds",
                    Class::Latency,
                    400.0,
                )
            },
            of("frontend-1", "jvm_gc_pause_seconds", Class::Latency, 50.0),
            // The callee: its own requests slow, its CPU busy.
            of(
                "currency-1",
                "http_server_request_duration_seconds",
                Class::Latency,
                40.0,
            ),
            Anomaly {
                resource: Some(Resource::Cpu),
                ..of(
                    "currency-1",
                    "container_cpu_usage_seconds_total",
                    Class::Saturation,
                    6.0,
                )
            },
        ];
        let ranked = detector.rank(&anomalies);
        assert_eq!(ranked[0].instance, "currency-1", "{ranked:?}");
        // The caller's two latency families, 1.5 each, count 0.3 of themselves: 0.9.
        let caller = ranked.iter().find(|c| c.instance == "frontend-1").unwrap();
        assert!((caller.score - 0.9).abs() < 1e-9, "{ranked:?}");
        // Without the outbound series it is the caller's own trouble again: 3.0, first.
        let own: Vec<Anomaly> = anomalies.iter().filter(|a| !a.outbound).cloned().collect();
        assert_eq!(detector.rank(&own)[0].instance, "frontend-1");
    }

    /// Issue 38 (PetShop): with no series naming whom it calls, the call graph says it. A
    /// caller slowed by a callee of its service (its latency risen at least half as far, no
    /// later) ranks below it, and its latency counts for the callee as a peer-labelled series
    /// would; a callee slowed a little does not explain it, nor one whose trouble began later,
    /// nor anything for a caller whose own traffic rose (it may be what loads the callee).
    /// (On fd4df67 the site, slow and failing, led the search it waits on: 3.0 against 1.5.)
    #[test]
    fn the_call_graph_explains_a_caller_s_delay_by_its_callee_s() {
        let graph = |dependencies: &[(&str, &str)]| {
            let dependencies = dependencies
                .iter()
                .map(|(caller, callee)| Dependency {
                    caller: caller.to_string(),
                    callee: callee.to_string(),
                    same_dc: true,
                })
                .collect();
            let mut detector = Detector::new(Vec::new(), dependencies, 10_000, Settings::default());
            for name in ["site", "search", "cache"] {
                detector.observe(0, &info(name, "dc-1", name, name), Vec::new());
            }
            detector
        };
        let of = |instance: &str, metric: &str, class: Class, deviation: f64, onset_ms: i64| Anomaly {
            metric: metric.into(),
            deviation,
            ..anomaly(instance, class, None, onset_ms)
        };
        // The site 50 ms slower and failing, the search 30 ms slower, the cache 5 ms.
        let anomalies = vec![
            of("site", "latency", Class::Latency, 0.05, 0),
            of("site", "failures", Class::Errors, 0.2, 0),
            of("search", "latency", Class::Latency, 0.03, 0),
            of("cache", "latency", Class::Latency, 0.005, 0),
        ];
        let score = |ranked: &[Candidate], name: &str| ranked.iter().find(|c| c.instance == name).unwrap().score;
        let without = graph(&[]).rank(&anomalies);
        assert_eq!(without[0].instance, "site", "{without:?}");
        assert!((score(&without, "site") - 3.0).abs() < 1e-9, "{without:?}");
        let with = graph(&[("site", "search"), ("site", "cache")]).rank(&anomalies);
        assert_eq!(with[0].instance, "search", "{with:?}");
        // The search: its own 1.5 and the site's latency, 2. The site: its errors (nothing it
        // calls fails) and 0.3 of its latency. The cache: its own only.
        assert!((score(&with, "search") - 3.5).abs() < 1e-9, "{with:?}");
        assert!((score(&with, "site") - 1.95).abs() < 1e-9, "{with:?}");
        assert!((score(&with, "cache") - 1.5).abs() < 1e-9, "{with:?}");
        // The search slowed two intervals after the site: not why the site is slow.
        let mut later = anomalies.clone();
        later[2].onset_ms = 20_000;
        let ranked = graph(&[("site", "search")]).rank(&later);
        assert_eq!(ranked[0].instance, "site", "{ranked:?}");
        // The site's own traffic rose: what it calls may be slow because of it.
        let mut loaded = anomalies.clone();
        loaded.push(of("site", "requests", Class::Traffic, 50.0, 0));
        let ranked = graph(&[("site", "search")]).rank(&loaded);
        assert_eq!(ranked[0].instance, "site", "{ranked:?}");
    }

    /// A host's own CPU and memory anomalies are a container's when one on the host (or on no
    /// known host) moved by at least half as much in the same unit: the pod leads, not the
    /// node (Sock Shop's memory stress: the node's available memory falls by what the stressed
    /// pod's working set grew).
    #[test]
    fn a_host_figure_a_container_accounts_for_is_the_container_s() {
        let rules = crate::rules::parse(
            "signals:\n  - {metric: node_memory_MemAvailable_bytes, kind: gauge, class: saturation, bad: down, floor: 268435456, role: host, resource: memory}\n",
        )
        .unwrap();
        let mut detector = Detector::new(rules, Vec::new(), 60_000, Settings::default());
        detector.observe(
            0,
            &info("vm1:9100", "dc-1", "vm1", "node"),
            [("node_memory_MemAvailable_bytes", BTreeMap::new(), 1e10)],
        );
        detector.observe(0, &info("carts-1", "dc-1", "vm1", "carts"), Vec::new());
        detector.observe(0, &info("user-1", "dc-1", "", "user"), Vec::new());
        let memory = |instance: &str, metric: &str, deviation: f64| Anomaly {
            metric: metric.into(),
            resource: Some(Resource::Memory),
            deviation,
            score: 40.0,
            ..anomaly(instance, Class::Saturation, None, 0)
        };
        let node = memory("vm1:9100", "node_memory_MemAvailable_bytes", 5.2e8);
        let ranked = detector.rank(&[
            node.clone(),
            memory("carts-1", "container_memory_working_set_bytes", 5.1e8),
        ]);
        assert_eq!(ranked.len(), 1, "{ranked:?}");
        assert_eq!(ranked[0].instance, "carts-1");
        // A pod on no known host accounts for it too; a small one does not.
        let unplaced = detector.rank(&[
            node.clone(),
            memory("user-1", "container_memory_working_set_bytes", 5.1e8),
        ]);
        assert_eq!(unplaced.len(), 1, "{unplaced:?}");
        let small = detector.rank(&[node, memory("carts-1", "container_memory_working_set_bytes", 1.0e8)]);
        assert_eq!(small.len(), 2, "{small:?}");
    }
}
