//! Families from lines: which family a sample belongs to, and the family-level rules.
//!
//! OpenMetrics 1.0 (section "Text format", "Metric types"): a sample belongs to the current
//! family when its name is the family name plus a suffix the family's type owns; otherwise it
//! starts a new family of type unknown. A family's samples are contiguous, metrics (label sets)
//! are not interleaved, timestamps do not go backwards, histogram buckets are sorted and end at
//! `+Inf`, and so on. Text 0.0.4 (`expfmt`'s rules): families are keyed by name, `_bucket`,
//! `_count` and `_sum` samples join a declared histogram or summary, interleaving is tolerated.
//!
//! Rules that leave the data unambiguous go through [`Assembler::violation`]: an error under
//! [`Validation::Strict`], a warning under [`Validation::Prometheus`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

use super::error::{show, ParseError, Rule};
use super::model::{Exposition, Family, Format, Label, LabelRange, MetricType, Sample, Validation};
use super::number::{format_value, parse_value};
use super::syntax::{error_at, read_series_labels, Line, LineReader, SampleLine};

/// At most this many warnings are kept; the rest are counted in
/// [`Exposition::warnings_dropped`].
const MAX_WARNINGS: usize = 1000;

/// Exemplar label sets are limited to 128 UTF-8 characters (OpenMetrics 1.0, "Exemplars").
const EXEMPLAR_LABEL_CHARACTERS: usize = 128;

/// Per-family bookkeeping that the public [`Family`] does not carry.
#[derive(Default, Clone)]
struct FamilyState {
    type_declared: bool,
    unit_declared: bool,
    sample_count: u32,
    warned_interleaved: bool,
    /// A `TYPE` line came after some of the family's samples.
    typed_after_samples: bool,
}

/// Violations found so far, and whether they are errors or warnings.
struct Diagnostics {
    validation: Validation,
    warnings: Vec<ParseError>,
    dropped_warnings: usize,
}

impl Diagnostics {
    /// Records a violation of a rule that leaves the data unambiguous: an error under
    /// [`Validation::Strict`], a warning otherwise.
    fn violation(&mut self, error: ParseError) -> Result<(), ParseError> {
        if self.validation == Validation::Strict {
            return Err(error);
        }
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(error);
        } else {
            self.dropped_warnings += 1;
        }
        Ok(())
    }
}

/// Builds an [`Exposition`] from a UTF-8 body.
pub(crate) struct Assembler<'a> {
    format: Format,
    diagnostics: Diagnostics,
    /// Accept an OpenMetrics body without `# EOF` (with a warning).
    allow_missing_eof: bool,
    families: Vec<Family<'a>>,
    states: Vec<FamilyState>,
    samples: Vec<Sample<'a>>,
    family_of_sample: Vec<u32>,
    labels: Vec<Label<'a>>,
    by_name: FxHashMap<Cow<'a, str>, u32>,
    current: Option<u32>,
    last_sample_family: u32,
    needs_regroup: bool,
    /// Defer the labels of text 0.0.4 samples with unquoted names
    /// ([`crate::exposition::parse_deferring_labels`]).
    defer_labels: bool,
}

impl<'a> Assembler<'a> {
    pub(crate) fn new(format: Format, validation: Validation, size_hint: usize, allow_missing_eof: bool) -> Self {
        // A realistic sample line is 60–150 bytes with 3–8 labels.
        let sample_hint = size_hint / 96;
        Assembler {
            format,
            diagnostics: Diagnostics {
                validation,
                warnings: Vec::new(),
                dropped_warnings: 0,
            },
            allow_missing_eof,
            families: Vec::new(),
            states: Vec::new(),
            samples: Vec::with_capacity(sample_hint),
            family_of_sample: Vec::with_capacity(sample_hint),
            labels: Vec::with_capacity(sample_hint * 4),
            by_name: FxHashMap::default(),
            current: None,
            last_sample_family: 0,
            needs_regroup: false,
            defer_labels: false,
        }
    }

    /// Defers the labels of text 0.0.4 samples with unquoted names under
    /// [`Validation::Prometheus`] (see [`LineReader::defer_labels`]). The family rules then
    /// run per sample on what the label scan kept (`le`, `quantile`): what is an error under
    /// that validation (a bucket without a numeric `le`, a non-numeric `quantile`) still is;
    /// the histogram and summary rules that give warnings only (bucket order, `_count`
    /// against `+Inf`, negative populations, a missing `quantile`) are not looked for, except
    /// for a family whose `TYPE` came after its samples, which is judged in full.
    pub(crate) fn defer_labels(mut self, defer: bool) -> Self {
        self.defer_labels =
            defer && self.format == Format::Text && self.diagnostics.validation == Validation::Prometheus;
        self
    }

