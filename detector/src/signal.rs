//! One signal: a series' value per interval, its robust baseline and its anomalies.
//!
//! The baseline is the median and the median absolute deviation (MAD) of the last `window`
//! values (Hampel's robust scale, 1.4826 × MAD for normal data), with floors against quiet
//! series: the scale is at least 10 % of the median and a fifth of the rule's floor (so on a
//! flat series the floor is exactly the threshold), and a change smaller than the floor never
//! counts. A value `threshold` scales away in the bad direction is
//! anomalous; while a signal is anomalous its values stay out of the baseline (a fault must
//! not become normal) unless it lasts past `adapt_after` intervals (a new level). The onset is
//! back-tracked CUSUM-style: the earliest of the recent values, contiguous with the detection,
//! that already leaned 2 scales the bad way.

use std::collections::VecDeque;

use crate::rules::{Bad, ValueKind};

/// Tuning of the spike detector (defaults in [`Tuning::default`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// Values kept for the baseline. Default 60 intervals.
    pub window: usize,
    /// Values needed before anything is judged. Default 12.
    pub min_history: usize,
    /// Scales away from the median that make an anomaly. Default 5.
    pub threshold: f64,
    /// Scales away that count towards the onset. Default 2.
    pub onset_threshold: f64,
    /// Intervals after which a persistent level joins the baseline. Default 30.
    pub adapt_after: u32,
    /// The scale is at least this share of the median's magnitude, for signals that keep a
    /// relative floor ([`Signal::absolute`] ones do not). Default 0.1.
    pub relative_floor: f64,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            window: 60,
            min_history: 12,
            threshold: 5.0,
            onset_threshold: 2.0,
            adapt_after: 30,
            relative_floor: 0.1,
        }
    }
}

/// A counter that falls by less than this fraction of its previous value is read as a glitch
/// (a scrape answered by a lagging replica, a value briefly read before a flush), not a reset.
/// Prometheus's `rate()` counts every decrease as a reset (a counter that dips from 1,100 to
/// 1,070 then "increased" by 1,070); a real reset falls to near zero. 0 reads every decrease as
/// a reset, as Prometheus does.
pub const COUNTER_GLITCH: f64 = 0.1;

/// The raw reading a signal keeps between intervals.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Raw {
    time_ms: i64,
    value: f64,
    count: f64,
}

/// State of one signal.
#[derive(Debug, Clone)]
pub struct Signal {
    kind: ValueKind,
    bad: Bad,
    floor: f64,
    last: Option<Raw>,
    history: VecDeque<f64>,
    recent: VecDeque<(i64, f64)>,
    /// Intervals in a row the signal has been anomalous.
    pub anomalous_for: u32,
    /// Onset of the current anomaly, ms.
    pub onset_ms: Option<i64>,
    /// The latest score (scales in the bad direction), 0 before the baseline exists.
    pub score: f64,
    since_restart: Option<u32>,
    counter_glitch: f64,
    /// Whether the scale keeps no floor relative to the level ([`Signal::absolute`]).
    absolute: bool,
    /// Whether a lasting anomaly never joins the baseline ([`Signal::never_normal`]).
    never_normal: bool,
}

/// Values whose mean a resource's level shift is judged on ([`Signal::judge`]).
const LEVEL_ROUNDS: usize = 3;

/// Intervals a restart stays anomalous (30 = 5 minutes at a 10 s interval).
const RESTART_MEMORY: u32 = 30;

/// The verdict on one interval's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judgement {
    /// The interval's value (rate, mean, gauge).
    pub value: f64,
    /// Scales away from the baseline in the bad direction.
    pub score: f64,
    /// Whether it is anomalous.
    pub anomalous: bool,
    /// The baseline's median the value was judged against, in the value's unit (the value
    /// itself while there is no baseline yet, or for a restart).
    pub baseline: f64,
}

impl Signal {
    /// A new signal for a rule's kind, bad direction and floor.
    pub fn new(kind: ValueKind, bad: Bad, floor: f64) -> Signal {
        Signal {
            kind,
            bad,
            floor,
            last: None,
            history: VecDeque::new(),
            recent: VecDeque::new(),
            anomalous_for: 0,
            onset_ms: None,
            score: 0.0,
            since_restart: None,
            counter_glitch: COUNTER_GLITCH,
            absolute: false,
            never_normal: false,
        }
    }

    /// The same signal with no scale floor relative to its level, only the rule's floor in
    /// the family's unit: a resource (bytes of memory, cores) whose level says nothing about
    /// how much it may move. Host memory available at 10 GiB moving by 3 GiB is 5 scales of a
    /// quiet host's noise, not the 3 it is against a floor of 10 % of the level.
    pub fn absolute(mut self) -> Signal {
        self.absolute = true;
        self
    }

