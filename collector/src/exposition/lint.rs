//! Naming and best-practice lint of a parsed body: what `promtool check metrics` reports.
//!
//! Source followed: `prometheus/testutil/promlint/promlint.go` of client_golang v1.14.0, the
//! version Prometheus 2.42 (and its `promtool`) is built with, and the text parser it lints
//! through (`expfmt`, prometheus/common v0.39.0). The rules, their order and their messages
//! are promlint's; the messages are kept word for word so that a finding can be looked up in
//! Prometheus's documentation and compared with promtool's output.
//!
//! What is linted is what promtool's parser builds from the body:
//!
//! * **families keyed by name**; a family without samples (`# HELP`/`# TYPE` only) is dropped
//!   by `expfmt` and so is not linted;
//! * **help**: a `# HELP` line with an empty text counts as no help (`expfmt` ignores it);
//! * **metrics**: every sample is one metric, except in summaries and histograms, where the
//!   samples that share their labels (`quantile` left out in a summary, `le` in a histogram)
//!   are one metric; label rules count once per metric and label, as promlint does, so one
//!   finding may stand for several of promtool's lines ([`LintFinding::count`]).
//!
//! An OpenMetrics body cannot be read by promtool 2.42 at all, or is read wrongly (a counter
//! family `x` with its sample `x_total` becomes an untyped family `x_total` without help).
//! Here it is linted as the text format families the same exporter would print: a counter is
//! named by its `_total` sample, an info family by its `_info` sample, `_created` samples are
//! left out, `info` and `stateset` are linted as gauges and `gaugehistogram` as a histogram
//! (text format 0.0.4 has none of the three). A text body declaring those types (client_java
//! 1.x prints `# TYPE jvm_runtime info`) has them linted as gauge and histogram too, its
//! samples grouped as `expfmt` groups text: `jvm_runtime_info` is then a family of its own.
//!
//! One choice where promtool has none: promlint looks a unit up by iterating a Go map, so for
//! a name holding two unit words (`x_bytes_milliseconds`) it reports the non-base one only on
//! some runs. Here the first non-base unit word, from the left, is always reported.

use std::borrow::Cow;
use std::collections::HashSet;

use super::model::{Exposition, Family, Format, Label, MetricType, Sample};

/// Which promlint check a finding comes from. The JSON form is the snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LintRule {
    /// `no help text`: no `# HELP`, or an empty one (promlint `lintHelp`).
    NoHelp,
    /// `use base unit "seconds" instead of "milliseconds"`: a unit word with an SI prefix or a
    /// non-base unit (minutes, bits, kelvins, …) in the name (promlint `lintMetricUnits`).
    NonBaseUnit,
    /// `counter metrics should have "_total" suffix` (promlint `lintCounter`).
    CounterWithoutTotal,
    /// `non-counter metrics should not have "_total" suffix`; untyped families are exempt
    /// (promlint `lintCounter`).
    TotalWithoutCounter,
    /// `non-histogram metrics should not have "_bucket" suffix` (promlint
    /// `lintHistogramSummaryReserved`; untyped families are exempt, as for the next four).
    BucketSuffix,
    /// `non-histogram and non-summary metrics should not have "_count" suffix`.
    CountSuffix,
    /// `non-histogram and non-summary metrics should not have "_sum" suffix`.
    SumSuffix,
    /// `non-histogram metrics should not have "le" label`, once per metric carrying it.
    LeLabel,
    /// `non-summary metrics should not have "quantile" label`, once per metric carrying it.
    QuantileLabel,
    /// `metric name should not include type 'gauge'` (`_gauge_` inside or `_gauge` at the end,
    /// case-insensitive; also counter, summary, histogram, gauge_histogram) (promlint
    /// `lintMetricTypeInName`).
    TypeInName,
    /// `metric names should not contain ':'`: colons are for recording rules (promlint
    /// `lintReservedChars`).
    ReservedChars,
    /// `metric names should be written in 'snake_case' not 'camelCase'` (a lowercase letter
    /// followed by an uppercase one) (promlint `lintCamelCase`).
    CamelCaseName,
    /// `label names should be written in 'snake_case' not 'camelCase'`, once per metric and
    /// label (promlint `lintCamelCase`).
    CamelCaseLabel,
    /// `metric names should not contain abbreviated units` (`_ms`, `_sec`, `_kb`, … as a word),
    /// once per abbreviation found (promlint `lintUnitAbbreviations`).
    AbbreviatedUnit,
}

