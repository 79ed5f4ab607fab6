//! Line grammar: one line of a body into metadata or a sample.
//!
//! Text format 0.0.4 (Prometheus "Exposition formats", and what `model/textparse` accepts):
//! blanks (space, tab) may surround every token, `HELP`/`TYPE` comments carry metadata and any
//! other `#` line is a comment, label sets may end with a comma, timestamps are integer
//! milliseconds. OpenMetrics 1.0 (ABNF in the specification, section "Text format"): exactly
//! one space between tokens, no leading or trailing blanks, no trailing comma, only
//! `HELP`/`TYPE`/`UNIT`/`EOF` comments, timestamps in seconds, optional exemplar after
//! ` # `. Both accept Prometheus 3's quoted UTF-8 names (`{"my.metric", "dc.name"="x"}`).

use std::borrow::Cow;
use std::collections::HashSet;

use super::error::{show, ParseError, Rule};
use super::model::{Exemplar, Format, Label, LabelRange, MetricType};
use super::number::{parse_decimal, parse_millis, parse_value};

/// Label sets up to this size are checked for duplicate names by a linear scan; larger ones
/// (a body with thousands of labels on a line) switch to a hash set to stay linear.
const LINEAR_DUPLICATE_CHECK: usize = 32;

/// What one line says.
#[derive(Debug)]
pub(crate) enum Line<'a> {
    /// Empty line (text) — ignored.
    Blank,
    /// A `#` line that is not metadata (text) — ignored.
    Comment,
    /// `# EOF` (OpenMetrics).
    Eof,
    /// `# HELP name text`.
    Help { name: Cow<'a, str>, text: Cow<'a, str> },
    /// `# TYPE name type`.
    Type {
        name: Cow<'a, str>,
        metric_type: MetricType,
    },
    /// `# UNIT name unit`.
    Unit { name: Cow<'a, str>, unit: Cow<'a, str> },
    /// A sample; its labels were pushed onto the label arena unless they were deferred.
    Sample(SampleLine<'a>),
}

/// A sample line's fields.
#[derive(Debug)]
pub(crate) struct SampleLine<'a> {
    pub(crate) name: Cow<'a, str>,
    pub(crate) labels: LabelRange,
    /// The label set was checked for syntax but not pushed onto the arena (see
    /// [`LineReader::defer_labels`]); `labels` is empty and the labels are read from `series`.
    pub(crate) labels_deferred: bool,
    /// Of a deferred label set: the values of `le` and `quantile`, the labels the histogram
    /// and summary rules read (the first of each; a repeated name fails when read).
    pub(crate) type_labels: TypeLabels<'a>,
    pub(crate) value: f64,
    pub(crate) timestamp: Option<f64>,
    pub(crate) exemplar: Option<Exemplar>,
    /// Byte offset of the name (for diagnostics).
    pub(crate) name_at: usize,
    /// The series as the line spells it: from the name (or the `{` of a label set that names
    /// it) to the end of the label set.
    pub(crate) series: &'a str,
    /// A deviation the line's grammar tolerates but the specification does not (text 0.0.4
    /// labels separated by blanks instead of a comma, as Prometheus's parser accepts).
    pub(crate) tolerated: Option<ParseError>,
}

/// The values of `le` and `quantile` in a deferred label set.
#[derive(Debug, Default)]
pub(crate) struct TypeLabels<'a> {
    /// `le`: a histogram bucket's upper bound.
    pub(crate) le: Option<Cow<'a, str>>,
    /// `quantile`: a summary sample's quantile.
    pub(crate) quantile: Option<Cow<'a, str>>,
}

/// How escapes inside a quoted string are read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quoted {
    /// Quoted metric or label name: `\\`, `\"`, `\n` only.
    Name,
    /// Text 0.0.4 label value: `\\`, `\"`, `\n` only.
    TextValue,
    /// OpenMetrics label value: `\\`, `\"`, `\n` decoded, any other backslash kept as is
    /// (the conformance suite's `escaping` case accepts `\z`).
    OpenMetricsValue,
}

/// A cursor over one line.
pub(crate) struct LineReader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line_no: u32,
    format: Format,
    tolerated: Option<ParseError>,
    /// OpenMetrics read loosely: runs of blanks between tokens count as one space. Used only
    /// when `auto` falls back to OpenMetrics for a snippet without `# EOF` (the specification's
    /// own examples have a doubled space).
    loose: bool,
    /// Text 0.0.4 only: a sample with an unquoted name has its label set checked for syntax
    /// but not pushed onto the arena, nor checked for repeated names (see `defer_labels`).
    defer: bool,
}

impl<'a> LineReader<'a> {
    /// Reads `text` (one line without its terminator) as line `line_no` of a `format` body.
    pub(crate) fn new(text: &'a str, line_no: u32, format: Format) -> Self {
        LineReader {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            line_no,
            format,
            tolerated: None,
            loose: false,
            defer: false,
        }
    }

