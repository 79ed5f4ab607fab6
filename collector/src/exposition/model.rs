//! The parsed form of an exposition body: families, samples, labels and exemplars.
//!
//! Everything borrows from the body (`'a`) and only owns a string where an escape sequence had
//! to be decoded. Samples and labels live in two flat arenas inside [`Exposition`]; a family
//! points at a contiguous run of samples and a sample at a contiguous run of labels, so parsing
//! a body allocates a handful of vectors instead of one per sample.

use std::borrow::Cow;

/// The wire format a body was parsed as.
///
/// Sources: Prometheus "Exposition formats" (text format 0.0.4) and the OpenMetrics 1.0
/// specification (`application/openmetrics-text; version=1.0.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Prometheus text format 0.0.4 (`text/plain; version=0.0.4`): timestamps are integer
    /// milliseconds, `# EOF` is an ordinary comment, families may be interleaved.
    Text,
    /// OpenMetrics 1.0 (`application/openmetrics-text`): timestamps are seconds, the body ends
    /// with `# EOF`, exemplars, `UNIT`, `info`, `stateset` and `gaugehistogram` exist.
    #[serde(rename = "openmetrics")]
    OpenMetrics,
}

impl Format {
    /// The name used on the command line and in JSON output: `text` or `openmetrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::OpenMetrics => "openmetrics",
        }
    }
}

/// How strictly family-level rules are enforced.
///
/// Syntax errors (a line that cannot be read) are always errors. Rules about how samples of a
/// family relate to each other (bucket order, `_count` matching the `+Inf` bucket, exemplars
/// only on buckets and `_total`, no interleaved families, …) are errors under
/// [`Validation::Strict`] and warnings under [`Validation::Prometheus`], where the data is
/// still unambiguous and Prometheus's own scrape would ingest it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Validation {
    /// Accept what Prometheus's scraper accepts; record every specification violation as a
    /// warning in [`Exposition::warnings`]. The scraper's default.
    #[default]
    Prometheus,
    /// Reject every violation of the format's specification (OpenMetrics 1.0 MUSTs; for text
    /// 0.0.4 the rules of `prometheus/common`'s `expfmt` parser, which `promtool` uses).
    Strict,
}

/// A metric family's type, as declared by `# TYPE` (or `Unknown` when undeclared).
///
/// Text format 0.0.4's `untyped` is read as [`MetricType::Unknown`] (OpenMetrics renamed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricType {
    /// Monotonic counter: samples `<name>_total` and optionally `<name>_created` (OpenMetrics);
    /// in text 0.0.4 the single sample carries the family name itself.
    Counter,
    /// A value that goes up and down: one sample named like the family.
    Gauge,
    /// Cumulative histogram: `_bucket{le=…}`, `_count`, `_sum`, optional `_created`.
    Histogram,
    /// Histogram of gauges (OpenMetrics): `_bucket{le=…}`, `_gcount`, `_gsum`.
    #[serde(rename = "gaugehistogram")]
    GaugeHistogram,
    /// Summary: `<name>{quantile=…}`, `_count`, `_sum`, optional `_created`.
    Summary,
    /// A set of boolean states (OpenMetrics): one sample per state, label named like the
    /// family, value 0 or 1.
    #[serde(rename = "stateset")]
    StateSet,
    /// Information about the target (OpenMetrics): `<name>_info` with value 1.
    Info,
    /// Undeclared or declared `unknown` / `untyped`.
    Unknown,
}

impl MetricType {
    /// The spelling used in `# TYPE` lines of OpenMetrics (`gaugehistogram`, `stateset`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::GaugeHistogram => "gaugehistogram",
            MetricType::Summary => "summary",
            MetricType::StateSet => "stateset",
            MetricType::Info => "info",
            MetricType::Unknown => "unknown",
        }
    }

    /// Sample-name suffixes a family of this type owns in OpenMetrics 1.0 (section "Metric
    /// types"); `""` means the family name itself.
    pub fn openmetrics_suffixes(self) -> &'static [&'static str] {
        match self {
            MetricType::Counter => &["_total", "_created"],
            MetricType::Gauge | MetricType::StateSet | MetricType::Unknown => &[""],
            MetricType::Histogram => &["_bucket", "_count", "_sum", "_created"],
            MetricType::GaugeHistogram => &["_bucket", "_gcount", "_gsum"],
            MetricType::Summary => &["", "_count", "_sum", "_created"],
            MetricType::Info => &["_info"],
        }
    }
}

