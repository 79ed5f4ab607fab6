//! The detector inside `epicenter run` and `epicenter demo`: scraped samples that a signal
//! rule names go to the detector as they arrive; every `detector.interval` it judges them,
//! and verdict events are printed, stored (`anomalies`, `verdicts`), served at
//! `/api/v1/verdicts` and exported as `epicenter_verdict_open`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use epicenter_collector::config::Config;
use epicenter_collector::scrape::ScrapeOutcome;
use epicenter_detector::engine::{Assessment, Dependency, Detector, InstanceInfo, Settings, Verdict};
use epicenter_detector::rules::{self, Rule};
use tokio::sync::{mpsc, watch};

use crate::run::Store;
use crate::server::{AppState, VerdictEvent};

/// The rules the configuration names (`detector.rules_file`, else the shipped ones), or a
/// message naming the key and the problem.
pub(crate) fn load_rules(config: &Config) -> Result<Vec<Rule>, String> {
    let text = match &config.detector.rules_file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| format!("detector.rules_file: cannot read {}: {error}", path.display()))?,
        None => rules::SHIPPED.to_string(),
    };
    rules::parse(&text).map_err(|error| match &config.detector.rules_file {
        Some(path) => format!("detector.rules_file {}: {error}", path.display()),
        None => format!("the shipped rules: {error}"),
    })
}

/// `detector.dependencies` as the detector takes them.
pub(crate) fn dependencies(config: &Config) -> Vec<Dependency> {
    config
        .detector
        .dependencies
        .iter()
        .map(|dependency| Dependency {
            caller: dependency.caller.clone(),
            callee: dependency.callee.clone(),
            same_dc: dependency.same_dc,
        })
        .collect()
}

