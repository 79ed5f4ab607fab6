//! `epicenter replay`: recomputes anomalies and verdicts from stored samples, so an
//! investigation can ask "what was the root cause at 14:03?" after the fact. The samples are
//! fed to the same detector the live path uses, round by round (one round per scrape
//! interval: the median gap between an instance's samples), so live and replay agree on the
//! same data.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use epicenter_detector::engine::{Detector, InstanceInfo, Settings};
use serde::Serialize;

use crate::run::EXIT_CONFIG;

/// Arguments of `epicenter replay`.
#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    /// Start of the period, RFC 3339 (`2026-12-01T14:00:00Z`); default: the first sample.
    #[arg(long, value_name = "TIME")]
    from: Option<String>,

    /// End of the period, RFC 3339; default: the last sample.
    #[arg(long, value_name = "TIME")]
    to: Option<String>,

    /// Configuration naming the store and the detector's dependencies and rules.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,

    /// The embedded store's directory instead of the configuration's (e.g. a demo's --data).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,

    /// Print the verdict events as JSON lines instead of text.
    #[arg(long)]
    json: bool,
}

/// One stored sample: metric, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// One verdict event of the replay.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReplayEvent {
    /// When, ms since the epoch.
    pub(crate) time_ms: i64,
    /// `opened`, `updated`, `resolved`.
    pub(crate) state: String,
    /// The verdict then.
    pub(crate) verdict: epicenter_detector::Verdict,
}

fn parse_time(text: &str, flag: &str) -> Result<i64, String> {
    let time = humantime::parse_rfc3339_weak(text)
        .map_err(|error| format!("{flag} '{text}': {error} (expected RFC 3339, e.g. 2026-12-01T14:00:00Z)"))?;
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("{flag} '{text}': before 1970"))?;
    Ok(since.as_millis() as i64)
}

/// Runs `epicenter replay`.
pub(crate) fn run(args: &ReplayArgs) -> ExitCode {
    let mut config = match crate::sql::store_config(args.config.as_ref(), args.data.as_ref()) {
        Ok(config) => config,
        Err(code) => return code,
    };
    if args.config.is_none() && config.detector.dependencies.is_empty() {
        // Without a configuration, the dependencies of the simulated fleet (the demo's).
        config.detector.dependencies = crate::eval::fleet_dependencies()
            .into_iter()
            .map(|d| epicenter_collector::config::DependencyConfig {
                caller: d.caller,
                callee: d.callee,
                same_dc: d.same_dc,
            })
            .collect();
    }
    let (from, to) = match (
        args.from.as_deref().map(|t| parse_time(t, "--from")).transpose(),
        args.to.as_deref().map(|t| parse_time(t, "--to")).transpose(),
    ) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(error), _) | (_, Err(error)) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let rules = match crate::live::load_rules(&config) {
        Ok(rules) => rules,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let (runtime, store) = match crate::sql::open_existing(&config) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    // The synthetic `up` carries the scrape's wall time while a target may stamp its own
    // samples (a simulated fleet's clock): replay groups by sample time, so it leaves `up`
    // out; a target that stops answering still shows, as a target with no samples.
    let metrics: Vec<String> = crate::live::rule_metrics(&rules)
        .into_iter()
        .filter(|metric| !metric.starts_with("up"))
        .collect();
    let quoted: Vec<String> = metrics
        .iter()
        .map(|m| format!("'{}'", m.replace('\'', "\\'")))
        .collect();
    let mut conditions = vec![format!("metric IN ({})", quoted.join(", "))];
    if let Some(from) = from {
        conditions.push(format!("time >= fromUnixTimestamp64Milli({from})"));
    }
    if let Some(to) = to {
        conditions.push(format!("time <= fromUnixTimestamp64Milli({to})"));
    }
    let sql = format!(
        "SELECT toUnixTimestamp64Milli(time) AS t, metric, labels, value, dc, host, service FROM samples WHERE {} ORDER BY t",
        conditions.join(" AND ")
    );
    let output = match store.query(&runtime, &sql, "JSONEachRow") {
        Ok(output) => output,
        Err(error) => {
            eprintln!("error: reading samples: {error}");
            return ExitCode::from(1);
        }
    };
    let events = replay(&String::from_utf8_lossy(&output), rules, &config);
    if events.is_empty() {
        eprintln!("replay: no verdict in the period");
    }
    for event in &events {
        if args.json {
            println!("{}", serde_json::to_string(event).unwrap_or_default());
        } else {
            let when = humantime::format_rfc3339_millis(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(event.time_ms.max(0) as u64),
            );
            println!("{when} {}: {}", event.state, crate::live::describe(&event.verdict));
        }
    }
    ExitCode::SUCCESS
}

