//! The incident page's evidence charts: each evidence signal's samples from the store, five
//! minutes either side of the verdict's onset, drawn as a small SVG line with the onset
//! marked. What is drawn follows the signal's shape: a counter (`…_total`, `…_count`,
//! `…_sum`) as its per-second rate between samples (a drop is a reset: the new value counts
//! from zero, as PromQL's `rate` reads it); a summary or histogram named without a suffix as
//! its mean per interval (increase of `_sum` over increase of `_count`); a gauge as its value.
//! Several series of one signal (one per pool, per peer) are added up; a signal pointing at
//! a peer keeps only the series with a label value naming it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use epicenter_detector::Anomaly;
use epicenter_store::schema::quote;
use html_escape::{encode_double_quoted_attribute as attribute, encode_text as text};

/// Minutes of samples shown either side of the onset.
pub(crate) const WINDOW_MINUTES: i64 = 5;
/// Chart width and height, pixels.
const WIDTH: f64 = 320.0;
const HEIGHT: f64 = 70.0;

/// The query for one evidence signal's samples around `onset_ms`: TabSeparated rows of
/// `t` (ms since the epoch), `metric`, `series_id`, `value`, oldest first. Values are quoted
/// as ClickHouse string literals.
pub(crate) fn evidence_query(anomaly: &Anomaly, onset_ms: i64) -> String {
    let metric = &anomaly.metric;
    let names = [metric.clone(), format!("{metric}_sum"), format!("{metric}_count")]
        .iter()
        .map(|name| quote(name))
        .collect::<Vec<_>>()
        .join(", ");
    let peer = anomaly
        .peer
        .as_deref()
        .map(|peer| {
            format!(
                " AND arrayExists(v -> position(v, {}) > 0, mapValues(labels))",
                quote(peer)
            )
        })
        .unwrap_or_default();
    format!(
        "SELECT toUnixTimestamp64Milli(time) AS t, metric, series_id, value FROM samples \
         WHERE metric IN ({names}) AND instance = {} \
         AND time BETWEEN fromUnixTimestamp64Milli({onset_ms}) - INTERVAL {WINDOW_MINUTES} MINUTE \
         AND fromUnixTimestamp64Milli({onset_ms}) + INTERVAL {WINDOW_MINUTES} MINUTE{peer} \
         ORDER BY t",
        quote(&anomaly.instance)
    )
}

/// Whether samples named `name` are a counter's (their rate is drawn).
fn is_counter(name: &str) -> bool {
    name.ends_with("_total") || name.ends_with("_count") || name.ends_with("_sum")
}

/// The points to draw for `metric` from TabSeparated `rows` of [`evidence_query`]:
/// (time ms, value), oldest first, one per distinct sample time (see the module docs).
pub(crate) fn points(metric: &str, rows: &str) -> Vec<(i64, f64)> {
    // Per series: its metric name and its samples in time order.
    let mut series: BTreeMap<u64, (String, Vec<(i64, f64)>)> = BTreeMap::new();
    for line in rows.lines() {
        let mut fields = line.split('\t');
        let (Some(t), Some(name), Some(id), Some(value)) = (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Ok(t), Ok(id), Ok(value)) = (t.parse::<i64>(), id.parse::<u64>(), value.parse::<f64>()) else {
            continue;
        };
        series
            .entry(id)
            .or_insert_with(|| (name.to_string(), Vec::new()))
            .1
            .push((t, value));
    }
    let exact = series.values().any(|(name, _)| name == metric);
    // Per time: the sum over series, of the value (gauges) or of the increase since the
    // series' previous sample (counters, and the _sum/_count of a mean).
    let mut values: BTreeMap<i64, f64> = BTreeMap::new();
    let mut sums: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    let mut spans: BTreeMap<i64, f64> = BTreeMap::new();
    for (name, samples) in series.values() {
        let part = if name == metric {
            None
        } else if exact {
            continue;
        } else if name.ends_with("_sum") {
            Some(true)
        } else {
            Some(false)
        };
        if part.is_none() && !is_counter(name) {
            for &(t, value) in samples {
                *values.entry(t).or_default() += value;
            }
            continue;
        }
        for pair in samples.windows(2) {
            let ((before_t, before), (t, value)) = (pair[0], pair[1]);
            if t <= before_t {
                continue;
            }
            let increase = if value < before { value } else { value - before };
            match part {
                None => {
                    *values.entry(t).or_default() += increase;
                    spans.insert(t, (t - before_t) as f64 / 1000.0);
                }
                Some(true) => sums.entry(t).or_default().0 += increase,
                Some(false) => sums.entry(t).or_default().1 += increase,
            }
        }
    }
    if !exact {
        return sums
            .into_iter()
            .filter(|(_, (_, count))| *count > 0.0)
            .map(|(t, (sum, count))| (t, sum / count))
            .collect();
    }
    values
        .into_iter()
        .map(|(t, value)| match spans.get(&t) {
            Some(seconds) if *seconds > 0.0 => (t, value / seconds),
            _ => (t, value),
        })
        .collect()
}

