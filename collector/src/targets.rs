//! Targets: a job's target groups (static or discovered) turned into what to scrape, through
//! `relabel_configs` (Prometheus `scrape/target.go`, `PopulateLabels`), and the health of every
//! target as scrapes report it (what Prometheus's `/api/v1/targets` shows).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use epicenter_store::rows::{fnv1a, Labels, ScrapeOutcome};
use serde::Serialize;

use epicenter_config::{Problems, PromDuration};

use crate::config::{check_listed_target, check_target, with_default_port, Job, Scheme, StaticConfig};
use crate::relabel::process;

/// A target after relabeling: what to scrape and the labels its series get.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The job's name.
    pub job: String,
    /// Full URL: scheme, address, path and query parameters.
    pub url: String,
    /// Labels attached to every series of the target (`job`, `instance`, static labels), with
    /// `__`-prefixed labels removed.
    pub labels: Labels,
    /// A stable hash of job, labels, URL, interval and timeout: the schedule offset comes
    /// from it.
    pub identity: u64,
    /// How often the target is scraped: the job's interval, or `__scrape_interval__` as
    /// relabeling left it (Prometheus's per-target interval).
    pub interval: Duration,
    /// Longest a scrape of the target may take: the job's, or `__scrape_timeout__` as
    /// relabeling left it; never longer than `interval`.
    pub timeout: Duration,
}

impl Target {
    /// The `instance` label.
    pub fn instance(&self) -> &str {
        self.labels.get("instance").map_or("", String::as_str)
    }
}

/// Builds a job's targets from its static configs and `relabel_configs`. Returns the targets
/// and how many relabeling dropped.
pub fn targets_for_job(job: &Job) -> (Vec<Target>, usize) {
    targets_for_groups(job, &job.config.static_configs)
}

/// Builds targets from target groups (static or discovered) with the job's defaults and
/// `relabel_configs`. Returns the targets and how many relabeling dropped; a target listed
/// twice is kept once. Two targets with different URLs but the same labels after relabeling
/// would write the same series (each scrape overwriting the other's values): the second is
/// not scraped and each such collision is logged as an error naming both
/// ([`static_target_problems`] reports them in `check config` for static targets).
pub fn targets_for_groups(job: &Job, groups: &[StaticConfig]) -> (Vec<Target>, usize) {
    let built = build(job, groups);
    for reason in &built.skipped {
        tracing::warn!(job = %job.config.job_name, %reason, "target skipped");
    }
    for collision in &built.collisions {
        tracing::error!(job = %job.config.job_name, "{}", collision.message);
    }
    (built.targets, built.dropped)
}

/// Static targets of `jobs` (one per scrape config, in order) whose labels after relabeling
/// collide with an earlier target's: one problem each at
/// `scrape_configs[J].static_configs[G].targets[T]`, naming both targets' URLs and labels.
pub fn static_target_problems(jobs: &[Job], problems: &mut Problems) {
    for (job_index, job) in jobs.iter().enumerate() {
        for collision in build(job, &job.config.static_configs).collisions {
            let (group, index) = collision.at;
            problems.push(
                format!("scrape_configs[{job_index}].static_configs[{group}].targets[{index}]"),
                collision.message,
            );
        }
    }
}

/// Targets built from groups, and what was left out.
struct Built {
    targets: Vec<Target>,
    dropped: usize,
    /// Why each target that is not `host:port` was skipped.
    skipped: Vec<String>,
    collisions: Vec<Collision>,
}

/// A target left out because an earlier one has the same labels and another URL.
struct Collision {
    /// Group and target index of the one left out.
    at: (usize, usize),
    message: String,
}

