//! What `epicenter demo` runs and reports: the collector configuration for a served fleet,
//! the timeline's marks, the ground truth of the faults that happened (as `ground_truth`
//! rows), the detector's first verdict after the onset judged against it, and queries that
//! show each fault kind in the stored samples.

use std::path::{Path, PathBuf};
use std::time::Duration;

use epicenter_fleet::scenario::Scenario;
use epicenter_fleet::serve::ServedInstance;
use epicenter_fleet::truth::Truth;
use epicenter_store::rows::GroundTruthRow;

/// The collector configuration the demo runs: one job per service, every instance a static
/// target labelled with its datacenter, host and service; simulated timestamps honoured.
///
/// `interval` is the wall-clock scrape interval (at least 100 ms; the timeout is 80 % of it,
/// at least 80 ms), `data` the embedded store's directory; the server listens on a free port
/// of 127.0.0.1 and the detector judges every interval with the fleet's dependencies.
pub fn collector_config(scenario: &Scenario, served: &[ServedInstance], interval: Duration, data: &Path) -> String {
    let interval_ms = interval.as_millis().max(100);
    let timeout_ms = (interval_ms * 8 / 10).max(80);
    let mut yaml = format!(
        "global:\n  scrape_interval: {interval_ms}ms\n  scrape_timeout: {timeout_ms}ms\n  external_labels: {{scenario: '{}'}}\nscrape_configs:\n",
        // Single-quoted YAML: any name a scenario file may give stays one value.
        scenario.name.replace('\'', "''")
    );
    // One job per service, in the fleet's order.
    let mut services: Vec<&str> = Vec::new();
    for target in served {
        if !services.contains(&target.instance.service.name()) {
            services.push(target.instance.service.name());
        }
    }
    for service in services {
        yaml.push_str(&format!("  - job_name: {service}\n"));
        // A kubelet's cAdvisor series name their own pod (a `pod` target label would overwrite
        // it), and each container's service is its `container`.
        let kubelet = service == epicenter_fleet::Service::Kubelet.name();
        if kubelet {
            yaml.push_str("    metric_relabel_configs:\n      - {source_labels: [container], regex: '(.+)', target_label: service}\n");
        }
        yaml.push_str("    static_configs:\n");
        for target in served.iter().filter(|target| target.instance.service.name() == service) {
            let pod = if kubelet {
                String::new()
            } else {
                format!(", pod: {}", target.instance.name)
            };
            yaml.push_str(&format!(
                "      - targets: ['{}']\n        labels: {{dc: {}, host: {}, service: {service}{pod}}}\n",
                target.address, target.instance.dc, target.instance.host
            ));
        }
    }
    yaml.push_str(&format!(
        "storage:\n  embedded:\n    path: '{}'\nserver:\n  listen_address: 127.0.0.1:0\nplacement:\n  instance_label: pod\ndetector:\n  interval: {interval_ms}ms\n  dependencies:\n{}",
        data.display().to_string().replace('\'', "''"),
        crate::scenarios::fleet_dependencies()
            .iter()
            .map(|d| format!("    - {{caller: {}, callee: {}, same_dc: {}}}\n", d.caller, d.callee, d.same_dc))
            .collect::<String>()
    ));
    yaml
}

/// A mark on the demo's timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark<'a> {
    /// The fault starts.
    Starts(&'a Truth),
    /// The fault ends.
    Ends(&'a Truth),
}

/// The demo's timeline: which marks the simulated clock passed since it was last read, and
/// whether it crossed a 30-second progress line. The clock is read from a watch channel: under
/// load a reader sees only the latest second, so a mark is reported when the clock passes it,
/// not only when it lands on it.
#[derive(Debug)]
pub struct Timeline<'a> {
    truth: &'a [Truth],
    start_ms: i64,
    seen_second: Option<u64>,
}

/// Simulated seconds between two progress lines.
pub const PROGRESS_EVERY_SECONDS: u64 = 30;