    /// Defers the labels of a text 0.0.4 sample whose name is unquoted: its label set is read
    /// for syntax only (every byte still checked, escapes included) and not pushed onto the
    /// arena; a repeated label name is found when the labels are read from the series spelling
    /// ([`read_series_labels`]). Prometheus's scrape loop works the same way: its text parser
    /// yields the series bytes and builds labels only for a series its cache has not seen.
    /// Without effect in OpenMetrics, whose family rules read every sample's labels.
    pub(crate) fn defer_labels(mut self, defer: bool) -> Self {
        self.defer = defer && self.format == Format::Text;
        self
    }

    /// Reads OpenMetrics loosely (see the `loose` field).
    pub(crate) fn loose(mut self, loose: bool) -> Self {
        self.loose = loose;
        self
    }

    /// In loose OpenMetrics, skips blanks after a separating space.
    fn skip_extra_blanks(&mut self) {
        if self.loose {
            self.skip_blanks();
        }
    }

    /// Builds an error at byte offset `at` of this line.
    pub(crate) fn error(&self, at: usize, rule: Rule, message: String) -> ParseError {
        error_at(self.text, self.line_no, at, rule, message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_blanks(&mut self) {
        self.pos = scan_while(self.bytes, self.pos, BLANK);
    }

    fn is_text(&self) -> bool {
        self.format == Format::Text
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn unexpected(&self, what: &str) -> ParseError {
        let found = match self.rest().chars().next() {
            None => "end of line".to_string(),
            Some(_) => format!("'{}'", show(token_at(self.rest()))),
        };
        self.error(self.pos, Rule::Syntax, format!("expected {what}, found {found}"))
    }

    /// Reads the whole line, pushing sample and exemplar labels onto `labels`.
    pub(crate) fn read(mut self, labels: &mut Vec<Label<'a>>) -> Result<Line<'a>, ParseError> {
        if self.is_text() {
            self.skip_blanks();
            match self.peek() {
                None => return Ok(Line::Blank),
                Some(b'#') => return self.text_comment(),
                _ => {}
            }
        } else {
            match self.peek() {
                None => {
                    return Err(self.error(
                        0,
                        Rule::UnexpectedLine,
                        "blank line: OpenMetrics does not allow empty lines".to_string(),
                    ))
                }
                Some(b'#') => return self.openmetrics_comment(),
                Some(b' ' | b'\t') => {
                    return Err(self.error(
                        0,
                        Rule::Syntax,
                        "line starts with a blank: OpenMetrics lines start with a metric name or '#'".to_string(),
                    ))
                }
                _ => {}
            }
        }
        self.sample(labels).map(Line::Sample)
    }

    // === metadata ===

    fn text_comment(&mut self) -> Result<Line<'a>, ParseError> {
        self.pos += 1; // '#'
        self.skip_blanks();
        let rest = self.rest();
        let keyword = if rest.starts_with("HELP") {
            "HELP"
        } else if rest.starts_with("TYPE") {
            "TYPE"
        } else {
            return Ok(Line::Comment);
        };
        let after = self.bytes.get(self.pos + 4).copied();
        if !matches!(after, None | Some(b' ' | b'\t')) {
            return Ok(Line::Comment); // `# HELPFUL note` is a comment
        }
        self.pos += 4;
        self.skip_blanks();
        if self.peek().is_none() {
            return Ok(Line::Comment); // a bare `# HELP` names nothing; expfmt skips it too
        }
        let name = self.metadata_name(keyword)?;
        if keyword == "HELP" {
            if self.peek().is_none() {
                // `# HELP name` with nothing after the name: expfmt ignores the line.
                return Ok(Line::Comment);
            }
            self.expect_blank_after_name(keyword)?;
            self.skip_blanks();
            let text = unescape_help(self.rest());
            return Ok(Line::Help { name, text });
        }
        self.expect_blank_after_name(keyword)?;
        self.skip_blanks();
        let type_at = self.pos;
        let word_end = self.rest().find([' ', '\t']).map_or(self.text.len(), |i| self.pos + i);
        let word = &self.text[type_at..word_end];
        self.pos = word_end;
        self.skip_blanks();
        if self.peek().is_some() {
            return Err(self.unexpected("end of line after the type"));
        }
        let metric_type = match word {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            "untyped" | "unknown" => MetricType::Unknown,
            // OpenMetrics types that client libraries also print in text output (client_java
            // 1.x writes `# TYPE jvm_runtime info`); Prometheus accepts them.
            "info" => MetricType::Info,
            "stateset" => MetricType::StateSet,
            "gaugehistogram" => MetricType::GaugeHistogram,
            _ => {
                return Err(self.error(
                    type_at,
                    Rule::InvalidType,
                    format!(
                        "unknown metric type '{}': text format 0.0.4 has counter, gauge, histogram, summary, untyped (and OpenMetrics' info, stateset, gaugehistogram, unknown)",
                        show(word)
                    ),
                ))
            }
        };
        Ok(Line::Type { name, metric_type })
    }

    fn openmetrics_comment(&mut self) -> Result<Line<'a>, ParseError> {
        let rest = self.rest();
        if rest == "# EOF" {
            return Ok(Line::Eof);
        }
        let keyword = ["HELP", "TYPE", "UNIT"].into_iter().find(|keyword| {
            rest.len() > 6 && rest.starts_with("# ") && rest[2..].starts_with(keyword) && rest.as_bytes()[6] == b' '
        });
        let Some(keyword) = keyword else {
            return Err(self.error(
                0,
                Rule::UnexpectedLine,
                format!(
                    "unexpected comment '{}': OpenMetrics allows only '# HELP', '# TYPE', '# UNIT' and '# EOF'",
                    show(rest)
                ),
            ));
        };
        self.pos += 7;
        let name = self.metadata_name(keyword)?;
        if self.peek() != Some(b' ') {
            return Err(self.unexpected(&format!("a space after the metric name in {keyword}")));
        }
        self.pos += 1;
        let value_at = self.pos;
        let value = self.rest();
        match keyword {
            "HELP" => Ok(Line::Help {
                name,
                text: unescape_help(value),
            }),
            "UNIT" => {
                if let Some(bad) = value.bytes().position(|byte| !is_name_char(byte)) {
                    return Err(self.error(
                        value_at + bad,
                        Rule::Syntax,
                        format!("invalid character in unit '{}'", show(value)),
                    ));
                }
                Ok(Line::Unit {
                    name,
                    unit: Cow::Borrowed(value),
                })
            }
            _ => {
                let metric_type = match value {
                    "counter" => MetricType::Counter,
                    "gauge" => MetricType::Gauge,
                    "histogram" => MetricType::Histogram,
                    "gaugehistogram" => MetricType::GaugeHistogram,
                    "summary" => MetricType::Summary,
                    "info" => MetricType::Info,
                    "stateset" => MetricType::StateSet,
                    "unknown" => MetricType::Unknown,
                    _ => {
                        return Err(self.error(
                            value_at,
                            Rule::InvalidType,
                            format!(
                                "unknown metric type '{}': OpenMetrics has counter, gauge, histogram, gaugehistogram, summary, info, stateset, unknown",
                                show(value)
                            ),
                        ))
                    }
                };
                Ok(Line::Type { name, metric_type })
            }
        }
    }

    fn metadata_name(&mut self, keyword: &str) -> Result<Cow<'a, str>, ParseError> {
        if self.peek() == Some(b'"') {
            let name = self.quoted(Quoted::Name)?;
            if name.is_empty() {
                return Err(self.error(self.pos, Rule::Syntax, "empty quoted metric name".to_string()));
            }
            return Ok(name);
        }
        let start = self.pos;
        let end = scan_metric_name(self.bytes, start);
        if end == start {
            return Err(self.unexpected(&format!("a metric name after {keyword}")));
        }
        self.pos = end;
        Ok(Cow::Borrowed(&self.text[start..end]))
    }

    fn expect_blank_after_name(&self, keyword: &str) -> Result<(), ParseError> {
        match self.peek() {
            Some(b' ' | b'\t') => Ok(()),
            None if keyword == "HELP" => Ok(()),
            None => Err(self.unexpected(&format!("a type after the metric name in {keyword}"))),
            Some(_) => Err(self.error(
                self.pos,
                Rule::Syntax,
                format!(
                    "invalid character in metric name in {keyword}: '{}'",
                    show(token_at(self.rest()))
                ),
            )),
        }
    }

    // === samples ===

    fn sample(&mut self, labels: &mut Vec<Label<'a>>) -> Result<SampleLine<'a>, ParseError> {
        let name_at = self.pos;
        let name_end = scan_metric_name(self.bytes, name_at);
        let mut name = None;
        if name_end > name_at {
            name = Some(Cow::Borrowed(&self.text[name_at..name_end]));
            self.pos = name_end;
            match self.peek() {
                None | Some(b' ' | b'{') => {}
                Some(b'\t') if self.is_text() => {}
                Some(_) => {
                    return Err(self.error(
                        self.pos,
                        Rule::Syntax,
                        format!(
                            "invalid character {} in metric name '{}' (quote UTF-8 names: {{\"{}…\"}})",
                            describe_char(self.rest()),
                            show(&self.text[name_at..name_end]),
                            show(&self.text[name_at..name_end]),
                        ),
                    ))
                }
            }
            if self.is_text() {
                self.skip_blanks();
            }
        } else if self.peek() != Some(b'{') {
            return Err(self.unexpected("a metric name"));
        }
        let label_start = labels.len() as u32;
        // Only an unquoted name can be deferred: a quoted one may sit inside the label set.
        let labels_deferred = self.defer && name.is_some() && self.peek() == Some(b'{');
        let mut type_labels = TypeLabels::default();
        if self.peek() == Some(b'{') {
            if !labels_deferred {
                self.label_set(labels, Some(&mut name), None)?;
            } else if !self.skim_label_set(&mut type_labels) {
                type_labels = TypeLabels::default();
                self.label_set(labels, Some(&mut name), Some(&mut type_labels))?;
            }
        }
        let label_range = LabelRange {
            start: label_start,
            end: labels.len() as u32,
        };
        let series = self.text[name_at..self.pos].trim_end_matches([' ', '\t']);
        let Some(name) = name else {
            return Err(self.error(name_at, Rule::Syntax, "sample has no metric name".to_string()));
        };

        // value
        if self.is_text() {
            self.skip_blanks();
        } else if self.peek() == Some(b' ') {
            self.pos += 1;
            self.skip_extra_blanks();
        } else {
            return Err(self.unexpected("a space before the value"));
        }
        let value = self.number_token("value", parse_value)?;

        // timestamp and exemplar
        let mut timestamp = None;
        let mut exemplar = None;
        if self.is_text() {
            self.skip_blanks();
            if self.peek().is_some() {
                let at = self.pos;
                let token = self.token();
                let Some(millis) = parse_millis(token) else {
                    if token == "#" && self.rest().starts_with(" {") {
                        return Err(self.error(
                            at,
                            Rule::Syntax,
                            "exemplar (' # {…}') in a text 0.0.4 body: exemplars exist only in OpenMetrics (use --format openmetrics, and end the body with '# EOF')".to_string(),
                        ));
                    }
                    return Err(self.error(
                        at,
                        Rule::Syntax,
                        format!(
                            "invalid timestamp '{}': text format 0.0.4 timestamps are integer milliseconds",
                            show(token)
                        ),
                    ));
                };
                timestamp = Some(millis as f64 / 1000.0);
                self.skip_blanks();
                if self.peek().is_some() {
                    return Err(self.unexpected("end of line after the timestamp"));
                }
            }
        } else if self.peek().is_some() {
            self.pos += 1; // the space after the value
            self.skip_extra_blanks();
            if self.peek() != Some(b'#') {
                timestamp = Some(self.number_token("timestamp", parse_decimal)?);
                if self.peek().is_some() {
                    self.pos += 1;
                    if self.peek() != Some(b'#') {
                        return Err(self.unexpected("'# {' (an exemplar) or end of line after the timestamp"));
                    }
                }
            }
            if self.peek() == Some(b'#') {
                // An exemplar that cannot be read is dropped, not the sample: its value and
                // timestamp are already read (a warning, an error under strict validation).
                let labels_before = labels.len();
                match self.exemplar(labels) {
                    Ok(read) => exemplar = Some(read),
                    Err(error) => {
                        labels.truncate(labels_before);
                        self.pos = self.bytes.len();
                        if self.tolerated.is_none() {
                            self.tolerated = Some(ParseError {
                                rule: Rule::Exemplar,
                                message: format!("exemplar dropped, the sample kept: {}", error.message),
                                ..error
                            });
                        }
                    }
                }
            }
        }
        Ok(SampleLine {
            name,
            labels: label_range,
            labels_deferred,
            type_labels,
            value,
            timestamp,
            exemplar,
            name_at,
            series,
            tolerated: self.tolerated.take(),
        })
    }

    /// A token up to the next blank (text) or space (OpenMetrics).
    fn token(&mut self) -> &'a str {
        let start = self.pos;
        let bytes = self.bytes;
        let end = if self.is_text() {
            scan_until(bytes, start, BLANK)
        } else {
            memchr::memchr(b' ', &bytes[start..]).map_or(bytes.len(), |i| start + i)
        };
        self.pos = end;
        &self.text[start..end]
    }

    /// Reads a value-like token and, in OpenMetrics, checks what follows is a single space or
    /// the end of line.
    fn number_token(&mut self, what: &str, parse: fn(&str) -> Option<f64>) -> Result<f64, ParseError> {
        let at = self.pos;
        let token = self.token();
        if token.is_empty() {
            return Err(self.unexpected(&format!("a {what}")));
        }
        let Some(number) = parse(token) else {
            if what == "value" && token.starts_with('{') {
                return Err(self.error(
                    at,
                    Rule::OpenMetrics2Syntax,
                    "native histogram value '{count:…}' is OpenMetrics 2.0 draft syntax; epicenter reads OpenMetrics 1.0 and text 0.0.4".to_string(),
                ));
            }
            if token.parse::<f64>().is_ok_and(f64::is_infinite) && token.bytes().any(|byte| byte.is_ascii_digit()) {
                return Err(self.error(
                    at,
                    Rule::Syntax,
                    format!("{what} '{}' is out of range for a 64-bit float", show(token)),
                ));
            }
            let hint = if what == "value" {
                ""
            } else {
                " (a finite decimal number of seconds)"
            };
            return Err(self.error(at, Rule::Syntax, format!("invalid {what} '{}'{hint}", show(token))));
        };
        if !self.is_text() && !self.loose && self.peek() == Some(b' ') && self.bytes.get(self.pos + 1).is_none() {
            return Err(self.error(self.pos, Rule::Syntax, "trailing space at end of line".to_string()));
        }
        Ok(number)
    }

    fn exemplar(&mut self, labels: &mut Vec<Label<'a>>) -> Result<Exemplar, ParseError> {
        if !self.rest().starts_with("# {") {
            return Err(self.unexpected("'# {' to start an exemplar"));
        }
        self.pos += 2;
        let start = labels.len() as u32;
        self.label_set(labels, None, None)?;
        let range = LabelRange {
            start,
            end: labels.len() as u32,
        };
        if self.peek() != Some(b' ') {
            return Err(self.unexpected("a space and the exemplar value after the exemplar labels"));
        }
        self.pos += 1;
        let value = self.number_token("exemplar value", parse_value)?;
        let mut timestamp = None;
        if self.peek() == Some(b' ') {
            self.pos += 1;
            timestamp = Some(self.number_token("exemplar timestamp", parse_decimal)?);
        }
        if self.peek().is_some() {
            return Err(self.unexpected("end of line after the exemplar"));
        }
        Ok(Exemplar {
            labels: range,
            value,
            timestamp,
        })
    }

    /// The fast path of a deferred text 0.0.4 label set at the cursor (`{`): a set written
    /// the way exporters write it (`{name="value",…}` with no blanks, escapes, quoted names
    /// or `__name__`, an optional trailing comma) is checked byte by byte with one table
    /// lookup per byte, `le` and `quantile` kept in `type_labels`, and the cursor moved past
    /// `}`; returns true. Anything else returns false with the cursor unmoved, for
    /// [`LineReader::label_set`] to read (and report) in full.
    fn skim_label_set(&mut self, type_labels: &mut TypeLabels<'a>) -> bool {
        let bytes = self.bytes;
        let mut pos = self.pos + 1;
        if bytes.get(pos) == Some(&b'}') {
            self.pos = pos + 1;
            return true;
        }
        loop {
            let name_start = pos;
            pos = scan_label_name(bytes, pos);
            if pos == name_start {
                return false;
            }
            let name = &bytes[name_start..pos];
            if bytes.get(pos) != Some(&b'=') || bytes.get(pos + 1) != Some(&b'"') {
                return false;
            }
            let value_start = pos + 2;
            pos = find_quote_stop(bytes, value_start);
            if bytes.get(pos) != Some(&b'"') {
                return false; // an escape, or no closing quote
            }
            // `"` is ASCII: both ends are character boundaries.
            let value = &self.text[value_start..pos];
            pos += 1;
            match name {
                b"le" if type_labels.le.is_none() => type_labels.le = Some(Cow::Borrowed(value)),
                b"quantile" if type_labels.quantile.is_none() => type_labels.quantile = Some(Cow::Borrowed(value)),
                b"__name__" => return false,
                _ => {}
            }
            match bytes.get(pos) {
                Some(b'}') => break,
                Some(b',') if bytes.get(pos + 1) == Some(&b'}') => {
                    pos += 1;
                    break;
                }
                Some(b',') => pos += 1,
                _ => return false,
            }
        }
        self.pos = pos + 1;
        true
    }

    /// Reads `{…}` at the cursor. `metric_name` is `Some` for a sample's label set, where a
    /// quoted string without `=` names the metric (Prometheus 3 UTF-8 syntax). With
    /// `deferred` given, the set is checked for syntax only: nothing is pushed, repeated names
    /// are not looked for, and only `le` and `quantile` are kept, in `deferred`.
    fn label_set(
        &mut self,
        labels: &mut Vec<Label<'a>>,
        mut metric_name: Option<&mut Option<Cow<'a, str>>>,
        mut deferred: Option<&mut TypeLabels<'a>>,
    ) -> Result<(), ParseError> {
        let set_start = labels.len();
        let mut seen_names: Option<HashSet<Cow<'a, str>>> = None;
        self.pos += 1; // '{'
        let mut after_comma = false;
        let mut first = true;
        loop {
            if self.is_text() {
                self.skip_blanks();
            }
            match self.peek() {
                None => return Err(self.unexpected("a label name or '}'")),
                Some(b'}') if first || after_comma => {
                    if after_comma && !self.is_text() {
                        return Err(self.error(
                            self.pos - 1,
                            Rule::Syntax,
                            "trailing comma in label set: OpenMetrics does not allow it".to_string(),
                        ));
                    }
                    self.pos += 1;
                    return Ok(());
                }
                _ => {}
            }
            first = false;
            let name_at = self.pos;
            let label_name;
            if self.peek() == Some(b'"') {
                let quoted = self.quoted(Quoted::Name)?;
                if self.is_text() {
                    self.skip_blanks();
                }
                if self.peek() == Some(b'=') {
                    label_name = quoted;
                } else if let Some(slot) = metric_name.as_deref_mut() {
                    if slot.is_some() {
                        return Err(self.error(
                            name_at,
                            Rule::Syntax,
                            format!("second metric name '{}' in one sample", show(&quoted)),
                        ));
                    }
                    if quoted.is_empty() {
                        return Err(self.error(name_at, Rule::Syntax, "empty quoted metric name".to_string()));
                    }
                    *slot = Some(quoted);
                    if !self.label_separator()? {
                        return Ok(());
                    }
                    after_comma = true;
                    continue;
                } else {
                    return Err(self.unexpected("'=' after the quoted label name"));
                }
            } else {
                let end = scan_label_name(self.bytes, self.pos);
                if end == self.pos {
                    return Err(self.unexpected("a label name"));
                }
                label_name = Cow::Borrowed(&self.text[self.pos..end]);
                self.pos = end;
                if self.is_text() {
                    self.skip_blanks();
                }
                if self.peek() != Some(b'=') {
                    return Err(self.unexpected(&format!("'=' after label name '{}'", show(&label_name))));
                }
            }
            self.pos += 1; // '='
            if self.is_text() {
                self.skip_blanks();
            }
            if self.peek() != Some(b'"') {
                return Err(self.unexpected(&format!("'\"' to open the value of label '{}'", show(&label_name))));
            }
            let mode = if self.is_text() {
                Quoted::TextValue
            } else {
                Quoted::OpenMetricsValue
            };
            let value = self.quoted(mode)?;
            if label_name.is_empty() {
                return Err(self.error(name_at, Rule::Syntax, "empty label name".to_string()));
            }
            if label_name == "__name__" {
                return Err(self.error(
                    name_at,
                    Rule::DuplicateLabel,
                    "label name '__name__' is reserved for the metric name".to_string(),
                ));
            }
            if let Some(type_labels) = deferred.as_deref_mut() {
                match label_name.as_ref() {
                    "le" if type_labels.le.is_none() => type_labels.le = Some(value),
                    "quantile" if type_labels.quantile.is_none() => type_labels.quantile = Some(value),
                    _ => {}
                }
                if !self.label_separator()? {
                    return Ok(());
                }
                after_comma = true;
                continue;
            }
            // Linear scan for the usual handful of labels; a set once a body has many.
            let duplicate = if labels.len() - set_start < LINEAR_DUPLICATE_CHECK {
                labels[set_start..].iter().any(|label| label.name == label_name)
            } else {
                let names = seen_names
                    .get_or_insert_with(|| labels[set_start..].iter().map(|label| label.name.clone()).collect());
                !names.insert(label_name.clone())
            };
            if duplicate {
                return Err(self.error(
                    name_at,
                    Rule::DuplicateLabel,
                    format!("duplicate label name '{}'", show(&label_name)),
                ));
            }
            labels.push(Label {
                name: label_name,
                value,
            });
            if !self.label_separator()? {
                return Ok(());
            }
            after_comma = true;
        }
    }

    /// After a label: `,` (returns true) or `}` (returns false).
    fn label_separator(&mut self) -> Result<bool, ParseError> {
        if self.is_text() {
            let before = self.pos;
            self.skip_blanks();
            let next = self.peek();
            let starts_label = next.is_some_and(|byte| byte == b'"' || byte == b'_' || byte.is_ascii_alphabetic());
            if self.pos > before && starts_label {
                if self.tolerated.is_none() {
                    self.tolerated = Some(self.error(
                        self.pos,
                        Rule::LabelSeparator,
                        "labels separated by blanks instead of ','".to_string(),
                    ));
                }
                return Ok(true);
            }
        }
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b'}') => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(self.unexpected("',' or '}' after a label")),
        }
    }

    /// Reads a double-quoted string at the cursor, decoding escapes for `mode`.
    fn quoted(&mut self, mode: Quoted) -> Result<Cow<'a, str>, ParseError> {
        let open = self.pos;
        let start = open + 1;
        let bytes = self.bytes;
        let mut index = start;
        // Fast path: no backslash before the closing quote.
        let stop = find_quote_stop(bytes, index);
        let found = (stop < bytes.len()).then_some(stop - index);
        match found {
            None => {
                return Err(self.error(open, Rule::Syntax, "unterminated quoted string".to_string()));
            }
            Some(found) if bytes[index + found] == b'"' => {
                self.pos = index + found + 1;
                return Ok(Cow::Borrowed(&self.text[start..index + found]));
            }
            Some(found) => index += found,
        }
        let mut decoded = String::with_capacity(index - start + 16);
        decoded.push_str(&self.text[start..index]);
        loop {
            // bytes[index] is a backslash or a quote here.
            if bytes[index] == b'"' {
                self.pos = index + 1;
                return Ok(Cow::Owned(decoded));
            }
            let escaped = bytes.get(index + 1).copied();
            match escaped {
                Some(b'\\') => decoded.push('\\'),
                Some(b'"') => decoded.push('"'),
                Some(b'n') => decoded.push('\n'),
                None => return Err(self.error(open, Rule::Syntax, "unterminated quoted string".to_string())),
                Some(_) if mode == Quoted::OpenMetricsValue => {
                    decoded.push('\\');
                    index += 1;
                    let next = memchr::memchr2(b'"', b'\\', &bytes[index..]).map_or(bytes.len(), |i| index + i);
                    decoded.push_str(&self.text[index..next]);
                    index = next;
                    if index == bytes.len() {
                        return Err(self.error(open, Rule::Syntax, "unterminated quoted string".to_string()));
                    }
                    continue;
                }
                Some(_) => {
                    let what = if mode == Quoted::Name {
                        "quoted name"
                    } else {
                        "label value"
                    };
                    let sequence: String = self.text[index..].chars().take(2).collect();
                    return Err(self.error(
                        index,
                        Rule::InvalidEscape,
                        format!("invalid {what} escape '{}' (allowed: \\\\, \\\", \\n)", show(&sequence)),
                    ));
                }
            }
            index += 2;
            let next = memchr::memchr2(b'"', b'\\', &bytes[index..]).map_or(bytes.len(), |i| index + i);
            decoded.push_str(&self.text[index..next]);
            index = next;
            if index == bytes.len() {
                return Err(self.error(open, Rule::Syntax, "unterminated quoted string".to_string()));
            }
        }
    }
}

