//! Forgetting series that stopped: what keeps the detector's memory level under series churn
//! (a label holding a request's URI, a pod name, a client's port).
//!
//! A series no sample has reached for [`STALE_MS`] (or ten scrape intervals, whichever is
//! longer) while its instance went on answering has stopped: its signal, its baseline and its
//! entry in the per-series lookup ([`Detector::observe_series`]) are dropped. Prometheus
//! marks such a series stale after its lookback delta (5 minutes by default,
//! `--query.lookback-delta`) and drops it from its head block at the next compaction; the
//! detector forgets it at the first look after the same 5 minutes. A series whose instance
//! went silent with it is kept: the instance is lost, not its series (its evidence and
//! baseline are what name it when it comes back or stays down). A series seen again after
//! being forgotten starts as a new one (its baseline is learnt again).
//!
//! Open incidents hold copies of their evidence, never positions in the signal table, so a
//! compaction changes nothing they show.

use super::*;

/// How long a series may go without a sample, while its instance answers, before it is
/// forgotten: Prometheus's default lookback delta, 5 minutes, in ms.
pub(crate) const STALE_MS: i64 = 5 * 60 * 1000;

/// How often (samples' clock, ms) the detector looks for stopped series: a look walks every
/// signal and series once, so it is done once a minute rather than every round.
const LOOK_EVERY_MS: i64 = 60 * 1000;

impl Detector {
    /// How long a series may go unseen before it is forgotten, in ms: [`STALE_MS`] or ten
    /// scrape intervals, whichever is longer.
    pub fn stale_after_ms(&self) -> i64 {
        STALE_MS.max(10 * self.interval_ms)
    }

    /// The number of signals held, and of series in the per-series lookup (one entry per
    /// series observed through [`Detector::observe_series`], whether or not a rule reads it).
    pub fn held(&self) -> (usize, usize) {
        (
            self.signals.len(),
            self.series_feeds.values().map(|by_series| by_series.len()).sum(),
        )
    }

