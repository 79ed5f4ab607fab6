//! Signal rules: which metric families mean availability, errors, latency, saturation,
//! traffic or a restart, which direction is bad, and which label names the peer a client
//! series talks to. Data, not code: `rules/signals/signals.yml` (docs/detector.md).

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;

/// How a family's samples become one value per interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    /// The sample's value.
    Gauge,
    /// Per-second rate over the interval; a decrease is a counter reset (the new value is
    /// the increase since the reset), as Prometheus's `rate()` treats it.
    Counter,
    /// `<metric>_sum` increase over `<metric>_count` increase (a summary's or histogram's mean
    /// over the interval), in the family's unit.
    Mean,
    /// 1 when the value changed since the last interval (a new process start time), else 0.
    Restart,
}

/// What kind of trouble a signal shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Up/down, registered/expired.
    Availability,
    /// Failures counted.
    Errors,
    /// Time taken.
    Latency,
    /// Pools, queues, threads, mailboxes filling.
    Saturation,
    /// Request, connection and message rates.
    Traffic,
    /// The process restarted.
    Restart,
}

/// Which way is trouble.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bad {
    /// Rising is bad.
    Up,
    /// Falling is bad.
    Down,
}

/// What an instance is, as far as naming the failure goes: rules say it, so a verdict's kind
/// follows the evidence's families and never a service's name. On a rule without `peer` the
/// role is the exporting instance's; with `peer`, it is the peer's (a Lettuce pool's `name`
/// is a cache node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A Redis-like node clients reach through pools (redis_exporter, Lettuce, commons-pool2):
    /// `node_loss`, `node_hang` or `slow_node` when it leads.
    Cache,
    /// A database reached through a connection pool (postgres_exporter, HikariCP):
    /// `pool_exhaustion`.
    Database,
    /// The front door where load enters (a public API tier): `retry_storm` when its own
    /// traffic or errors rise.
    Entry,
    /// A BEAM node whose processes' mailboxes are watched: `mailbox_overload` when it
    /// saturates.
    Mailbox,
    /// A holder of client sessions (a gateway): `session_loss`.
    Session,
    /// A host's own exporter (node_exporter: CPU steal, pressure stall, memory, OOM kills):
    /// `host_saturation` when it leads or when it suffers beside the leader on the same host,
    /// naming the host rather than the services on it (issue 18).
    Host,
    /// A host's network interface and TCP stack, as its own exporter reports them
    /// (node_exporter's `netdev` and `netstat`: interface errors and drops, retransmitted
    /// segments): `host_network` when these are all the host's exporter shows, else as
    /// [`Role::Host`].
    Network,
    /// A container whose CPU quota the kernel enforces (cAdvisor's CFS throttled periods and
    /// time, on series placed on their pod): `cpu_throttling` when such a rule's saturation is
    /// where the leader's trouble began and its traffic did not rise (its limit is below its
    /// usual demand), in place of `unknown`, `slow_node`, `pool_exhaustion` or
    /// `mailbox_overload`.
    Container,
}

/// What part of an instance's resources a family measures (`resource:`): names the kind of a
/// leader whose own trouble it is (CPU saturation, memory pressure), and lets a host's own
/// figure be set against its containers' in the same unit (cores, bytes): a host whose
/// available memory fell by what one pod's working set grew by is that pod's trouble, not the
/// host's (docs/detector.md, "Resources").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// Processor time: cores busy (`node_cpu_seconds_total`, `container_cpu_usage_seconds_total`,
    /// rates in seconds per second), run-queue waits (`node_schedstat_waiting_seconds_total`).
    Cpu,
    /// Memory, in bytes: used, anonymous, working set, available (bad down).
    Memory,
    /// Network interfaces and the TCP stack.
    Network,
    /// Block devices and filesystems.
    Disk,
}

/// How the series a rule matches at one instance make signals (`aggregate:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// One signal per instance (and peer): the sum of every matched series' interval values,
    /// as PromQL's `sum by (instance) (rate(…))` for counters: eight per-CPU, per-mode
    /// `node_cpu_seconds_total` series become the host's busy cores, judged once, so the
    /// evidence a fault gets does not grow with the exporter's cardinality.
    Sum,
}

