//! Exposition parser: Prometheus text format 0.0.4 and OpenMetrics 1.0 into metric families.
//!
//! ```
//! use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, MetricType};
//!
//! let body = b"# TYPE redis_connected_clients gauge\nredis_connected_clients{addr=\"redis-7:6379\"} 48\n";
//! let exposition = parse(body, ParseOptions::default()).unwrap();
//! let family = &exposition.families[0];
//! assert_eq!(family.metric_type, MetricType::Gauge);
//! let sample = &exposition.samples_of(family)[0];
//! assert_eq!(exposition.label_value(sample, "addr").as_deref(), Some("redis-7:6379"));
//! assert_eq!(sample.value, 48.0);
//! ```
//!
//! Sources followed: the OpenMetrics 1.0 specification (ABNF and per-type rules), Prometheus's
//! "Exposition formats" page for text 0.0.4, Prometheus 3's quoted UTF-8 name syntax, and the
//! behaviour of the reference parsers where the documents are silent (`model/textparse` for
//! what a scrape accepts, `expfmt` for text-format strictness). The module owns syntax
//! ([`syntax`]), family assembly and validation ([`assemble`]), numbers and rendering.
//!
//! Hot path: the body is checked for UTF-8 once, lines are found with `memchr`, names, label
//! values and HELP texts are borrowed slices of the body unless an escape must be decoded, and
//! samples and labels go into two flat vectors. A scrape goes further
//! ([`parse_deferring_labels`]): label sets are checked but left unread until a series is new.

mod assemble;
mod error;
mod json;
mod lint;
mod model;
mod number;
mod render;
mod syntax;

pub use error::{ParseError, Rule};
pub use json::{write_json, write_json_with_lint};
pub use lint::{lint, lint_line_count, LintFinding, LintRule};
pub use model::{Exemplar, Exposition, Family, Format, Label, LabelRange, MetricType, Sample, Validation};
pub use render::render;

/// Which format to read a body as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FormatChoice {
    /// Decide from the body: OpenMetrics when its last line is `# EOF`, text 0.0.4 otherwise.
    /// Two fallbacks, each reported as a [`Rule::FormatFallback`] warning: a body that ends
    /// with `# EOF` but reads as OpenMetrics only with warnings while it is clean text 0.0.4 (a
    /// text body with `# EOF` appended) is read as text; a body without `# EOF` that is not
    /// text 0.0.4 but carries exemplars (` # {`) is read as OpenMetrics (a snippet copied
    /// from documentation) under [`Validation::Prometheus`].
    #[default]
    Auto,
    /// Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics 1.0.
    OpenMetrics,
}

impl FormatChoice {
    /// The format a scrape's `Content-Type` header names: `application/openmetrics-text` →
    /// OpenMetrics, `text/plain` → text 0.0.4, anything else (or none) → [`FormatChoice::Auto`].
    pub fn from_content_type(content_type: Option<&str>) -> FormatChoice {
        let Some(content_type) = content_type else {
            return FormatChoice::Auto;
        };
        let media_type = content_type.split(';').next().unwrap_or("").trim();
        if media_type.eq_ignore_ascii_case("application/openmetrics-text") {
            FormatChoice::OpenMetrics
        } else if media_type.eq_ignore_ascii_case("text/plain") {
            FormatChoice::Text
        } else {
            FormatChoice::Auto
        }
    }
}

/// Options for [`parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParseOptions {
    /// Format to read the body as (default: sniff).
    pub format: FormatChoice,
    /// How strictly family-level rules are enforced (default: as Prometheus ingests).
    pub validation: Validation,
}

/// Parses an exposition body.
///
/// The result borrows from `body`. Errors name the 1-based line and column and the rule
/// broken; no input makes this function panic. Under [`Validation::Prometheus`] tolerated
/// violations are returned in [`Exposition::warnings`].
pub fn parse(body: &[u8], options: ParseOptions) -> Result<Exposition<'_>, ParseError> {
    parse_with(body, options, false)
}