    /// Parses the whole body.
    pub(crate) fn run(mut self, text: &'a str) -> Result<Exposition<'a>, ParseError> {
        let bytes = text.as_bytes();
        let mut offset = 0;
        let mut line_no: u32 = 0;
        let mut eof_seen = false;
        let mut warned_cr = false;
        while offset < bytes.len() {
            line_no += 1;
            let (mut line, next) = match memchr::memchr(b'\n', &bytes[offset..]) {
                Some(found) => (&text[offset..offset + found], offset + found + 1),
                None => (&text[offset..], bytes.len()),
            };
            if let Some(stripped) = line.strip_suffix('\r') {
                if self.format == Format::OpenMetrics && !warned_cr {
                    warned_cr = true;
                    self.diagnostics.violation(error_at(
                        line,
                        line_no,
                        stripped.len(),
                        Rule::CarriageReturn,
                        "line ends with CR LF: OpenMetrics lines end with LF alone".to_string(),
                    ))?;
                }
                line = stripped;
            }
            let parsed = LineReader::new(line, line_no, self.format)
                .loose(self.allow_missing_eof)
                .defer_labels(self.defer_labels)
                .read(&mut self.labels)?;
            match parsed {
                Line::Blank | Line::Comment => {}
                Line::Eof => {
                    if next < bytes.len() {
                        return Err(ParseError {
                            line: line_no + 1,
                            column: 1,
                            rule: Rule::TextAfterEof,
                            message: format!("unexpected data after '# EOF': '{}'", show(&text[next..])),
                        });
                    }
                    eof_seen = true;
                }
                Line::Help { name, text } => self.help(name, text, line, line_no)?,
                Line::Type { name, metric_type } => self.declare_type(name, metric_type, line, line_no)?,
                Line::Unit { name, unit } => self.unit(name, unit, line, line_no)?,
                Line::Sample(sample) => self.sample(sample, line, line_no)?,
            }
            offset = next;
        }
        if self.format == Format::OpenMetrics && !eof_seen {
            // Point at where `# EOF` is missing: the line after the last complete line.
            let (line, column) = match text.rsplit_once('\n') {
                _ if text.is_empty() => (1, 1),
                Some((_, "")) => (line_no + 1, 1),
                Some((_, last)) => (line_no, last.chars().count() as u32 + 1),
                None => (1, text.chars().count() as u32 + 1),
            };
            let error = ParseError {
                line,
                column,
                rule: Rule::MissingEof,
                message: "OpenMetrics body does not end with '# EOF'".to_string(),
            };
            if !self.allow_missing_eof {
                return Err(error);
            }
            self.diagnostics.violation(error)?;
        }
        self.finish()
    }

    fn new_family(&mut self, name: Cow<'a, str>, line_no: u32) -> u32 {
        let index = self.families.len() as u32;
        self.by_name.insert(name.clone(), index);
        self.families.push(Family {
            name,
            metric_type: MetricType::Unknown,
            help: None,
            unit: None,
            samples_start: 0,
            samples_end: 0,
            line: line_no,
        });
        self.states.push(FamilyState::default());
        index
    }

    /// The family metadata for `name` applies to, creating or (re)opening it.
    fn metadata_family(&mut self, name: Cow<'a, str>, line: &str, line_no: u32) -> Result<u32, ParseError> {
        if self.format == Format::Text {
            return Ok(match self.by_name.get(&name) {
                Some(&index) => index,
                None => self.new_family(name, line_no),
            });
        }
        if let Some(current) = self.current {
            if self.families[current as usize].name == name {
                return Ok(current);
            }
        }
        let index = match self.by_name.get(&name) {
            Some(&index) => {
                self.diagnostics.violation(error_at(
                    line,
                    line_no,
                    0,
                    Rule::ClashingName,
                    format!(
                        "metadata for family '{}' again after other families (first seen on line {})",
                        show(&name),
                        self.families[index as usize].line
                    ),
                ))?;
                index
            }
            None => self.new_family(name, line_no),
        };
        self.current = Some(index);
        Ok(index)
    }

    fn metadata_after_samples(&mut self, index: u32, what: &str, line: &str, line_no: u32) -> Result<(), ParseError> {
        if self.states[index as usize].sample_count == 0 {
            return Ok(());
        }
        self.diagnostics.violation(error_at(
            line,
            line_no,
            0,
            Rule::MetadataAfterSamples,
            format!(
                "{what} for '{}' after its samples: metadata comes first",
                show(&self.families[index as usize].name)
            ),
        ))
    }

    fn help(&mut self, name: Cow<'a, str>, text: Cow<'a, str>, line: &str, line_no: u32) -> Result<(), ParseError> {
        let index = self.metadata_family(name, line, line_no)?;
        if self.format == Format::OpenMetrics {
            self.metadata_after_samples(index, "HELP", line, line_no)?;
        }
        if self.families[index as usize].help.is_some() {
            return self.diagnostics.violation(error_at(
                line,
                line_no,
                0,
                Rule::RepeatedMetadata,
                format!("second HELP for '{}'", show(&self.families[index as usize].name)),
            ));
        }
        self.families[index as usize].help = Some(text);
        Ok(())
    }

    fn declare_type(
        &mut self,
        name: Cow<'a, str>,
        metric_type: MetricType,
        line: &str,
        line_no: u32,
    ) -> Result<(), ParseError> {
        let index = self.metadata_family(name, line, line_no)?;
        let state = &self.states[index as usize];
        let family = &self.families[index as usize];
        if state.type_declared {
            let message = format!(
                "second TYPE for '{}' (already {})",
                show(&family.name),
                family.metric_type.as_str()
            );
            let error = error_at(line, line_no, 0, Rule::RepeatedMetadata, message);
            if family.metric_type != metric_type {
                return Err(error);
            }
            return self.diagnostics.violation(error);
        }
        if state.sample_count > 0 {
            let error = error_at(
                line,
                line_no,
                0,
                Rule::MetadataAfterSamples,
                format!(
                    "TYPE for '{}' after its samples: metadata comes first",
                    show(&family.name)
                ),
            );
            // A type arriving after samples would change how OpenMetrics assigned them.
            if self.format == Format::OpenMetrics {
                return Err(error);
            }
            self.diagnostics.violation(error)?;
        }
        self.states[index as usize].type_declared = true;
        self.states[index as usize].typed_after_samples = self.states[index as usize].sample_count > 0;
        self.families[index as usize].metric_type = metric_type;
        Ok(())
    }

    fn unit(&mut self, name: Cow<'a, str>, unit: Cow<'a, str>, line: &str, line_no: u32) -> Result<(), ParseError> {
        let index = self.metadata_family(name, line, line_no)?;
        self.metadata_after_samples(index, "UNIT", line, line_no)?;
        if self.states[index as usize].unit_declared {
            return self.diagnostics.violation(error_at(
                line,
                line_no,
                0,
                Rule::RepeatedMetadata,
                format!("second UNIT for '{}'", show(&self.families[index as usize].name)),
            ));
        }
        self.states[index as usize].unit_declared = true;
        if unit.is_empty() {
            return Ok(());
        }
        let family_name = &self.families[index as usize].name;
        let suffixed = family_name.len() > unit.len()
            && family_name.ends_with(unit.as_ref())
            && family_name.as_bytes()[family_name.len() - unit.len() - 1] == b'_';
        if !suffixed {
            return Err(error_at(
                line,
                line_no,
                0,
                Rule::UnitNotSuffix,
                format!(
                    "unit '{}' is not a suffix of metric name '{}' (expected a name ending in '_{}')",
                    show(&unit),
                    show(family_name),
                    show(&unit)
                ),
            ));
        }
        self.families[index as usize].unit = Some(unit);
        Ok(())
    }

    // === samples ===

    fn sample(&mut self, mut sample: SampleLine<'a>, line: &str, line_no: u32) -> Result<(), ParseError> {
        if let Some(tolerated) = sample.tolerated.take() {
            self.diagnostics.violation(tolerated)?;
        }
        let index = match self.format {
            Format::OpenMetrics => self.openmetrics_family_for(&sample.name, sample.name_at, line, line_no)?,
            Format::Text => self.text_family_for(&sample.name, line_no),
        };
        if index < self.last_sample_family {
            self.needs_regroup = true;
        }
        self.last_sample_family = index;
        if self.defer_labels {
            self.check_type_labels(index, &sample, line_no)?;
        }
        self.states[index as usize].sample_count += 1;
        self.family_of_sample.push(index);
        self.samples.push(Sample {
            name: sample.name,
            series: sample.series,
            labels: sample.labels,
            labels_deferred: sample.labels_deferred,
            series_offset: u16::try_from(sample.name_at).unwrap_or(u16::MAX),
            value: sample.value,
            timestamp: sample.timestamp,
            exemplar: sample.exemplar,
            line: line_no,
        });
        Ok(())
    }

    /// The errors of [`check_text_family`] that one sample shows, for a body read with
    /// deferred labels (which skips that function): a histogram bucket needs a numeric `le`,
    /// a summary sample's `quantile` must be a number. The family rules' violations (warnings
    /// under [`Validation::Prometheus`], the only validation that defers) are not looked for.
    fn check_type_labels(&self, family: u32, sample: &SampleLine<'a>, line_no: u32) -> Result<(), ParseError> {
        let family = &self.families[family as usize];
        let metric_type = family.metric_type;
        if !matches!(metric_type, MetricType::Histogram | MetricType::Summary) {
            return Ok(());
        }
        let arena = &self.labels[sample.labels.start as usize..sample.labels.end as usize];
        // The value of `name`: kept by the label scan when deferred, else in the arena.
        fn find<'s>(
            deferred: bool,
            arena: &'s [Label<'_>],
            name: &str,
            kept: &'s Option<Cow<'_, str>>,
        ) -> Option<&'s str> {
            if deferred {
                kept.as_deref()
            } else {
                arena
                    .iter()
                    .find(|label| label.name == name)
                    .map(|label| label.value.as_ref())
            }
        }
        let suffix = sample.name.strip_prefix(family.name.as_ref()).unwrap_or("");
        if metric_type == MetricType::Histogram {
            if suffix == "_bucket" {
                let le = find(sample.labels_deferred, arena, "le", &sample.type_labels.le);
                bucket_bound(&sample.name, le, line_no)?;
            }
        } else if suffix.is_empty() {
            if let Some(quantile) = find(sample.labels_deferred, arena, "quantile", &sample.type_labels.quantile) {
                quantile_number(quantile, line_no)?;
            }
        }
        Ok(())
    }

    #[allow(
        clippy::ptr_arg,
        reason = "a borrowed Cow is cloned without allocating when it names a new family"
    )]
    fn text_family_for(&mut self, name: &Cow<'a, str>, line_no: u32) -> u32 {
        if let Some(current) = self.current {
            if text_owns(&self.families[current as usize], name) {
                return current;
            }
        }
        let index = if let Some(&index) = self.by_name.get(name.as_ref()) {
            index
        } else {
            let base = ["_bucket", "_count", "_sum"].iter().find_map(|suffix| {
                let base = name.strip_suffix(suffix)?;
                let &index = self.by_name.get(base)?;
                text_owns(&self.families[index as usize], name).then_some(index)
            });
            match base {
                Some(index) => index,
                None => self.new_family(name.clone(), line_no),
            }
        };
        self.current = Some(index);
        index
    }

    #[allow(
        clippy::ptr_arg,
        reason = "a borrowed Cow is cloned without allocating when it names a new family"
    )]
    fn openmetrics_family_for(
        &mut self,
        name: &Cow<'a, str>,
        name_at: usize,
        line: &str,
        line_no: u32,
    ) -> Result<u32, ParseError> {
        if let Some(current) = self.current {
            let family = &self.families[current as usize];
            if openmetrics_owns(family, name) {
                return Ok(current);
            }
            if family.name == *name {
                // `ii` in info family `ii`, `x_total` in counter family `x_total`: what text
                // 0.0.4 habits produce and Prometheus ingests.
                let message = format!(
                    "sample '{}' does not fit {} family '{}' (expected one of: {})",
                    show(name),
                    family.metric_type.as_str(),
                    show(&family.name),
                    expected_names(family)
                );
                self.diagnostics
                    .violation(error_at(line, line_no, name_at, Rule::SampleNameForType, message))?;
                return Ok(current);
            }
        }
        // A family seen before, now interleaved with others?
        let earlier = std::iter::once(name.as_ref())
            .chain(
                [
                    "_total", "_created", "_bucket", "_count", "_sum", "_gcount", "_gsum", "_info",
                ]
                .iter()
                .filter_map(|suffix| name.strip_suffix(suffix)),
            )
            .find_map(|base| {
                let &index = self.by_name.get(base)?;
                let family = &self.families[index as usize];
                (openmetrics_owns(family, name) || family.name == *name).then_some(index)
            });
        if let Some(index) = earlier {
            if !self.states[index as usize].warned_interleaved {
                self.states[index as usize].warned_interleaved = true;
                let message = format!(
                    "sample '{}' of family '{}' after other families: a family's samples must be contiguous",
                    show(name),
                    show(&self.families[index as usize].name)
                );
                self.diagnostics
                    .violation(error_at(line, line_no, name_at, Rule::Interleaved, message))?;
            }
            self.current = Some(index);
            return Ok(index);
        }
        let index = self.new_family(name.clone(), line_no);
        self.current = Some(index);
        Ok(index)
    }

    // === whole body ===

    fn finish(mut self) -> Result<Exposition<'a>, ParseError> {
        if self.defer_labels {
            self.read_retyped_labels()?;
        }
        if self.needs_regroup {
            self.regroup();
        }
        let mut start = 0u32;
        for (family, state) in self.families.iter_mut().zip(&self.states) {
            family.samples_start = start;
            start += state.sample_count;
            family.samples_end = start;
        }
        for (family, state) in self.families.iter().zip(&self.states) {
            let samples = &self.samples[family.samples_start as usize..family.samples_end as usize];
            match self.format {
                Format::OpenMetrics => check_openmetrics_family(family, samples, &self.labels, &mut self.diagnostics)?,
                // Checked sample by sample as read (`check_type_labels`), unless the type
                // came after samples (`read_retyped_labels`).
                Format::Text if self.defer_labels && !state.typed_after_samples => {}
                Format::Text => check_text_family(family, samples, &self.labels, &mut self.diagnostics)?,
            }
        }
        if self.format == Format::OpenMetrics {
            self.check_clashing_names()?;
        }
        let mut warnings = self.diagnostics.warnings;
        // Family checks run after the body is read; report everything in body order.
        warnings.sort_by_key(|warning| (warning.line, warning.column));

        Ok(Exposition {
            format: self.format,
            families: self.families,
            samples: self.samples,
            labels: self.labels,
            warnings,
            warnings_dropped: self.diagnostics.dropped_warnings,
        })
    }

    /// With deferred labels: the samples of a histogram or summary family whose `TYPE` came
    /// after some of them (a violation) were read under another type; their labels are read
    /// onto the arena now so that [`check_text_family`] judges the family as an eager parse
    /// does. Runs before `regroup`, while `family_of_sample` is in sample order.
    fn read_retyped_labels(&mut self) -> Result<(), ParseError> {
        for (sample, &family) in self.samples.iter_mut().zip(&self.family_of_sample) {
            let retyped = self.states[family as usize].typed_after_samples
                && matches!(
                    self.families[family as usize].metric_type,
                    MetricType::Histogram | MetricType::Summary
                );
            if !retyped || !sample.labels_deferred {
                continue;
            }
            let start = self.labels.len() as u32;
            read_series_labels(sample.series, sample.line, sample.series_offset, &mut self.labels)?;
            sample.labels = LabelRange {
                start,
                end: self.labels.len() as u32,
            };
            sample.labels_deferred = false;
        }
        Ok(())
    }

    /// Stable counting sort of samples by family, for bodies whose families were interleaved.
    fn regroup(&mut self) {
        let mut next_slot: Vec<u32> = Vec::with_capacity(self.families.len());
        let mut running = 0u32;
        for state in &self.states {
            next_slot.push(running);
            running += state.sample_count;
        }
        let mut order: Vec<u32> = vec![0; self.samples.len()];
        for (sample_index, &family) in self.family_of_sample.iter().enumerate() {
            let slot = &mut next_slot[family as usize];
            order[*slot as usize] = sample_index as u32;
            *slot += 1;
        }
        let mut taken: Vec<Option<Sample<'a>>> = std::mem::take(&mut self.samples).into_iter().map(Some).collect();
        self.samples = order
            .iter()
            .map(|&index| {
                taken[index as usize]
                    .take()
                    .expect("each sample is placed exactly once")
            })
            .collect();
    }

    fn check_clashing_names(&mut self) -> Result<(), ParseError> {
        let mut owner: HashMap<String, usize> = HashMap::with_capacity(self.families.len() * 2);
        for index in 0..self.families.len() {
            let family = &self.families[index];
            let mut names: Vec<String> = vec![family.name.to_string()];
            for suffix in family.metric_type.openmetrics_suffixes() {
                if !suffix.is_empty() {
                    names.push(format!("{}{suffix}", family.name));
                }
            }
            for produced in names {
                if let Some(&other) = owner.get(&produced) {
                    if other != index {
                        let message = format!(
                            "family '{}' clashes with family '{}' (line {}) over the name '{}'",
                            show(&self.families[index].name),
                            show(&self.families[other].name),
                            self.families[other].line,
                            show(&produced)
                        );
                        let line = self.families[index].line;
                        self.diagnostics
                            .violation(sample_error(line, Rule::ClashingName, message))?;
                    }
                } else {
                    owner.insert(produced, index);
                }
            }
        }
        Ok(())
    }
}