/// The label naming the peer a client series talks to (`peer:`), or the service that calls a
/// server (`caller:`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerSpec {
    /// Label name (`name`, `remote`, `pool`, `peer`).
    pub label: String,
    /// A regex whose first group is the peer's name within the label value; the whole value
    /// when absent.
    #[serde(default)]
    pub regex: Option<String>,
}

/// One entry of `signals:`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Family name as exposed (for `mean`, without `_sum`/`_count`).
    pub metric: String,
    /// How samples become values.
    pub kind: ValueKind,
    /// What trouble it shows.
    pub class: Class,
    /// Which way is trouble.
    pub bad: Bad,
    /// The label naming the peer, for client-side series.
    #[serde(default)]
    pub peer: Option<PeerSpec>,
    /// The label naming the service that calls the exporting instance, for server-side series
    /// that carry it (a mesh's destination-side metrics: Istio's `source_workload`, Linkerd's
    /// inbound `client_id`). Each value gives a call edge, caller service → the instance's
    /// service, without any configured `dependencies` (docs/detector.md, "Call edges"); the
    /// series' evidence stays the instance's own. Not together with `peer`.
    #[serde(default)]
    pub caller: Option<PeerSpec>,
    /// Label values a series must carry to count; a label the series lacks is the empty
    /// string, as in PromQL (`container: ""` keeps the series without a container).
    #[serde(default)]
    pub r#match: BTreeMap<String, String>,
    /// Regexes a series' label values must match to count, anchored at both ends as
    /// Prometheus's `=~` matcher is (`{code: '5..'}`: any 5xx); a label the series lacks is
    /// matched as the empty string, as in PromQL.
    #[serde(default)]
    pub match_re: BTreeMap<String, String>,
    /// Smallest change that can matter, in the signal's unit (per second for counters).
    pub floor: f64,
    /// What the series shows about the instance it belongs to (or its peer, with `peer`).
    #[serde(default)]
    pub role: Option<Role>,
    /// Which resource of the instance the family measures ([`Resource`]); none for request
    /// metrics.
    #[serde(default)]
    pub resource: Option<Resource>,
    /// Sum the matched series of an instance into one signal ([`Aggregate`]); absent: one
    /// signal per series (labels but `le` and `quantile`).
    #[serde(default)]
    pub aggregate: Option<Aggregate>,
    /// The series measures calls the instance makes, without a label naming whom (a client's
    /// request latency, Istio's `reporter: source` side): its trouble says that something the
    /// instance calls is slow, so an instance whose own latency rose together with it is
    /// waiting on a callee and ranks below one whose latency rose alone. Not with `peer` or
    /// `caller`.
    #[serde(default)]
    pub outbound: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    signals: Vec<RuleSpec>,
}

/// A rule ready to match samples.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule as written.
    pub spec: RuleSpec,
    peer_regex: Option<Regex>,
    caller_regex: Option<Regex>,
    /// `match_re`, compiled (anchored).
    match_regexes: Vec<(String, Regex)>,
}

impl Rule {
    /// The peer a series with `labels` talks to, if the rule names one and the label is
    /// there.
    pub fn peer(&self, labels: &BTreeMap<String, String>) -> Option<String> {
        label_part(self.spec.peer.as_ref()?, self.peer_regex.as_ref(), labels)
    }

    /// The service that calls the exporting instance, as a series with `labels` names it, if
    /// the rule has `caller` and the label is there (an empty value names nobody).
    pub fn caller(&self, labels: &BTreeMap<String, String>) -> Option<String> {
        label_part(self.spec.caller.as_ref()?, self.caller_regex.as_ref(), labels).filter(|caller| !caller.is_empty())
    }

    /// Whether a series with `labels` is one this rule counts.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.spec
            .r#match
            .iter()
            .all(|(name, value)| labels.get(name).map_or("", String::as_str) == value)
            && self
                .match_regexes
                .iter()
                .all(|(name, regex)| regex.is_match(labels.get(name).map_or("", String::as_str)))
    }
}