/// Feeds `rows` (JSONEachRow of t, metric, labels, value, dc, host, service) to a fresh
/// detector, one round per scrape interval, and returns the verdict events.
pub(crate) fn replay(
    rows: &str,
    rules: Vec<epicenter_detector::rules::Rule>,
    config: &epicenter_collector::config::Config,
) -> Vec<ReplayEvent> {
    #[derive(serde::Deserialize)]
    struct Row {
        t: serde_json::Value,
        metric: String,
        labels: BTreeMap<String, String>,
        value: f64,
        dc: String,
        host: String,
        service: String,
    }
    // Per (instance, time): one scrape.
    let mut scrapes: BTreeMap<(i64, String), (InstanceInfo, Vec<Sample>)> = BTreeMap::new();
    for line in rows.lines() {
        let Ok(row) = serde_json::from_str::<Row>(line) else {
            continue;
        };
        let time = row
            .t
            .as_i64()
            .or_else(|| row.t.as_str().and_then(|t| t.parse().ok()))
            .unwrap_or(0);
        let name = row
            .labels
            .get("pod")
            .or_else(|| row.labels.get("instance"))
            .cloned()
            .unwrap_or_default();
        let entry = scrapes.entry((time, name.clone())).or_insert_with(|| {
            (
                InstanceInfo {
                    name,
                    dc: row.dc.clone(),
                    host: row.host.clone(),
                    service: row.service.clone(),
                },
                Vec::new(),
            )
        });
        entry.1.push((row.metric, row.labels, row.value));
    }
    // The scrape interval: the median gap between one instance's scrapes (robust to jitter).
    let mut last: HashMap<&str, i64> = HashMap::new();
    let mut gaps = Vec::new();
    for (time, name) in scrapes.keys() {
        if let Some(before) = last.insert(name.as_str(), *time) {
            if *time > before {
                gaps.push(time - before);
            }
        }
    }
    if gaps.is_empty() {
        return Vec::new();
    }
    gaps.sort_unstable();
    let interval = gaps[gaps.len() / 2];
    let dependencies = crate::live::dependencies(config);
    let mut detector = Detector::new(rules, dependencies, interval, Settings::default());
    let mut events = Vec::new();
    let mut open: Option<epicenter_detector::Verdict> = None;
    let Some(&(first, _)) = scrapes.keys().next() else {
        return events;
    };
    let mut boundary = first + interval;
    let mut latest = first;
    let assess = |detector: &mut Detector,
                  at: i64,
                  open: &mut Option<epicenter_detector::Verdict>,
                  events: &mut Vec<ReplayEvent>| {
        let assessment = detector.assess(at);
        let event = match (&open, &assessment.verdict, assessment.resolved) {
            (_, Some(verdict), _) if assessment.opened => Some(("opened", verdict.clone())),
            (Some(before), Some(verdict), _)
                if before.kind != verdict.kind
                    || before.dc != verdict.dc
                    || before.hosts.first() != verdict.hosts.first() =>
            {
                Some(("updated", verdict.clone()))
            }
            (Some(before), None, true) => Some(("resolved", before.clone())),
            _ => None,
        };
        *open = assessment.verdict.clone();
        if let Some((state, verdict)) = event {
            events.push(ReplayEvent {
                time_ms: at,
                state: state.to_string(),
                verdict,
            });
        }
    };
    for ((time, _), (info, samples)) in scrapes {
        while time >= boundary {
            assess(&mut detector, latest, &mut open, &mut events);
            boundary += interval;
        }
        latest = latest.max(time);
        detector.observe(time, &info, samples.iter().map(|(m, l, v)| (m.as_str(), l.clone(), *v)));
    }
    assess(&mut detector, latest, &mut open, &mut events);
    events
}