/// Reads the labels of a deferred text 0.0.4 sample (see [`LineReader::defer_labels`]) from
/// its series spelling (`series`: an unquoted name, then the label set) onto `labels`, as the
/// eager read would have: names and values decoded, a repeated name refused
/// ([`Rule::DuplicateLabel`]). Errors name line `line_no` and the column on that line, given
/// that the series starts `offset` bytes (blanks) into it.
pub(crate) fn read_series_labels<'a>(
    series: &'a str,
    line_no: u32,
    offset: u16,
    labels: &mut Vec<Label<'a>>,
) -> Result<(), ParseError> {
    let mut reader = LineReader::new(series, line_no, Format::Text);
    let name_end = scan_metric_name(reader.bytes, 0);
    let mut name = Some(Cow::Borrowed(&series[..name_end]));
    reader.pos = name_end;
    reader.skip_blanks();
    if reader.peek() == Some(b'{') {
        reader
            .label_set(labels, Some(&mut name), None)
            .map_err(|error| ParseError {
                column: error.column + u32::from(offset),
                ..error
            })?;
    }
    Ok(())
}

/// Builds an error at byte offset `at` of `line`, converting the offset to a 1-based column in
/// characters.
pub(crate) fn error_at(line: &str, line_no: u32, at: usize, rule: Rule, message: String) -> ParseError {
    let at = at.min(line.len());
    let column = line.get(..at).map_or(at, |prefix| prefix.chars().count()) + 1;
    ParseError {
        line: line_no,
        column: column as u32,
        rule,
        message,
    }
}