/// The value of `spec`'s label in `labels`, or its regex's first group within it.
fn label_part(spec: &PeerSpec, regex: Option<&Regex>, labels: &BTreeMap<String, String>) -> Option<String> {
    let value = labels.get(&spec.label)?;
    match regex {
        Some(regex) => regex
            .captures(value)
            .and_then(|captures| captures.get(1))
            .map(|found| found.as_str().to_string()),
        None => Some(value.clone()),
    }
}

/// Compiles `signals[index].<key>.regex`, if there is one.
fn label_regex(spec: Option<&PeerSpec>, index: usize, key: &str) -> Result<Option<Regex>, RulesError> {
    spec.and_then(|spec| spec.regex.as_ref())
        .map(|pattern| {
            Regex::new(pattern).map_err(|error| RulesError {
                path: format!("signals[{index}].{key}.regex"),
                message: error.to_string(),
            })
        })
        .transpose()
}

/// The rules shipped in `rules/signals/signals.yml`.
pub const SHIPPED: &str = include_str!("../../rules/signals/signals.yml");

/// A rules file that cannot be used, with the entry and key concerned.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct RulesError {
    /// Key path (`signals[3].peer.regex`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Parses a rules file (YAML, the shape of `rules/signals/signals.yml`).
pub fn parse(text: &str) -> Result<Vec<Rule>, RulesError> {
    // Size and nesting first: the YAML library is slow on deep nesting.
    epicenter_config::check_shape(text).map_err(|error| RulesError {
        path: "rules file".to_string(),
        message: error.to_string(),
    })?;
    let deserializer = serde_norway::Deserializer::from_str(text);
    let file: RulesFile = serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let message = error.into_inner().to_string();
        // The YAML library already starts some messages with the path (`signals[1].role: …`,
        // or `signals[4]: …` for an unknown field): say it once.
        let message = message
            .split_once(": ")
            .filter(|(head, _)| path.starts_with(*head) && head.starts_with("signals"))
            .map_or(message.clone(), |(_, rest)| rest.to_string());
        RulesError { path, message }
    })?;
    if file.signals.is_empty() {
        return Err(RulesError {
            path: "signals".to_string(),
            message: "no signal rules: the detector would see nothing (rules/signals/signals.yml shows the shape)"
                .to_string(),
        });
    }
    file.signals
        .into_iter()
        .enumerate()
        .map(|(index, spec)| {
            if !(spec.floor.is_finite() && spec.floor > 0.0) {
                return Err(RulesError {
                    path: format!("signals[{index}].floor"),
                    message: format!("{} must be a positive number", spec.floor),
                });
            }
            if spec.peer.is_some() && spec.caller.is_some() {
                return Err(RulesError {
                    path: format!("signals[{index}].caller"),
                    message: "a rule has `peer` (a client's series: whom it calls) or `caller` (a server's series: who calls it), not both".to_string(),
                });
            }
            if spec.outbound && (spec.peer.is_some() || spec.caller.is_some()) {
                return Err(RulesError {
                    path: format!("signals[{index}].outbound"),
                    message: "`outbound` marks a client series that names no peer; with `peer` (or `caller`) the label already says whom the calls go to".to_string(),
                });
            }
            if spec.outbound && !matches!(spec.class, Class::Latency | Class::Errors) {
                return Err(RulesError {
                    path: format!("signals[{index}].outbound"),
                    message: format!("`outbound` is for latency or errors of the calls an instance makes, not {:?}", spec.class).to_lowercase(),
                });
            }
            if spec.aggregate.is_some() && matches!(spec.kind, ValueKind::Restart | ValueKind::Mean) {
                return Err(RulesError {
                    path: format!("signals[{index}].aggregate"),
                    message: "`aggregate: sum` adds gauges or counters' rates; a mean or a restart of several series does not add up".to_string(),
                });
            }
            let peer_regex = label_regex(spec.peer.as_ref(), index, "peer")?;
            let caller_regex = label_regex(spec.caller.as_ref(), index, "caller")?;
            let match_regexes = spec
                .match_re
                .iter()
                .map(|(label, pattern)| {
                    Regex::new(&format!("^(?:{pattern})$"))
                        .map(|regex| (label.clone(), regex))
                        .map_err(|error| RulesError {
                            path: format!("signals[{index}].match_re.{label}"),
                            message: error.to_string(),
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Rule {
                spec,
                peer_regex,
                caller_regex,
                match_regexes,
            })
        })
        .collect()
}

// === Rules that do not fit the families they read ===

/// A rule that parses but will not read what it says (a `mean` of a family that has no
/// `_sum`/`_count`, several quantiles feeding one signal, a counter's rate of a gauge):
/// worth a warning, never a reason to stop (the run goes on with the rule as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleWarning {
    /// Key path of the rule in its file (`signals[3]`; entries counted from 0).
    pub path: String,
    /// What does not fit, and how to read the family instead.
    pub message: String,
}

impl std::fmt::Display for RuleWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Whether `rule` constrains `label` (by `match` or `match_re`).
fn constrains(rule: &Rule, label: &str) -> bool {
    rule.spec.r#match.contains_key(label) || rule.spec.match_re.contains_key(label)
}

/// Whether `rule` only counts series whose `label` is not empty: `match` gives it a value, or
/// `match_re` a regex the empty string does not match.
fn requires(rule: &Rule, label: &str) -> bool {
    rule.spec.r#match.get(label).is_some_and(|value| !value.is_empty())
        || rule
            .match_regexes
            .iter()
            .any(|(name, regex)| name == label && !regex.is_match(""))
}

/// What can be said of `rules` without any data: only what follows from the exposition
/// formats themselves (Prometheus text 0.0.4, OpenMetrics 1.0), so every warning is right
/// whatever the fleet exports:
/// - a `mean` rule whose metric ends in `_sum`, `_count` or `_bucket`: it reads
///   `<metric>_sum` and `<metric>_count` (`x_count_sum`), which a summary or histogram
///   family `x` never has; its metric is the family's name without the suffix;
/// - a `mean` rule that requires a `quantile` or `le` value (`match`, or a `match_re` the
///   empty string fails): a family's `_sum` and `_count` series carry neither label, so it
///   counts no series;
/// - a `gauge`, `counter` or `restart` rule on a `_bucket` series that does not match on
///   `le`: every bucket of the histogram would feed the same signal (a signal is keyed by
///   the series' labels but `le` and `quantile`).
///
/// What needs the data (which families a server holds, their labels, their types) is
/// [`data_warnings`]. Not checked, as not certain: a `counter` rule on a name without
/// `_total` (old exporters' counters have none: node_exporter before 0.16 wrote
/// `node_network_receive_bytes`, and the shipped rules read `node_vmstat_oom_kill`).
pub fn shape_warnings(rules: &[Rule]) -> Vec<RuleWarning> {
    let mut warnings = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        let metric = &rule.spec.metric;
        let path = format!("signals[{index}]");
        match rule.spec.kind {
            ValueKind::Mean => {
                if let Some((base, suffix)) = ["_sum", "_count", "_bucket"]
                    .iter()
                    .find_map(|suffix| metric.strip_suffix(suffix).map(|base| (base, *suffix)))
                {
                    warnings.push(RuleWarning {
                        path: path.clone(),
                        message: format!(
                            "kind: mean reads {metric}_sum and {metric}_count, which no family has (a summary's or histogram's are {base}_sum and {base}_count): write `metric: {base}`{}",
                            if suffix == "_count" { format!(", or `kind: counter` on {metric} for the rate of the count") } else { String::new() }
                        ),
                    });
                }
                for label in ["quantile", "le"] {
                    if requires(rule, label) {
                        warnings.push(RuleWarning {
                            path: path.clone(),
                            message: format!(
                                "kind: mean reads {metric}_sum and {metric}_count, which carry no `{label}` label, so this rule's `{label}` matcher counts no series: {}",
                                if label == "quantile" {
                                    format!("read a quantile with `kind: gauge` on {metric} and `match: {{quantile: \"0.9\"}}`")
                                } else {
                                    "drop the matcher (the mean is over all buckets)".to_string()
                                }
                            ),
                        });
                    }
                }
            }
            ValueKind::Gauge | ValueKind::Counter | ValueKind::Restart => {
                if let Some(base) = metric.strip_suffix("_bucket").filter(|base| !base.is_empty()) {
                    if !constrains(rule, "le") {
                        warnings.push(RuleWarning {
                            path,
                            message: format!(
                                "{metric} is a histogram's buckets, one series per `le`, and this rule does not match on `le`: every bucket feeds one signal (a signal is keyed by the labels but `le` and `quantile`); read the histogram's mean with `kind: mean` and `metric: {base}`, or one bucket with `match: {{le: \"…\"}}`"
                            ),
                        });
                    }
                }
            }
        }
    }
    warnings
}

