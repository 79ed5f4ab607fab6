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

/// Turns assessments, round after round, into verdict events, incident by incident (by
/// [`Verdict::id`]).
#[derive(Debug, Clone, Default)]
pub struct VerdictTracker {
    open: Vec<Verdict>,
}

impl VerdictTracker {
    /// The events `assessment` brings (`opened` and `updated` in the order of its incidents,
    /// then `resolved`), and remembers its incidents as the open ones.
    pub fn track(&mut self, assessment: &Assessment) -> Vec<VerdictEvent> {
        let mut events = Vec::new();
        for verdict in &assessment.incidents {
            let before = self.open.iter().find(|before| before.id == verdict.id);
            if assessment.opened.contains(&verdict.id) {
                events.push(("opened", verdict.clone()));
            } else if before.is_some_and(|before| changed(before, verdict)) {
                events.push(("updated", verdict.clone()));
            }
        }
        for verdict in &assessment.resolved {
            if let Some(before) = self.open.iter().find(|before| before.id == verdict.id) {
                events.push(("resolved", before.clone()));
            }
        }
        self.open = assessment.incidents.clone();
        events
            .into_iter()
            .map(|(state, verdict)| VerdictEvent {
                time_ms: assessment.time_ms,
                state: state.to_string(),
                verdict,
            })
            .collect()
    }

    /// The incidents open after the last round tracked, oldest first.
    pub fn open(&self) -> &[Verdict] {
        &self.open
    }
}

/// Whether the answer a person acts on changed: kind, datacenter or first host.
fn changed(before: &Verdict, now: &Verdict) -> bool {
    before.kind != now.kind || before.dc != now.dc || before.hosts.first() != now.hosts.first()
}

impl Verdict {
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
            id: verdict.id.clone(),
            state: self.state.clone(),
            kind: verdict.kind.clone(),
            dc: verdict.dc.clone(),
            dcs: verdict.dcs.clone(),
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

    fn verdict(id: &str, host: &str) -> Verdict {
        Verdict {
            id: id.into(),
            kind: "node_loss".into(),
            dc: "dc-1".into(),
            dcs: vec!["dc-1".into()],
            hosts: vec![host.into()],
            service: "redis".into(),
            instances: vec![id.into()],
            confidence: 0.9,
            leader_share: 0.5,
            candidates: Vec::new(),
            evidence: Vec::new(),
            onset_ms: 0,
            opened_ms: 0,
        }
    }

    fn assessment(time_ms: i64, incidents: Vec<Verdict>, opened: &[&str], resolved: Vec<Verdict>) -> Assessment {
        Assessment {
            time_ms,
            anomalies: Vec::new(),
            candidates: Vec::new(),
            incidents,
            opened: opened.iter().map(|id| id.to_string()).collect(),
            resolved,
            held: false,
            tie_broken_by_name: false,
        }
    }

    /// Each incident has its own events: two opened in one round, one updated when its
    /// answer changes while the other stays silent, one resolved as it was last open.
    #[test]
    fn every_incident_has_its_own_events() {
        let states = |events: Vec<VerdictEvent>| -> Vec<(String, String, String)> {
            events
                .into_iter()
                .map(|event| (event.state, event.verdict.id.clone(), event.verdict.hosts[0].clone()))
                .collect()
        };
        let owned = |rows: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
            rows.iter()
                .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
                .collect()
        };
        let mut tracker = VerdictTracker::default();
        let both = vec![verdict("a", "h1"), verdict("b", "h2")];
        assert_eq!(
            states(tracker.track(&assessment(1, both.clone(), &["a", "b"], Vec::new()))),
            owned(&[("opened", "a", "h1"), ("opened", "b", "h2")])
        );
        assert!(tracker.track(&assessment(2, both, &[], Vec::new())).is_empty());
        let moved = vec![verdict("a", "h1"), verdict("b", "h3")];
        assert_eq!(
            states(tracker.track(&assessment(3, moved, &[], Vec::new()))),
            owned(&[("updated", "b", "h3")])
        );
        // `a` resolves as it was last open (h1), even if the round reports it otherwise.
        let events = tracker.track(&assessment(4, vec![verdict("b", "h3")], &[], vec![verdict("a", "h9")]));
        assert_eq!(states(events), owned(&[("resolved", "a", "h1")]));
        assert_eq!(tracker.open().len(), 1);
        assert_eq!(tracker.open()[0].id, "b");
    }

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
            labels: BTreeMap::new(),
            value: 0.0,
            baseline: 0.0,
            deviation: 0.0,
            resource: None,
            outbound: false,
        };
        let mut verdict = Verdict {
            id: "2000-redis-2-1".into(),
            kind: "node_loss".into(),
            dc: "dc-2".into(),
            dcs: vec!["dc-2".into()],
            hosts: vec!["dc-2-host-3".into()],
            service: "redis".into(),
            instances: vec!["redis-2-1".into()],
            confidence: 0.9198,
            leader_share: 0.5,
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