/// What the chart's values are, for its caption.
fn unit(metric: &str, exact: bool) -> &'static str {
    match (exact, is_counter(metric)) {
        (false, _) => "mean per interval",
        (true, true) => "per second",
        (true, false) => "value",
    }
}

/// One evidence chart: a figure with an SVG line of `points` over the window around
/// `onset_ms` (a red line at the onset), its highest value, and the signal in its caption;
/// `data-points` holds how many points it draws. Without points, a figure that says so.
pub(crate) fn chart(anomaly: &Anomaly, onset_ms: i64, points: &[(i64, f64)], exact: bool) -> String {
    let from = onset_ms - WINDOW_MINUTES * 60_000;
    let span = (2 * WINDOW_MINUTES * 60_000) as f64;
    let caption = format!(
        "{} {}{} ({})",
        anomaly.instance,
        anomaly.metric,
        anomaly
            .peer
            .as_deref()
            .map(|peer| format!(" towards {peer}"))
            .unwrap_or_default(),
        unit(&anomaly.metric, exact)
    );
    let mut out = format!(
        "<figure class=\"chart\" data-instance=\"{}\" data-metric=\"{}\" data-points=\"{}\">",
        attribute(&anomaly.instance),
        attribute(&anomaly.metric),
        points.len()
    );
    let finite: Vec<(i64, f64)> = points.iter().copied().filter(|(_, value)| value.is_finite()).collect();
    if finite.is_empty() {
        let _ = write!(
            out,
            "<p>No samples of this signal in the store around the onset.</p><figcaption>{}</figcaption></figure>",
            text(&caption)
        );
        return out;
    }
    let low = finite
        .iter()
        .map(|(_, value)| *value)
        .fold(f64::INFINITY, f64::min)
        .min(0.0);
    let high = finite.iter().map(|(_, value)| *value).fold(f64::NEG_INFINITY, f64::max);
    let range = if high > low { high - low } else { 1.0 };
    let x = |t: i64| ((t - from) as f64 / span * WIDTH).clamp(0.0, WIDTH);
    let y = |value: f64| HEIGHT - 4.0 - (value - low) / range * (HEIGHT - 8.0);
    let line: Vec<String> = finite
        .iter()
        .map(|&(t, value)| format!("{:.1},{:.1}", x(t), y(value)))
        .collect();
    let onset_x = x(onset_ms);
    let _ = write!(
        out,
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\"><rect class=\"frame\" x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{HEIGHT}\"/><line class=\"onset\" x1=\"{onset_x:.1}\" y1=\"0\" x2=\"{onset_x:.1}\" y2=\"{HEIGHT}\"/><polyline class=\"series\" points=\"{}\"/></svg><figcaption>{} · highest {}</figcaption></figure>",
        line.join(" "),
        text(&caption),
        format_value(high)
    );
    out
}

/// A value for a caption: three significant figures.
fn format_value(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits = (2 - value.abs().log10().floor() as i32).max(0) as usize;
    format!("{value:.digits$}")
}

/// Whether `rows` hold samples named exactly `metric` (else its `_sum`/`_count`).
pub(crate) fn has_exact(metric: &str, rows: &str) -> bool {
    rows.lines().any(|line| line.split('\t').nth(1) == Some(metric))
}

#[cfg(test)]
mod tests {
    use super::*;
    use epicenter_detector::rules::Class;

