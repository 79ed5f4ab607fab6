//! What an open incident explains ([`Scope`]): the anomalies of what it names, of its callers
//! (while they do not stand out) and, for load, of its callees.

use super::*;

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
pub(super) struct Scope {
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
    /// Whether the incident is a host's (`host_saturation`, `host_network`): it names every
    /// instance on the host, but not their own lost availability ([`Scope::explains`]).
    host: bool,
}

impl Scope {
    /// Whether `anomaly` is explained by the incident this scope belongs to.
    pub(super) fn explains(&self, anomaly: &Anomaly) -> bool {
        if self.named.contains(&anomaly.instance) {
            // A starved host slows what runs on it; it does not kill it: an instance's own lost
            // availability (a dead node's `redis_up` 0 while its exporter answers) is a fault
            // of its own, not the host's. A target that stopped answering (`up`) may be the
            // host's.
            let own_loss = anomaly.peer.is_none() && anomaly.class == Class::Availability && anomaly.metric != "up";
            return !(self.host && own_loss);
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

impl Detector {
    /// The evidence an incident explains ([`Scope`]): a datacenter or link degradation names
    /// every instance of its datacenters, a host's saturation every instance of the host, a cold
    /// start (a deploy) also every instance of its service that restarts this round.
    pub(super) fn scope(&self, verdict: &Verdict, edges: &ServiceEdges) -> Scope {
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
            host: is_host_kind(&verdict.kind),
        }
    }
}