/// One `name="value"` pair of a sample or an exemplar. Borrowed unless the value (or a quoted
/// name) contained an escape sequence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Label<'a> {
    /// Label name, e.g. `le`, `instance`, or a quoted UTF-8 name such as `dc.name`.
    pub name: Cow<'a, str>,
    /// Label value with escapes decoded (`\\`, `\"`, `\n`).
    pub value: Cow<'a, str>,
}

/// Half-open range `[start, end)` into [`Exposition::labels`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LabelRange {
    /// First label's index.
    pub start: u32,
    /// One past the last label's index.
    pub end: u32,
}

impl LabelRange {
    /// Number of labels in the range.
    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    /// True when the range holds no label.
    pub fn is_empty(self) -> bool {
        self.end == self.start
    }
}

/// An exemplar attached to a sample (OpenMetrics 1.0, section "Exemplars"): a trace's labels,
/// the observed value and optionally when it was observed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exemplar {
    /// The exemplar's labels (e.g. `trace_id`), a range into [`Exposition::labels`].
    pub labels: LabelRange,
    /// The observed value.
    pub value: f64,
    /// When the value was observed, in seconds since the Unix epoch.
    pub timestamp: Option<f64>,
}

/// One sample: a series (name + labels) and its value at one point in time.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    /// The sample's own name, including the type's suffix (`http_requests_total`,
    /// `latency_seconds_bucket`).
    pub name: Cow<'a, str>,
    /// The sample's series as the body spells it, byte for byte: the name and the label set
    /// (`http_requests_total{code="200"}`, `{"my.metric",code="200"}`), without the blanks
    /// before the value. Two samples with the same spelling are the same series; the same
    /// series may be spelled two ways (label order, escapes, a trailing comma). The scrape
    /// cache keys on it, as Prometheus's does on `Parser::Series`.
    pub series: &'a str,
    /// The sample's labels in body order, a range into [`Exposition::labels`]; empty when
    /// [`Sample::labels_deferred`] (use [`Exposition::labels_of`], which reads either).
    pub labels: LabelRange,
    /// The labels were not read onto the arena ([`crate::exposition::parse_deferring_labels`]):
    /// [`Exposition::labels_of`] reads them from [`Sample::series`] when asked.
    pub labels_deferred: bool,
    /// Bytes before [`Sample::series`] on its line (blanks a text 0.0.4 line may start
    /// with; saturates at 65,535), so errors found in a deferred label set name the column.
    pub series_offset: u16,
    /// The value; NaN and ±Inf are kept as such.
    pub value: f64,
    /// Exposition timestamp in seconds since the Unix epoch (text 0.0.4 milliseconds are
    /// divided by 1,000; `Sample::timestamp_ms` gives them back exactly).
    pub timestamp: Option<f64>,
    /// The exemplar printed after the value, if any.
    pub exemplar: Option<Exemplar>,
    /// 1-based line of the body the sample came from (for diagnostics).
    pub line: u32,
}

impl Sample<'_> {
    /// The timestamp in whole milliseconds since the epoch (rounded to nearest), as Prometheus
    /// stores it. Exact for text 0.0.4 bodies, whose timestamps are integer milliseconds.
    pub fn timestamp_ms(&self) -> Option<i64> {
        self.timestamp.map(seconds_to_millis)
    }
}

/// Whole milliseconds for `seconds`: the integer `ms` with `ms / 1000 == seconds` when there is
/// one (every text 0.0.4 timestamp), else the nearest. Rounding `seconds * 1000` alone is off by
/// one for timestamps beyond about 4.4e15 ms, where that product is not exact.
pub(crate) fn seconds_to_millis(seconds: f64) -> i64 {
    let nearest = (seconds * 1000.0).round();
    for candidate in [nearest, nearest - 1.0, nearest + 1.0] {
        if candidate / 1000.0 == seconds {
            return candidate as i64;
        }
    }
    nearest as i64
}