impl LintRule {
    /// The snake_case name used in JSON (`no_help`, `non_base_unit`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            LintRule::NoHelp => "no_help",
            LintRule::NonBaseUnit => "non_base_unit",
            LintRule::CounterWithoutTotal => "counter_without_total",
            LintRule::TotalWithoutCounter => "total_without_counter",
            LintRule::BucketSuffix => "bucket_suffix",
            LintRule::CountSuffix => "count_suffix",
            LintRule::SumSuffix => "sum_suffix",
            LintRule::LeLabel => "le_label",
            LintRule::QuantileLabel => "quantile_label",
            LintRule::TypeInName => "type_in_name",
            LintRule::ReservedChars => "reserved_chars",
            LintRule::CamelCaseName => "camel_case_name",
            LintRule::CamelCaseLabel => "camel_case_label",
            LintRule::AbbreviatedUnit => "abbreviated_unit",
        }
    }
}

/// One lint finding: a metric family, the rule it breaks and promlint's message for it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LintFinding {
    /// The family's name as promtool names it (`http_requests_total` for an OpenMetrics counter
    /// family `http_requests`).
    pub metric: String,
    /// The check that found it.
    pub rule: LintRule,
    /// promlint's message, word for word (`counter metrics should have "_total" suffix`).
    pub message: String,
    /// 1-based line of the body: where the family starts for name rules, the first sample
    /// carrying the label for label rules.
    pub line: u32,
    /// How many times promtool prints this line for the body (at least 1): label rules
    /// count once per metric and label, abbreviations once per abbreviation found.
    pub count: u32,
}

/// Lints `exposition` with promlint's rules (client_golang v1.14.0, as in promtool 2.42).
///
/// Findings are sorted as promtool prints them: by metric name, then message (byte order);
/// the same (metric, message) pair is one finding whose [`LintFinding::count`] says how many
/// times promtool repeats it. Takes an exposition from [`crate::exposition::parse`]: label
/// sets deferred by [`crate::exposition::parse_deferring_labels`] are not read here.
///
/// ```
/// use epicenter_collector::exposition::{lint, parse, LintRule, ParseOptions};
///
/// let body = b"# HELP job_latency_milliseconds Time per job.\n# TYPE job_latency_milliseconds counter\njob_latency_milliseconds 7\n";
/// let exposition = parse(body, ParseOptions::default()).unwrap();
/// let findings = lint(&exposition);
/// let messages: Vec<&str> = findings.iter().map(|finding| finding.message.as_str()).collect();
/// assert_eq!(
///     messages,
///     ["counter metrics should have \"_total\" suffix", "use base unit \"seconds\" instead of \"milliseconds\""]
/// );
/// assert_eq!(findings[0].rule, LintRule::CounterWithoutTotal);
/// assert_eq!((findings[0].metric.as_str(), findings[0].line), ("job_latency_milliseconds", 1));
/// ```
pub fn lint(exposition: &Exposition<'_>) -> Vec<LintFinding> {
    let mut raw: Vec<LintFinding> = Vec::new();
    for family in &exposition.families {
        if let Some(view) = LintFamily::of(exposition, family) {
            view.lint(exposition, &mut raw);
        }
    }
    // promlint sorts by metric, then text (stable); equal pairs collapse into one finding.
    raw.sort_by(|left, right| (&left.metric, &left.message).cmp(&(&right.metric, &right.message)));
    let mut findings: Vec<LintFinding> = Vec::with_capacity(raw.len());
    for finding in raw {
        match findings.last_mut() {
            Some(last) if last.metric == finding.metric && last.message == finding.message => {
                last.count += finding.count;
                last.line = last.line.min(finding.line);
            }
            _ => findings.push(finding),
        }
    }
    findings
}

/// How many lines promtool prints for `findings` (the sum of their counts).
pub fn lint_line_count(findings: &[LintFinding]) -> usize {
    findings.iter().map(|finding| finding.count as usize).sum()
}

// === the family as promlint sees it ===

/// The metric types promlint knows (client_model's `MetricType` without gauge histograms,
/// which expfmt's text parser never produces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PromType {
    Counter,
    Gauge,
    Summary,
    Histogram,
    Untyped,
}