/// One target's scrape, reduced to the samples a rule names.
pub(crate) struct Batch {
    time_ms: i64,
    instance: InstanceInfo,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

/// The metric names any rule reads (with `_sum`/`_count` for means).
pub(crate) fn rule_metrics(rules: &[Rule]) -> HashSet<String> {
    let mut names = HashSet::new();
    for rule in rules {
        names.insert(rule.spec.metric.clone());
        names.insert(format!("{}_sum", rule.spec.metric));
        names.insert(format!("{}_count", rule.spec.metric));
    }
    names
}

/// The part of `outcome` the detector reads: the target (named by its `pod` label, else its
/// `instance`) and the samples of families a rule names.
pub(crate) fn extract(outcome: &ScrapeOutcome, metrics: &HashSet<String>) -> Option<Batch> {
    let report = &outcome.report;
    let name = outcome
        .rows
        .first()
        .and_then(|row| row.series.labels.get("pod").cloned())
        .unwrap_or_else(|| report.instance.clone());
    let samples: Vec<(String, BTreeMap<String, String>, f64)> = outcome
        .rows
        .iter()
        .filter(|row| metrics.contains(&row.series.name))
        .map(|row| (row.series.name.clone(), row.series.labels.clone(), row.value))
        .collect();
    let time_ms = outcome.rows.iter().map(|row| row.timestamp_ms).max()?;
    Some(Batch {
        time_ms,
        instance: InstanceInfo {
            name,
            dc: report.placement.dc.clone(),
            host: report.placement.host.clone(),
            service: report.placement.service.clone(),
        },
        samples,
    })
}

/// Runs the detector until `shutdown`: observes batches, judges every `tick`.
pub(crate) async fn run(
    rules: Vec<Rule>,
    dependencies: Vec<Dependency>,
    tick: Duration,
    mut inbox: mpsc::Receiver<Batch>,
    state: Arc<AppState>,
    store: Store,
    mut shutdown: watch::Receiver<bool>,
) {
    // The samples' clock may run faster than the wall clock (a simulated fleet): the interval
    // the detector reasons in is measured between one target's scrapes, and the detector is
    // built once the first gaps are known.
    let mut detector: Option<Detector> = None;
    let mut pending: Vec<Batch> = Vec::new();
    let mut previous: HashMap<String, i64> = HashMap::new();
    let mut gaps: Vec<i64> = Vec::new();
    let mut interval_ms: Option<i64> = None;
    let mut latest_ms = 0i64;
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            batch = inbox.recv() => {
                let Some(batch) = batch else { return };
                // The interval is the median of the first gaps between one target's samples
                // (robust to scheduling jitter); fixed once 30 gaps are known.
                if let Some(before) = previous.insert(batch.instance.name.clone(), batch.time_ms) {
                    let gap = batch.time_ms - before;
                    if gap > 0 && gaps.len() < 30 {
                        gaps.push(gap);
                        let mut sorted = gaps.clone();
                        sorted.sort_unstable();
                        interval_ms = Some(sorted[sorted.len() / 2]);
                    }
                }
                latest_ms = latest_ms.max(batch.time_ms);
                pending.push(batch);
            }
            _ = ticks.tick() => {
                let Some(interval) = interval_ms.filter(|_| gaps.len() >= 5) else { continue };
                let detector = detector.get_or_insert_with(|| {
                    Detector::new(rules.clone(), dependencies.clone(), interval, Settings::default())
                });
                for batch in pending.drain(..) {
                    let samples = batch.samples.iter().map(|(name, labels, value)| (name.as_str(), labels.clone(), *value));
                    detector.observe(batch.time_ms, &batch.instance, samples);
                }
                let assessment = detector.assess(latest_ms);
                let instances = detector.instances().clone();
                let graph = epicenter_detector::reference::graph_document(&instances, detector.dependencies(), &detector.peer_edges());
                if let Ok(mut slot) = state.graph.lock() {
                    *slot = Some(graph);
                }
                record(&assessment, &instances, &state, &store).await;
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// Prints, stores and publishes what an assessment changed.
async fn record(assessment: &Assessment, instances: &BTreeMap<String, InstanceInfo>, state: &AppState, store: &Store) {
    let place = |name: &str, pick: fn(&InstanceInfo) -> &str| -> String {
        instances.get(name).map_or(String::new(), |info| pick(info).to_string())
    };
    let new_anomalies: Vec<String> = assessment
        .anomalies
        .iter()
        .filter(|anomaly| anomaly.rounds == 1)
        .map(|anomaly| {
            format!(
                "(fromUnixTimestamp64Milli({}), {}, {}, {}, {}, {}, {}, {}, {}, fromUnixTimestamp64Milli({}))",
                assessment.time_ms,
                quote(&anomaly.instance),
                quote(&place(&anomaly.instance, |info| &info.dc)),
                quote(&place(&anomaly.instance, |info| &info.host)),
                quote(&place(&anomaly.instance, |info| &info.service)),
                quote(&anomaly.metric),
                quote(&format!("{:?}", anomaly.class).to_lowercase()),
                quote(anomaly.peer.as_deref().unwrap_or("")),
                if anomaly.score.is_finite() { anomaly.score } else { 0.0 },
                anomaly.onset_ms
            )
        })
        .collect();
    if !new_anomalies.is_empty() {
        let sql = format!(
            "INSERT INTO anomalies (time, instance, dc, host, service, metric, class, peer, score, onset) VALUES {}",
            new_anomalies.join(", ")
        );
        if let Err(error) = store.execute(sql).await {
            tracing::warn!(%error, "storing anomalies failed");
        }
    }
    let previous = state.verdicts.lock().map(|book| book.open.clone()).unwrap_or(None);
    let event = match (&previous, &assessment.verdict, assessment.resolved) {
        (_, Some(verdict), _) if assessment.opened => Some(("opened", verdict.clone())),
        (Some(before), Some(verdict), _) if changed(before, verdict) => Some(("updated", verdict.clone())),
        (Some(before), None, true) => Some(("resolved", before.clone())),
        _ => None,
    };
    if let Ok(mut book) = state.verdicts.lock() {
        book.open = assessment.verdict.clone();
        if let Some((kind, verdict)) = &event {
            book.history.push(VerdictEvent {
                time_ms: assessment.time_ms,
                state: kind.to_string(),
                verdict: verdict.clone(),
            });
            let excess = book.history.len().saturating_sub(100);
            book.history.drain(..excess);
        }
    }
    let gauge = &state.telemetry.verdict_open;
    gauge.reset();
    if let Some(verdict) = &assessment.verdict {
        let host = verdict.hosts.first().map_or("", String::as_str);
        gauge
            .with_label_values(&[
                verdict.dc.as_str(),
                host,
                verdict.service.as_str(),
                verdict.kind.as_str(),
            ])
            .set(1);
    }
    let Some((kind, verdict)) = event else { return };
    println!("epicenter: VERDICT {kind}: {}", describe(&verdict));
    state.notifiers.notify(&crate::notify::Event {
        state: kind.to_string(),
        verdict: verdict.clone(),
    });
    let evidence = serde_json::to_string(&verdict.evidence).unwrap_or_default();
    let sql = format!(
        "INSERT INTO verdicts (time, id, state, kind, dc, hosts, service, instances, confidence, onset, opened, evidence) VALUES (fromUnixTimestamp64Milli({}), {}, {}, {}, {}, [{}], {}, [{}], {}, fromUnixTimestamp64Milli({}), fromUnixTimestamp64Milli({}), {})",
        assessment.time_ms,
        quote(&format!("{}-{}", verdict.opened_ms, verdict.instances.first().map_or("", String::as_str))),
        quote(kind),
        quote(&verdict.kind),
        quote(&verdict.dc),
        verdict.hosts.iter().map(|host| quote(host)).collect::<Vec<_>>().join(", "),
        quote(&verdict.service),
        verdict.instances.iter().map(|name| quote(name)).collect::<Vec<_>>().join(", "),
        verdict.confidence,
        verdict.onset_ms,
        verdict.opened_ms,
        quote(&evidence)
    );
    if let Err(error) = store.execute(sql).await {
        tracing::warn!(%error, "storing the verdict failed");
    }
}

/// Whether the answer a person acts on changed: kind, datacenter or first host.
fn changed(before: &Verdict, now: &Verdict) -> bool {
    before.kind != now.kind || before.dc != now.dc || before.hosts.first() != now.hosts.first()
}

/// One line: what, where, how sure, since when.
pub(crate) fn describe(verdict: &Verdict) -> String {
    let hosts: Vec<&str> = verdict.hosts.iter().take(3).map(String::as_str).collect();
    format!(
        "{} of {} ({}) on {} in {}, confidence {:.2}, {} pieces of evidence",
        verdict.kind,
        verdict.instances.join(", "),
        verdict.service,
        hosts.join(", "),
        verdict.dc,
        verdict.confidence,
        verdict.evidence.len()
    )
}

/// A ClickHouse string literal.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}