/// A metric family: metadata plus the samples that belong to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Family<'a> {
    /// The family name (`http_requests`, without `_total` in OpenMetrics; as printed in text
    /// 0.0.4, where a counter family is usually named `…_total`).
    pub name: Cow<'a, str>,
    /// Declared type; [`MetricType::Unknown`] without a `# TYPE` line.
    pub metric_type: MetricType,
    /// `# HELP` text with escapes decoded.
    pub help: Option<Cow<'a, str>>,
    /// `# UNIT` (OpenMetrics), e.g. `seconds`; an empty `# UNIT name ` line gives `None`.
    pub unit: Option<Cow<'a, str>>,
    /// Index of the first sample in [`Exposition::samples`].
    pub samples_start: u32,
    /// One past the last sample.
    pub samples_end: u32,
    /// 1-based line where the family was first seen.
    pub line: u32,
}

/// A parsed body: families in body order, with the sample and label arenas they index.
#[derive(Debug, Clone, PartialEq)]
pub struct Exposition<'a> {
    /// The format the body was read as.
    pub format: Format,
    /// Families in order of first appearance.
    pub families: Vec<Family<'a>>,
    /// Every sample, grouped by family (a family's samples are contiguous, in body order).
    pub samples: Vec<Sample<'a>>,
    /// Every label of every sample and exemplar, except a sample's whose labels were deferred
    /// ([`Sample::labels_deferred`]; [`Exposition::labels_of`] reads either).
    pub labels: Vec<Label<'a>>,
    /// Violations tolerated under [`Validation::Prometheus`], in body order (at most 1,000).
    pub warnings: Vec<super::ParseError>,
    /// Warnings found beyond the 1,000 kept in [`Exposition::warnings`].
    pub warnings_dropped: usize,
}

impl<'a> Exposition<'a> {
    /// The samples of `family`, in body order.
    pub fn samples_of(&self, family: &Family<'a>) -> &[Sample<'a>] {
        &self.samples[family.samples_start as usize..family.samples_end as usize]
    }

    /// The labels a range points at.
    pub fn labels_in(&self, range: LabelRange) -> &[Label<'a>] {
        &self.labels[range.start as usize..range.end as usize]
    }

