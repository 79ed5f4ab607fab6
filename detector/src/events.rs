//! Verdict events: what changed between two rounds, as a person acts on it. A verdict is
//! `opened`, `updated` when the answer changed (kind, datacenter or first host) and
//! `resolved` when it closed; the live loop, replay, the API, the store and the notifiers all
//! see the same events.

use std::collections::BTreeMap;

use epicenter_store::rows::{AnomalyRow, Placement, VerdictRow};
use serde::Serialize;

use crate::engine::{Assessment, InstanceInfo, Verdict};

/// One verdict event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictEvent {
    /// When, ms since the epoch (the samples' clock).
    pub time_ms: i64,
    /// `opened`, `updated` or `resolved`.
    pub state: String,
    /// The verdict then (for `resolved`, as it was last open).
    pub verdict: Verdict,
}

/// Turns assessments, round after round, into verdict events.
#[derive(Debug, Clone, Default)]
pub struct VerdictTracker {
    open: Option<Verdict>,
}

impl VerdictTracker {
    /// The event `assessment` brings, if any, and remembers its verdict as the open one.
    pub fn track(&mut self, assessment: &Assessment) -> Option<VerdictEvent> {
        let event = match (&self.open, &assessment.verdict, assessment.resolved) {
            (_, Some(verdict), _) if assessment.opened => Some(("opened", verdict.clone())),
            (Some(before), Some(verdict), _) if changed(before, verdict) => Some(("updated", verdict.clone())),
            (Some(before), None, true) => Some(("resolved", before.clone())),
            _ => None,
        };
        self.open = assessment.verdict.clone();
        event.map(|(state, verdict)| VerdictEvent {
            time_ms: assessment.time_ms,
            state: state.to_string(),
            verdict,
        })
    }

    /// The verdict open after the last round tracked.
    pub fn open(&self) -> Option<&Verdict> {
        self.open.as_ref()
    }
}

/// Whether the answer a person acts on changed: kind, datacenter or first host.
fn changed(before: &Verdict, now: &Verdict) -> bool {
    before.kind != now.kind || before.dc != now.dc || before.hosts.first() != now.hosts.first()
}

impl Verdict {
    /// Id of a verdict: when it opened and what it first named, `<opened ms>-<instance>`
    /// (the `verdicts.id` column and Alertmanager's `verdict_id` annotation).
    pub fn id(&self) -> String {
        format!(
            "{}-{}",
            self.opened_ms,
            self.instances.first().map_or("", String::as_str)
        )
    }

    /// One line: what, where, how sure, since when
    /// (`node_loss of redis-2-1 (redis) on dc-2-host-3 in dc-2, confidence 0.93, 12 pieces of
    /// evidence`).
    pub fn describe(&self) -> String {
        let hosts: Vec<&str> = self.hosts.iter().take(3).map(String::as_str).collect();
        format!(
            "{} of {} ({}) on {} in {}, confidence {:.2}, {} {}",
            self.kind,
            self.instances.join(", "),
            self.service,
            hosts.join(", "),
            self.dc,
            self.confidence,
            self.evidence.len(),
            if self.evidence.len() == 1 {
                "piece of evidence"
            } else {
                "pieces of evidence"
            }
        )
    }
}

impl VerdictEvent {
    /// The event as a row of the `verdicts` table.
    pub fn row(&self) -> VerdictRow {
        let verdict = &self.verdict;
        VerdictRow {
            time_ms: self.time_ms,
            id: verdict.id(),
            state: self.state.clone(),
            kind: verdict.kind.clone(),
            dc: verdict.dc.clone(),
            hosts: verdict.hosts.clone(),
            service: verdict.service.clone(),
            instances: verdict.instances.clone(),
            confidence: verdict.confidence,
            onset_ms: verdict.onset_ms,
            opened_ms: verdict.opened_ms,
            evidence_json: serde_json::to_string(&verdict.evidence).unwrap_or_default(),
        }
    }
}

/// The anomalies an assessment saw for the first time (their first round), as rows of the
/// `anomalies` table, placed by `instances`.
pub fn new_anomaly_rows(assessment: &Assessment, instances: &BTreeMap<String, InstanceInfo>) -> Vec<AnomalyRow> {
    assessment
        .anomalies
        .iter()
        .filter(|anomaly| anomaly.rounds == 1)
        .map(|anomaly| AnomalyRow {
            time_ms: assessment.time_ms,
            instance: anomaly.instance.clone(),
            placement: instances
                .get(&anomaly.instance)
                .map(|info| Placement {
                    instance: info.name.clone(),
                    dc: info.dc.clone(),
                    host: info.host.clone(),
                    service: info.service.clone(),
                })
                .unwrap_or_default(),
            metric: anomaly.metric.clone(),
            class: format!("{:?}", anomaly.class).to_lowercase(),
            peer: anomaly.peer.clone().unwrap_or_default(),
            score: anomaly.score,
            onset_ms: anomaly.onset_ms,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Anomaly;
    use crate::rules::Class;

    #[test]
    fn the_one_line_counts_its_evidence_in_good_english() {
        let anomaly = Anomaly {
            instance: "redis-2-1".into(),
            metric: "redis_up".into(),
            class: Class::Availability,
            peer: None,
            score: 9.0,
            onset_ms: 1_000,
            rounds: 1,
        };
        let mut verdict = Verdict {
            kind: "node_loss".into(),
            dc: "dc-2".into(),
            hosts: vec!["dc-2-host-3".into()],
            service: "redis".into(),
            instances: vec!["redis-2-1".into()],
            confidence: 0.9198,
            candidates: Vec::new(),
            evidence: vec![anomaly.clone()],
            onset_ms: 1_000,
            opened_ms: 2_000,
        };
        assert_eq!(
            verdict.describe(),
            "node_loss of redis-2-1 (redis) on dc-2-host-3 in dc-2, confidence 0.92, 1 piece of evidence"
        );
        verdict.evidence.push(anomaly);
        assert!(verdict.describe().ends_with(", 2 pieces of evidence"));
    }
}
