//! Ground truth: what each fault of a scenario broke, where and when, derived from the
//! scenario alone (no knowledge of the detector), written with the run's data.

use serde::Serialize;

use crate::model::Fleet;

/// One injected fault, resolved to instances, hosts and datacenters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Truth {
    /// Scenario name.
    pub scenario: String,
    /// Fault kind (`node_loss`, `slow_node`, `cold_start`, …, [`crate::scenario::FaultKind::name`]).
    pub kind: String,
    /// Service of the faulty instances.
    pub service: String,
    /// Datacenters of the faulty instances, sorted, without repeats.
    pub dcs: Vec<String>,
    /// Hosts of the faulty instances, sorted, without repeats.
    pub hosts: Vec<String>,
    /// The faulty instances, in name order.
    pub instances: Vec<String>,
    /// Fault onset, milliseconds since the epoch (simulated clock).
    pub onset_ms: i64,
    /// Fault end, milliseconds since the epoch; `None` when it lasts to the end of the run.
    pub end_ms: Option<i64>,
}

/// The ground truth of every fault of the fleet's scenario, in scenario order.
pub fn ground_truth(fleet: &Fleet) -> Vec<Truth> {
    let scenario = fleet.scenario();
    scenario
        .faults
        .iter()
        .map(|fault| {
            let mut picked = fleet.select(fault);
            let instances = fleet.instances();
            // A session loss is triggered at the gateways and bottlenecks at the datacenter's
            // voice-state supervisor: the truth names both.
            if fault.kind == crate::scenario::FaultKind::SessionLoss {
                let dcs: Vec<String> = picked.iter().map(|&index| instances[index].dc.clone()).collect();
                picked.extend(
                    instances
                        .iter()
                        .enumerate()
                        .filter(|(_, instance)| {
                            instance.service == crate::topology::Service::Voice && dcs.contains(&instance.dc)
                        })
                        .map(|(index, _)| index),
                );
            }
            // A link names both of its datacenters, every instance of each.
            if fault.kind == crate::scenario::FaultKind::LinkDegradation {
                if let Some(peer) = &fault.peer_dc {
                    picked.extend(
                        instances
                            .iter()
                            .enumerate()
                            .filter(|(_, instance)| &instance.dc == peer)
                            .map(|(index, _)| index),
                    );
                }
            }
            let mut dcs: Vec<String> = picked.iter().map(|&index| instances[index].dc.clone()).collect();
            let mut hosts: Vec<String> = picked.iter().map(|&index| instances[index].host.clone()).collect();
            let mut names: Vec<String> = picked.iter().map(|&index| instances[index].name.clone()).collect();
            for list in [&mut dcs, &mut hosts, &mut names] {
                list.sort();
                list.dedup();
            }
            // A throttled container's service is whichever the selector picked.
            let service = match (fault.kind, picked.first()) {
                (crate::scenario::FaultKind::CpuThrottling, Some(&index)) => instances[index].service.name(),
                _ => fault.kind.service(),
            };
            let onset_seconds = fault.at.0.as_secs().max(1) as i64;
            let onset_ms = fleet.start_ms() + onset_seconds * 1000;
            Truth {
                scenario: scenario.name.clone(),
                kind: fault.kind.name().to_string(),
                service: service.to_string(),
                dcs,
                hosts,
                instances: names,
                onset_ms,
                end_ms: fault.duration.map(|duration| onset_ms + duration.0.as_millis() as i64),
            }
        })
        .collect()
}