    fn anomaly(metric: &str, peer: Option<&str>) -> Anomaly {
        Anomaly {
            instance: "backend-1'1".into(),
            metric: metric.into(),
            class: Class::Errors,
            peer: peer.map(Into::into),
            score: 20.0,
            onset_ms: 600_000,
            rounds: 2,
            labels: BTreeMap::new(),
            value: 0.0,
            baseline: 0.0,
            deviation: 0.0,
            resource: None,
            outbound: false,
        }
    }

    #[test]
    fn the_query_quotes_what_it_is_given_and_keeps_the_peer() {
        let sql = evidence_query(&anomaly("errors_total", Some("redis-2'1")), 600_000);
        assert!(sql.contains("instance = 'backend-1\\'1'"), "{sql}");
        assert!(
            sql.contains("metric IN ('errors_total', 'errors_total_sum', 'errors_total_count')"),
            "{sql}"
        );
        assert!(sql.contains("position(v, 'redis-2\\'1')"), "{sql}");
        assert!(
            sql.contains("fromUnixTimestamp64Milli(600000) - INTERVAL 5 MINUTE"),
            "{sql}"
        );
    }

    #[test]
    fn counters_become_rates_with_resets_means_divide_and_gauges_add_up() {
        // A counter over two series, 10 s apart: series 1 goes 100 → 150 → 20 (a reset:
        // +20), series 2 goes 5 → 15 → 25.
        let rows = "0\terrors_total\t1\t100\n0\terrors_total\t2\t5\n10000\terrors_total\t1\t150\n10000\terrors_total\t2\t15\n20000\terrors_total\t1\t20\n20000\terrors_total\t2\t25\n";
        assert!(has_exact("errors_total", rows));
        assert_eq!(
            points("errors_total", rows),
            [(10_000, (50.0 + 10.0) / 10.0), (20_000, (20.0 + 10.0) / 10.0)]
        );
        // A mean: sum 1.0 → 3.0 → 3.5, count 10 → 20 → 30: 0.2 then 0.05 seconds.
        let rows = "0\tlatency_seconds_sum\t7\t1.0\n0\tlatency_seconds_count\t8\t10\n5000\tlatency_seconds_sum\t7\t3.0\n5000\tlatency_seconds_count\t8\t20\n10000\tlatency_seconds_sum\t7\t3.5\n10000\tlatency_seconds_count\t8\t30\n";
        assert!(!has_exact("latency_seconds", rows));
        let mean = points("latency_seconds", rows);
        assert_eq!(mean.len(), 2);
        assert!(
            (mean[0].1 - 0.2).abs() < 1e-12 && (mean[1].1 - 0.05).abs() < 1e-12,
            "{mean:?}"
        );
        // A gauge over two pools: values added per time.
        let rows = "0\twaiters\t1\t3\n0\twaiters\t2\t4\n10000\twaiters\t1\t0\n";
        assert_eq!(points("waiters", rows), [(0, 7.0), (10_000, 0.0)]);
        // Unreadable lines are skipped.
        assert_eq!(points("waiters", "x\ty\n0\twaiters\tnot-an-id\t1\n"), []);
    }

    #[test]
    fn a_chart_draws_every_point_and_marks_the_onset() {
        let signal = anomaly("waiters", None);
        let onset = 600_000;
        let drawn = chart(&signal, onset, &[(300_000, 0.0), (600_000, 10.0), (900_000, 5.0)], true);
        assert!(drawn.contains("data-points=\"3\""), "{drawn}");
        // The window is 10 minutes across 320 px: the onset in the middle, the highest value
        // at the top (4 px margin), zero at the bottom.
        assert!(drawn.contains("<line class=\"onset\" x1=\"160.0\""), "{drawn}");
        assert!(drawn.contains("points=\"0.0,66.0 160.0,4.0 320.0,35.0\""), "{drawn}");
        assert!(
            drawn.contains("backend-1&#x27;1") || drawn.contains("backend-1'1"),
            "{drawn}"
        );
        assert!(drawn.contains("highest 10.0"), "{drawn}");
        let empty = chart(&signal, onset, &[], true);
        assert!(
            empty.contains("data-points=\"0\"") && empty.contains("No samples"),
            "{empty}"
        );
    }
}