/// HELP text: `\\`, `\n` and `\"` decoded (OpenMetrics defines all three; expfmt also
/// decodes `\"` in text HELP); any other backslash is kept, as both reference parsers do.
fn unescape_help(text: &str) -> Cow<'_, str> {
    if !text.contains('\\') {
        return Cow::Borrowed(text);
    }
    let mut decoded = String::with_capacity(text.len());
    let mut characters = text.chars().peekable();
    while let Some(character) = characters.next() {
        if character != '\\' {
            decoded.push(character);
            continue;
        }
        match characters.peek() {
            Some('\\') => {
                decoded.push('\\');
                characters.next();
            }
            Some('n') => {
                decoded.push('\n');
                characters.next();
            }
            Some('"') => {
                decoded.push('"');
                characters.next();
            }
            _ => decoded.push('\\'),
        }
    }
    Cow::Owned(decoded)
}

/// Byte classes of the line grammar, one table lookup per byte instead of a chain of range
/// tests (the scans below are a fifth of a node_exporter body's parse otherwise).
const METRIC_START: u8 = 1;
/// `[a-zA-Z0-9_:]`
const METRIC_CHAR: u8 = 2;
/// `[a-zA-Z_]`
const LABEL_START: u8 = 4;
/// `[a-zA-Z0-9_]`
const LABEL_CHAR: u8 = 8;
/// `"` or `\\`: where a quoted string ends or an escape starts.
const QUOTE_STOP: u8 = 16;
/// Space or tab: where a text 0.0.4 token ends.
const BLANK: u8 = 32;