fn build(job: &Job, groups: &[StaticConfig]) -> Built {
    let config = &job.config;
    let mut built = Built {
        targets: Vec::new(),
        dropped: 0,
        skipped: Vec::new(),
        collisions: Vec::new(),
    };
    for (group_index, group) in groups.iter().enumerate() {
        for (target_index, address) in group.targets.iter().enumerate() {
            if let Err(reason) = check_listed_target(address) {
                built.skipped.push(reason);
                built.dropped += 1;
                continue;
            }
            let mut labels: Labels = group.labels.clone();
            let defaults = [
                ("__address__", address.clone()),
                ("__scheme__", scheme_name(config.scheme).to_string()),
                ("__metrics_path__", config.metrics_path.clone()),
                ("__scrape_interval__", PromDuration(job.interval).to_string()),
                ("__scrape_timeout__", PromDuration(job.timeout).to_string()),
                ("job", config.job_name.clone()),
            ];
            for (name, value) in defaults {
                labels.entry(name.to_string()).or_insert(value);
            }
            for (name, values) in &config.params {
                if let Some(first) = values.first() {
                    labels.entry(format!("__param_{name}")).or_insert_with(|| first.clone());
                }
            }
            let Some(labels) = process(&job.relabel, labels) else {
                built.dropped += 1;
                continue;
            };
            let target = match finish_target(labels, job) {
                Ok(target) => target,
                Err(reason) => {
                    built.skipped.push(reason);
                    built.dropped += 1;
                    continue;
                }
            };
            match built.targets.iter().find(|existing| existing.labels == target.labels) {
                Some(existing) if existing.url == target.url => {}
                Some(existing) => built.collisions.push(Collision {
                    at: (group_index, target_index),
                    message: format!(
                        "targets {} and {} have the same labels {} after relabeling, so their series would mix: only the first is scraped (keep a label that tells them apart, such as instance)",
                        existing.url,
                        target.url,
                        show_labels(&target.labels)
                    ),
                }),
                None => built.targets.push(target),
            }
        }
    }
    built
}

/// Labels as PromQL prints them: `{instance="a:1", job="x"}`.
fn show_labels(labels: &Labels) -> String {
    let pairs: Vec<String> = labels.iter().map(|(name, value)| format!("{name}={value:?}")).collect();
    format!("{{{}}}", pairs.join(", "))
}

fn scheme_name(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    }
}

/// Turns relabeled labels into a target: URL from the `__` labels, `instance` defaulted,
/// `__` labels removed, interval and timeout from `__scrape_interval__`/`__scrape_timeout__`.
/// The target relabeling left: the scheme's default port added to a port-less
/// `__address__`, which must then be `host:port`. Errors say why the target is skipped.
fn finish_target(mut labels: Labels, job: &Job) -> Result<Target, String> {
    // Per-target interval and timeout, as Prometheus 2.42's PopulateLabels reads them.
    let duration = |label: &str, default: Duration| -> Result<Duration, String> {
        match labels.get(label) {
            // The job's own value, as written into the label: kept exactly (the label holds
            // whole milliseconds; a sped-up simulation's interval may not).
            None => Ok(default),
            Some(text) if *text == PromDuration(default).to_string() => Ok(default),
            Some(text) => epicenter_config::parse_duration(text)
                .map_err(|reason| format!("after relabeling: {label} '{text}': {reason}")),
        }
    };
    let interval = duration("__scrape_interval__", job.interval)?;
    let timeout = duration("__scrape_timeout__", job.timeout)?;
    if interval.is_zero() {
        return Err("after relabeling: __scrape_interval__ cannot be 0".to_string());
    }
    if timeout.is_zero() {
        return Err("after relabeling: __scrape_timeout__ cannot be 0".to_string());
    }
    if timeout > interval {
        return Err(format!(
            "after relabeling: __scrape_timeout__ {} is longer than __scrape_interval__ {}",
            PromDuration(timeout),
            PromDuration(interval)
        ));
    }
    // A `redis_observer` job's targets are Redis nodes: `redis://host:port` (6379 by
    // default), whatever `scheme` and `metrics_path` say.
    let observer = job.config.redis_observer.is_some();
    let scheme = if observer {
        "redis".to_string()
    } else {
        labels.get("__scheme__").cloned().unwrap_or_else(|| "http".to_string())
    };
    let listed = labels.get("__address__").ok_or("relabeling left no __address__")?;
    let address = with_default_port(listed, &scheme);
    check_target(&address).map_err(|reason| format!("after relabeling: {reason}"))?;
    let path = labels
        .get("__metrics_path__")
        .cloned()
        .unwrap_or_else(|| "/metrics".to_string());
    let query: Vec<String> = labels
        .iter()
        .filter_map(|(name, value)| {
            name.strip_prefix("__param_")
                .map(|param| format!("{}={}", url_escape(param), url_escape(value)))
        })
        .collect();
    let mut url = if observer {
        format!("redis://{address}")
    } else {
        format!("{scheme}://{address}{path}")
    };
    if !query.is_empty() && !observer {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    labels.entry("instance".to_string()).or_insert(address);
    labels.retain(|name, _| !name.starts_with("__"));
    let job_name = labels.get("job").cloned().unwrap_or_default();
    let mut identity_text = url.clone();
    if (interval, timeout) != (job.interval, job.timeout) {
        identity_text.push_str(&format!("\u{0}{interval:?}\u{0}{timeout:?}"));
    }
    for (name, value) in &labels {
        identity_text.push('\u{0}');
        identity_text.push_str(name);
        identity_text.push('=');
        identity_text.push_str(value);
    }
    Ok(Target {
        job: job_name,
        url,
        labels,
        identity: fnv1a(identity_text.as_bytes()),
        interval,
        timeout,
    })
}

fn url_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            escaped.push(byte as char);
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

/// One target's health, as `/api/v1/targets` reports it (the `activeTargets` fields of
/// Prometheus's HTTP API): `labels`, `scrapePool` (the job), `scrapeUrl`, `health` (`up`,
/// `down`, `unknown` before the first scrape), `lastError`, `lastScrape` (RFC 3339) and
/// `lastScrapeDuration` (seconds), `scrapeInterval` and `scrapeTimeout` (Prometheus durations,
/// `15s`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetStatus {
    labels: Labels,
    scrape_pool: String,
    scrape_url: String,
    health: &'static str,
    last_error: String,
    last_scrape: Option<String>,
    last_scrape_duration: f64,
    scrape_interval: String,
    scrape_timeout: String,
}