    /// The same signal whose anomalous values never join its baseline, however long they last
    /// (no `adapt_after`): an availability lost (a dead node's `redis_up` 0, a target's `up`
    /// 0) is not a new level; it stays lost until the node answers again (issue 38: a dead
    /// node's verdict resolved about 40 intervals after the kill).
    pub fn never_normal(mut self) -> Signal {
        self.never_normal = true;
        self
    }

    /// The same signal with `fraction` as its glitch threshold ([`COUNTER_GLITCH`], the
    /// default): a counter (or a mean's `_count`) falling by less than `fraction` of its
    /// previous value is skipped, not taken as a reset. Clamped to 0 ..= 0.99.
    pub fn with_counter_glitch(mut self, fraction: f64) -> Signal {
        self.counter_glitch = if fraction.is_finite() {
            fraction.clamp(0.0, 0.99)
        } else {
            COUNTER_GLITCH
        };
        self
    }

    /// Whether `value` after `previous` is a counter's small dip ([`COUNTER_GLITCH`]).
    fn glitch(&self, previous: f64, value: f64) -> bool {
        value < previous && previous > 0.0 && value >= previous * (1.0 - self.counter_glitch)
    }

    /// Turns a reading (`value`, plus `count` for a mean) at `time_ms` into the interval's
    /// value: `None` for the first reading of a counter, a mean or a restart (a gauge's first
    /// reading is its value), an interval without observations (a mean whose
    /// count did not move) or a non-advancing clock. A counter (or a mean's count) that dips
    /// by less than the glitch fraction ([`Signal::with_counter_glitch`]) gives `None` too,
    /// and the reading is dropped: the next one is measured from the reading before the dip.
    /// A larger decrease is a reset (the new value counted from zero, as Prometheus does).
    pub fn interval_value(&mut self, time_ms: i64, value: f64, count: f64) -> Option<f64> {
        let current = Raw { time_ms, value, count };
        let Some(previous) = self.last.replace(current) else {
            // A gauge's reading is its value: the first one needs nothing before it.
            return (self.kind == ValueKind::Gauge).then_some(value);
        };
        let seconds = (time_ms - previous.time_ms) as f64 / 1000.0;
        if seconds <= 0.0 {
            return None;
        }
        let dipped = match self.kind {
            ValueKind::Counter => self.glitch(previous.value, value),
            ValueKind::Mean => self.glitch(previous.count, count),
            ValueKind::Gauge | ValueKind::Restart => false,
        };
        if dipped {
            self.last = Some(previous);
            return None;
        }
        match self.kind {
            ValueKind::Gauge => Some(value),
            ValueKind::Counter => {
                let increase = if value >= previous.value {
                    value - previous.value
                } else {
                    value
                };
                Some(increase / seconds)
            }
            ValueKind::Mean => {
                let (sum, observations) = if count >= previous.count {
                    (value - previous.value, count - previous.count)
                } else {
                    (value, count)
                };
                (observations > 0.0).then(|| sum / observations)
            }
            ValueKind::Restart => Some(if value != previous.value { 1.0 } else { 0.0 }),
        }
    }

