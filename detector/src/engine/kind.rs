//! Kinds: what failed, from the leader's roles and evidence (node loss, slow node, host
//! saturation, a degraded datacenter or link, …; docs/detector.md).

use super::*;

/// The callers and the callees (instance names) of the slowed or failing calls from one
/// datacenter to another.
pub(super) type CallersAndCallees<'a> = (BTreeSet<&'a str>, BTreeSet<&'a str>);

impl Detector {
    /// Whether `own` (one instance's anomalies) holds throttling of its container (a rule
    /// `role: container`) that began no more than an interval after any other of its own
    /// anomalies.
    pub(super) fn throttled_first(&self, own: &[&Anomaly]) -> bool {
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

    /// The failure kind, from the leader's roles (what its series and its callers' series say
    /// it is, [`Role`]) and its evidence; `transient` for a restart whose trouble has not
    /// lasted (a warm deploy).
    pub(super) fn kind(&self, anomalies: &[Anomaly], candidates: &[Candidate]) -> Option<String> {
        let leader = candidates.first()?;
        if let Some((one, other)) = self.degraded_link(anomalies) {
            if leader.dc == one || leader.dc == other {
                return Some("link_degradation".to_string());
            }
        }
        // The leader's datacenter degraded, alone or with others (one incident of them all).
        let degraded = self.degraded_dcs(anomalies);
        if degraded.first() == Some(&leader.dc) || (degraded.len() >= 2 && degraded.contains(&leader.dc)) {
            return Some("dc_degradation".to_string());
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
            own_kind(&own)
        };
        // The leader's container is throttled by its CPU quota, and that is where its trouble
        // began: its limit is what slows it, whatever it is (a Redis node, a database, a
        // mailbox). Not when more work came first: a surge of traffic (a retry storm at the
        // entry, which the chain above names, or load spreading to a callee) or a restart (a
        // cold JVM compiling) throttles a container that was fine at its usual load. A starved
        // host does not raise a container's throttling (steal is not charged to the cgroup).
        let kind = if matches!(
            kind,
            "unknown"
                | "slow_node"
                | "pool_exhaustion"
                | "mailbox_overload"
                | "cpu_saturation"
                | "code_defect"
                | "network_delay"
        ) && !has(Class::Traffic)
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
    pub(super) fn host_kind(&self, anomalies: &[Anomaly], host: &str) -> &'static str {
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
    pub(super) fn host_roles(&self, anomalies: &[Anomaly], instance: &str, by_ms: i64) -> BTreeSet<Role> {
        self.exporter_roles(anomalies, &|name| name == instance, by_ms)
    }

    /// [`Detector::host_roles`] over every instance `of` accepts.
    pub(super) fn exporter_roles(
        &self,
        anomalies: &[Anomaly],
        of: &dyn Fn(&str) -> bool,
        by_ms: i64,
    ) -> BTreeSet<Role> {
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
    pub(super) fn co_located(&self, anomalies: &[Anomaly], candidates: &[Candidate]) -> Vec<String> {
        self.co_located_with(anomalies, candidates, true)
    }

    /// [`Detector::co_located`], counting the host's exporter beside the leader only when
    /// `exporter`.
    pub(super) fn co_located_with(
        &self,
        anomalies: &[Anomaly],
        candidates: &[Candidate],
        exporter: bool,
    ) -> Vec<String> {
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
    pub(super) fn degraded_link(&self, anomalies: &[Anomaly]) -> Option<(String, String)> {
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
    pub(super) fn slow_calls_across_datacenters<'a>(
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

    /// Every datacenter whose calls from other datacenters slowed or failed towards two or
    /// more of its instances, from every datacenter whose instances call it (to two or more
    /// of its hosts, where that datacenter calls more than one), while its own
    /// instances' calls outwards slowed too; the one most callers see first (then by name). A
    /// healthy datacenter that calls a degraded one sees its calls into it slow and the
    /// degraded one's calls into it slow as well, but not a third, healthy datacenter's: with
    /// four datacenters two degraded ones are told from the healthy two; with three, a healthy
    /// one between two degraded ones looks degraded too.
    pub(super) fn degraded_dcs(&self, anomalies: &[Anomaly]) -> Vec<String> {
        let mut inbound: BTreeMap<&str, CallersAndCallees<'_>> = BTreeMap::new();
        // Per callee datacenter, per calling datacenter: the hosts its slowed calls reached.
        let mut slow_from: BTreeMap<&str, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
        let mut outbound: BTreeMap<&str, usize> = BTreeMap::new();
        for (caller, callee) in self.slow_calls_across_datacenters(anomalies) {
            let entry = inbound.entry(callee.dc.as_str()).or_default();
            entry.0.insert(caller.name.as_str());
            entry.1.insert(callee.name.as_str());
            slow_from
                .entry(callee.dc.as_str())
                .or_default()
                .entry(caller.dc.as_str())
                .or_default()
                .insert(callee.host.as_str());
            *outbound.entry(caller.dc.as_str()).or_default() += 1;
        }
        // Which datacenters' instances call into each datacenter at all (client series with a
        // peer).
        let mut calling: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (caller, callee) in self.peer_edges() {
            let (Some(caller), Some(callee)) = (self.instances.get(&caller), self.instances.get(&callee)) else {
                continue;
            };
            if caller.dc != callee.dc {
                calling.entry(callee.dc.clone()).or_default().insert(caller.dc.clone());
            }
        }
        let mut degraded: Vec<(&str, usize)> = inbound
            .into_iter()
            .filter(|(dc, (callers, callees))| {
                // Every datacenter that calls it sees its calls slow, to more than one of its
                // hosts where it calls more than one (one starved host slows every call into
                // it too, from everywhere, but only into that host).
                let reached_hosts = |caller_dc: &str| {
                    self.peer_edges()
                        .iter()
                        .filter_map(|(caller, callee)| Some((self.instances.get(caller)?, self.instances.get(callee)?)))
                        .filter(|(caller, callee)| caller.dc == caller_dc && callee.dc == **dc)
                        .map(|(_, callee)| callee.host.clone())
                        .collect::<BTreeSet<String>>()
                        .len()
                };
                let from_everywhere = calling.get(*dc).is_none_or(|callers_dcs| {
                    callers_dcs.iter().all(|caller_dc| {
                        let slow_hosts = slow_from
                            .get(dc)
                            .and_then(|by_caller| by_caller.get(caller_dc.as_str()))
                            .map_or(0, BTreeSet::len);
                        slow_hosts >= 2.min(reached_hosts(caller_dc))
                    })
                });
                callers.len() >= 2
                    && callees.len() >= 2
                    && outbound.get(dc).copied().unwrap_or(0) >= 2
                    && from_everywhere
            })
            .map(|(dc, (callers, _))| (dc, callers.len()))
            .collect();
        degraded.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        degraded.into_iter().map(|(dc, _)| dc.to_string()).collect()
    }
}

/// Whether `kind` names a host rather than a service: `host_saturation` (a starved host: CPU,
/// memory) or `host_network` (its network interface or TCP stack losing packets).
pub(super) fn is_host_kind(kind: &str) -> bool {
    matches!(kind, "host_saturation" | "host_network")
}

/// Whether one instance's trouble of `kind` may be its host's: slowness, a hang, exhausted
/// pools, a swollen mailbox, a surge of retries or trouble of no known kind, all of which a
/// starved host (CPU steal, memory pressure) causes. A dead process (`node_loss`, whose own
/// exporter reports it down), a restart (`cold_start`, `transient`), dropped sessions, the
/// network's kinds and a container's own CPU or memory rising (`cpu_saturation`,
/// `memory_pressure`: a starved host does not make its containers use more; a container that
/// does starves its neighbours) are never renamed `host_saturation`.
pub(super) fn host_may_explain(kind: &str) -> bool {
    matches!(
        kind,
        "slow_node"
            | "node_hang"
            | "pool_exhaustion"
            | "mailbox_overload"
            | "retry_storm"
            | "unknown"
            | "code_defect"
            | "network_delay"
    )
}

/// Whether an open verdict of kind `open` is renamed `new` while its instance still leads:
/// only a vaguer kind (`slow_node`, `unknown`) gives way to a lost node (`node_hang`,
/// `node_loss`), and one instance's trouble (`slow_node`, `pool_exhaustion`, `unknown`) to its
/// host's (`host_saturation`, once other services' instances on the host suffer too); every
/// other rename waits for a new verdict.
pub(super) fn sharpens(open: &str, new: &str) -> bool {
    let vague = matches!(open, "slow_node" | "unknown" | "code_defect" | "network_delay");
    (vague && matches!(new, "node_hang" | "node_loss")) || ((vague || open == "pool_exhaustion") && is_host_kind(new))
}

/// The kind of an instance's own trouble when none of its roles names one (real fleets'
/// containers and services, which export resource and request metrics, not pools):
/// - `memory_pressure`: its strongest own resource anomaly is memory (a working set or a
///   host's available memory, `resource: memory`);
/// - `cpu_saturation`: it is CPU (cores busy, tasks waiting);
/// - `code_defect`: no resource moved, but its own errors or its own (server-side) latency did:
///   what it does itself went wrong;
/// - `network_delay`: only the calls it makes slowed (`outbound` series) — the time is lost
///   on the wire between it and what it calls, its own work is unchanged;
/// - `unknown` otherwise.
///
/// Kinds from the fault classes of the RCA benchmarks on real clusters (Nezha's CPU contention,
/// network delay, code `return`/`exception`; Sock Shop's Chaos Mesh stress and delay).
pub(super) fn own_kind(own: &[&Anomaly]) -> &'static str {
    let mine = || own.iter().filter(|a| a.peer.is_none());
    let resource = mine()
        .filter(|a| a.class == Class::Saturation && matches!(a.resource, Some(Resource::Cpu | Resource::Memory)))
        .max_by(|a, b| a.score.total_cmp(&b.score).then(b.metric.cmp(&a.metric)));
    if let Some(strongest) = resource {
        return match strongest.resource {
            Some(Resource::Memory) => "memory_pressure",
            _ => "cpu_saturation",
        };
    }
    if mine().any(|a| !a.outbound && matches!(a.class, Class::Errors | Class::Latency)) {
        return "code_defect";
    }
    if mine().any(|a| a.outbound && a.class == Class::Latency) {
        return "network_delay";
    }
    "unknown"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::*;

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
        // Its own latency alone, no resource, no role: its own work went wrong.
        assert_eq!(
            kind(std::slice::from_ref(&slow)),
            ("b1".into(), Some("code_defect".into()))
        );
        // The exporter's own steal began minutes after the backend's trouble: not its cause.
        let late_steal = Anomaly {
            onset_ms: 300_000,
            ..of("node-1", "node_cpu_seconds_total", Class::Saturation, 6.0)
        };
        assert_eq!(kind(&[slow, late_steal]), ("b1".into(), Some("code_defect".into())));
        // An exporter that only went unanswered says nothing about its host.
        let unanswered = of("node-1", "up", Class::Availability, 40.0);
        assert_eq!(kind(&[unanswered]), ("node-1".into(), Some("unknown".into())));
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
}