impl<'a> Timeline<'a> {
    /// A timeline over `truth` for a run that started at `start_ms` (ms since the epoch).
    pub fn new(truth: &'a [Truth], start_ms: i64) -> Timeline<'a> {
        Timeline {
            truth,
            start_ms,
            seen_second: None,
        }
    }

    /// The clock is at simulated `second`: the fault starts and ends passed since the last
    /// call (the first call: those at or before `second`), in truth order, and whether a
    /// progress line is due.
    pub fn advance(&mut self, second: u64) -> (Vec<Mark<'a>>, bool) {
        let now_ms = self.start_ms + second as i64 * 1000;
        let before_ms = self
            .seen_second
            .map_or(i64::MIN, |seen| self.start_ms + seen as i64 * 1000);
        let passed = |at_ms: i64| before_ms < at_ms && at_ms <= now_ms;
        let progress = self.seen_second.map_or(second % PROGRESS_EVERY_SECONDS == 0, |seen| {
            second / PROGRESS_EVERY_SECONDS > seen / PROGRESS_EVERY_SECONDS
        });
        self.seen_second = Some(second);
        let mut marks = Vec::new();
        for fault in self.truth {
            if passed(fault.onset_ms) {
                marks.push(Mark::Starts(fault));
            }
            if fault.end_ms.is_some_and(passed) {
                marks.push(Mark::Ends(fault));
            }
        }
        (marks, progress)
    }
}

/// Scrapes by service since `start_ms`: service, scrapes, up, samples.
pub fn scrapes_by_service_query(start_ms: i64) -> String {
    format!(
        "SELECT service, count() AS scrapes, sum(up) AS up, sum(samples_scraped) AS samples FROM scrapes \
         WHERE time >= fromUnixTimestamp64Milli({start_ms}) GROUP BY service ORDER BY service"
    )
}

/// Verdicts opened since `start_ms`, in time order, as [`OpenedVerdict::parse_rows`] reads
/// them (TabSeparated).
pub fn opened_verdicts_query(start_ms: i64) -> String {
    format!(
        "SELECT kind, dc, arrayElement(hosts, 1), toUnixTimestamp64Milli(time) FROM verdicts \
         WHERE state = 'opened' AND time >= fromUnixTimestamp64Milli({start_ms}) ORDER BY time"
    )
}

/// The ground truth of the faults since `start_ms`.
pub fn ground_truth_query(start_ms: i64) -> String {
    format!(
        "SELECT scenario, kind, service, dcs, hosts, instances, onset FROM ground_truth WHERE onset >= fromUnixTimestamp64Milli({start_ms}) ORDER BY onset"
    )
}

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

/// The verdict of `opened` (in time order) that answers `fault`: the first at or after its
/// onset that names one of its hosts, else the first at or after its onset (with two faults
/// at once, each has its own incident; docs/detector.md, "Incidents"), judged; `None` when
/// the detector opened none after it.
pub fn first_verdict_after(fault: &Truth, opened: &[OpenedVerdict]) -> Option<FirstVerdict> {
    let after = || opened.iter().filter(|verdict| verdict.time_ms >= fault.onset_ms);
    let verdict = after()
        .find(|verdict| fault.hosts.contains(&verdict.host))
        .or_else(|| after().next())?;
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
        "node_loss" => format!("SELECT instance AS node, toStartOfMinute(time) AS minute, max(value) - min(value) AS new_connections FROM samples WHERE metric = 'redis_connections_received_total' AND {this_run} GROUP BY node, minute ORDER BY minute, node"),
        "slow_node" => format!("SELECT labels['name'] AS redis_node, round(avg(value), 2) AS active_connections FROM samples WHERE metric = 'commons_pool2_num_active_objects' AND {this_run} GROUP BY redis_node ORDER BY active_connections DESC"),
        "cold_start" => format!("SELECT instance AS pod, max(value) AS longest_gc_pause_seconds FROM samples WHERE metric = 'jvm_gc_pause_seconds_max' AND {this_run} GROUP BY pod ORDER BY longest_gc_pause_seconds DESC LIMIT 5"),
        "slow_database" => format!("SELECT labels['pool'] AS pool, max(value) AS pending_threads FROM samples WHERE metric = 'hikaricp_connections_pending' AND {this_run} GROUP BY pool ORDER BY pending_threads DESC"),
        "retry_storm" => format!("SELECT dc, labels['code'] AS code, max(value) - min(value) AS requests FROM samples WHERE metric = 'http_requests_total' AND {this_run} GROUP BY dc, code ORDER BY dc, code"),
        // A link shows the same way: the callers of one end slow towards the other.
        "dc_degradation" | "link_degradation" => format!("SELECT dc AS caller_dc, labels['remote'] AS remote, round(1000 * (maxIf(value, metric LIKE '%_sum') - minIf(value, metric LIKE '%_sum')) / (maxIf(value, metric LIKE '%_count') - minIf(value, metric LIKE '%_count')), 2) AS mean_command_ms FROM samples WHERE metric IN ('lettuce_command_completion_seconds_sum', 'lettuce_command_completion_seconds_count') AND {this_run} GROUP BY caller_dc, remote ORDER BY mean_command_ms DESC LIMIT 10"),
        // A starved host: what each instance on each host serves, slowest first (the
        // backends' own request time; Redis nodes and databases by their callers' view).
        "host_saturation" => format!("SELECT host, service, instance, round(1000 * (maxIf(value, metric LIKE '%_sum') - minIf(value, metric LIKE '%_sum')) / (maxIf(value, metric LIKE '%_count') - minIf(value, metric LIKE '%_count')), 2) AS mean_request_ms FROM samples WHERE metric IN ('http_server_requests_seconds_sum', 'http_server_requests_seconds_count', 'http_request_duration_seconds_sum', 'http_request_duration_seconds_count') AND {this_run} GROUP BY host, service, instance ORDER BY mean_request_ms DESC LIMIT 10"),
        "host_packet_loss" | "host_network" => format!("SELECT host, toStartOfMinute(time) AS minute, max(value) - min(value) AS retransmitted_segments FROM samples WHERE metric = 'node_netstat_Tcp_RetransSegs' AND {this_run} GROUP BY host, minute ORDER BY retransmitted_segments DESC LIMIT 10"),
        "host_memory_pressure" => format!("SELECT host, toStartOfMinute(time) AS minute, round(min(value) / 1073741824, 2) AS mem_available_gib FROM samples WHERE metric = 'node_memory_MemAvailable_bytes' AND {this_run} GROUP BY host, minute ORDER BY mem_available_gib LIMIT 10"),
        // A container over its CPU quota: throttled periods per minute, by pod (cAdvisor's
        // series are placed on their pod).
        "cpu_throttling" => format!("SELECT instance AS pod, toStartOfMinute(time) AS minute, max(value) - min(value) AS throttled_periods FROM samples WHERE metric = 'container_cpu_cfs_throttled_periods_total' AND {this_run} GROUP BY pod, minute ORDER BY throttled_periods DESC LIMIT 10"),
        "session_loss" => format!("SELECT instance AS pod, toStartOfMinute(time) AS minute, max(value) AS voice_state_sup_mailbox FROM samples WHERE metric = 'erlang_vm_process_message_queue_len' AND labels['registered_name'] = 'voice_state_sup' AND {this_run} GROUP BY pod, minute ORDER BY minute, pod"),
        _ => format!("SELECT service, count(DISTINCT metric) AS metrics, count() AS samples FROM samples WHERE {this_run} GROUP BY service ORDER BY service"),
    };
    vec![
        specific,
        format!("SELECT service, dc, host, countIf(up = 0) AS failed_scrapes, round(max(duration_seconds), 3) AS slowest_scrape_seconds FROM scrapes WHERE job = service GROUP BY service, dc, host ORDER BY failed_scrapes DESC, service, host"),
        "SELECT scenario, kind, dcs, hosts, instances, onset FROM ground_truth ORDER BY onset DESC LIMIT 5".to_string(),
    ]
}