/// Type names promlint looks for in metric names (`dto.MetricType_name` of client_model
/// v0.3.0 in lower case, `UNTYPED` left out).
const TYPE_NAMES: [&str; 5] = ["counter", "gauge", "summary", "histogram", "gauge_histogram"];

/// Unit words and their base unit (promlint's `units`).
const UNITS: [(&str, &str); 24] = [
    ("amperes", "amperes"),
    ("bytes", "bytes"),
    ("celsius", "celsius"),
    ("grams", "grams"),
    ("joules", "joules"),
    ("kelvin", "kelvin"),
    ("meters", "meters"),
    ("metres", "metres"),
    ("seconds", "seconds"),
    ("volts", "volts"),
    ("minutes", "seconds"),
    ("hours", "seconds"),
    ("days", "seconds"),
    ("weeks", "seconds"),
    ("kelvins", "kelvin"),
    ("fahrenheit", "celsius"),
    ("rankine", "celsius"),
    ("inches", "meters"),
    ("yards", "meters"),
    ("miles", "meters"),
    ("bits", "bytes"),
    ("calories", "joules"),
    ("pounds", "grams"),
    ("ounces", "grams"),
];

/// Prefixes a unit word may carry (promlint's `unitPrefixes`, including its `mibi`).
const UNIT_PREFIXES: [&str; 18] = [
    "pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi", "mega", "mibi", "giga", "gibi",
    "tera", "tebi", "peta", "pebi",
];

/// Abbreviated units promlint discourages, as whole words of the lower-cased name.
const UNIT_ABBREVIATIONS: [&str; 14] = [
    "s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d",
];

/// One family as promtool's parser would have built it.
struct LintFamily<'e, 'a> {
    name: Cow<'e, str>,
    prom_type: PromType,
    has_help: bool,
    line: u32,
    samples: Vec<&'e Sample<'a>>,
}