    /// Forgets the series that stopped (see the module docs) once [`LOOK_EVERY_MS`] has passed
    /// since the last look; `time_ms` is the round's time.
    pub(super) fn evict_stale(&mut self, time_ms: i64) {
        if self.evicted_ms != i64::MIN && time_ms - self.evicted_ms < LOOK_EVERY_MS {
            return;
        }
        self.evicted_ms = time_ms;
        let stale_ms = self.stale_after_ms();
        let last_seen = &self.last_seen;
        // Stopped: unseen for the staleness period, while its instance answered after its last
        // sample (or it has no scrapes of its own: a pod reported by its node's kubelet).
        let stopped = |instance: &str, seen_ms: i64| {
            time_ms.saturating_sub(seen_ms) > stale_ms
                && last_seen.get(instance).is_none_or(|answered| *answered > seen_ms)
        };
        let mut kept = vec![true; self.signals.len()];
        for (index, entry) in self.signals.iter().enumerate() {
            // An aggregate goes with its last series (below).
            if entry.feeders.is_empty() {
                kept[index] = !stopped(&entry.instance, entry.seen_ms);
            }
        }
        for (index, entry) in self.signals.iter().enumerate() {
            if !entry.feeders.is_empty() {
                kept[index] = entry.feeders.iter().any(|&feeder| kept[feeder]);
            }
        }
        for (instance, by_series) in &mut self.series_feeds {
            by_series.retain(|_, (seen_ms, _)| !stopped(instance, *seen_ms));
        }
        self.series_feeds.retain(|_, by_series| !by_series.is_empty());
        if kept.iter().all(|keep| *keep) {
            return;
        }
        // Old position -> new one.
        let mut moved = vec![None; self.signals.len()];
        let mut next = 0;
        for (index, keep) in kept.iter().enumerate() {
            if *keep {
                moved[index] = Some(next);
                next += 1;
            }
        }
        let mut index = 0;
        self.signals.retain(|_| {
            index += 1;
            kept[index - 1]
        });
        for entry in &mut self.signals {
            entry.into = entry.into.and_then(|into| moved[into]);
            entry.feeders = entry.feeders.iter().filter_map(|&feeder| moved[feeder]).collect();
        }
        // Moves `index` to its new position; false when its signal went.
        let renumber = |index: &mut usize| moved[*index].map(|new| *index = new).is_some();
        self.signal_index.retain(|_, index| renumber(index));
        for by_series in self.series_feeds.values_mut() {
            for (_, feeds) in by_series.values_mut() {
                feeds.retain_mut(|(index, _)| renumber(index));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::*;

    fn series(name: &str, labels: &[(&str, &str)]) -> Arc<Series> {
        let labels = labels
            .iter()
            .map(|(label, value)| (label.to_string(), value.to_string()))
            .collect();
        Arc::new(Series::new(name.to_string(), labels, &Default::default()))
    }

    /// Every 10 s round, a backend reports 100 requests to 50 URIs never seen before (a
    /// request metric labelled with the URI) besides its steady `errs_total` and a gauge no
    /// rule reads; each URI lives one round. After 30 minutes the detector holds only the
    /// URIs of the last staleness period plus a minute (when it last looked), not all
    /// 9,000; the steady signal is still judged (its anomaly is found at round 170 as it
    /// would be without churn, counted by an independent detector fed no churn); and a second
    /// instance that went silent keeps its signal.
    #[test]
    fn series_that_stopped_are_forgotten_and_the_rest_judged_as_before() {
        let rules = crate::rules::parse(concat!(
            "signals:\n",
            "  - {metric: requests_total, kind: counter, class: errors, bad: up, floor: 0.5}\n",
            "  - {metric: errs_total, kind: counter, class: errors, bad: up, floor: 0.5}\n",
        ))
        .unwrap();
        let mut churned = Detector::new(rules.clone(), Vec::new(), 10_000, Settings::default());
        let mut steady = Detector::new(rules, Vec::new(), 10_000, Settings::default());
        let backend = info("b1", "dc-1", "h1", "backend");
        let silent = info("b2", "dc-1", "h2", "backend");
        let mut errors = 0.0;
        let mut anomalies = (Vec::new(), Vec::new());
        for round in 0..180_i64 {
            let time_ms = round * 10_000;
            // From round 170 on b1 fails 40 requests a round.
            errors += if round >= 170 { 400.0 } else { 1.0 };
            let own = vec![
                (series("errs_total", &[("instance", "b1")]), errors),
                (
                    series("unread_gauge", &[("instance", "b1"), ("round", &round.to_string())]),
                    1.0,
                ),
            ];
            let mut samples = own.clone();
            for uri in 0..50 {
                let uri = format!("/item/{round}/{uri}");
                samples.push((series("requests_total", &[("instance", "b1"), ("uri", &uri)]), 100.0));
            }
            churned.observe_series(time_ms, &backend, &samples, true);
            steady.observe_series(time_ms, &backend, &own, true);
            if round < 3 {
                let theirs = [(series("errs_total", &[("instance", "b2")]), 0.0)];
                churned.observe_series(time_ms, &silent, &theirs, true);
            }
            let of = |assessment: Assessment| -> Vec<(String, String)> {
                let mut found: Vec<_> = assessment
                    .anomalies
                    .into_iter()
                    .filter(|anomaly| anomaly.metric == "errs_total")
                    .map(|anomaly| (anomaly.instance, anomaly.onset_ms.to_string()))
                    .collect();
                found.sort();
                found
            };
            anomalies.0.push(of(churned.assess(time_ms)));
            anomalies.1.push(of(steady.assess(time_ms)));
        }
        // The steady signal's judgement is the same beside the churn: b1's errors are found
        // from round 170 on, in the same rounds, with the same onset.
        let b1_rounds = |found: &[Vec<(String, String)>]| {
            found
                .iter()
                .enumerate()
                .filter(|(_, round)| round.iter().any(|(instance, _)| instance == "b1"))
                .map(|(round, found)| (round, found.iter().find(|(instance, _)| instance == "b1").cloned()))
                .collect::<Vec<_>>()
        };
        let (churned_b1, steady_b1) = (b1_rounds(&anomalies.0), b1_rounds(&anomalies.1));
        assert_eq!(churned_b1, steady_b1);
        assert_eq!(churned_b1.first().map(|(round, _)| *round), Some(170));
        // Held: the last look was at round 174 (every 6 rounds from 0); it kept what a sample
        // reached within the 5 minutes (30 rounds) before, rounds 144..=174 of URIs, gauges,
        // plus the steady signal of b1 and b2's (b2 went silent, so its signal is kept).
        // Rounds 175..=179 added theirs since.
        let (signals, by_series) = churned.held();
        let uri_rounds = (174 - 144 + 1) + 5;
        assert_eq!(signals, uri_rounds * 50 + 2);
        // The lookup also holds the unread gauges (one per round) and b1's and b2's errs_total.
        assert_eq!(by_series, uri_rounds * 51 + 2);
        assert!(churned.signal_index.len() == signals);
    }

    /// An aggregate rule's signal loses the series that stopped from its sum, keeps
    /// judging the rest, and goes when its last series goes.
    #[test]
    fn an_aggregate_keeps_its_live_series_and_goes_with_its_last() {
        let rules = crate::rules::parse(
            "signals:\n  - {metric: pool_waiting, kind: gauge, class: saturation, bad: up, floor: 1, aggregate: sum}\n",
        )
        .unwrap();
        let mut detector = Detector::new(rules, Vec::new(), 10_000, Settings::default());
        let backend = info("b1", "dc-1", "h1", "backend");
        let pool = |name: &str| series("pool_waiting", &[("instance", "b1"), ("pool", name)]);
        for round in 0..60_i64 {
            let mut samples = vec![(pool("steady"), 2.0), (series("up", &[("instance", "b1")]), 1.0)];
            if round < 10 {
                samples.push((pool("gone"), 3.0));
            }
            detector.observe_series(round * 10_000, &backend, &samples, true);
            detector.assess(round * 10_000);
        }
        // The aggregate and its one remaining series.
        assert_eq!(detector.held().0, 2);
        let aggregate = detector.signals.iter().find(|entry| !entry.feeders.is_empty()).unwrap();
        assert_eq!(aggregate.feeders.len(), 1);
        assert_eq!(
            detector.signals[aggregate.feeders[0]]
                .labels
                .get("pool")
                .map(String::as_str),
            Some("steady")
        );
        assert_eq!(detector.signals[aggregate.feeders[0]].into, Some(0));
        for round in 60..100_i64 {
            let samples = [(series("up", &[("instance", "b1")]), 1.0)];
            detector.observe_series(round * 10_000, &backend, &samples, true);
            detector.assess(round * 10_000);
        }
        assert_eq!(detector.held().0, 0);
    }
}