/// [`parse`] for a scrape: under [`Validation::Prometheus`], a text 0.0.4 sample whose name
/// is unquoted keeps its label set unread ([`Sample::labels_deferred`]). Every byte is still
/// checked and the body is accepted or refused as [`parse`] would, with one difference: a
/// label name repeated within a deferred label set is reported only when
/// [`Exposition::labels_of`] reads it. Histogram and summary errors (`le`, `quantile`) are
/// found from the values the label scan keeps; the family rules that only warn are not looked
/// for (docs/exposition.md). When a body has several errors, the one reported may differ.
/// This is how Prometheus's scrape loop parses (its `textparse` yields each series' bytes and
/// builds labels only for a series missing from the scrape cache); a scrape keyed on
/// [`Sample::series`] reads labels only for new series. OpenMetrics bodies, `Strict`
/// validation and quoted names are read eagerly. `render` and `write_json` read deferred
/// labels; `lint` expects an eager parse.
///
/// # Errors
/// As [`parse`].
pub fn parse_deferring_labels(body: &[u8], options: ParseOptions) -> Result<Exposition<'_>, ParseError> {
    parse_with(body, options, true)
}

fn parse_with(body: &[u8], options: ParseOptions, defer_labels: bool) -> Result<Exposition<'_>, ParseError> {
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(error) => return Err(utf8_error(body, error.valid_up_to())),
    };
    if text.starts_with('\u{feff}') {
        return Err(ParseError {
            line: 1,
            column: 1,
            rule: Rule::Syntax,
            message: "body starts with a UTF-8 byte-order mark (U+FEFF): exporters must not send one; remove it"
                .to_string(),
        });
    }
    match options.format {
        FormatChoice::Text => parse_as(text, Format::Text, options.validation, false, defer_labels),
        FormatChoice::OpenMetrics => parse_as(text, Format::OpenMetrics, options.validation, false, defer_labels),
        FormatChoice::Auto => {
            if sniff(text) == Format::Text {
                let text_error = match parse_as(text, Format::Text, options.validation, false, defer_labels) {
                    Ok(exposition) => return Ok(exposition),
                    Err(error) => error,
                };
                // An OpenMetrics snippet without `# EOF`, recognisable by its exemplars: read
                // it as OpenMetrics when that works, with a warning about the missing `# EOF`.
                if !text.contains(" # {") {
                    return Err(text_error);
                }
                return match parse_as(text, Format::OpenMetrics, options.validation, true, defer_labels) {
                    Ok(mut exposition) => {
                        exposition.warnings.insert(
                            0,
                            ParseError {
                                line: text_error.line,
                                column: text_error.column,
                                rule: Rule::FormatFallback,
                                message: format!(
                                    "body is not text format 0.0.4 ({}); read as OpenMetrics",
                                    text_error.message
                                ),
                            },
                        );
                        Ok(exposition)
                    }
                    Err(_) => Err(text_error),
                };
            }
            match parse_as(text, Format::OpenMetrics, options.validation, false, defer_labels) {
                Ok(exposition)
                    if !exposition
                        .warnings
                        .iter()
                        .all(|warning| matches!(warning.rule, Rule::SampleNameForType | Rule::ClashingName)) =>
                {
                    Ok(exposition)
                }
                Ok(exposition) if exposition.warnings.is_empty() => Ok(exposition),
                Ok(exposition) => {
                    // A text 0.0.4 body with `# EOF` appended reads as OpenMetrics only with
                    // warnings (counter samples named like their family); prefer a clean text read.
                    // Read eagerly: the choice rests on the text read's warnings, some of which a
                    // deferred read does not look for.
                    match parse_as(text, Format::Text, options.validation, false, false) {
                        Ok(mut text_exposition) if text_exposition.warnings.is_empty() => {
                            let first = &exposition.warnings[0];
                            text_exposition.warnings.push(ParseError {
                                line: first.line,
                                column: first.column,
                                rule: Rule::FormatFallback,
                                message: format!(
                                    "body ends with '# EOF' but reads as OpenMetrics only with {} warnings (first: {}); read as text format 0.0.4",
                                    exposition.warnings.len(),
                                    first.message
                                ),
                            });
                            Ok(text_exposition)
                        }
                        _ => Ok(exposition),
                    }
                }
                // Fall back to text only when the failure says the body is not OpenMetrics at
                // all (grammar, comments, text-style names), not when an OpenMetrics body
                // breaks a value or histogram rule that text 0.0.4 does not check.
                Err(openmetrics_error)
                    if matches!(
                        openmetrics_error.rule,
                        Rule::Syntax
                            | Rule::UnexpectedLine
                            | Rule::InvalidType
                            | Rule::SampleNameForType
                            | Rule::ClashingName
                    ) =>
                {
                    match parse_as(text, Format::Text, options.validation, false, defer_labels) {
                        Ok(mut exposition) => {
                            exposition.warnings.insert(
                                0,
                                ParseError {
                                    line: openmetrics_error.line,
                                    column: openmetrics_error.column,
                                    rule: Rule::FormatFallback,
                                    message: format!(
                                        "body ends with '# EOF' but is not OpenMetrics ({}); read as text format 0.0.4",
                                        openmetrics_error.message
                                    ),
                                },
                            );
                            Ok(exposition)
                        }
                        Err(_) => Err(openmetrics_error),
                    }
                }
                Err(openmetrics_error) => Err(openmetrics_error),
            }
        }
    }
}