/// What a Prometheus server holds about the families rules read, for [`data_warnings`]: the
/// metric names with samples in the period, the label names of the series of each name the
/// rules read, and the families' types from the server's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holdings {
    /// Metric (sample) names with samples in the period (`/api/v1/label/__name__/values`).
    pub names: std::collections::BTreeSet<String>,
    /// Per metric name the rules read and the server has, the label names its series carry
    /// (`/api/v1/labels?match[]=…`).
    pub labels: BTreeMap<String, std::collections::BTreeSet<String>>,
    /// Per metric family, its type in the server's metadata (`counter`, `gauge`, `summary`,
    /// `histogram`, `unknown`, …; `/api/v1/metadata`). Empty when the server has none:
    /// Prometheus keeps metadata from its scrapes only, so backfilled data has none.
    pub types: BTreeMap<String, String>,
}

/// The metric names whose series [`data_warnings`] looks at for `rules`: each rule's metric,
/// and for a `mean` rule its `_sum` and `_count` too.
pub fn names_to_check(rules: &[Rule]) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for rule in rules {
        names.insert(rule.spec.metric.clone());
        if rule.spec.kind == ValueKind::Mean {
            names.insert(format!("{}_sum", rule.spec.metric));
            names.insert(format!("{}_count", rule.spec.metric));
        }
    }
    names
}

