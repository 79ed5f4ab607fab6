//! The SQL functions the schema installs for the cookbook, run in the embedded engine on a
//! migrated store and set against a reference written here from PromQL's definition of
//! `histogram_quantile` (prometheus/promql/quantile.go, `bucketQuantile`), and the
//! time-series functions a read-only connection is given. Needs `libchdb.so`
//! (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::time::Duration;

use epicenter_store::embedded::EmbeddedStore;

/// PromQL's bucket quantile over `(upper bound, cumulative count)` sorted by bound.
fn reference(q: f64, buckets: &[(f64, f64)]) -> f64 {
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    let Some(&(last_bound, total)) = buckets.last() else {
        return f64::NAN;
    };
    if buckets.len() < 2 || last_bound != f64::INFINITY || total <= 0.0 {
        return f64::NAN;
    }
    let rank = q * total;
    let index = buckets.iter().position(|&(_, count)| count >= rank).unwrap();
    if index == buckets.len() - 1 {
        return buckets[index - 1].0;
    }
    if index == 0 && buckets[0].0 <= 0.0 {
        return buckets[0].0;
    }
    let (start, below) = if index == 0 { (0.0, 0.0) } else { buckets[index - 1] };
    let (end, count) = buckets[index];
    start + (end - start) * (rank - below) / (count - below)
}

fn value(store: &EmbeddedStore, sql: &str) -> f64 {
    let out = store.query(sql, "TabSeparated").unwrap();
    let text = String::from_utf8(out).unwrap();
    match text.trim() {
        "nan" => f64::NAN,
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        number => number.parse().unwrap_or_else(|_| panic!("{sql}: {text:?}")),
    }
}

fn sql_tuples(buckets: &[(f64, f64)]) -> String {
    let items: Vec<String> = buckets
        .iter()
        .map(|&(bound, count)| {
            let bound = if bound.is_infinite() {
                "inf".to_string()
            } else {
                format!("{bound:?}")
            };
            format!("({bound}, {count:?})")
        })
        .collect();
    format!("[{}]", items.join(", "))
}

#[test]
fn the_histogram_quantile_follows_promql_and_readers_get_the_time_series_functions() {
    if !common::library_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("epicenter-functions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = EmbeddedStore::open(&dir, "epicenter").unwrap();
    store.migrate(Duration::from_secs(86_400)).unwrap();

    // Latency buckets of one window (cumulative), and edge cases PromQL names.
    let inf = f64::INFINITY;
    let cases: Vec<Vec<(f64, f64)>> = vec![
        vec![
            (0.005, 10.0),
            (0.01, 40.0),
            (0.025, 70.0),
            (0.05, 93.0),
            (0.1, 99.0),
            (0.25, 100.0),
            (inf, 100.0),
        ],
        vec![(1.0, 2.0), (2.0, 6.0), (4.0, 9.0), (inf, 10.0)],
        vec![(1.0, 0.0), (2.0, 0.0), (inf, 5.0)],
        vec![(-1.0, 3.0), (1.0, 4.0), (inf, 4.0)],
        vec![(0.5, 7.0), (inf, 7.0)],
        vec![(1.0, 2.0), (2.0, 6.0)],
        vec![(inf, 5.0)],
        vec![(1.0, 0.0), (inf, 0.0)],
    ];
    let mut compared = 0;
    for buckets in &cases {
        for q in [-0.5, 0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 1.0, 1.5] {
            let expected = reference(q, buckets);
            // The tuples go in reversed: the function sorts them by bound.
            let mut reversed = buckets.clone();
            reversed.reverse();
            let got = value(
                &store,
                &format!("SELECT epicenterHistogramQuantile({q:?}, {})", sql_tuples(&reversed)),
            );
            let same = (got.is_nan() && expected.is_nan()) || got == expected || (got - expected).abs() < 1e-12;
            assert!(same, "q {q} of {buckets:?}: SQL {got}, PromQL {expected}");
            compared += 1;
        }
    }
    assert_eq!(compared, cases.len() * 9);
    // A known answer, worked by hand: rank 5 of 10 lies 3/4 into the (1, 2] bucket.
    assert_eq!(reference(0.5, &cases[1]), 1.75);

    // A read-only connection has the counter functions (with resets) and no more.
    drop(store);
    let reader = EmbeddedStore::open_read_only(&dir, "epicenter").unwrap();
    let increase = value(
        &reader,
        "SELECT timeSeriesIncreaseToGrid(toDateTime64(60, 3), toDateTime64(60, 3), 60, 60)(toDateTime64(t, 3), v)[1] \
         FROM values('t UInt32, v Float64', (0, 10), (20, 30), (40, 5), (60, 25))",
    );
    // PromQL's `increase` over the window (0 s, 60 s] (left-open: the sample at 0 is out):
    // samples 30, 5 (a reset: +5), 25 (+20) give 25 over the 40 s they span; the window
    // starts 20 s before the first of them, within 1.1 × the 20 s average gap, and the
    // counter's zero point (40 s × 30 / 25 = 48 s back) lies beyond it, so the increase is
    // extrapolated over the whole 60 s.
    let (raw, sampled_seconds, window_seconds) = (5.0 + 20.0, 40.0, 60.0);
    let expected = raw * window_seconds / sampled_seconds;
    assert!((increase - expected).abs() < 1e-9, "{increase} vs {expected}");
    let refused = reader
        .query(
            "SET allow_experimental_time_series_aggregate_functions = 0",
            "TabSeparated",
        )
        .unwrap_err();
    assert!(refused.to_string().contains("READONLY"), "{refused}");
    drop(reader);
    let _ = std::fs::remove_dir_all(&dir);
}