fn check_text_family(
    family: &Family<'_>,
    samples: &[Sample<'_>],
    all_labels: &[Label<'_>],
    diagnostics: &mut Diagnostics,
) -> Result<(), ParseError> {
    let metric_type = family.metric_type;
    if !matches!(metric_type, MetricType::Histogram | MetricType::Summary) {
        return Ok(());
    }
    let name = family.name.as_ref();
    // Each histogram metric's buckets (per timestamp) in the order listed (the format requires
    // increasing `le`), found by label set since text 0.0.4 tolerates interleaving.
    let mut runs: FxHashMap<u64, Vec<(Group<'_, '_>, HistogramRun)>> = FxHashMap::default();
    // The run the previous histogram sample went to: (hash, index in its bucket, group, timestamp).
    let mut last_run: Option<(u64, usize, Group<'_, '_>, Option<u64>)> = None;
    for sample in samples {
        let suffix = sample.name.strip_prefix(name).unwrap_or("");
        let labels = &all_labels[sample.labels.start as usize..sample.labels.end as usize];
        let line_no = sample.line;
        let value = sample.value;
        if metric_type == MetricType::Histogram {
            if suffix == "_bucket" {
                let le = labels.iter().find(|label| label.name == "le");
                bucket_bound(&sample.name, le.map(|label| label.value.as_ref()), line_no)?;
                if value < 0.0 {
                    diagnostics.violation(sample_error(
                        line_no,
                        Rule::ValueRange,
                        format!("negative bucket population {value} for histogram '{}'", show(name)),
                    ))?;
                }
            } else if suffix == "_count" && value < 0.0 {
                diagnostics.violation(sample_error(
                    line_no,
                    Rule::ValueRange,
                    format!("negative count {value} for histogram '{}'", show(name)),
                ))?;
            }
        } else if suffix.is_empty() {
            match labels.iter().find(|label| label.name == "quantile") {
                None => {
                    let message = format!("summary sample '{}' has no 'quantile' label", show(&sample.name));
                    diagnostics.violation(sample_error(line_no, Rule::TypeLabel, message))?;
                }
                Some(label) => {
                    quantile_number(&label.value, line_no)?;
                }
            }
        }
        if metric_type == MetricType::Histogram && matches!(suffix, "_bucket" | "_count" | "_sum") {
            let group: Group<'_, '_> = (labels, Some("le"));
            let timestamp_bits = sample.timestamp.map(f64::to_bits);
            // Exporters print a series' buckets, sum and count one after another: the run of
            // the previous sample is found without hashing.
            let key = match last_run {
                Some((hash, index, other, bits)) if bits == timestamp_bits && same_group(other, group) => (hash, index),
                _ => {
                    let hash = group_hash(group);
                    let same_hash = runs.entry(hash).or_default();
                    let same_point = |(other, run): &(Group<'_, '_>, HistogramRun)| {
                        run.timestamp_bits == timestamp_bits && same_group(*other, group)
                    };
                    let index = match same_hash.iter().position(same_point) {
                        Some(index) => index,
                        None => {
                            let run = HistogramRun {
                                timestamp_bits,
                                line: line_no,
                                ..HistogramRun::default()
                            };
                            same_hash.push((group, run));
                            same_hash.len() - 1
                        }
                    };
                    (hash, index)
                }
            };
            last_run = Some((key.0, key.1, group, timestamp_bits));
            let run = runs
                .get_mut(&key.0)
                .and_then(|same_hash| same_hash.get_mut(key.1))
                .map(|(_, run)| run)
                .expect("the run was found or created above");
            // A bucket without a readable `le` has failed above.
            add_to_histogram_run(run, suffix, sample, labels, name, diagnostics)?;
        }
    }
    let mut runs: Vec<HistogramRun> = runs.into_values().flatten().map(|(_, run)| run).collect();
    runs.sort_by_key(|run| run.line);
    for run in &runs {
        check_histogram_run(run, metric_type, name, diagnostics)?;
    }
    Ok(())
}

fn check_openmetrics_family(
    family: &Family<'_>,
    samples: &[Sample<'_>],
    all_labels: &[Label<'_>],
    diagnostics: &mut Diagnostics,
) -> Result<(), ParseError> {
    let metric_type = family.metric_type;
    let name = family.name.as_ref();
    if family.unit.is_some() && matches!(metric_type, MetricType::Info | MetricType::StateSet) {
        diagnostics.violation(sample_error(
            family.line,
            Rule::UnitForType,
            format!("{} family '{}' may not have a UNIT", metric_type.as_str(), show(name)),
        ))?;
    }
    let is_histogram = matches!(metric_type, MetricType::Histogram | MetricType::GaugeHistogram);

    // The previous sample's metric, every metric seen so far (by label-set hash, compared
    // exactly on a hash hit), and the histogram MetricPoint being read.
    let mut previous: Option<Group<'_, '_>> = None;
    let mut previous_timestamp: Option<f64> = None;
    let mut seen_groups: FxHashMap<u64, Vec<Group<'_, '_>>> = FxHashMap::default();
    let mut histogram = HistogramRun::default();
    let mut histogram_group: Option<Group<'_, '_>> = None;

    for sample in samples {
        let suffix = sample.name.strip_prefix(name).unwrap_or("");
        let line_no = sample.line;
        let labels = &all_labels[sample.labels.start as usize..sample.labels.end as usize];

        // Exemplars only on buckets and counter totals, with short label sets.
        if let Some(exemplar) = sample.exemplar {
            let allowed =
                (is_histogram && suffix == "_bucket") || (metric_type == MetricType::Counter && suffix == "_total");
            if !allowed {
                diagnostics.violation(sample_error(
                    line_no,
                    Rule::Exemplar,
                    format!(
                        "exemplar on '{}': only histogram buckets and counter '_total' samples may carry one",
                        show(&sample.name)
                    ),
                ))?;
            }
            let characters: usize = all_labels[exemplar.labels.start as usize..exemplar.labels.end as usize]
                .iter()
                .map(|label| label.name.chars().count() + label.value.chars().count())
                .sum();
            if characters > EXEMPLAR_LABEL_CHARACTERS {
                diagnostics.violation(sample_error(line_no, Rule::Exemplar, format!("exemplar labels are {characters} characters long; at most {EXEMPLAR_LABEL_CHARACTERS} are allowed")))?;
            }
        }

        // Values where the type forbids NaN or negatives.
        let owned_suffix = metric_type != MetricType::Unknown && metric_type != MetricType::Gauge;
        if owned_suffix {
            let counter_like = matches!(suffix, "_total" | "_count" | "_bucket" | "_gcount" | "_sum" | "_gsum");
            if counter_like && sample.value.is_nan() {
                diagnostics.violation(sample_error(
                    line_no,
                    Rule::ValueRange,
                    format!("'{}' is NaN: counter-like samples may not be NaN", show(&sample.name)),
                ))?;
            }
            if suffix == "_count"
                && metric_type == MetricType::Summary
                && sample.value.fract() != 0.0
                && sample.value.is_finite()
            {
                diagnostics.violation(sample_error(
                    line_no,
                    Rule::ValueRange,
                    format!("summary count {} of '{}' is not an integer", sample.value, show(name)),
                ))?;
            }
            let negative_forbidden = matches!(suffix, "_total" | "_count" | "_bucket" | "_gcount")
                || (suffix == "_sum" && metric_type == MetricType::Summary);
            if negative_forbidden && sample.value < 0.0 {
                diagnostics.violation(sample_error(
                    line_no,
                    Rule::ValueRange,
                    format!(
                        "'{}' is negative ({}): counter-like samples may not be negative",
                        show(&sample.name),
                        sample.value
                    ),
                ))?;
            }
        }

        // Labels the type requires.
        let mut skip_label: Option<&str> = None;
        match metric_type {
            MetricType::Histogram | MetricType::GaugeHistogram if suffix == "_bucket" => {
                skip_label = Some("le");
                let le = labels
                    .iter()
                    .find(|label| label.name == "le")
                    .map(|label| label.value.as_ref());
                let bound = bucket_bound(&sample.name, le, line_no)?;
                let le = le.unwrap_or_default();
                if bound.is_infinite() && le != "+Inf" && le != "-Inf" {
                    diagnostics.violation(sample_error(
                        line_no,
                        Rule::TypeLabel,
                        format!("'le' value '{}' is not canonical: write +Inf", show(le)),
                    ))?;
                }
            }
            MetricType::Summary if suffix.is_empty() => {
                skip_label = Some("quantile");
                let Some(quantile) = labels.iter().find(|label| label.name == "quantile") else {
                    return Err(sample_error(
                        line_no,
                        Rule::TypeLabel,
                        format!("summary sample '{}' has no 'quantile' label", show(&sample.name)),
                    ));
                };
                let q = quantile_number(&quantile.value, line_no)?;
                if !(0.0..=1.0).contains(&q) {
                    diagnostics.violation(sample_error(
                        line_no,
                        Rule::TypeLabel,
                        format!("quantile '{}' is outside [0, 1]", show(&quantile.value)),
                    ))?;
                }
                if sample.value < 0.0 {
                    diagnostics.violation(sample_error(
                        line_no,
                        Rule::ValueRange,
                        format!("quantile value {} is negative", sample.value),
                    ))?;
                }
            }
            MetricType::StateSet => {
                skip_label = Some(name);
                if !labels.iter().any(|label| label.name == name) {
                    diagnostics.violation(sample_error(
                        line_no,
                        Rule::TypeLabel,
                        format!(
                            "stateset sample '{}' has no label named '{}' for its state",
                            show(&sample.name),
                            show(name)
                        ),
                    ))?;
                }
                if sample.value != 0.0 && sample.value != 1.0 {
                    diagnostics.violation(sample_error(
                        line_no,
                        Rule::ValueRange,
                        format!("stateset value {} is neither 0 nor 1", sample.value),
                    ))?;
                }
            }
            MetricType::Info if sample.value != 1.0 => {
                diagnostics.violation(sample_error(
                    line_no,
                    Rule::ValueRange,
                    format!("info value {} is not 1", sample.value),
                ))?;
            }
            _ => {}
        }

        // Metrics (label sets) not interleaved; timestamps within a metric move forward.
        let group: Group<'_, '_> = if metric_type == MetricType::Info {
            (&[], None) // info metrics cannot be told apart (OpenMetrics 1.0, Info)
        } else {
            (labels, skip_label)
        };
        if !previous.is_some_and(|previous| same_group(previous, group)) {
            let earlier = seen_groups.entry(group_hash(group)).or_default();
            if earlier.iter().any(|&other| same_group(other, group)) {
                diagnostics.violation(sample_error(
                    line_no,
                    Rule::Interleaved,
                    format!(
                        "metric {} of family '{}' appears again after other metrics of the family",
                        describe_labels(labels, skip_label),
                        show(name)
                    ),
                ))?;
            } else {
                earlier.push(group);
            }
        } else if sample.timestamp.is_some() != previous_timestamp.is_some() {
            diagnostics.violation(sample_error(
                line_no,
                Rule::TimestampOrder,
                format!(
                    "'{}' mixes samples with and without timestamps in one metric",
                    show(&sample.name)
                ),
            ))?;
        } else if let (Some(now), Some(before)) = (sample.timestamp, previous_timestamp) {
            if now < before && metric_type != MetricType::Info {
                diagnostics.violation(sample_error(
                    line_no,
                    Rule::TimestampOrder,
                    format!(
                        "timestamp {now} of '{}' goes backwards (previous {before})",
                        show(&sample.name)
                    ),
                ))?;
            }
        }

        if is_histogram && !suffix.is_empty() {
            let timestamp_bits = sample.timestamp.map(f64::to_bits);
            let same_point = histogram_group.is_some_and(|current| same_group(current, group))
                && histogram.timestamp_bits == timestamp_bits;
            if !same_point {
                if histogram_group.is_some() {
                    check_histogram_run(&histogram, metric_type, name, diagnostics)?;
                }
                histogram_group = Some(group);
                histogram = HistogramRun {
                    openmetrics: true,
                    timestamp_bits,
                    line: line_no,
                    ..HistogramRun::default()
                };
            }
            add_to_histogram_run(&mut histogram, suffix, sample, labels, name, diagnostics)?;
        }
        previous = Some(group);
        previous_timestamp = sample.timestamp;
    }
    if histogram_group.is_some() {
        check_histogram_run(&histogram, metric_type, name, diagnostics)?;
    }
    Ok(())
}

fn add_to_histogram_run(
    run: &mut HistogramRun,
    suffix: &str,
    sample: &Sample<'_>,
    labels: &[Label<'_>],
    name: &str,
    diagnostics: &mut Diagnostics,
) -> Result<(), ParseError> {
    match suffix {
        "_bucket" => {
            let bound = labels
                .iter()
                .find(|label| label.name == "le")
                .and_then(|label| parse_value(&label.value))
                .unwrap_or(f64::NAN);
            if let Some(previous) = run.last_bound {
                if bound <= previous {
                    let torn = if previous == f64::INFINITY {
                        " (a bucket after +Inf: a torn histogram)"
                    } else {
                        ""
                    };
                    diagnostics.violation(sample_error(
                        sample.line,
                        Rule::HistogramStructure,
                        format!(
                            "buckets of '{}' out of order: le=\"{}\" after le=\"{}\"{torn}",
                            show(name),
                            number_text(bound),
                            number_text(previous)
                        ),
                    ))?;
                }
            }
            if sample.value < run.last_bucket_value {
                diagnostics.violation(sample_error(
                    sample.line,
                    Rule::HistogramStructure,
                    format!(
                        "bucket values of '{}' decrease: {} after {}",
                        show(name),
                        sample.value,
                        run.last_bucket_value
                    ),
                ))?;
            }
            if run.openmetrics && sample.value.fract() != 0.0 && sample.value.is_finite() {
                diagnostics.violation(sample_error(
                    sample.line,
                    Rule::HistogramStructure,
                    format!("bucket value {} of '{}' is not an integer", sample.value, show(name)),
                ))?;
            }
            if bound == f64::INFINITY {
                run.inf_bucket = Some(sample.value);
            }
            run.negative_buckets |= bound < 0.0;
            run.last_bound = Some(bound);
            run.last_bucket_value = sample.value;
        }
        "_count" | "_gcount" => {
            if run.openmetrics && sample.value.fract() != 0.0 && sample.value.is_finite() {
                diagnostics.violation(sample_error(
                    sample.line,
                    Rule::HistogramStructure,
                    format!("count {} of '{}' is not an integer", sample.value, show(name)),
                ))?;
            }
            run.count = Some(sample.value);
        }
        "_sum" => run.sum = Some(sample.value),
        "_gsum" => run.gsum = Some(sample.value),
        _ => {}
    }
    Ok(())
}

fn check_histogram_run(
    run: &HistogramRun,
    metric_type: MetricType,
    name: &str,
    diagnostics: &mut Diagnostics,
) -> Result<(), ParseError> {
    let line = run.line;
    let mut problems: Vec<String> = Vec::new();
    match (run.inf_bucket, run.count) {
        // Text 0.0.4: a metric with `_count`/`_sum` and no buckets at all is not torn.
        (None, _) if run.openmetrics || run.last_bound.is_some() => problems.push("has no +Inf bucket".to_string()),
        (Some(inf), Some(count)) if count != inf && !(count.is_nan() && inf.is_nan()) => {
            problems.push(format!("count {count} differs from the +Inf bucket {inf}"));
        }
        _ => {}
    }
    if !run.openmetrics {
        // Text 0.0.4 defines only the buckets, `_count` and `_sum`, not how they pair.
    } else if metric_type == MetricType::Histogram {
        if run.sum.is_some() != run.count.is_some() {
            problems.push("has only one of _count and _sum: both or neither".to_string());
        }
        if let Some(sum) = run.sum {
            if run.negative_buckets {
                problems.push("has negative buckets and a _sum (OpenMetrics 1.0 forbids the sum then)".to_string());
            } else if sum < 0.0 {
                problems.push(format!("has a negative _sum {sum}"));
            }
        }
    } else {
        if run.gsum.is_some() != run.count.is_some() {
            problems.push("has only one of _gcount and _gsum: both or neither".to_string());
        }
        if let Some(gsum) = run.gsum {
            if gsum < 0.0 && !run.negative_buckets {
                problems.push(format!("has a negative _gsum {gsum} without negative buckets"));
            }
        }
    }
    for problem in problems {
        diagnostics.violation(sample_error(
            line,
            Rule::HistogramStructure,
            format!("{} '{}' {problem}", metric_type.as_str(), show(name)),
        ))?;
    }
    Ok(())
}

/// One histogram MetricPoint (same labels and timestamp) while it is being read; in text
/// 0.0.4, one metric's buckets, `_count` and `_sum` wherever they are in the family.
#[derive(Default)]
struct HistogramRun {
    /// OpenMetrics' rules (integer counts, `_count` and `_sum` together) apply.
    openmetrics: bool,
    timestamp_bits: Option<u64>,
    line: u32,
    last_bound: Option<f64>,
    last_bucket_value: f64,
    /// The value of the `le="+Inf"` bucket, wherever it was listed.
    inf_bucket: Option<f64>,
    negative_buckets: bool,
    count: Option<f64>,
    sum: Option<f64>,
    gsum: Option<f64>,
}

/// A number as OpenMetrics spells it (`+Inf`, `NaN`, shortest decimal), for messages.
fn number_text(value: f64) -> String {
    let mut text = String::new();
    format_value(value, &mut text);
    text
}

/// The bound a histogram bucket's `le` label gives (`le`: its value, `None` without one), or
/// the error both formats report ([`Rule::TypeLabel`]): no `le`, or one that is not a number
/// (NaN bounds nothing).
fn bucket_bound(sample_name: &str, le: Option<&str>, line_no: u32) -> Result<f64, ParseError> {
    let Some(le) = le else {
        return Err(sample_error(
            line_no,
            Rule::TypeLabel,
            format!("histogram bucket '{}' has no 'le' label", show(sample_name)),
        ));
    };
    parse_value(le).filter(|bound| !bound.is_nan()).ok_or_else(|| {
        sample_error(
            line_no,
            Rule::TypeLabel,
            format!("expected a number as value of label 'le', found '{}'", show(le)),
        )
    })
}

/// A summary sample's `quantile` value as a number, or the error both formats report
/// ([`Rule::TypeLabel`]).
fn quantile_number(quantile: &str, line_no: u32) -> Result<f64, ParseError> {
    parse_value(quantile).ok_or_else(|| {
        sample_error(
            line_no,
            Rule::TypeLabel,
            format!(
                "expected a number as value of label 'quantile', found '{}'",
                show(quantile)
            ),
        )
    })
}

fn sample_error(line: u32, rule: Rule, message: String) -> ParseError {
    ParseError {
        line,
        column: 1,
        rule,
        message,
    }
}

/// Whether text 0.0.4 family `family` takes sample `name`.
#[inline]
fn text_owns(family: &Family<'_>, name: &str) -> bool {
    let Some(suffix) = name.strip_prefix(family.name.as_ref()) else {
        return false;
    };
    match suffix {
        "" => true,
        "_count" | "_sum" => matches!(family.metric_type, MetricType::Histogram | MetricType::Summary),
        "_bucket" => family.metric_type == MetricType::Histogram,
        _ => false,
    }
}

/// Whether OpenMetrics family `family` takes sample `name` (name = family name + owned suffix).
#[inline]
fn openmetrics_owns(family: &Family<'_>, name: &str) -> bool {
    let Some(suffix) = name.strip_prefix(family.name.as_ref()) else {
        return false;
    };
    family.metric_type.openmetrics_suffixes().contains(&suffix)
}

fn expected_names(family: &Family<'_>) -> String {
    family
        .metric_type
        .openmetrics_suffixes()
        .iter()
        .map(|suffix| format!("{}{suffix}", family.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_labels(labels: &[Label<'_>], skip: Option<&str>) -> String {
    let inner: Vec<String> = labels
        .iter()
        .filter(|label| Some(label.name.as_ref()) != skip)
        .map(|label| format!("{}=\"{}\"", show(&label.name), show(&label.value)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A metric inside a family: its labels and the one label that varies inside a MetricPoint
/// (`le`, `quantile` or the stateset's state label), which does not identify the metric.
type Group<'s, 'a> = (&'s [Label<'a>], Option<&'s str>);

fn group_labels<'s, 'a>(group: Group<'s, 'a>) -> impl Iterator<Item = &'s Label<'a>> {
    let (labels, skip) = group;
    labels.iter().filter(move |label| Some(label.name.as_ref()) != skip)
}

/// Whether two samples belong to the same metric: equal label sets (in any order) once the
/// varying label is left out.
fn same_group(left: Group<'_, '_>, right: Group<'_, '_>) -> bool {
    // Fast path: same labels in the same order, as exporters print them.
    let mut in_order = true;
    let mut left_count = 0;
    let mut right_labels = group_labels(right);
    for label in group_labels(left) {
        left_count += 1;
        if in_order && right_labels.next() != Some(label) {
            in_order = false;
        }
    }
    if in_order && right_labels.next().is_none() {
        return true;
    }
    if group_labels(right).count() != left_count {
        return false;
    }
    // Label names are unique within a set, so equal sizes plus inclusion means equality.
    let mut left_sorted: Vec<&Label<'_>> = group_labels(left).collect();
    let mut right_sorted: Vec<&Label<'_>> = group_labels(right).collect();
    left_sorted.sort_by(|a, b| a.name.cmp(&b.name));
    right_sorted.sort_by(|a, b| a.name.cmp(&b.name));
    left_sorted == right_sorted
}

/// Order-independent hash of a metric's labels; equal groups hash equally. Hits are confirmed
/// with [`same_group`], so a collision can never merge two metrics.
fn group_hash(group: Group<'_, '_>) -> u64 {
    let mut combined: u64 = 0;
    for label in group_labels(group) {
        // FxHash (rustc-hash): a few cycles per word on these short strings, where SipHash
        // was a quarter of the parse time; a collision only costs a `same_group` comparison.
        let mut hasher = FxHasher::default();
        label.name.hash(&mut hasher);
        label.value.hash(&mut hasher);
        // splitmix64 finaliser, so that summing per-label hashes keeps them well spread.
        let mut mixed = hasher.finish().wrapping_add(0x9e37_79b9_7f4a_7c15);
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        combined = combined.wrapping_add(mixed ^ (mixed >> 31));
    }
    combined
}