/// Counts of targets by health ([`TargetRegistry::health`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetHealth {
    /// Targets whose last scrape succeeded.
    pub up: usize,
    /// Targets whose last scrape failed.
    pub down: usize,
    /// Targets not scraped yet.
    pub unknown: usize,
    /// The first down target, in identity order.
    pub first_down: Option<DownTarget>,
}

/// A target that is down, and why (its last scrape's error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownTarget {
    /// Its job.
    pub job: String,
    /// Its scrape URL.
    pub url: String,
    /// The last scrape's error (`request failed: connection refused`, `HTTP 500`, …).
    pub error: String,
}

/// Health of every target, updated from scrape outcomes.
#[derive(Debug, Default)]
pub struct TargetRegistry {
    /// By target identity (job, URL and labels): two targets may share an address.
    targets: Mutex<BTreeMap<u64, TargetStatus>>,
}

impl TargetRegistry {
    /// Adds a target before its first scrape (health `unknown`).
    pub fn add(&self, target: &Target) {
        let status = TargetStatus {
            labels: target.labels.clone(),
            scrape_pool: target.job.clone(),
            // As shown by the API and the status line: query values (a target's `params` may
            // carry a key) masked.
            scrape_url: epicenter_config::redacted_url(&target.url),
            health: "unknown",
            last_error: String::new(),
            last_scrape: None,
            last_scrape_duration: 0.0,
            scrape_interval: PromDuration(target.interval).to_string(),
            scrape_timeout: PromDuration(target.timeout).to_string(),
        };
        self.lock().insert(target.identity, status);
    }