    /// `sample`'s labels in body order, whether they sit in the arena or were deferred
    /// ([`Sample::labels_deferred`]; then they are read from [`Sample::series`] now, one
    /// allocation). The scrape calls this for a series its cache does not know (and for
    /// `node_uname_info`'s one sample).
    ///
    /// # Errors
    /// A deferred label set that repeats a label name ([`super::Rule::DuplicateLabel`],
    /// naming the line and column, as the eager parse does when it refuses such a body).
    pub fn labels_of(&self, sample: &Sample<'a>) -> Result<std::borrow::Cow<'_, [Label<'a>]>, super::ParseError> {
        if !sample.labels_deferred {
            return Ok(std::borrow::Cow::Borrowed(self.labels_in(sample.labels)));
        }
        let mut labels = Vec::new();
        super::syntax::read_series_labels(sample.series, sample.line, sample.series_offset, &mut labels)?;
        Ok(std::borrow::Cow::Owned(labels))
    }

    /// `sample`'s labels as an owned map, name → value (values unescaped): the shape the
    /// detector and the simulator's tests take samples in. A name given twice (refused by
    /// the parser; for a deferred label set, by [`Exposition::labels_of`]) gives an empty map
    /// if deferred, else keeps the last value.
    pub fn label_map(&self, sample: &Sample<'a>) -> std::collections::BTreeMap<String, String> {
        self.labels_of(sample)
            .unwrap_or_default()
            .iter()
            .map(|label| (label.name.to_string(), label.value.to_string()))
            .collect()
    }

    /// The value of label `name` on `sample`, if present (owned only when it held an escape).
    pub fn label_value(&self, sample: &Sample<'a>, name: &str) -> Option<std::borrow::Cow<'a, str>> {
        self.labels_of(sample)
            .ok()?
            .iter()
            .find(|label| label.name == name)
            .map(|label| label.value.clone())
    }

    /// Number of warnings found, including those not kept.
    pub fn warning_count(&self) -> usize {
        self.warnings.len() + self.warnings_dropped
    }

    /// Warnings that `Validation::Strict` would turn into errors: every warning (kept or
    /// dropped) except the `auto` format decision's (`Rule::FormatFallback`), which is not a
    /// violation of either format. Non-zero means a strict check rejects the body.
    pub fn strict_rejections(&self) -> usize {
        self.warnings
            .iter()
            .filter(|warning| warning.rule != super::Rule::FormatFallback)
            .count()
            + self.warnings_dropped
    }

    /// Total number of samples in the body.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }

    /// Samples that repeat an earlier sample's series (the same name and label set, in any
    /// label order) at the same timestamp (or both without one), as [`Rule::DuplicateSeries`]
    /// problems in body order, each naming the line of the first. Prometheus keeps the first
    /// sample and counts the others (`prometheus_target_scrapes_sample_duplicate_timestamp_total`);
    /// so does epicenter's scrape, by stored series id after metric relabeling. `parse` does
    /// not look for them so that scrapes do not hash every sample twice; `check metrics`
    /// calls this and rejects the body under `--strict`.
    ///
    /// [`Rule::DuplicateSeries`]: super::Rule::DuplicateSeries
    pub fn duplicate_samples(&self) -> Vec<super::ParseError> {
        // (name, sorted label pairs, timestamp bits) → line of the first sample.
        type SeriesAt<'s> = (&'s str, Vec<(&'s str, &'s str)>, Option<u64>);
        let mut first_line: std::collections::HashMap<SeriesAt<'_>, u32> =
            std::collections::HashMap::with_capacity(self.samples.len());
        let mut duplicates = Vec::new();
        // Deferred label sets read first (borrowed as they are otherwise).
        let read: Vec<std::borrow::Cow<'_, [Label<'a>]>> = self
            .samples
            .iter()
            .map(|sample| self.labels_of(sample).unwrap_or_default())
            .collect();
        for (sample, sample_labels) in self.samples.iter().zip(&read) {
            let mut labels: Vec<(&str, &str)> = sample_labels
                .iter()
                .map(|label| (label.name.as_ref(), label.value.as_ref()))
                .collect();
            labels.sort_unstable();
            let key = (sample.name.as_ref(), labels, sample.timestamp.map(f64::to_bits));
            match first_line.entry(key) {
                std::collections::hash_map::Entry::Occupied(first) => duplicates.push(super::ParseError {
                    line: sample.line,
                    column: 1,
                    rule: super::Rule::DuplicateSeries,
                    message: format!(
                        "series '{}' repeats line {} at the same timestamp: a scrape keeps the first sample and drops this one",
                        super::error::show(&sample.name),
                        first.get()
                    ),
                }),
                std::collections::hash_map::Entry::Vacant(vacant) => {
                    vacant.insert(sample.line);
                }
            }
        }
        duplicates
    }

    /// Adds [`Exposition::duplicate_samples`] to the warnings (in line order, within the
    /// 1,000 kept; the rest counted in [`Exposition::warnings_dropped`]), or under
    /// [`Validation::Strict`] returns the first as the error.
    ///
    /// # Errors
    /// The first duplicate sample, under strict validation.
    pub fn check_duplicates(&mut self, validation: Validation) -> Result<(), super::ParseError> {
        let mut duplicates = self.duplicate_samples();
        if duplicates.is_empty() {
            return Ok(());
        }
        if validation == Validation::Strict {
            return Err(duplicates.swap_remove(0));
        }
        self.warnings.append(&mut duplicates);
        self.warnings.sort_by_key(|warning| (warning.line, warning.column));
        const KEPT: usize = 1000;
        if self.warnings.len() > KEPT {
            self.warnings_dropped += self.warnings.len() - KEPT;
            self.warnings.truncate(KEPT);
        }
        Ok(())
    }

    /// The family called `name`, if the body has one.
    pub fn family(&self, name: &str) -> Option<&Family<'a>> {
        self.families.iter().find(|family| family.name == name)
    }
}
