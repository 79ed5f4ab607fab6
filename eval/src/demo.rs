//! What `epicenter demo` reports after a run: the ground truth of the faults that happened,
//! as `ground_truth` rows; the detector's first verdict after the onset judged against it; and
//! queries that show each fault kind in the stored samples.

use epicenter_fleet::truth::Truth;
use epicenter_store::rows::GroundTruthRow;

/// The faults of `truth` that happened in a run that started at `start_ms` and reached
/// `reached_ms` (ms since the epoch, the simulated clock) of a scenario lasting `duration_ms`:
/// only faults that started; a fault still running when a run stopped early ends there.
pub fn truth_reached(truth: Vec<Truth>, start_ms: i64, reached_ms: i64, duration_ms: i64) -> Vec<Truth> {
    truth
        .into_iter()
        .filter(|fault| fault.onset_ms <= reached_ms)
        .map(|mut fault| {
            if fault.end_ms.is_none_or(|end| end > reached_ms) && reached_ms < start_ms + duration_ms {
                fault.end_ms = Some(reached_ms);
            }
            fault
        })
        .collect()
}

/// `truth` as rows of the `ground_truth` table.
pub fn truth_rows(truth: &[Truth]) -> Vec<GroundTruthRow> {
    truth
        .iter()
        .map(|fault| GroundTruthRow {
            scenario: fault.scenario.clone(),
            kind: fault.kind.clone(),
            service: fault.service.clone(),
            dcs: fault.dcs.clone(),
            hosts: fault.hosts.clone(),
            instances: fault.instances.clone(),
            onset_ms: fault.onset_ms,
            end_ms: fault.end_ms,
        })
        .collect()
}

/// A verdict as the `verdicts` table stores its opening: kind, datacenter, first host, time
/// (ms since the epoch).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedVerdict {
    /// Incident kind.
    pub kind: String,
    /// Datacenter named.
    pub dc: String,
    /// First host named.
    pub host: String,
    /// When it opened, ms since the epoch.
    pub time_ms: i64,
}

impl OpenedVerdict {
    /// Reads TabSeparated rows of `kind, dc, first host, time ms`; rows of another shape are
    /// skipped.
    pub fn parse_rows(text: &str) -> Vec<OpenedVerdict> {
        text.lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split('\t').collect();
                let [kind, dc, host, time] = fields.as_slice() else {
                    return None;
                };
                Some(OpenedVerdict {
                    kind: kind.to_string(),
                    dc: dc.to_string(),
                    host: host.to_string(),
                    time_ms: time.parse().ok()?,
                })
            })
            .collect()
    }
}

/// The first verdict opened at or after `fault`'s onset, judged against it.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstVerdict {
    /// The verdict.
    pub verdict: OpenedVerdict,
    /// Seconds from the onset to the verdict (whole seconds, rounded down).
    pub seconds_after_onset: i64,
    /// Whether its host is one of the fault's hosts.
    pub host_right: bool,
    /// Whether its datacenter is one of the fault's datacenters.
    pub dc_right: bool,
}

/// The first of `opened` (in time order) at or after `fault`'s onset, judged; `None` when the
/// detector opened none.
pub fn first_verdict_after(fault: &Truth, opened: &[OpenedVerdict]) -> Option<FirstVerdict> {
    let verdict = opened.iter().find(|verdict| verdict.time_ms >= fault.onset_ms)?;
    Some(FirstVerdict {
        host_right: fault.hosts.contains(&verdict.host),
        dc_right: fault.dcs.contains(&verdict.dc),
        seconds_after_onset: (verdict.time_ms - fault.onset_ms) / 1000,
        verdict: verdict.clone(),
    })
}

