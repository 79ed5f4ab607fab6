//! Parse errors and warnings: where (line, column) and which rule.

use std::fmt;

/// The rule a [`ParseError`] reports, so tools and tests can tell kinds apart without matching
/// on message text. `Syntax`-like rules are always errors; the others become warnings under
/// [`super::Validation::Prometheus`] when the data stays unambiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rule {
    /// The line does not follow the format's grammar (names, labels, numbers, spacing).
    Syntax,
    /// The body is not valid UTF-8.
    InvalidUtf8,
    /// A label value or quoted name holds an escape the format does not define.
    InvalidEscape,
    /// The same label name twice in one label set, or the reserved `__name__`.
    DuplicateLabel,
    /// An OpenMetrics body without the closing `# EOF` line (tolerated only when `auto` falls
    /// back to OpenMetrics for a snippet with exemplars).
    MissingEof,
    /// Bytes after `# EOF`.
    TextAfterEof,
    /// A blank line or a comment that is not `HELP`/`TYPE`/`UNIT`/`EOF` (OpenMetrics only).
    UnexpectedLine,
    /// `# TYPE` names a type the format does not have.
    InvalidType,
    /// `# UNIT` that is not a suffix of the family name.
    UnitNotSuffix,
    /// A second `HELP`, `TYPE` or `UNIT` for the same family.
    RepeatedMetadata,
    /// Metadata for a family after its samples.
    MetadataAfterSamples,
    /// A family name, or a sample name it owns, that another family already used.
    ClashingName,
    /// Samples of a family (or of one metric inside it) split by other samples.
    Interleaved,
    /// Timestamps going backwards, or present on some samples of a metric and not others.
    TimestampOrder,
    /// A sample name that does not fit the family's type (`ii` for info family `ii`).
    SampleNameForType,
    /// `le` / `quantile` / stateset label missing or not a valid number.
    TypeLabel,
    /// Histogram structure: `+Inf` bucket, bucket order, `_count`/`_sum` presence and agreement.
    HistogramStructure,
    /// Negative or NaN value where the type forbids it (counters, buckets, counts, sums).
    ValueRange,
    /// Exemplar on a sample that may not carry one, or with labels over 128 characters.
    Exemplar,
    /// `UNIT` on a family type that may not have one (info, stateset).
    UnitForType,
    /// Text 0.0.4 labels separated by blanks instead of a comma (Prometheus accepts it).
    LabelSeparator,
    /// Line ending with CR LF (tolerated in text 0.0.4).
    CarriageReturn,
    /// The body was sniffed as one format and parsed as another.
    FormatFallback,
    /// OpenMetrics 2.0 draft syntax (native histograms in braces) that 1.0 parsers reject.
    OpenMetrics2Syntax,
    /// The same series twice at one timestamp ([`super::Exposition::duplicate_samples`]).
    DuplicateSeries,
}

/// A problem found in a body: 1-based line and column (in characters) plus what is wrong.
///
/// Displayed as `line:column: message`, e.g. `12:18: invalid label value escape '\q'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: u32,
    /// 1-based column in Unicode scalar values (characters), not bytes.
    pub column: u32,
    /// The rule broken.
    pub rule: Rule,
    /// Human-readable reason, lowercase, naming the offending token.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Shows a token for an error message: at most 120 characters (metric names fit whole),
/// control characters escaped.
pub(crate) fn show(token: &str) -> String {
    let mut shown = String::new();
    for (count, character) in token.chars().enumerate() {
        if count == 120 {
            shown.push('…');
            break;
        }
        match character {
            '\n' => shown.push_str("\\n"),
            '\t' => shown.push_str("\\t"),
            '\r' => shown.push_str("\\r"),
            '\0' => shown.push_str("\\0"),
            other => shown.push(other),
        }
    }
    shown
}