/// [`METRIC_START`] … [`BLANK`] for each byte value.
static CLASSES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        let alpha = b.is_ascii_alphabetic();
        let digit = b.is_ascii_digit();
        let mut class = 0;
        if alpha || b == b'_' || b == b':' {
            class |= METRIC_START;
        }
        if alpha || digit || b == b'_' || b == b':' {
            class |= METRIC_CHAR;
        }
        if alpha || b == b'_' {
            class |= LABEL_START;
        }
        if alpha || digit || b == b'_' {
            class |= LABEL_CHAR;
        }
        if b == b'"' || b == b'\\' {
            class |= QUOTE_STOP;
        }
        if b == b' ' || b == b'\t' {
            class |= BLANK;
        }
        table[byte] = class;
        byte += 1;
    }
    table
};

/// The offset of the first `"` or `\\` at or after `start` (`bytes.len()` if none). Most label
/// values are a few bytes, shorter than what pays for `memchr2`'s set-up: the first 16 bytes
/// are looked at one by one.
#[inline(always)]
fn find_quote_stop(bytes: &[u8], start: usize) -> usize {
    let near_end = bytes.len().min(start + 16);
    match bytes[start..near_end].iter().position(|&byte| is(byte, QUOTE_STOP)) {
        Some(offset) => start + offset,
        None => memchr::memchr2(b'"', b'\\', &bytes[near_end..]).map_or(bytes.len(), |offset| near_end + offset),
    }
}