    /// Forgets a target that discovery removed.
    pub fn remove(&self, identity: u64) {
        self.lock().remove(&identity);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, TargetStatus>> {
        self.targets.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks a registered target down with `reason`, without a scrape (its job is past
    /// `target_limit`, so none of its targets is scraped).
    pub fn mark_down(&self, identity: u64, reason: &str) {
        if let Some(status) = self.lock().get_mut(&identity) {
            status.health = "down";
            status.last_error = reason.to_string();
        }
    }

    /// Records a scrape's outcome. A skipped scrape (`ScrapeReport::skipped`: epicenter
    /// was behind, the target was not asked) says nothing of the target's health.
    pub fn observe(&self, outcome: &ScrapeOutcome) {
        let report = &outcome.report;
        if report.skipped {
            return;
        }
        if let Some(status) = self.lock().get_mut(&report.target_identity) {
            status.health = if report.up { "up" } else { "down" };
            status.last_error = report.error.clone().unwrap_or_default();
            let time = UNIX_EPOCH + Duration::from_millis(report.timestamp_ms.max(0) as u64);
            status.last_scrape = Some(humantime::format_rfc3339_millis(time).to_string());
            status.last_scrape_duration = report.duration_seconds;
        }
    }

    /// Every target's `(job, instance, health)`, health being `up`, `down` or `unknown`
    /// (not scraped yet), in identity order: what epicenter's own `/metrics` exports.
    pub fn health_by_target(&self) -> Vec<(String, String, &'static str)> {
        self.lock()
            .values()
            .map(|status| {
                let instance = status.labels.get("instance").cloned().unwrap_or_default();
                (status.scrape_pool.clone(), instance, status.health)
            })
            .collect()
    }

    /// The placement (host, service) of every target whose address is an IP literal, by
    /// that IP: how the Redis observer names a caller that is itself a known target. An IP
    /// whose targets name different services keeps the host and an empty service (a host
    /// running several services); an IP whose targets name different hosts (a shared
    /// address: NAT, loopback in a test rig) places nobody, and targets without a host in
    /// their placement are left out.
    pub fn placements_by_ip(
        &self,
        placement: &epicenter_store::config::PlacementConfig,
    ) -> std::collections::HashMap<std::net::IpAddr, (String, String)> {
        // None: the IP's targets name different hosts.
        let mut found: std::collections::HashMap<std::net::IpAddr, Option<(String, String)>> =
            std::collections::HashMap::new();
        for status in self.lock().values() {
            let Some(ip) = url::Url::parse(&status.scrape_url)
                .ok()
                .and_then(|url| match url.host()? {
                    url::Host::Ipv4(ip) => Some(std::net::IpAddr::V4(ip)),
                    url::Host::Ipv6(ip) => Some(std::net::IpAddr::V6(ip)),
                    // A non-special scheme (`redis://`) leaves an IPv4 address unparsed.
                    url::Host::Domain(name) => name.parse().ok(),
                })
            else {
                continue;
            };
            let placed = epicenter_store::rows::Placement::of(&status.labels, placement);
            if placed.host.is_empty() {
                continue;
            }
            found
                .entry(ip)
                .and_modify(|seen| match seen {
                    Some((host, _)) if *host != placed.host => *seen = None,
                    Some((_, service)) if *service != placed.service => service.clear(),
                    _ => {}
                })
                .or_insert(Some((placed.host, placed.service)));
        }
        found
            .into_iter()
            .filter_map(|(ip, placed)| Some((ip, placed?)))
            .collect()
    }

    /// Every target's status, by identity.
    pub fn statuses(&self) -> Vec<TargetStatus> {
        self.lock().values().cloned().collect()
    }

    /// How many targets are up, down and not scraped yet, with the first down target (in
    /// identity order): what a status line shows.
    pub fn health(&self) -> TargetHealth {
        let targets = self.lock();
        let mut health = TargetHealth::default();
        for status in targets.values() {
            match status.health {
                "up" => health.up += 1,
                "down" => {
                    health.down += 1;
                    if health.first_down.is_none() {
                        health.first_down = Some(DownTarget {
                            job: status.scrape_pool.clone(),
                            url: status.scrape_url.clone(),
                            error: status.last_error.clone(),
                        });
                    }
                }
                _ => health.unknown += 1,
            }
        }
        health
    }

    /// Whether every target has been scraped at least once, and how many wait for their
    /// first scrape.
    pub fn first_round_done(&self) -> (bool, usize) {
        let targets = self.lock();
        let waiting = targets.values().filter(|status| status.health == "unknown").count();
        (waiting == 0, waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(yaml: &str) -> Job {
        crate::config::jobs_from_yaml(yaml).unwrap().remove(0)
    }

    #[test]
    fn relabeling_sets_a_target_s_own_interval_and_timeout_as_in_prometheus() {
        // One target slowed to 1m by its label; the other keeps the job's 15s/10s; a third
        // whose timeout would pass its interval is skipped, as Prometheus skips it.
        let job = job("scrape_configs:
  - job_name: mixed
    scrape_interval: 15s
    scrape_timeout: 10s
    static_configs:
      - targets: ['10.0.0.1:9100']
        labels: {__tier: slow}
      - targets: ['10.0.0.2:9100']
      - targets: ['10.0.0.3:9100']
        labels: {__tier: broken}
    relabel_configs:
      - {source_labels: [__tier], regex: slow, target_label: __scrape_interval__, replacement: 1m}
      - {source_labels: [__tier], regex: broken, target_label: __scrape_timeout__, replacement: 30s}
      - {source_labels: [__scrape_interval__], target_label: every}
");
        let (targets, dropped) = targets_for_job(&job);
        assert_eq!(dropped, 1);
        let by_instance: BTreeMap<&str, &Target> = targets.iter().map(|target| (target.instance(), target)).collect();
        let slow = by_instance["10.0.0.1:9100"];
        assert_eq!(
            (slow.interval, slow.timeout),
            (Duration::from_secs(60), Duration::from_secs(10))
        );
        assert_eq!(slow.labels["every"], "1m");
        let plain = by_instance["10.0.0.2:9100"];
        assert_eq!(
            (plain.interval, plain.timeout),
            (Duration::from_secs(15), Duration::from_secs(10))
        );
        assert_eq!(plain.labels["every"], "15s");
        assert!(!by_instance.contains_key("10.0.0.3:9100"));
    }

    /// Targets at one IP with one host and two services place that IP's callers on the
    /// host alone; an IP shared by two hosts places nobody; a DNS name is not an IP.
    #[test]
    fn known_targets_place_callers_by_ip_unless_the_ip_is_shared_by_hosts() {
        let job = job("scrape_configs:\n  - job_name: any\n    static_configs:\n      - targets: ['10.0.0.1:1']\n        labels: {host: a, service: x}\n      - targets: ['10.0.0.1:2']\n        labels: {host: a, service: y}\n      - targets: ['10.0.0.2:1']\n        labels: {host: b, service: x}\n      - targets: ['10.0.0.2:2']\n        labels: {host: c, service: x}\n      - targets: ['10.0.0.3:1']\n        labels: {host: d, service: z}\n      - targets: ['db.example:1']\n        labels: {host: e, service: z}\n");
        let registry = TargetRegistry::default();
        for target in targets_for_job(&job).0 {
            registry.add(&target);
        }
        let placed = registry.placements_by_ip(&epicenter_store::config::PlacementConfig::default());
        let ip = |text: &str| text.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(placed.len(), 2, "{placed:?}");
        assert_eq!(placed[&ip("10.0.0.1")], ("a".to_string(), String::new()));
        assert_eq!(placed[&ip("10.0.0.3")], ("d".to_string(), "z".to_string()));
    }

    #[test]
    fn a_redis_observer_target_is_a_redis_url_on_6379_by_default() {
        let job = job("scrape_configs:\n  - job_name: observer\n    metrics_path: /ignored\n    params: {a: [b]}\n    redis_observer: {}\n    static_configs:\n      - targets: ['10.0.0.1', '10.0.0.2:7000', '[::1]']\n");
        let (targets, _) = targets_for_job(&job);
        let urls: Vec<&str> = targets.iter().map(|target| target.url.as_str()).collect();
        assert_eq!(
            urls,
            ["redis://10.0.0.1:6379", "redis://10.0.0.2:7000", "redis://[::1]:6379"]
        );
        assert_eq!(targets[0].instance(), "10.0.0.1:6379");
    }

    #[test]
    fn targets_get_job_instance_and_static_labels() {
        let job = job("scrape_configs:\n  - job_name: redis\n    params: {module: [redis]}\n    static_configs:\n      - targets: ['127.0.0.1:9121', 'redis-7:9121']\n        labels: {dc: dc-2}\n");
        let (targets, dropped) = targets_for_job(&job);
        assert_eq!(dropped, 0);
        assert_eq!(targets.len(), 2);
        assert_eq!(targets[0].url, "http://127.0.0.1:9121/metrics?module=redis");
        assert_eq!(targets[0].labels.get("job").map(String::as_str), Some("redis"));
        assert_eq!(targets[0].instance(), "127.0.0.1:9121");
        assert_eq!(targets[0].labels.get("dc").map(String::as_str), Some("dc-2"));
        assert!(targets[0].labels.keys().all(|name| !name.starts_with("__")));
        assert_ne!(targets[0].identity, targets[1].identity);
    }

    #[test]
    fn relabeling_can_drop_targets_and_rewrite_the_address() {
        let job = job("scrape_configs:\n  - job_name: a\n    static_configs: [{targets: ['10.0.0.1:9100', '10.0.0.2:9100']}]\n    relabel_configs:\n      - {source_labels: [__address__], regex: '10.0.0.2:.*', action: drop}\n      - {source_labels: [__address__], regex: '(.*):9100', target_label: __address__, replacement: '${1}:9200'}\n");
        let (targets, dropped) = targets_for_job(&job);
        assert_eq!(dropped, 1);
        assert_eq!(targets[0].url, "http://10.0.0.1:9200/metrics");
        // instance defaults to the address after relabeling, as in Prometheus.
        assert_eq!(targets[0].instance(), "10.0.0.1:9200");
    }

    #[test]
    fn discovered_targets_are_checked_like_static_ones() {
        let job = job("scrape_configs:\n  - job_name: a\n");
        let group = StaticConfig {
            targets: vec![
                "http://bad/".into(),
                "a@nohost".into(),
                "127.0.0.1:99999".into(),
                "127.0.0.1:9100".into(),
                "porthost".into(),
            ],
            labels: Default::default(),
        };
        let (targets, dropped) = targets_for_groups(&job, &[group]);
        assert_eq!(dropped, 3);
        let urls: Vec<&str> = targets.iter().map(|target| target.url.as_str()).collect();
        // A port-less host gets the scheme's default port, in its URL and instance.
        assert_eq!(
            urls,
            vec!["http://127.0.0.1:9100/metrics", "http://porthost:80/metrics"]
        );
        assert_eq!(targets[1].instance(), "porthost:80");
    }
}