    /// Judges an interval's value against the baseline and updates it.
    pub fn judge(&mut self, time_ms: i64, value: f64, tuning: &Tuning) -> Judgement {
        if self.kind == ValueKind::Restart {
            // A restart stays news for `RESTART_MEMORY` intervals: what follows it (a cold
            // JVM's latency) is judged with it in view.
            if value >= 1.0 {
                self.since_restart = Some(0);
            } else if let Some(since) = self.since_restart.as_mut() {
                *since += 1;
            }
            let anomalous = self.since_restart.is_some_and(|since| since < RESTART_MEMORY);
            if !anomalous {
                self.since_restart = None;
            }
            let onset = if value >= 1.0 {
                time_ms
            } else {
                self.onset_ms.unwrap_or(time_ms)
            };
            self.note(time_ms, anomalous, if anomalous { 10.0 } else { 0.0 }, onset);
            return Judgement {
                value,
                score: self.score,
                anomalous,
                baseline: 0.0,
            };
        }
        if self.history.len() < tuning.min_history {
            self.push(value, tuning);
            self.recent_push(time_ms, value);
            return Judgement {
                value,
                score: 0.0,
                anomalous: false,
                baseline: value,
            };
        }
        let relative_floor = if self.absolute { 0.0 } else { tuning.relative_floor };
        let (median, scale) = self.baseline(relative_floor);
        let direction = if self.bad == Bad::Up { 1.0 } else { -1.0 };
        let deviation = (value - median) * direction;
        let mut score = deviation / scale;
        let mut anomalous = score >= tuning.threshold && deviation >= self.floor;
        let mut onset = time_ms;
        // A resource's level shift: the last LEVEL_ROUNDS values all on the bad side, their mean
        // judged against the scale of a mean of that many (scale / √n, for values that vary
        // independently round to round). A busy pod's CPU moves about by half a core from
        // minute to minute; a stress that adds one core for five minutes is no single
        // outlier but plainly a new level (Sock Shop's front-end).
        if !anomalous && self.absolute && self.recent.len() + 1 >= LEVEL_ROUNDS {
            let last: Vec<(i64, f64)> = self
                .recent
                .iter()
                .rev()
                .take(LEVEL_ROUNDS - 1)
                .copied()
                .chain(std::iter::once((time_ms, value)))
                .collect();
            let leaning = last.iter().all(|(_, earlier)| (earlier - median) * direction > 0.0);
            let mean_deviation = last
                .iter()
                .map(|(_, earlier)| (earlier - median) * direction)
                .sum::<f64>()
                / LEVEL_ROUNDS as f64;
            let level = mean_deviation / (scale / (LEVEL_ROUNDS as f64).sqrt());
            if leaning && level >= tuning.threshold && mean_deviation >= self.floor {
                anomalous = true;
                score = level;
                onset = last.iter().map(|(at, _)| *at).min().unwrap_or(time_ms);
            }
        }
        if anomalous && self.anomalous_for == 0 {
            for &(earlier, earlier_value) in self.recent.iter().rev() {
                if earlier >= onset {
                    continue;
                }
                if (earlier_value - median) * direction / scale >= tuning.onset_threshold {
                    onset = earlier;
                } else {
                    break;
                }
            }
        }
        self.note(time_ms, anomalous, score, onset);
        if !anomalous || (self.anomalous_for > tuning.adapt_after && !self.never_normal) {
            self.push(value, tuning);
        }
        self.recent_push(time_ms, value);
        Judgement {
            value,
            score,
            anomalous,
            baseline: median,
        }
    }

    fn note(&mut self, time_ms: i64, anomalous: bool, score: f64, onset: i64) {
        self.score = score;
        if anomalous {
            if self.anomalous_for == 0 {
                self.onset_ms = Some(onset.min(time_ms));
            }
            self.anomalous_for += 1;
        } else {
            self.anomalous_for = 0;
            self.onset_ms = None;
        }
    }

    fn push(&mut self, value: f64, tuning: &Tuning) {
        self.history.push_back(value);
        while self.history.len() > tuning.window {
            self.history.pop_front();
        }
    }

    fn recent_push(&mut self, time_ms: i64, value: f64) {
        self.recent.push_back((time_ms, value));
        while self.recent.len() > 6 {
            self.recent.pop_front();
        }
    }

    /// Median and robust scale of the history (see the module docs for the floors).
    ///
    /// Runs for every signal every round, so it allocates nothing for windows up to
    /// [`STACK_WINDOW`] values: the values are copied to the stack, the median is selected in
    /// place, the same buffer then holds the absolute deviations, and their median is the MAD.
    fn baseline(&self, relative_floor: f64) -> (f64, f64) {
        let mut stack = [0.0f64; STACK_WINDOW];
        let mut heap = Vec::new();
        let values: &mut [f64] = if self.history.len() <= STACK_WINDOW {
            let values = &mut stack[..self.history.len()];
            for (slot, value) in values.iter_mut().zip(&self.history) {
                *slot = *value;
            }
            values
        } else {
            heap.extend(self.history.iter().copied());
            &mut heap
        };
        let median = median_in_place(values);
        let mut absolute_sum = 0.0;
        for value in values.iter_mut() {
            *value = (*value - median).abs();
            absolute_sum += *value;
        }
        let mean_absolute = if values.is_empty() {
            0.0
        } else {
            absolute_sum / values.len() as f64
        };
        let mad = median_in_place(values);
        // The MAD is 0 on a series with two levels where one holds the majority (a counter's
        // rate flipping between two values with the scrape's timing): the mean absolute
        // deviation (× 1.2533, the normal-data factor) still sees the other level.
        let scale = (1.4826 * mad)
            .max(1.2533 * mean_absolute)
            .max(relative_floor * median.abs())
            .max(self.floor / 5.0);
        (median, scale)
    }
}