/// Whether `byte` is in `class`.
#[inline(always)]
fn is(byte: u8, class: u8) -> bool {
    CLASSES[byte as usize] & class != 0
}

/// The offset of the first byte at or after `start` that is not in `class` (`bytes.len()` if
/// none).
#[inline(always)]
fn scan_while(bytes: &[u8], start: usize, class: u8) -> usize {
    bytes[start..]
        .iter()
        .position(|&byte| !is(byte, class))
        .map_or(bytes.len(), |offset| start + offset)
}

/// The offset of the first byte at or after `start` that is in `class` (`bytes.len()` if none).
#[inline(always)]
fn scan_until(bytes: &[u8], start: usize, class: u8) -> usize {
    bytes[start..]
        .iter()
        .position(|&byte| is(byte, class))
        .map_or(bytes.len(), |offset| start + offset)
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*` starting at `start`; returns the end offset (== start if none).
#[inline]
pub(crate) fn scan_metric_name(bytes: &[u8], start: usize) -> usize {
    match bytes.get(start) {
        Some(&byte) if is(byte, METRIC_START) => scan_while(bytes, start + 1, METRIC_CHAR),
        _ => start,
    }
}

/// `[a-zA-Z_][a-zA-Z0-9_]*` starting at `start`.
#[inline]
fn scan_label_name(bytes: &[u8], start: usize) -> usize {
    match bytes.get(start) {
        Some(&byte) if is(byte, LABEL_START) => scan_while(bytes, start + 1, LABEL_CHAR),
        _ => start,
    }
}

#[inline]
fn is_name_char(byte: u8) -> bool {
    is(byte, METRIC_CHAR)
}

/// Whether `name` is a metric name that needs no quoting.
pub(crate) fn is_plain_metric_name(name: &str) -> bool {
    !name.is_empty() && scan_metric_name(name.as_bytes(), 0) == name.len()
}

/// Whether `name` is a label name that needs no quoting.
pub(crate) fn is_plain_label_name(name: &str) -> bool {
    !name.is_empty() && scan_label_name(name.as_bytes(), 0) == name.len()
}

fn token_at(rest: &str) -> &str {
    let end = rest
        .char_indices()
        .find(|&(index, character)| index > 0 && (character == ' ' || character == '\t'))
        .map_or(rest.len(), |(index, _)| index);
    &rest[..end]
}

fn describe_char(rest: &str) -> String {
    match rest.chars().next() {
        Some('\0') => "NUL".to_string(),
        Some('\t') => "tab".to_string(),
        Some(character) => format!("'{character}'"),
        None => "end of line".to_string(),
    }
}