/// The format [`FormatChoice::Auto`] picks for `text`: OpenMetrics when the last line is
/// `# EOF` (with or without a final newline), text 0.0.4 otherwise.
pub fn sniff(text: &str) -> Format {
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    let trimmed = trimmed.strip_suffix('\r').unwrap_or(trimmed);
    let last_line = trimmed.rsplit('\n').next().unwrap_or("");
    if last_line == "# EOF" {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

fn parse_as(
    text: &str,
    format: Format,
    validation: Validation,
    allow_missing_eof: bool,
    defer_labels: bool,
) -> Result<Exposition<'_>, ParseError> {
    assemble::Assembler::new(format, validation, text.len(), allow_missing_eof)
        .defer_labels(defer_labels)
        .run(text)
}

fn utf8_error(body: &[u8], valid_up_to: usize) -> ParseError {
    let before = &body[..valid_up_to];
    let line = before.iter().filter(|&&byte| byte == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&byte| byte == b'\n')
        .map_or(0, |index| index + 1);
    // The prefix is valid UTF-8 by construction.
    let column = std::str::from_utf8(&before[line_start..]).map_or(0, |prefix| prefix.chars().count()) + 1;
    ParseError {
        line: line as u32,
        column: column as u32,
        rule: Rule::InvalidUtf8,
        message: format!("invalid UTF-8 byte 0x{:02x}", body[valid_up_to]),
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn om(body: &str, validation: Validation) -> Result<Exposition<'_>, ParseError> {
        parse(
            body.as_bytes(),
            ParseOptions {
                format: FormatChoice::OpenMetrics,
                validation,
            },
        )
    }

    fn text(body: &str) -> Result<Exposition<'_>, ParseError> {
        parse(
            body.as_bytes(),
            ParseOptions {
                format: FormatChoice::Text,
                validation: Validation::Strict,
            },
        )
    }

    /// Each specification rule, written from the OpenMetrics 1.0 text: the body, and the rule
    /// a strict parse must report (`None`: must parse).
    #[test]
    fn openmetrics_rules_from_the_specification() {
        let cases: &[(&str, Option<Rule>)] = &[
            ("# EOF\n", None),
            ("", Some(Rule::MissingEof)),
            ("a 1\n", Some(Rule::MissingEof)),
            ("a 1\n# EOF\n\n", Some(Rule::TextAfterEof)),
            ("a 1\n\n# EOF\n", Some(Rule::UnexpectedLine)),
            ("# random comment\n# EOF\n", Some(Rule::UnexpectedLine)),
            ("# TYPE a untyped\n# EOF\n", Some(Rule::InvalidType)),
            (
                "# TYPE a_seconds gauge\n# UNIT a_seconds milliseconds\n# EOF\n",
                Some(Rule::UnitNotSuffix),
            ),
            (
                "# TYPE a counter\n# TYPE a counter\n# EOF\n",
                Some(Rule::RepeatedMetadata),
            ),
            (
                "# TYPE a gauge\na 1\n# HELP a late\n# EOF\n",
                Some(Rule::MetadataAfterSamples),
            ),
            (
                "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n# EOF\n",
                Some(Rule::Interleaved),
            ),
            (
                "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"2\"} 1\na{x=\"1\"} 2\n# EOF\n",
                Some(Rule::Interleaved),
            ),
            ("# TYPE a gauge\na 1 10\na 1 9\n# EOF\n", Some(Rule::TimestampOrder)),
            ("# TYPE a gauge\na 1 10\na 1 10\n# EOF\n", None),
            ("# TYPE a info\na 1\n# EOF\n", Some(Rule::SampleNameForType)),
            ("# TYPE a info\na_info{v=\"1\"} 1\n# EOF\n", None),
            ("# TYPE a info\na_info 2\n# EOF\n", Some(Rule::ValueRange)),
            ("# TYPE a stateset\na{a=\"on\"} 1\na{a=\"off\"} 0\n# EOF\n", None),
            ("# TYPE a stateset\na{b=\"on\"} 1\n# EOF\n", Some(Rule::TypeLabel)),
            ("# TYPE a counter\na_total -1\n# EOF\n", Some(Rule::ValueRange)),
            ("# TYPE a counter\na_total NaN\n# EOF\n", Some(Rule::ValueRange)),
            ("# TYPE a counter\na_total 1\na_created 1.5e9\n# EOF\n", None),
            (
                "# TYPE a counter\na_total 1 # {trace_id=\"abc\"} 0.5 1.5e9\n# EOF\n",
                None,
            ),
            (
                "# TYPE a gauge\na 1 # {trace_id=\"abc\"} 0.5\n# EOF\n",
                Some(Rule::Exemplar),
            ),
            (
                "# TYPE a summary\na{quantile=\"0.5\"} 1\na_count 2\na_sum 3\n# EOF\n",
                None,
            ),
            (
                "# TYPE a summary\na{quantile=\"1.5\"} 1\n# EOF\n",
                Some(Rule::TypeLabel),
            ),
            ("# TYPE a summary\na_count 1.5\n# EOF\n", Some(Rule::ValueRange)),
            ("# TYPE a summary\na 1\n# EOF\n", Some(Rule::TypeLabel)),
            (
                "# TYPE a histogram\na_bucket{le=\"1\"} 1\na_bucket{le=\"+Inf\"} 2\na_count 2\na_sum 3\n# EOF\n",
                None,
            ),
            (
                "# TYPE a histogram\na_bucket{le=\"1\"} 1\n# EOF\n",
                Some(Rule::HistogramStructure),
            ),
            (
                "# TYPE a histogram\na_bucket{le=\"+Inf\"} 2\na_count 3\na_sum 1\n# EOF\n",
                Some(Rule::HistogramStructure),
            ),
            (
                "# TYPE a histogram\na_bucket{le=\"2\"} 1\na_bucket{le=\"1\"} 1\na_bucket{le=\"+Inf\"} 1\n# EOF\n",
                Some(Rule::HistogramStructure),
            ),
            (
                "# TYPE a histogram\na_bucket{le=\"-1\"} 1\na_bucket{le=\"+Inf\"} 2\na_count 2\na_sum -1\n# EOF\n",
                Some(Rule::HistogramStructure),
            ),
            ("# TYPE a histogram\na_bucket 1\n# EOF\n", Some(Rule::TypeLabel)),
            (
                "# TYPE a histogram\na_bucket{le=\"x\"} 1\n# EOF\n",
                Some(Rule::TypeLabel),
            ),
            (
                "# TYPE a gaugehistogram\na_bucket{le=\"+Inf\"} 2\na_gcount 2\na_gsum -1\n# EOF\n",
                Some(Rule::HistogramStructure),
            ),
            (
                "# TYPE a_created gauge\n# TYPE a counter\n# EOF\n",
                Some(Rule::ClashingName),
            ),
            ("# TYPE a stateset\n# UNIT a \n# EOF\n", None),
            ("a{b=\"c\",b=\"d\"} 1\n# EOF\n", Some(Rule::DuplicateLabel)),
            ("a{__name__=\"b\"} 1\n# EOF\n", Some(Rule::DuplicateLabel)),
            ("a 1\r\n# EOF\n", Some(Rule::CarriageReturn)),
            ("a {count:1,sum:2} \n# EOF\n", Some(Rule::OpenMetrics2Syntax)),
            ("a{b=\"c\",} 1\n# EOF\n", Some(Rule::Syntax)),
            ("a  1\n# EOF\n", Some(Rule::Syntax)),
            ("a 1 \n# EOF\n", Some(Rule::Syntax)),
            ("a 1 Inf\n# EOF\n", Some(Rule::Syntax)),
            ("a 0x1p3\n# EOF\n", Some(Rule::Syntax)),
            ("{\"a.b\",\"c.d\"=\"e\"} 1\n# EOF\n", None),
        ];
        for (body, expected) in cases {
            match (om(body, Validation::Strict), expected) {
                (Ok(_), None) => {}
                (Err(error), Some(rule)) => assert_eq!(error.rule, *rule, "{body:?}: {error}"),
                (Ok(_), Some(rule)) => panic!("{body:?}: accepted, expected {rule:?}"),
                (Err(error), None) => panic!("{body:?}: rejected: {error}"),
            }
        }
    }

    /// `Sample::series` is the name and label set exactly as the line spells them, without
    /// the blanks before the value, in both formats; the spelling decides, not the series
    /// (reordered labels or a trailing comma spell the same series another way).
    #[test]
    fn each_sample_carries_its_series_as_spelled() {
        let body = "a 1\nb{x=\"1\",y=\"\\\"q\"} 2\nb{y=\"\\\"q\",x=\"1\",} 3\nc \t 4 1000\nd {z=\"}\"}\t5\n";
        let exposition = text(body).unwrap();
        let spelled: Vec<&str> = exposition.samples.iter().map(|sample| sample.series).collect();
        assert_eq!(
            spelled,
            [
                "a",
                "b{x=\"1\",y=\"\\\"q\"}",
                "b{y=\"\\\"q\",x=\"1\",}",
                "c",
                "d {z=\"}\"}"
            ]
        );
        let body = "# TYPE e gauge\ne{k=\"v\"} 1\n{\"my.metric\",k=\"v\"} 2\n# EOF\n";
        let exposition = om(body, Validation::Prometheus).unwrap();
        let spelled: Vec<&str> = exposition.samples.iter().map(|sample| sample.series).collect();
        assert_eq!(spelled, ["e{k=\"v\"}", "{\"my.metric\",k=\"v\"}"]);
    }

    #[test]
    fn tolerated_rules_are_warnings_by_default() {
        let body = "# TYPE a histogram\na_bucket{le=\"2\"} 1\na_bucket{le=\"1\"} 1\na_bucket{le=\"+Inf\"} 1\n# EOF\n";
        let exposition = om(body, Validation::Prometheus).unwrap();
        assert_eq!(exposition.sample_count(), 3);
        assert_eq!(exposition.warnings.len(), 1);
        assert_eq!(exposition.warnings[0].rule, Rule::HistogramStructure);
        assert_eq!(exposition.warnings[0].line, 3);
        // Syntax stays an error whatever the validation.
        assert!(om("a{b=1} 1\n# EOF\n", Validation::Prometheus).is_err());
    }

    #[test]
    fn interleaved_families_are_merged_under_prometheus_validation() {
        let body = "# TYPE a gauge\na{x=\"1\"} 1\n# TYPE b gauge\nb 2\na{x=\"2\"} 3\n# EOF\n";
        let exposition = om(body, Validation::Prometheus).unwrap();
        assert_eq!(exposition.families.len(), 2);
        let a = exposition.family("a").unwrap();
        let values: Vec<f64> = exposition.samples_of(a).iter().map(|sample| sample.value).collect();
        assert_eq!(values, vec![1.0, 3.0]);
        assert_eq!(exposition.samples_of(exposition.family("b").unwrap())[0].value, 2.0);
    }

    #[test]
    fn errors_name_line_and_column() {
        let body = "# TYPE a counter\na_total{foo=\"b\\qr\"} 1\n";
        let error = text(body).unwrap_err();
        assert_eq!((error.line, error.column), (2, 15));
        assert_eq!(error.rule, Rule::InvalidEscape);
        assert_eq!(
            error.to_string(),
            "2:15: invalid label value escape '\\q' (allowed: \\\\, \\\", \\n)"
        );
        // Columns count characters, not bytes.
        let error = text("a{b=\"☃☃\",c=d} 1\n").unwrap_err();
        assert_eq!((error.line, error.column), (1, 12));
        let error = parse(b"a 1\nb{c=\"\xff\"} 1\n", ParseOptions::default()).unwrap_err();
        assert_eq!((error.line, error.column, error.rule), (2, 6, Rule::InvalidUtf8));
    }

    #[test]
    fn text_format_specifics() {
        // Millisecond timestamps, blanks around tokens, trailing comma, CR LF, no final newline.
        let body =
            "  # HELP x  The x.\r\n# TYPE x counter\nx { a = \"1\" , } 3 1441205977284\r\nx{a=\"2\"}\t-4 -123456";
        let exposition = text(body).unwrap();
        let family = &exposition.families[0];
        assert_eq!(family.help.as_deref(), Some("The x."));
        assert_eq!(family.metric_type, MetricType::Counter);
        let samples = exposition.samples_of(family);
        assert_eq!(samples[0].timestamp_ms(), Some(1441205977284));
        assert_eq!(samples[1].timestamp_ms(), Some(-123456));
        assert_eq!(samples[1].value, -4.0);
        // Seconds are an error in text 0.0.4.
        assert_eq!(text("x 1 1.5\n").unwrap_err().rule, Rule::Syntax);
        // `# EOF` is a comment in text format.
        assert_eq!(text("x 1\n# EOF\n").unwrap().sample_count(), 1);
        // Interleaved text families are one family, as expfmt reads them.
        let exposition = text("a 1\nb 2\na{c=\"d\"} 3\n").unwrap();
        assert_eq!(exposition.families.len(), 2);
        assert_eq!(exposition.samples_of(&exposition.families[0]).len(), 2);
    }

    #[test]
    fn plain_values_are_borrowed_and_escapes_are_decoded() {
        let body =
            "# HELP a A \\\"quoted\\\" help\\nline\n# TYPE a gauge\na{p=\"plain\",e=\"x\\\\y\\\"z\\nw\"} 1\n# EOF\n";
        let exposition = om(body, Validation::Strict).unwrap();
        let labels = exposition.labels_in(exposition.samples[0].labels);
        assert!(matches!(labels[0].value, Cow::Borrowed("plain")));
        assert!(matches!(exposition.samples[0].name, Cow::Borrowed("a")));
        assert_eq!(labels[1].value, "x\\y\"z\nw");
        assert_eq!(exposition.families[0].help.as_deref(), Some("A \"quoted\" help\nline"));
    }

    #[test]
    fn quoted_utf8_names() {
        let body = "# TYPE \"my.metric\" gauge\n{\"my.metric\",\"dc.name\"=\"eu-1\",host=\"h\"} 2\n{host=\"h2\",\"my.metric\"} 3\n";
        let exposition = text(body).unwrap();
        assert_eq!(exposition.families.len(), 1);
        let family = &exposition.families[0];
        assert_eq!(family.name, "my.metric");
        assert_eq!(family.metric_type, MetricType::Gauge);
        let samples = exposition.samples_of(family);
        assert_eq!(exposition.label_value(&samples[0], "dc.name").as_deref(), Some("eu-1"));
        assert_eq!(samples[1].value, 3.0);
        assert_eq!(text("my.metric 1\n").unwrap_err().rule, Rule::Syntax);
        assert_eq!(text("{\"a\",\"b\"} 1\n").unwrap_err().rule, Rule::Syntax);
    }

    #[test]
    fn format_selection() {
        assert_eq!(
            FormatChoice::from_content_type(Some("application/openmetrics-text; version=1.0.0; charset=utf-8")),
            FormatChoice::OpenMetrics
        );
        assert_eq!(
            FormatChoice::from_content_type(Some("text/plain; version=0.0.4")),
            FormatChoice::Text
        );
        assert_eq!(
            FormatChoice::from_content_type(Some("application/json")),
            FormatChoice::Auto
        );
        assert_eq!(FormatChoice::from_content_type(None), FormatChoice::Auto);
        assert_eq!(sniff("a 1\n# EOF\n"), Format::OpenMetrics);
        assert_eq!(sniff("a 1\n# EOF"), Format::OpenMetrics);
        assert_eq!(sniff("a 1\n"), Format::Text);
        // Text body with `# EOF` appended: clean as text, so read as text.
        let exposition = parse(b"# TYPE a_total counter\na_total 1\n# EOF\n", ParseOptions::default()).unwrap();
        assert_eq!(exposition.format, Format::Text);
        assert_eq!(exposition.warnings[0].rule, Rule::FormatFallback);
        // A real OpenMetrics body stays OpenMetrics.
        let exposition = parse(b"# TYPE a counter\na_total 1\n# EOF\n", ParseOptions::default()).unwrap();
        assert_eq!(exposition.format, Format::OpenMetrics);
        assert!(exposition.warnings.is_empty());
        // OpenMetrics snippet without `# EOF` but with exemplars.
        let exposition = parse(b"# TYPE a counter\na_total 1 # {t=\"x\"} 1\n", ParseOptions::default()).unwrap();
        assert_eq!(exposition.format, Format::OpenMetrics);
        assert!(exposition.samples[0].exemplar.is_some());
        // ...which strict validation refuses.
        let strict = ParseOptions {
            format: FormatChoice::Auto,
            validation: Validation::Strict,
        };
        assert!(parse(b"# TYPE a counter\na_total 1 # {t=\"x\"} 1\n", strict).is_err());
    }

    #[test]
    fn render_round_trip_of_a_mixed_body() {
        let body = "# TYPE h histogram\n# UNIT h seconds\n# HELP h Latency.\nh_seconds_bucket{le=\"1\"} 0\n# EOF\n";
        assert_eq!(om(body, Validation::Strict).unwrap_err().rule, Rule::UnitNotSuffix);
        let body = "# TYPE h_seconds histogram\n# UNIT h_seconds seconds\n# HELP h_seconds Latency.\nh_seconds_bucket{le=\"0.5\"} 1 # {trace_id=\"t\"} 0.25 1.5\nh_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_count 2\nh_seconds_sum 1.25\n# TYPE c counter\nc_total{path=\"/a\\\"b\"} 7 1700000000.5\n# EOF\n";
        let first = om(body, Validation::Strict).unwrap();
        let rendered = render(&first, Format::OpenMetrics);
        assert_eq!(rendered, body);
        let text_rendered = render(&first, Format::Text);
        let second = text(&text_rendered).unwrap();
        assert_eq!(second.sample_count(), first.sample_count());
        assert_eq!(second.samples[4].timestamp_ms(), Some(1_700_000_000_500));
    }

    fn deferred(body: &str) -> Result<Exposition<'_>, ParseError> {
        parse_deferring_labels(
            body.as_bytes(),
            ParseOptions {
                format: FormatChoice::Text,
                validation: Validation::Prometheus,
            },
        )
    }

    fn pairs(labels: &[Label<'_>]) -> Vec<(String, String)> {
        labels
            .iter()
            .map(|label| (label.name.to_string(), label.value.to_string()))
            .collect()
    }

    /// The scrape's parse leaves plain label sets unread and gives them back on demand, the
    /// same as the eager parse, whichever path (the skim, or the full reader for blanks,
    /// escapes, a trailing comma, quoted names) the set took.
    #[test]
    fn deferred_labels_read_back_as_the_eager_parse_reads_them() {
        let body = concat!(
            "# TYPE g gauge\n",
            "g{a=\"1\",b=\"two\"} 1\n",
            "g{a=\"1\",b=\"esc\\\"aped\\\\\\n\"} 2\n",
            "g { a = \"1\" , b=\"blank\" , } 3\n",
            "g{a=\"1\",b=\"trailing\",} 4\n",
            "g{} 5\n",
            "g 6\n",
            "g{a=\"1\" b=\"no comma\"} 7\n",
            "{\"g\",a=\"1\",b=\"quoted name\"} 8\n",
            "g{\"dc.name\"=\"x\",b=\"quoted label\"} 9\n",
            "g{a=\"a long value that the skim hands to memchr2 after sixteen bytes\",b=\"x\"} 10\n",
        );
        let eager = parse(body.as_bytes(), ParseOptions::default()).unwrap();
        let lazy = deferred(body).unwrap();
        assert_eq!(lazy.sample_count(), 10);
        let deferred_lines: Vec<u32> = lazy
            .samples
            .iter()
            .filter(|sample| sample.labels_deferred)
            .map(|sample| sample.line)
            .collect();
        // Every set behind an unquoted name; not `g 6` (no set) nor the quoted name.
        assert_eq!(deferred_lines, vec![2, 3, 4, 5, 6, 8, 10, 11]);
        for (eager_sample, lazy_sample) in eager.samples.iter().zip(&lazy.samples) {
            assert!(
                lazy_sample.labels_deferred || !lazy.labels_in(lazy_sample.labels).is_empty() || lazy_sample.line == 7
            );
            assert_eq!(
                pairs(&lazy.labels_of(lazy_sample).unwrap()),
                pairs(eager.labels_in(eager_sample.labels)),
                "line {}",
                lazy_sample.line
            );
            assert_eq!(lazy_sample.series, eager_sample.series);
        }
        assert_eq!(
            lazy.label_value(&lazy.samples[1], "b").as_deref(),
            Some("esc\"aped\\\n")
        );
        // The blank separator is tolerated with the same warning.
        assert_eq!(eager.warnings.len(), 1);
        assert_eq!(lazy.warnings.len(), 1);
        assert_eq!(lazy.warnings[0].rule, Rule::LabelSeparator);
    }

    /// A repeated label name in a deferred set is found when the labels are read, naming the
    /// line; the rest of the body is read; what the eager parse refuses, the deferred refuses.
    #[test]
    fn deferred_labels_find_a_repeated_name_when_read() {
        let body = "# TYPE g gauge\ng{a=\"1\"} 1\ng{a=\"1\",b=\"2\",a=\"3\"} 2\ng{a=\"2\"} 3\n";
        assert_eq!(
            parse(body.as_bytes(), ParseOptions::default()).unwrap_err().rule,
            Rule::DuplicateLabel
        );
        let lazy = deferred(body).unwrap();
        assert!(lazy.labels_of(&lazy.samples[0]).is_ok());
        let error = lazy.labels_of(&lazy.samples[1]).unwrap_err();
        assert_eq!((error.line, error.rule), (3, Rule::DuplicateLabel));
        // The column counts the blanks a text line may start with, as the eager parse's does.
        let indented = "# TYPE g gauge\n \t g{a=\"1\",b=\"2\",a=\"3\"} 2\n";
        let eager = parse(indented.as_bytes(), ParseOptions::default()).unwrap_err();
        let lazy_indented = deferred(indented).unwrap();
        let found = lazy_indented.labels_of(&lazy_indented.samples[0]).unwrap_err();
        assert_eq!((found.line, found.column), (eager.line, eager.column));
        assert_eq!((found.line, found.column), (2, 18));
        assert!(error.message.contains("'a'"), "{error}");
        assert!(lazy.label_map(&lazy.samples[1]).is_empty());
        // Errors that are not about repeated names stay errors of the parse.
        for (bad, rule) in [
            ("# TYPE g gauge\ng{a=\"1\",__name__=\"x\"} 1\n", Rule::DuplicateLabel),
            ("# TYPE g gauge\ng{a=\"1\"=} 1\n", Rule::Syntax),
            ("# TYPE g gauge\ng{a=\"1} 1\n", Rule::Syntax),
            ("# TYPE g gauge\ng{a=1} 1\n", Rule::Syntax),
            ("# TYPE g gauge\ng{a=\"1\"} x\n", Rule::Syntax),
        ] {
            let eager = parse(bad.as_bytes(), ParseOptions::default()).unwrap_err();
            let lazy = deferred(bad).unwrap_err();
            assert_eq!(
                (lazy.line, lazy.column, lazy.rule),
                (eager.line, eager.column, rule),
                "{bad:?}"
            );
        }
    }

    /// Histogram and summary samples are deferred too; what the family rules make an error
    /// under Prometheus validation still is, read from the `le` and `quantile` the scan kept;
    /// a family typed after its samples is judged in full.
    #[test]
    fn deferred_histograms_keep_their_errors() {
        let good = "# TYPE h histogram\nh_bucket{x=\"1\",le=\"0.5\"} 1\nh_bucket{x=\"1\",le=\"+Inf\"} 2\nh_count{x=\"1\"} 2\nh_sum{x=\"1\"} 1\n# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_count 1\ns_sum 1\n";
        let lazy = deferred(good).unwrap();
        assert!(lazy.warnings.is_empty());
        assert!(lazy
            .samples
            .iter()
            .filter(|sample| sample.series.contains('{'))
            .all(|sample| sample.labels_deferred));
        assert_eq!(lazy.label_value(&lazy.samples[1], "le").as_deref(), Some("+Inf"));
        for bad in [
            "# TYPE h histogram\nh_bucket{x=\"1\"} 1\n",
            "# TYPE h histogram\nh_bucket{x=\"1\",le=\"high\"} 1\n",
            "# TYPE h histogram\nh_bucket{x=\"1\",le=\"NaN\"} 1\n",
            "# TYPE s summary\ns{quantile=\"median\"} 1\n",
            "# TYPE h histogram\nh_bucket{x=\"1\", le=\"high\"} 1\n",
            "s{quantile=\"median\"} 1\n# TYPE s summary\n",
        ] {
            let eager = parse(bad.as_bytes(), ParseOptions::default()).unwrap_err();
            let lazy = deferred(bad).unwrap_err();
            assert_eq!((lazy.line, lazy.rule), (eager.line, Rule::TypeLabel), "{bad:?}");
            assert_eq!(lazy.message, eager.message);
        }
        // Warnings only: the eager parse warns about the bucket order, the deferred skips it.
        let unordered = "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_bucket{le=\"0.5\"} 1\nh_count 2\nh_sum 1\n";
        assert!(!parse(unordered.as_bytes(), ParseOptions::default())
            .unwrap()
            .warnings
            .is_empty());
        assert!(deferred(unordered).unwrap().warnings.is_empty());
        // Strict validation and OpenMetrics read eagerly.
        let strict = ParseOptions {
            format: FormatChoice::Text,
            validation: Validation::Strict,
        };
        assert!(parse_deferring_labels(good.as_bytes(), strict)
            .unwrap()
            .samples
            .iter()
            .all(|sample| !sample.labels_deferred));
        let openmetrics = "# TYPE g gauge\ng{a=\"1\"} 1\n# EOF\n";
        let read = parse_deferring_labels(openmetrics.as_bytes(), ParseOptions::default()).unwrap();
        assert_eq!(read.format, Format::OpenMetrics);
        assert!(!read.samples[0].labels_deferred);
    }
}