/// What `holdings` (a server's families) show of rules whose kind does not fit the family they
/// read; nothing about families the server does not have (most rules name families of other
/// exporters). On top of [`shape_warnings`], whose cases it does not repeat:
/// - a `mean` rule for `X` when the server has no `X_sum` or `X_count` but has `X` with a
///   `quantile` label (a summary's quantiles, or a mesh's quantile written as a gauge), unless
///   another rule already reads `X` as a `gauge` matching `quantile`;
/// - a `gauge`, `counter` or `restart` rule whose series carry `quantile` (or `le`, on a
///   name not ending `_bucket`) and that does not match on it: several quantiles would feed one
///   signal;
/// - a `counter` rule on a family the metadata types `gauge` (looked up by the rule's metric,
///   then without `_total`).
pub fn data_warnings(rules: &[Rule], holdings: &Holdings) -> Vec<RuleWarning> {
    let mut warnings = Vec::new();
    let carries = |name: &str, label: &str| holdings.labels.get(name).is_some_and(|labels| labels.contains(label));
    for (index, rule) in rules.iter().enumerate() {
        let metric = &rule.spec.metric;
        let path = format!("signals[{index}]");
        match rule.spec.kind {
            ValueKind::Mean => {
                let has_parts = holdings.names.contains(&format!("{metric}_sum"))
                    || holdings.names.contains(&format!("{metric}_count"));
                let read_as_quantiles = rules.iter().any(|other| {
                    other.spec.metric == *metric && other.spec.kind == ValueKind::Gauge && constrains(other, "quantile")
                });
                if !has_parts && holdings.names.contains(metric) && carries(metric, "quantile") && !read_as_quantiles {
                    warnings.push(RuleWarning {
                        path: path.clone(),
                        message: format!(
                            "kind: mean reads {metric}_sum and {metric}_count, which the server does not have; its {metric} series carry a `quantile` label (a summary's quantiles, or quantiles written as gauges): read them with a `kind: gauge` rule on {metric} with `match: {{quantile: \"0.9\"}}`, one rule per quantile"
                        ),
                    });
                }
            }
            ValueKind::Gauge | ValueKind::Counter | ValueKind::Restart => {
                for label in ["quantile", "le"] {
                    let shape_said_it = label == "le" && metric.ends_with("_bucket");
                    if carries(metric, label) && !constrains(rule, label) && !shape_said_it {
                        warnings.push(RuleWarning {
                            path: path.clone(),
                            message: format!(
                                "the server's {metric} series carry a `{label}` label this rule does not match on: every {} feeds one signal (a signal is keyed by the labels but `le` and `quantile`); add `match: {{{label}: \"{}\"}}`, one rule per {label}",
                                if label == "quantile" { "quantile" } else { "bucket" },
                                if label == "quantile" { "0.9" } else { "…" }
                            ),
                        });
                    }
                }
                if rule.spec.kind == ValueKind::Counter {
                    let family_type = holdings.types.get(metric).or_else(|| {
                        metric
                            .strip_suffix("_total")
                            .and_then(|family| holdings.types.get(family))
                    });
                    if family_type.is_some_and(|kind| kind == "gauge") {
                        warnings.push(RuleWarning {
                            path,
                            message: format!(
                                "kind: counter reads the rate of {metric}, which the server's metadata types as a gauge (a decrease would be read as a counter reset): write `kind: gauge`"
                            ),
                        });
                    }
                }
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_rules_parse_and_mistakes_name_their_entry() {
        let rules = parse(SHIPPED).unwrap();
        assert!(rules.len() > 20);
        let remote = rules
            .iter()
            .find(|rule| rule.spec.metric == "lettuce_command_completion_seconds")
            .unwrap();
        let labels: BTreeMap<String, String> = [("remote".to_string(), "redis/redis-2-1:6379".to_string())].into();
        assert_eq!(remote.peer(&labels).as_deref(), Some("redis-2-1"));
        assert_eq!(parse("signals: []\n").unwrap_err().path, "signals");
        let bad = parse(
            "signals:\n  - {metric: x, kind: gauge, class: errors, bad: up, floor: 1, peer: {label: p, regex: '('}}\n",
        )
        .unwrap_err();
        assert_eq!(bad.path, "signals[0].peer.regex");
        let floor = parse("signals:\n  - {metric: x, kind: gauge, class: errors, bad: up, floor: 0}\n").unwrap_err();
        assert_eq!(floor.path, "signals[0].floor");
        let bad = parse(
            "signals:\n  - {metric: x, kind: gauge, class: errors, bad: up, floor: 1, match_re: {code: '5(.'}}\n",
        )
        .unwrap_err();
        assert_eq!(bad.path, "signals[0].match_re.code");
    }

    /// `caller` reads the calling service from a server's series: Istio's `source_workload`
    /// as it is, Linkerd's `client_id` through its regex (the service account's name); no
    /// label, an empty one or a value the regex misses names no caller; `peer` and `caller`
    /// together are refused.
    #[test]
    fn caller_names_the_calling_service_of_a_server_series() {
        let rules = parse(SHIPPED).unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect()
        };
        let istio = rules
            .iter()
            .find(|rule| rule.spec.metric == "istio_request_duration_milliseconds")
            .unwrap();
        assert_eq!(
            istio
                .caller(&labels(&[("reporter", "destination"), ("source_workload", "api")]))
                .as_deref(),
            Some("api")
        );
        assert_eq!(istio.caller(&labels(&[("reporter", "destination")])), None);
        assert_eq!(istio.caller(&labels(&[("source_workload", "")])), None);
        assert_eq!(istio.peer(&labels(&[("source_workload", "api")])), None);
        let linkerd = rules
            .iter()
            .find(|rule| rule.spec.metric == "response_latency_ms")
            .unwrap();
        assert_eq!(
            linkerd
                .caller(&labels(&[(
                    "client_id",
                    "api.prod.serviceaccount.identity.linkerd.cluster.local"
                )]))
                .as_deref(),
            Some("api")
        );
        // No mTLS identity (an unmeshed client): Linkerd leaves the label empty.
        assert_eq!(linkerd.caller(&labels(&[("client_id", "")])), None);
        let both = parse(
            "signals:\n  - {metric: x, kind: gauge, class: errors, bad: up, floor: 1, peer: {label: p}, caller: {label: c}}\n",
        )
        .unwrap_err();
        assert_eq!(both.path, "signals[0].caller");
        let bad = parse(
            "signals:\n  - {metric: x, kind: gauge, class: errors, bad: up, floor: 1, caller: {label: c, regex: '('}}\n",
        )
        .unwrap_err();
        assert_eq!(bad.path, "signals[0].caller.regex");
    }

    /// Issue 38: what a rules file gets wrong about the exposition formats is said without
    /// data, each with its entry's key path; the shipped rules say nothing.
    #[test]
    fn shape_warnings_name_rules_that_cannot_read_their_family() {
        assert_eq!(shape_warnings(&parse(SHIPPED).unwrap()), []);
        let rules = parse(
            "signals:
  - {metric: rpc_seconds_count, kind: mean, class: latency, bad: up, floor: 1}
  - {metric: rpc_seconds, kind: mean, class: latency, bad: up, floor: 1, match: {quantile: '0.9'}}
  - {metric: rpc_seconds_bucket, kind: counter, class: latency, bad: up, floor: 1}
  - {metric: rpc_seconds_bucket, kind: counter, class: latency, bad: up, floor: 1, match: {le: '0.5'}}
  - {metric: rpc_seconds, kind: mean, class: latency, bad: up, floor: 1, match_re: {le: '.*'}}
  - {metric: rpc_seconds, kind: gauge, class: latency, bad: up, floor: 1, match: {quantile: '0.9'}}
  - {metric: node_network_receive_bytes, kind: counter, class: traffic, bad: up, floor: 1}
",
        )
        .unwrap();
        let warnings = shape_warnings(&rules);
        let paths: Vec<&str> = warnings.iter().map(|warning| warning.path.as_str()).collect();
        assert_eq!(paths, ["signals[0]", "signals[1]", "signals[2]"], "{warnings:#?}");
        assert_eq!(
            warnings[0].to_string(),
            "signals[0]: kind: mean reads rpc_seconds_count_sum and rpc_seconds_count_count, which no family has (a summary's or histogram's are rpc_seconds_sum and rpc_seconds_count): write `metric: rpc_seconds`, or `kind: counter` on rpc_seconds_count for the rate of the count"
        );
        assert!(
            warnings[1].message.contains("`quantile` matcher counts no series"),
            "{}",
            warnings[1]
        );
        assert!(warnings[1]
            .message
            .contains("`kind: gauge` on rpc_seconds and `match: {quantile: \"0.9\"}`"));
        assert!(
            warnings[2].message.contains("every bucket feeds one signal"),
            "{}",
            warnings[2]
        );
        assert!(warnings[2].message.contains("`kind: mean` and `metric: rpc_seconds`"));
    }

    /// Issue 38: what a server's families show: a mean of quantiles, quantiles (or buckets)
    /// feeding one signal, a counter's rate of a gauge; nothing about families it does not
    /// have, and the mean is not warned about when another rule reads the quantiles.
    #[test]
    fn data_warnings_name_rules_whose_kind_does_not_fit_the_server_s_family() {
        let names = |list: &[&str]| {
            list.iter()
                .map(|name| name.to_string())
                .collect::<std::collections::BTreeSet<_>>()
        };
        let holdings = Holdings {
            names: names(&[
                "rpc_seconds",
                "queue_depth",
                "jobs_total",
                "req_seconds_sum",
                "req_seconds_count",
                "lat_ms",
            ]),
            labels: [
                ("rpc_seconds", names(&["instance", "job", "quantile"])),
                ("lat_ms", names(&["instance", "le"])),
                ("queue_depth", names(&["instance", "job"])),
                ("jobs_total", names(&["instance", "job"])),
            ]
            .into_iter()
            .map(|(name, labels)| (name.to_string(), labels))
            .collect(),
            types: [("queue_depth", "gauge"), ("jobs", "gauge"), ("req_seconds", "summary")]
                .into_iter()
                .map(|(name, kind)| (name.to_string(), kind.to_string()))
                .collect(),
        };
        let rules = parse(
            "signals:
  - {metric: rpc_seconds, kind: mean, class: latency, bad: up, floor: 1}
  - {metric: rpc_seconds, kind: gauge, class: latency, bad: up, floor: 1}
  - {metric: queue_depth, kind: counter, class: traffic, bad: up, floor: 1}
  - {metric: jobs_total, kind: counter, class: traffic, bad: up, floor: 1}
  - {metric: req_seconds, kind: mean, class: latency, bad: up, floor: 1}
  - {metric: queue_depth, kind: gauge, class: saturation, bad: up, floor: 1}
  - {metric: lat_ms, kind: gauge, class: latency, bad: up, floor: 1}
  - {metric: absent_seconds, kind: mean, class: latency, bad: up, floor: 1}
  - {metric: absent, kind: counter, class: errors, bad: up, floor: 1}
",
        )
        .unwrap();
        let warnings = data_warnings(&rules, &holdings);
        let paths: Vec<&str> = warnings.iter().map(|warning| warning.path.as_str()).collect();
        assert_eq!(
            paths,
            ["signals[0]", "signals[1]", "signals[2]", "signals[3]", "signals[6]"],
            "{warnings:#?}"
        );
        assert!(
            warnings[0]
                .message
                .contains("which the server does not have; its rpc_seconds series carry a `quantile` label")
                && warnings[0]
                    .message
                    .contains("`kind: gauge` rule on rpc_seconds with `match: {quantile: \"0.9\"}`"),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[1]
                .message
                .contains("carry a `quantile` label this rule does not match on"),
            "{}",
            warnings[1]
        );
        assert!(warnings[2].message.contains("types as a gauge"), "{}", warnings[2]);
        // Found without `_total` in the metadata.
        assert!(warnings[3]
            .message
            .contains("jobs_total, which the server's metadata types as a gauge"));
        assert!(warnings[4].message.contains("`le` label"), "{}", warnings[4]);
        // With the quantiles read as gauges (one matching `quantile`), the mean is left alone
        // and the gauge that matches says nothing.
        let covered = parse(
            "signals:
  - {metric: rpc_seconds, kind: mean, class: latency, bad: up, floor: 1}
  - {metric: rpc_seconds, kind: gauge, class: latency, bad: up, floor: 1, match: {quantile: '0.9'}}
",
        )
        .unwrap();
        assert_eq!(data_warnings(&covered, &holdings), []);
        assert_eq!(
            names_to_check(&covered).into_iter().collect::<Vec<_>>(),
            ["rpc_seconds", "rpc_seconds_count", "rpc_seconds_sum"]
        );
    }

    /// `match_re` is anchored at both ends, as PromQL's `=~` is, and a missing label is the
    /// empty string.
    #[test]
    fn regex_matchers_are_anchored_like_promql() {
        let rules = parse(
            "signals:\n  - {metric: x, kind: counter, class: errors, bad: up, floor: 1, match: {method: GET}, match_re: {code: '5..', handler: '(/api.*)?'}}\n",
        )
        .unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect()
        };
        let rule = &rules[0];
        assert!(rule.matches(&labels(&[("method", "GET"), ("code", "503")])));
        assert!(rule.matches(&labels(&[("method", "GET"), ("code", "500"), ("handler", "/api/v1")])));
        // Not a prefix or a substring match: 5030 and 1500 are no 5xx.
        assert!(!rule.matches(&labels(&[("method", "GET"), ("code", "5030")])));
        assert!(!rule.matches(&labels(&[("method", "GET"), ("code", "1500")])));
        // The exact matcher still applies; a handler outside /api does not match.
        assert!(!rule.matches(&labels(&[("method", "POST"), ("code", "503")])));
        assert!(!rule.matches(&labels(&[("method", "GET"), ("code", "503"), ("handler", "/metrics")])));
        // No code label: the empty string, which '5..' does not match.
        assert!(!rule.matches(&labels(&[("method", "GET")])));
    }
}