impl<'e, 'a> LintFamily<'e, 'a> {
    /// The family promlint would lint for `family`, or `None` when it has no sample.
    fn of(exposition: &'e Exposition<'a>, family: &'e Family<'a>) -> Option<Self> {
        let openmetrics_names = exposition.format == Format::OpenMetrics;
        let samples: Vec<&Sample<'a>> = exposition
            .samples_of(family)
            .iter()
            // `_created` belongs to the OpenMetrics family; text output prints it apart.
            .filter(|sample| !(openmetrics_names && is_created(family, sample)))
            .collect();
        let first = samples.first()?;
        let name: Cow<'e, str> = match family.metric_type {
            // OpenMetrics names the family without the sample's suffix; text names it by it.
            MetricType::Counter | MetricType::Info if openmetrics_names => Cow::Borrowed(first.name.as_ref()),
            _ => Cow::Borrowed(family.name.as_ref()),
        };
        let prom_type = match family.metric_type {
            MetricType::Counter => PromType::Counter,
            MetricType::Gauge | MetricType::Info | MetricType::StateSet => PromType::Gauge,
            MetricType::Summary => PromType::Summary,
            MetricType::Histogram | MetricType::GaugeHistogram => PromType::Histogram,
            MetricType::Unknown => PromType::Untyped,
        };
        let has_help = family
            .help
            .as_ref()
            .is_some_and(|help| !help.trim_start_matches([' ', '\t']).is_empty());
        Some(LintFamily {
            name,
            prom_type,
            has_help,
            line: family.line,
            samples,
        })
    }

    /// The labels of each metric (in order of first sample) with the line of its first
    /// sample. Summaries and histograms merge samples that share labels apart from
    /// `quantile` / `le`, which are not labels there.
    fn metrics(&self, exposition: &'e Exposition<'a>) -> Vec<(u32, Vec<&'e Label<'a>>)> {
        let special = match self.prom_type {
            PromType::Summary => Some("quantile"),
            PromType::Histogram => Some("le"),
            _ => None,
        };
        let mut seen: HashSet<Vec<(&str, &str)>> = HashSet::new();
        let mut metrics = Vec::new();
        for sample in &self.samples {
            let labels: Vec<&Label<'a>> = exposition
                .labels_in(sample.labels)
                .iter()
                .filter(|label| Some(label.name.as_ref()) != special)
                .collect();
            if special.is_some() {
                let mut signature: Vec<(&str, &str)> = labels
                    .iter()
                    .map(|label| (label.name.as_ref(), label.value.as_ref()))
                    .collect();
                signature.sort_unstable();
                if !seen.insert(signature) {
                    continue;
                }
            }
            metrics.push((sample.line, labels));
        }
        metrics
    }

    /// Appends promlint's findings for this family, in promlint's order of checks.
    fn lint(&self, exposition: &'e Exposition<'a>, out: &mut Vec<LintFinding>) {
        let name = self.name.as_ref();
        let mut report = |rule: LintRule, message: String, line: u32| {
            out.push(LintFinding {
                metric: name.to_string(),
                rule,
                message,
                line,
                count: 1,
            });
        };
        // lintHelp
        if !self.has_help {
            report(LintRule::NoHelp, "no help text".to_string(), self.line);
        }
        // lintMetricUnits
        if let Some((unit, base)) = non_base_unit(name) {
            report(
                LintRule::NonBaseUnit,
                format!("use base unit \"{base}\" instead of \"{unit}\""),
                self.line,
            );
        }
        // lintCounter
        let has_total = name.ends_with("_total");
        match self.prom_type {
            PromType::Counter if !has_total => report(
                LintRule::CounterWithoutTotal,
                "counter metrics should have \"_total\" suffix".to_string(),
                self.line,
            ),
            PromType::Gauge | PromType::Summary | PromType::Histogram if has_total => report(
                LintRule::TotalWithoutCounter,
                "non-counter metrics should not have \"_total\" suffix".to_string(),
                self.line,
            ),
            _ => {}
        }
        let metrics = self.metrics(exposition);
        // lintHistogramSummaryReserved (not for untyped families)
        if self.prom_type != PromType::Untyped {
            let histogram = self.prom_type == PromType::Histogram;
            let summary = self.prom_type == PromType::Summary;
            if !histogram && name.ends_with("_bucket") {
                report(
                    LintRule::BucketSuffix,
                    "non-histogram metrics should not have \"_bucket\" suffix".to_string(),
                    self.line,
                );
            }
            if !histogram && !summary && name.ends_with("_count") {
                report(
                    LintRule::CountSuffix,
                    "non-histogram and non-summary metrics should not have \"_count\" suffix".to_string(),
                    self.line,
                );
            }
            if !histogram && !summary && name.ends_with("_sum") {
                report(
                    LintRule::SumSuffix,
                    "non-histogram and non-summary metrics should not have \"_sum\" suffix".to_string(),
                    self.line,
                );
            }
            for (line, labels) in &metrics {
                for label in labels {
                    if !histogram && label.name == "le" {
                        report(
                            LintRule::LeLabel,
                            "non-histogram metrics should not have \"le\" label".to_string(),
                            *line,
                        );
                    }
                    if !summary && label.name == "quantile" {
                        report(
                            LintRule::QuantileLabel,
                            "non-summary metrics should not have \"quantile\" label".to_string(),
                            *line,
                        );
                    }
                }
            }
        }
        // lintMetricTypeInName
        let lower = name.to_lowercase();
        for type_name in TYPE_NAMES {
            if contains_word(&lower, type_name) {
                report(
                    LintRule::TypeInName,
                    format!("metric name should not include type '{type_name}'"),
                    self.line,
                );
            }
        }
        // lintReservedChars
        if name.contains(':') {
            report(
                LintRule::ReservedChars,
                "metric names should not contain ':'".to_string(),
                self.line,
            );
        }
        // lintCamelCase
        if is_camel_case(name) {
            report(
                LintRule::CamelCaseName,
                "metric names should be written in 'snake_case' not 'camelCase'".to_string(),
                self.line,
            );
        }
        for (line, labels) in &metrics {
            for label in labels {
                if is_camel_case(&label.name) {
                    report(
                        LintRule::CamelCaseLabel,
                        "label names should be written in 'snake_case' not 'camelCase'".to_string(),
                        *line,
                    );
                }
            }
        }
        // lintUnitAbbreviations
        for abbreviation in UNIT_ABBREVIATIONS {
            if contains_word(&lower, abbreviation) {
                report(
                    LintRule::AbbreviatedUnit,
                    "metric names should not contain abbreviated units".to_string(),
                    self.line,
                );
            }
        }
    }
}