/// Windows up to this many values are judged without allocating (the default is 60).
const STACK_WINDOW: usize = 128;

/// The median of `values` (the mean of the two middle values for an even count; 0 for none),
/// by selection in O(n) with `f64::total_cmp` order; `values` is reordered. The same figure as
/// statrs's `Median` for finite values (checked in the tests), without its copies.
pub fn median_in_place(values: &mut [f64]) -> f64 {
    let count = values.len();
    if count == 0 {
        return 0.0;
    }
    let (lower, middle, _) = values.select_nth_unstable_by(count / 2, f64::total_cmp);
    let middle = *middle;
    if count % 2 == 1 {
        middle
    } else {
        let below = lower.iter().copied().max_by(f64::total_cmp).unwrap_or(middle);
        (below + middle) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauge() -> Signal {
        Signal::new(ValueKind::Gauge, Bad::Up, 1.0)
    }

    #[test]
    fn counters_become_rates_and_resets_count_from_zero() {
        let mut signal = Signal::new(ValueKind::Counter, Bad::Up, 1.0);
        assert_eq!(signal.interval_value(0, 100.0, 0.0), None);
        assert_eq!(signal.interval_value(10_000, 150.0, 0.0), Some(5.0));
        // Reset: 150 -> 20 means 20 since the restart.
        assert_eq!(signal.interval_value(20_000, 20.0, 0.0), Some(2.0));
    }

    /// The regression for issue 17's glitch: a counter at 1,100 that reads 1,070 once is not
    /// reset (read as a reset, that interval "increased" by 1,070: 107 per second against a
    /// rate of 10). The dip is skipped and the next reading is measured from 1,100.
    #[test]
    fn a_small_counter_dip_is_a_glitch_not_a_reset() {
        let mut signal = Signal::new(ValueKind::Counter, Bad::Up, 1.0);
        assert_eq!(signal.interval_value(0, 1_000.0, 0.0), None);
        assert_eq!(signal.interval_value(10_000, 1_100.0, 0.0), Some(10.0));
        assert_eq!(signal.interval_value(20_000, 1_070.0, 0.0), None);
        // 1,100 -> 1,300 over the 20 s since the last good reading.
        assert_eq!(signal.interval_value(30_000, 1_300.0, 0.0), Some(10.0));
        // A fall of more than 10 % is still a reset.
        assert_eq!(signal.interval_value(40_000, 1_100.0, 0.0), Some(110.0));
        // With the fraction at 0, every decrease is a reset, as in Prometheus.
        let mut prometheus = Signal::new(ValueKind::Counter, Bad::Up, 1.0).with_counter_glitch(0.0);
        prometheus.interval_value(0, 1_100.0, 0.0);
        assert_eq!(prometheus.interval_value(10_000, 1_070.0, 0.0), Some(107.0));
        // A mean whose count dips a little skips the interval the same way.
        let mut mean = Signal::new(ValueKind::Mean, Bad::Up, 0.01);
        mean.interval_value(0, 10.0, 100.0);
        assert_eq!(mean.interval_value(10_000, 9.9, 99.0), None);
        assert_eq!(mean.interval_value(20_000, 13.0, 120.0), Some(0.15));
    }

    /// A gauge's first reading is a value (a counter's or a mean's needs the one before it):
    /// with one step of history before an issue (PetShop's temporal settings), that step is
    /// the baseline the first step is judged against. (On fd4df67 it only started the
    /// signal.)
    #[test]
    fn a_gauge_s_first_reading_is_its_value() {
        let mut signal = gauge();
        assert_eq!(signal.interval_value(0, 0.25, 0.0), Some(0.25));
        assert_eq!(signal.interval_value(10_000, 0.5, 0.0), Some(0.5));
        // The clock must still advance.
        assert_eq!(signal.interval_value(10_000, 0.75, 0.0), None);
        let mut restart = Signal::new(ValueKind::Restart, Bad::Up, 1.0);
        assert_eq!(restart.interval_value(0, 1_700_000_000.0, 0.0), None);
    }

    #[test]
    fn means_divide_sum_by_count_increases() {
        let mut signal = Signal::new(ValueKind::Mean, Bad::Up, 0.01);
        assert_eq!(signal.interval_value(0, 10.0, 100.0), None);
        assert_eq!(signal.interval_value(10_000, 13.0, 120.0), Some(0.15));
        assert_eq!(signal.interval_value(20_000, 13.0, 120.0), None);
    }

    #[test]
    fn a_step_is_anomalous_with_its_onset_back_tracked_and_noise_is_not() {
        let tuning = Tuning::default();
        let mut signal = gauge();
        let noise = [10.0, 11.0, 9.0, 10.5, 9.5, 10.0, 10.2, 9.8, 10.1, 9.9, 10.3, 9.7, 10.0];
        for (step, value) in noise.iter().enumerate() {
            assert!(!signal.judge(step as i64 * 10_000, *value, &tuning).anomalous);
        }
        // A lean (14: a few scales up) then the jump (40): onset at the lean.
        assert!(!signal.judge(130_000, 14.0, &tuning).anomalous);
        let jump = signal.judge(140_000, 40.0, &tuning);
        assert!(jump.anomalous, "{jump:?}");
        assert_eq!(signal.onset_ms, Some(130_000));
        // The fault does not become the baseline.
        assert!(signal.judge(150_000, 40.0, &tuning).anomalous);
        assert_eq!(signal.anomalous_for, 2);
        assert!(!signal.judge(160_000, 10.0, &tuning).anomalous);
        assert_eq!(signal.onset_ms, None);
    }

    #[test]
    fn changes_below_the_floor_never_count() {
        let tuning = Tuning::default();
        let mut signal = Signal::new(ValueKind::Gauge, Bad::Up, 5.0);
        for step in 0..20 {
            signal.judge(step * 10_000, 0.0, &tuning);
        }
        // 0 -> 3: infinitely many MADs, but under the floor of 5.
        assert!(!signal.judge(200_000, 3.0, &tuning).anomalous);
        assert!(signal.judge(210_000, 6.0, &tuning).anomalous);
    }

    /// The selection median agrees with statrs's on odd and even counts, ties and spreads.
    #[test]
    fn the_median_is_statrs_median() {
        use statrs::statistics::{Data, Median};
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for count in 1..=130 {
            let values: Vec<f64> = (0..count)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    // Coarse values so that ties happen.
                    ((state % 41) as f64 - 20.0) * 0.25
                })
                .collect();
            let expected = Data::new(values.clone()).median();
            let mut scratch = values.clone();
            assert_eq!(median_in_place(&mut scratch), expected, "{values:?}");
        }
        assert_eq!(median_in_place(&mut []), 0.0);
    }

    /// Baselines over windows longer than the stack buffer take the heap path and agree.
    #[test]
    fn a_long_window_gives_the_same_baseline() {
        let mut short = gauge();
        let mut long = gauge();
        let tuning = Tuning {
            window: 300,
            ..Tuning::default()
        };
        for step in 0..300 {
            let value = 10.0 + f64::from(step % 7) * 0.5;
            long.push(value, &tuning);
            if step >= 300 - 60 {
                short.push(value, &Tuning::default());
            }
        }
        assert!(long.history.len() > STACK_WINDOW);
        let mut all: Vec<f64> = long.history.iter().copied().collect();
        all.sort_by(f64::total_cmp);
        let median = (all[149] + all[150]) / 2.0;
        assert_eq!(long.baseline(0.1).0, median);
        // The last 60 of the same cycle: 10.0 ..= 13.0 in steps of 0.5, median 11.5.
        assert_eq!(short.baseline(0.1).0, 11.5);
    }

    /// Issue 38: a dead node's `redis_up` (1 for 60 intervals, then 0) joins the baseline
    /// after `adapt_after` and stops being anomalous 40 intervals after the kill (its verdict
    /// then resolved while the node was still dead); marked never normal, as availability is,
    /// it stays anomalous until the node answers again.
    #[test]
    fn a_lost_availability_never_becomes_normal() {
        let tuning = Tuning::default();
        let anomalous_rounds = |mut signal: Signal| {
            for round in 0..60 {
                signal.judge(round * 1_000, 1.0, &tuning);
            }
            (1..=200)
                .take_while(|round| signal.judge((59 + round) * 1_000, 0.0, &tuning).anomalous)
                .count()
        };
        assert_eq!(anomalous_rounds(Signal::new(ValueKind::Gauge, Bad::Down, 0.5)), 40);
        assert_eq!(
            anomalous_rounds(Signal::new(ValueKind::Gauge, Bad::Down, 0.5).never_normal()),
            200
        );
        // Back to 1: not anomalous at once.
        let mut signal = Signal::new(ValueKind::Gauge, Bad::Down, 0.5).never_normal();
        for round in 0..60 {
            signal.judge(round * 1_000, 1.0, &tuning);
        }
        for round in 60..300 {
            signal.judge(round * 1_000, 0.0, &tuning);
        }
        assert!(!signal.judge(300_000, 1.0, &tuning).anomalous);
    }
}