/// Three queries that show the fault of `kind` (`node_loss`, …; anything else: an overview)
/// in the samples a run of `scenario` stored, then its scrapes, then the ground truth.
pub fn suggested_queries(kind: &str, scenario: &str) -> Vec<String> {
    let this_run = format!("labels['scenario'] = '{}'", scenario.replace('\'', "''"));
    let specific = match kind {
        "node_loss" => format!("SELECT labels['pod'] AS node, toStartOfMinute(time) AS minute, max(value) - min(value) AS new_connections FROM samples WHERE metric = 'redis_connections_received_total' AND {this_run} GROUP BY node, minute ORDER BY minute, node"),
        "slow_node" => format!("SELECT labels['name'] AS redis_node, round(avg(value), 2) AS active_connections FROM samples WHERE metric = 'commons_pool2_num_active_objects' AND {this_run} GROUP BY redis_node ORDER BY active_connections DESC"),
        "cold_start" => format!("SELECT labels['pod'] AS pod, max(value) AS longest_gc_pause_seconds FROM samples WHERE metric = 'jvm_gc_pause_seconds_max' AND {this_run} GROUP BY pod ORDER BY longest_gc_pause_seconds DESC LIMIT 5"),
        "slow_database" => format!("SELECT labels['pool'] AS pool, max(value) AS pending_threads FROM samples WHERE metric = 'hikaricp_connections_pending' AND {this_run} GROUP BY pool ORDER BY pending_threads DESC"),
        "retry_storm" => format!("SELECT dc, labels['code'] AS code, max(value) - min(value) AS requests FROM samples WHERE metric = 'http_requests_total' AND {this_run} GROUP BY dc, code ORDER BY dc, code"),
        "dc_degradation" => format!("SELECT dc AS caller_dc, labels['remote'] AS remote, round(1000 * (maxIf(value, metric LIKE '%_sum') - minIf(value, metric LIKE '%_sum')) / (maxIf(value, metric LIKE '%_count') - minIf(value, metric LIKE '%_count')), 2) AS mean_command_ms FROM samples WHERE metric IN ('lettuce_command_completion_seconds_sum', 'lettuce_command_completion_seconds_count') AND {this_run} GROUP BY caller_dc, remote ORDER BY mean_command_ms DESC LIMIT 10"),
        "session_loss" => format!("SELECT labels['pod'] AS pod, toStartOfMinute(time) AS minute, max(value) AS voice_state_sup_mailbox FROM samples WHERE metric = 'erlang_vm_process_message_queue_len' AND labels['registered_name'] = 'voice_state_sup' AND {this_run} GROUP BY pod, minute ORDER BY minute, pod"),
        _ => format!("SELECT service, count(DISTINCT metric) AS metrics, count() AS samples FROM samples WHERE {this_run} GROUP BY service ORDER BY service"),
    };
    vec![
        specific,
        format!("SELECT service, dc, host, countIf(up = 0) AS failed_scrapes, round(max(duration_seconds), 3) AS slowest_scrape_seconds FROM scrapes WHERE job = service GROUP BY service, dc, host ORDER BY failed_scrapes DESC, service, host"),
        "SELECT scenario, kind, dcs, hosts, instances, onset FROM ground_truth ORDER BY onset DESC LIMIT 5".to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(onset_ms: i64, end_ms: Option<i64>) -> Truth {
        Truth {
            scenario: "s".into(),
            kind: "node_loss".into(),
            service: "redis".into(),
            dcs: vec!["dc-2".into()],
            hosts: vec!["dc-2-host-3".into()],
            instances: vec!["redis-2-1".into()],
            onset_ms,
            end_ms,
        }
    }

    #[test]
    fn only_faults_that_started_happened_and_a_cut_short_one_ends_there() {
        let truth = vec![fault(10_000, Some(20_000)), fault(50_000, None), fault(90_000, None)];
        // A run of 100 s stopped at 60 s: the third never started, the second ends at 60 s.
        let reached = truth_reached(truth.clone(), 0, 60_000, 100_000);
        assert_eq!(reached.len(), 2);
        assert_eq!(reached[0].end_ms, Some(20_000));
        assert_eq!(reached[1].end_ms, Some(60_000));
        // A run that reached its end leaves an open-ended fault open.
        let reached = truth_reached(truth, 0, 100_000, 100_000);
        assert_eq!(reached.len(), 3);
        assert_eq!(reached[2].end_ms, None);
    }

    #[test]
    fn the_first_verdict_after_the_onset_is_judged() {
        let rows = "unknown\tdc-1\tdc-1-host-1\t5000\nnot a row\nnode_loss\tdc-2\tdc-2-host-3\t13500\nslow_node\tdc-1\tdc-1-host-2\t20000\n";
        let opened = OpenedVerdict::parse_rows(rows);
        assert_eq!(opened.len(), 3, "{opened:?}");
        let first = first_verdict_after(&fault(10_000, None), &opened).unwrap();
        assert_eq!(first.verdict.kind, "node_loss");
        assert_eq!(first.seconds_after_onset, 3);
        assert!(first.host_right && first.dc_right);
        let wrong = first_verdict_after(&fault(15_000, None), &opened).unwrap();
        assert_eq!(wrong.verdict.kind, "slow_node");
        assert!(!wrong.host_right && !wrong.dc_right);
        assert_eq!(first_verdict_after(&fault(30_000, None), &opened), None);
    }

    #[test]
    fn truth_rows_carry_every_field() {
        let rows = truth_rows(&[fault(10_000, Some(20_000))]);
        assert_eq!(rows[0].instances, ["redis-2-1"]);
        assert_eq!((rows[0].onset_ms, rows[0].end_ms), (10_000, Some(20_000)));
        assert_eq!(rows[0].kind, "node_loss");
    }

    #[test]
    fn every_fault_kind_has_its_own_query() {
        let kinds = [
            "node_loss",
            "slow_node",
            "cold_start",
            "slow_database",
            "retry_storm",
            "dc_degradation",
            "session_loss",
        ];
        let overview = suggested_queries("none", "s")[0].clone();
        for kind in kinds {
            let queries = suggested_queries(kind, "it's");
            assert_eq!(queries.len(), 3);
            assert_ne!(queries[0], overview, "{kind}");
            // The scenario name is quoted as an SQL string.
            assert!(
                queries[0].contains("labels['scenario'] = 'it''s'"),
                "{kind}: {}",
                queries[0]
            );
        }
    }
}