/// Whether `sample` is the `_created` sample of an OpenMetrics counter, histogram or summary.
fn is_created(family: &Family<'_>, sample: &Sample<'_>) -> bool {
    matches!(
        family.metric_type,
        MetricType::Counter | MetricType::Histogram | MetricType::Summary
    ) && sample
        .name
        .strip_prefix(family.name.as_ref())
        .is_some_and(|suffix| suffix == "_created")
}

/// `_word_` inside `name` or `_word` at its end (promlint's test for types and abbreviations).
fn contains_word(name: &str, word: &str) -> bool {
    let inner = format!("_{word}_");
    name.contains(&inner) || name.ends_with(&inner[..inner.len() - 1])
}

/// A lowercase ASCII letter followed by an uppercase one (promlint's `[a-z][A-Z]`).
fn is_camel_case(name: &str) -> bool {
    name.as_bytes()
        .windows(2)
        .any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase())
}

/// The first `_`-separated word of `name`, from the left, that is a known unit other than its
/// base unit (with or without a prefix), and that base: `("milliseconds", "seconds")`.
fn non_base_unit(name: &str) -> Option<(&str, &'static str)> {
    name.split('_').find_map(|word| {
        let base = unit_base(word)?;
        (word != base).then_some((word, base))
    })
}

