//! The report `epicenter eval` prints for scenarios: a table with a line per fault and the
//! overall figures ([`table`]).

use std::fmt::Write as _;

use crate::scenarios::{ScenarioResult, Summary};

/// The table `epicenter eval` prints: a line per fault (the scenario's false verdicts on its
/// first), then the overall figures, the confidence's Brier score and reliability, and the
/// reference rankings' means.
pub fn table(results: &[ScenarioResult], summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<34} {:<44} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>5} | {:>11} {:>11}",
        "scenario",
        "ground truth",
        "incident (kind dc: hosts)",
        "h@1",
        "h@3",
        "havg5",
        "dc@1",
        "kind",
        "TTD",
        "false",
        "robust-z h@1/3",
        "pagerank h@1/3"
    );
    for result in results {
        if result.incidents.is_empty() {
            let _ = writeln!(
                out,
                "{:<24} {:<34} {:<44} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>5} |",
                result.scenario, "none", "-", "", "", "", "", "", "", result.false_verdicts
            );
        }
        // One line per fault; the scenario's false verdicts on its first.
        for (row, incident) in result.incidents.iter().enumerate() {
            let truth = result.truth.get(incident.truth).map_or("none".to_string(), |t| {
                format!("{} {}: {}", t.kind, t.dcs.join(","), t.hosts.join(","))
            });
            let verdict = incident.verdict.as_ref().map_or("none".to_string(), |v| {
                format!("{} {}: {}", v.kind, v.dcs.join(","), v.hosts.join(","))
            });
            let ttd = incident
                .intervals_to_detect
                .map_or("-".to_string(), |v| format!("{v:.1}"));
            let s = &incident.epicenter;
            let false_verdicts = if row == 0 {
                result.false_verdicts.to_string()
            } else {
                String::new()
            };
            let _ = writeln!(out,
                "{:<24} {:<34} {:<44} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>5} {:>6} {:>5} | {:>5.2}/{:<5.2} {:>5.2}/{:<5.2}",
                if row == 0 { result.scenario.as_str() } else { "" },
                truncate(&truth, 34),
                truncate(&verdict, 44),
                s.host_ac1,
                s.host_ac3,
                s.host_avg5,
                s.dc_ac1,
                if incident.kind_right { "ok" } else { "wrong" },
                ttd,
                false_verdicts,
                incident.robust_z.host_ac1,
                incident.robust_z.host_ac3,
                incident.pagerank.host_ac1,
                incident.pagerank.host_ac3,
            );
        }
    }
    if summary.faults == 0 {
        let _ = writeln!(
            out,
            "\nno scenario with faults: false verdicts {} ({:.2} per simulated day)",
            summary.false_verdicts, summary.false_verdicts_per_day
        );
        return out;
    }
    let s = &summary.epicenter;
    let _ = writeln!(out,
        "\noverall ({} faults in {} scenarios, each fault scored on its own incident): epicenter host AC@1 {:.2}, AC@3 {:.2}, Avg@5 {:.2}, dc AC@1 {:.2}; kind right {:.2}; datacenters exactly right {:.2}; time to detect median {}, slowest {} scrape intervals; false verdicts {} ({:.2} per simulated day)",
        summary.faults,
        summary.scenarios_with_faults,
        s.host_ac1,
        s.host_ac3,
        s.host_avg5,
        s.dc_ac1,
        summary.kind_accuracy,
        summary.dc_set_accuracy,
        summary.median_intervals_to_detect.map_or("-".to_string(), |v| format!("{v:.1}")),
        summary.max_intervals_to_detect.map_or("-".to_string(), |v| format!("{v:.1}")),
        summary.false_verdicts,
        summary.false_verdicts_per_day,
    );
    let calibration = &summary.calibration;
    if let Some(brier) = calibration.brier {
        let _ = writeln!(out,
            "  confidence over {} incidents: Brier score {brier:.3}; reliability (confidence bin: incidents, mean confidence, share right): {}",
            calibration.verdicts,
            calibration
                .bins
                .iter()
                .map(|bin| format!(
                    "{:.1}-{:.1}: {}, {:.2}, {:.2}",
                    bin.from, bin.to, bin.verdicts, bin.mean_confidence, bin.observed
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    for (name, scores) in [
        ("robust z-score (BARO/N-Sigma style)", &summary.robust_z),
        ("personalized PageRank (MicroRCA style)", &summary.pagerank),
    ] {
        let _ = writeln!(
            out,
            "  reference, {name}: host AC@1 {:.2}, AC@3 {:.2}, Avg@5 {:.2}, dc AC@1 {:.2}",
            scores.host_ac1, scores.host_ac3, scores.host_avg5, scores.dc_ac1
        );
    }
    out
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let cut: String = text.chars().take(width - 1).collect();
        format!("{cut}…")
    }
}
