//! Fuzz target: the exposition parser (`epicenter_collector::exposition::parse`).
//!
//! Every input is read in each format (auto, text 0.0.4, OpenMetrics), eagerly and as a scrape
//! does (labels deferred, then read back per sample), and
//! once more strictly as `epicenter check metrics --strict` does. Beyond "never panics", a
//! parse that succeeds must hold together: family and label ranges inside their vectors, at
//! most one sample per line, and rendering it back (text, OpenMetrics, JSON) must not panic.
#![no_main]

use epicenter_collector::exposition::{parse, parse_deferring_labels, render, write_json, Exposition, Format, FormatChoice, ParseOptions, Validation};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let line_count = body.split(|&byte| byte == b'\n').count();
    for format in [FormatChoice::Auto, FormatChoice::Text, FormatChoice::OpenMetrics] {
        let options = ParseOptions {
            format,
            validation: Validation::Prometheus,
        };
        if let Ok(exposition) = parse(body, options) {
            check_invariants(&exposition, line_count);
        }
        // The scrape's parse: label sets deferred and read back one by one.
        if let Ok(exposition) = parse_deferring_labels(body, options) {
            check_invariants(&exposition, line_count);
            for sample in &exposition.samples {
                let _ = exposition.labels_of(sample);
            }
        }
    }
    let strict = ParseOptions {
        format: FormatChoice::Auto,
        validation: Validation::Strict,
    };
    if let Ok(exposition) = parse(body, strict) {
        check_invariants(&exposition, line_count);
        assert_eq!(exposition.strict_rejections(), 0, "a strict parse succeeded with violations");
    }
});

/// Cheap structural checks on a successful parse; `render` and `write_json` walk it all.
fn check_invariants(exposition: &Exposition<'_>, line_count: usize) {
    let samples = exposition.samples.len();
    let labels = exposition.labels.len();
    assert!(samples <= line_count, "{samples} samples from {line_count} lines");
    assert!(exposition.warnings.len() <= 1_000, "more warnings kept than the cap");
    let mut previous_end = 0;
    for family in &exposition.families {
        let (start, end) = (family.samples_start as usize, family.samples_end as usize);
        assert!(start <= end && end <= samples, "family {} samples {start}..{end} of {samples}", family.name);
        assert!(start >= previous_end, "family {} overlaps the previous family", family.name);
        previous_end = end;
        assert!(family.line >= 1 && family.line as usize <= line_count);
    }
    for sample in &exposition.samples {
        let (start, end) = (sample.labels.start as usize, sample.labels.end as usize);
        assert!(start <= end && end <= labels, "sample labels {start}..{end} of {labels}");
        assert!(sample.line >= 1 && sample.line as usize <= line_count, "sample line {}", sample.line);
        if let Some(exemplar) = &sample.exemplar {
            assert!(exemplar.labels.start <= exemplar.labels.end && exemplar.labels.end as usize <= labels);
        }
        let _ = sample.timestamp_ms();
    }
    let _ = render(exposition, Format::Text);
    let _ = render(exposition, Format::OpenMetrics);
    let mut json = Vec::new();
    write_json(exposition, &mut json).expect("writing JSON into a Vec cannot fail");
}