/// The base unit of `word` when it is a unit word, optionally prefixed (`kilobytes` → bytes).
fn unit_base(word: &str) -> Option<&'static str> {
    UNITS.iter().find_map(|&(unit, base)| {
        let stem = word.strip_suffix(unit)?;
        (stem.is_empty() || UNIT_PREFIXES.contains(&stem)).then_some(base)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{parse, FormatChoice, ParseOptions};

    /// (metric, message, count) of each finding, for a text body.
    fn text_findings(body: &str) -> Vec<(String, String, u32)> {
        findings(body, FormatChoice::Text)
    }

    fn findings(body: &str, format: FormatChoice) -> Vec<(String, String, u32)> {
        let options = ParseOptions {
            format,
            ..ParseOptions::default()
        };
        let exposition = parse(body.as_bytes(), options).unwrap();
        lint(&exposition)
            .into_iter()
            .map(|finding| (finding.metric, finding.message, finding.count))
            .collect()
    }

    fn one(metric: &str, message: &str) -> (String, String, u32) {
        (metric.to_string(), message.to_string(), 1)
    }

    /// A gauge called `name` with help and one sample, linted.
    fn gauge(name: &str) -> Vec<(String, String, u32)> {
        text_findings(&format!("# HELP {name} h\n# TYPE {name} gauge\n{name} 1\n"))
    }

    #[test]
    fn a_clean_body_has_no_findings() {
        let body = "# HELP http_requests_total Requests.\n# TYPE http_requests_total counter\nhttp_requests_total{code=\"200\"} 3\n\
                    # HELP latency_seconds Latency.\n# TYPE latency_seconds histogram\nlatency_seconds_bucket{le=\"1\"} 1\n\
                    latency_seconds_bucket{le=\"+Inf\"} 1\nlatency_seconds_count 1\nlatency_seconds_sum 0.5\n";
        assert_eq!(text_findings(body), vec![]);
    }

    #[test]
    fn help_missing_or_empty() {
        assert_eq!(text_findings("a 1\n"), vec![one("a", "no help text")]);
        assert_eq!(text_findings("# HELP a \na 1\n"), vec![one("a", "no help text")]);
        assert_eq!(text_findings("# HELP a x\na 1\n"), vec![]);
    }

    #[test]
    fn a_family_without_samples_is_not_linted() {
        assert_eq!(text_findings("# HELP a_count x\n# TYPE a_count gauge\n"), vec![]);
    }

    #[test]
    fn base_units() {
        let expected = |unit: &str, base: &str| format!("use base unit \"{base}\" instead of \"{unit}\"");
        for (name, unit, base) in [
            ("a_milliseconds", "milliseconds", "seconds"),
            ("a_minutes", "minutes", "seconds"),
            ("a_kilobytes_x", "kilobytes", "bytes"),
            ("a_bits", "bits", "bytes"),
            ("a_kelvins", "kelvins", "kelvin"),
            ("a_millicelsius", "millicelsius", "celsius"),
            ("a_mibibytes", "mibibytes", "bytes"),
            ("a_ounces", "ounces", "grams"),
        ] {
            assert_eq!(gauge(name), vec![one(name, &expected(unit, base))], "{name}");
        }
        // Base units, words that only end like a unit, and a unit word in another case.
        for name in [
            "a_seconds",
            "a_bytes",
            "a_metres",
            "a_thermometers",
            "a_Milliseconds",
            "a_millisecond",
        ] {
            assert_eq!(gauge(name), vec![], "{name}");
        }
        // Two unit words: the first non-base one from the left.
        assert_eq!(
            non_base_unit("a_bytes_milliseconds_hours"),
            Some(("milliseconds", "seconds"))
        );
    }

    #[test]
    fn counters_and_total() {
        let body = "# HELP a x\n# TYPE a counter\na 1\n";
        assert_eq!(
            text_findings(body),
            vec![one("a", "counter metrics should have \"_total\" suffix")]
        );
        for (kind, samples) in [
            ("gauge", "a_total 1\n"),
            ("summary", "a_total_count 1\na_total_sum 1\n"),
            (
                "histogram",
                "a_total_bucket{le=\"+Inf\"} 1\na_total_count 1\na_total_sum 1\n",
            ),
        ] {
            let body = format!("# HELP a_total x\n# TYPE a_total {kind}\n{samples}");
            assert!(
                text_findings(&body).contains(&one("a_total", "non-counter metrics should not have \"_total\" suffix")),
                "{kind}"
            );
        }
        assert_eq!(
            text_findings("# HELP a_total x\na_total 1\n"),
            vec![],
            "untyped is exempt"
        );
    }

    #[test]
    fn reserved_suffixes_by_type() {
        let bucket = "non-histogram metrics should not have \"_bucket\" suffix";
        let count = "non-histogram and non-summary metrics should not have \"_count\" suffix";
        let sum = "non-histogram and non-summary metrics should not have \"_sum\" suffix";
        assert_eq!(gauge("a_bucket"), vec![one("a_bucket", bucket)]);
        assert_eq!(gauge("a_count"), vec![one("a_count", count)]);
        assert_eq!(gauge("a_sum"), vec![one("a_sum", sum)]);
        // A summary may end in _count/_sum, not _bucket; untyped is exempt.
        let summary = "# HELP a_count x\n# TYPE a_count summary\na_count{quantile=\"0.5\"} 1\n";
        assert_eq!(text_findings(summary), vec![]);
        let summary = "# HELP a_bucket x\n# TYPE a_bucket summary\na_bucket{quantile=\"0.5\"} 1\n";
        assert_eq!(text_findings(summary), vec![one("a_bucket", bucket)]);
        assert_eq!(text_findings("# HELP a_count x\na_count 1\n"), vec![]);
    }

    #[test]
    fn le_and_quantile_labels_count_per_metric() {
        let le = "non-histogram metrics should not have \"le\" label";
        let quantile = "non-summary metrics should not have \"quantile\" label";
        let body = "# HELP a x\n# TYPE a gauge\na{le=\"1\"} 1\na{le=\"2\"} 1\na{quantile=\"0.5\"} 1\n";
        assert_eq!(
            text_findings(body),
            vec![("a".to_string(), le.to_string(), 2), one("a", quantile)]
        );
        // In a summary, `le` is a label: one finding per label set (quantiles merged).
        let body = "# HELP a x\n# TYPE a summary\na{le=\"1\",quantile=\"0.5\"} 1\na{le=\"1\",quantile=\"0.9\"} 1\n\
                    a_count{le=\"1\"} 2\na_sum{le=\"1\"} 2\na{le=\"2\",quantile=\"0.5\"} 1\n";
        assert_eq!(text_findings(body), vec![("a".to_string(), le.to_string(), 2)]);
        // In a histogram, `quantile` is a label; `le` is not.
        let body = "# HELP a x\n# TYPE a histogram\na_bucket{quantile=\"1\",le=\"1\"} 1\na_bucket{quantile=\"1\",le=\"+Inf\"} 1\n\
                    a_count{quantile=\"1\"} 1\na_sum{quantile=\"1\"} 1\n";
        assert_eq!(text_findings(body), vec![one("a", quantile)]);
        // Untyped families are exempt.
        assert_eq!(text_findings("# HELP a x\na{le=\"1\",quantile=\"1\"} 1\n"), vec![]);
    }

    #[test]
    fn type_names_in_metric_names() {
        let message = |type_name: &str| format!("metric name should not include type '{type_name}'");
        assert_eq!(gauge("a_gauge"), vec![one("a_gauge", &message("gauge"))]);
        assert_eq!(gauge("a_Counter_x"), vec![one("a_Counter_x", &message("counter"))]);
        assert_eq!(
            gauge("a_gauge_histogram"),
            vec![
                one("a_gauge_histogram", &message("gauge")),
                one("a_gauge_histogram", &message("gauge_histogram")),
                one("a_gauge_histogram", &message("histogram")),
            ]
        );
        assert_eq!(gauge("gauge_a"), vec![], "only as a word after `_`");
    }

    #[test]
    fn colons_and_camel_case() {
        assert_eq!(
            gauge("job:rate5m"),
            vec![one("job:rate5m", "metric names should not contain ':'")]
        );
        assert_eq!(
            gauge("fooBar"),
            vec![one(
                "fooBar",
                "metric names should be written in 'snake_case' not 'camelCase'"
            )]
        );
        assert_eq!(gauge("FOO_BAR"), vec![]);
        let body = "# HELP a x\n# TYPE a gauge\na{osVersion=\"1\",kernelVersion=\"2\"} 1\na{osVersion=\"2\"} 1\n";
        assert_eq!(
            text_findings(body),
            vec![(
                "a".to_string(),
                "label names should be written in 'snake_case' not 'camelCase'".to_string(),
                3
            )]
        );
    }

    #[test]
    fn abbreviated_units_once_per_abbreviation() {
        let message = "metric names should not contain abbreviated units";
        assert_eq!(gauge("a_duration_sec"), vec![one("a_duration_sec", message)]);
        assert_eq!(gauge("a_MB_x"), vec![one("a_MB_x", message)]);
        assert_eq!(gauge("a_s_ms"), vec![("a_s_ms".to_string(), message.to_string(), 2)]);
        assert_eq!(gauge("a_msx"), vec![]);
    }

    #[test]
    fn findings_are_sorted_by_metric_then_message_with_lines() {
        let body = "# HELP z_count x\n# TYPE z_count gauge\nz_count 1\nb_milliseconds 1\n";
        let exposition = parse(body.as_bytes(), ParseOptions::default()).unwrap();
        let found: Vec<(String, LintRule, u32)> = lint(&exposition)
            .into_iter()
            .map(|finding| (finding.metric, finding.rule, finding.line))
            .collect();
        assert_eq!(
            found,
            vec![
                ("b_milliseconds".to_string(), LintRule::NoHelp, 4),
                ("b_milliseconds".to_string(), LintRule::NonBaseUnit, 4),
                ("z_count".to_string(), LintRule::CountSuffix, 1),
            ]
        );
    }

    #[test]
    fn openmetrics_families_are_linted_by_their_text_names() {
        let body = "# TYPE requests counter\n# HELP requests Requests.\nrequests_total 1\nrequests_created 1\n\
                    # TYPE build info\n# HELP build Build.\nbuild_info{version=\"1\"} 1\n\
                    # TYPE door stateset\n# HELP door Door.\ndoor{door=\"open\"} 1\n\
                    # TYPE queue_ms gaugehistogram\n# HELP queue_ms Queue.\nqueue_ms_bucket{le=\"+Inf\"} 1\nqueue_ms_gcount 1\nqueue_ms_gsum 1\n\
                    # TYPE rpc_seconds summary\nrpc_seconds_count 1\nrpc_seconds_sum 1\nrpc_seconds_created 1\n# EOF\n";
        assert_eq!(
            findings(body, FormatChoice::OpenMetrics),
            vec![
                one("queue_ms", "metric names should not contain abbreviated units"),
                one("rpc_seconds", "no help text"),
            ]
        );
        // The same counter read as text the way promtool reads it: untyped, named by its sample.
        let body = "# TYPE requests counter\n# HELP requests Requests.\nrequests_total 1\n";
        assert_eq!(text_findings(body), vec![one("requests_total", "no help text")]);
    }
}