/// The simulated clock's start for a demo begun at wall time `wall_start_ms` that simulates
/// `duration` at `speed` simulated seconds per wall second: early enough that the
/// simulation ends when its run does (`duration / speed` after `wall_start_ms`), so its
/// samples never lie ahead of the wall clock and a finished demo's store answers "the last
/// 10 minutes" as a live one would. Milliseconds since the epoch, whole seconds (the fleet
/// steps once per simulated second); `wall_start_ms` itself at `speed` 1 or below.
pub fn simulated_start_ms(wall_start_ms: i64, duration: Duration, speed: f64) -> i64 {
    let simulated_ms = duration.as_millis() as f64;
    let wall_ms = if speed > 1.0 {
        simulated_ms / speed
    } else {
        simulated_ms
    };
    let start_ms = wall_start_ms - (simulated_ms - wall_ms).round() as i64;
    start_ms.div_euclid(1000) * 1000
}

/// The run's store folder: `--data` when it is new or empty, else a fresh
/// `<root>/<scenario>-<UTC start, 20261202T001204Z>` (`-2`, `-3`, … when that exists; `root`
/// is `demo-data`), created on the spot. A `--data` folder holding anything is refused.
///
/// Errors: the `--data` folder holds files, or cannot be read (the message names it).
pub fn store_folder(given: Option<&Path>, root: &Path, scenario: &str, start_ms: i64) -> Result<PathBuf, String> {
    let folder = match given {
        Some(folder) => folder.to_path_buf(),
        None => {
            let started = std::time::UNIX_EPOCH + Duration::from_millis(start_ms.max(0) as u64);
            let stamp: String = humantime::format_rfc3339_seconds(started)
                .to_string()
                .chars()
                .filter(|c| *c != '-' && *c != ':')
                .collect();
            let name: String = scenario
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            // Two demos started in the same second get `-2`, `-3`, … rather than a refusal;
            // the folder is created here (`create_dir` succeeds for one process only), so two
            // demos started at once never pick the same one.
            let base = format!("{name}-{stamp}");
            std::fs::create_dir_all(root).map_err(|error| format!("store folder {}: {error}", root.display()))?;
            let mut chosen = None;
            for n in 1..100 {
                let folder = root.join(if n == 1 { base.clone() } else { format!("{base}-{n}") });
                match std::fs::create_dir(&folder) {
                    Ok(()) => {
                        chosen = Some(folder);
                        break;
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(error) => return Err(format!("store folder {}: {error}", folder.display())),
                }
            }
            chosen.ok_or_else(|| {
                format!(
                    "store folder {}: 99 folders named {base}-N exist already",
                    root.display()
                )
            })?
        }
    };
    let occupied = match std::fs::read_dir(&folder) {
        Ok(mut entries) => entries.next().is_some(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => return Err(format!("store folder {}: {error}", folder.display())),
    };
    if occupied {
        return Err(format!(
            "store folder {}: it already holds files (an earlier run's store?); a demo writes a store of its own: name a new folder with --data, or leave --data out for a fresh one under ./demo-data",
            folder.display()
        ));
    }
    Ok(folder)
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
        // A later verdict naming the fault's host answers it rather than an earlier one
        // about something else (two incidents at once).
        let rows = "unknown\tdc-1\tdc-1-host-1\t11000\nnode_loss\tdc-2\tdc-2-host-3\t13500\n";
        let own = first_verdict_after(&fault(10_000, None), &OpenedVerdict::parse_rows(rows)).unwrap();
        assert_eq!((own.verdict.kind.as_str(), own.seconds_after_onset), ("node_loss", 3));
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
        let overview = suggested_queries("none", "s")[0].clone();
        for kind in epicenter_fleet::scenario::FaultKind::ALL.map(|kind| kind.name()) {
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

    #[test]
    fn the_timeline_reports_each_mark_once_even_when_the_clock_jumps() {
        let truth = vec![fault(40_000, Some(100_000))];
        let mut timeline = Timeline::new(&truth, 0);
        assert_eq!(timeline.advance(0), (vec![], true));
        assert_eq!(timeline.advance(10), (vec![], false));
        // The clock jumps from 10 s to 45 s: the onset at 40 s was passed, and a progress
        // line (30 s) was crossed.
        assert_eq!(timeline.advance(45), (vec![Mark::Starts(&truth[0])], true));
        assert_eq!(timeline.advance(50), (vec![], false));
        // Landing exactly on the end reports it, once.
        assert_eq!(timeline.advance(100), (vec![Mark::Ends(&truth[0])], true));
        assert_eq!(timeline.advance(101), (vec![], false));
    }

    /// A fresh folder per run, `-2` for a second run in the same second, and a `--data`
    /// folder that holds anything refused with its name.
    #[test]
    fn each_demo_gets_a_store_folder_of_its_own() {
        let root = std::env::temp_dir().join(format!("epicenter-demo-folders-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // 2026-12-02T00:12:04Z
        let start_ms = 1_796_170_324_000;
        let first = store_folder(None, &root, "redis node/loss", start_ms).unwrap();
        assert_eq!(first, root.join("redis_node_loss-20261202T001204Z"));
        assert!(
            first.is_dir(),
            "the chosen folder is created, so no other demo takes it"
        );
        let second = store_folder(None, &root, "redis node/loss", start_ms).unwrap();
        assert_eq!(second, root.join("redis_node_loss-20261202T001204Z-2"));
        std::fs::write(first.join("status"), "PID: 1").unwrap();
        let error = store_folder(Some(&first), &root, "x", start_ms).unwrap_err();
        assert!(
            error.contains("redis_node_loss-20261202T001204Z: it already holds files"),
            "{error}"
        );
        let empty = root.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert_eq!(store_folder(Some(&empty), &root, "x", start_ms).unwrap(), empty);
        // Eight demos started at once, in the same second: eight folders.
        let racers: Vec<_> = (0..8)
            .map(|_| {
                let root = root.clone();
                std::thread::spawn(move || store_folder(None, &root, "race", start_ms).unwrap())
            })
            .collect();
        let mut folders: Vec<PathBuf> = racers.into_iter().map(|racer| racer.join().unwrap()).collect();
        folders.sort();
        folders.dedup();
        assert_eq!(folders.len(), 8, "{folders:?}");
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A 12-minute scenario at 20x runs 36 s: its clock starts 11 min 24 s before the
    /// wall clock and meets it at the end; at 1x it is the wall clock.
    #[test]
    fn the_simulated_clock_ends_with_the_run() {
        let wall = 1_796_300_000_000;
        let start = simulated_start_ms(wall, Duration::from_secs(720), 20.0);
        assert_eq!(start, wall - 684_000);
        assert_eq!(start + 720_000, wall + 36_000);
        assert_eq!(simulated_start_ms(wall + 300, Duration::from_secs(720), 1.0), wall);
    }
}
