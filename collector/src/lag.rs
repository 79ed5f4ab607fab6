//! How late epicenter's own runtime wakes up: its scheduling lag, measured, so that a scrape
//! that timed out because epicenter itself was starved of CPU is told from a target that did
//! not answer (issue 17: a scrape late or missed because epicenter is starved never becomes an
//! availability anomaly).
//!
//! A probe task sleeps [`PROBE`] again and again on the runtime that scrapes and records how
//! far past its deadline each wake-up came, as the largest lag per 100 ms bucket over the last
//! minute (a ring of atomics: the probe writes, any scrape reads, no lock). The idea is the
//! one behind Node.js's event-loop delay histogram and tokio-metrics' poll-time figures: a
//! timer that fires late means every task on that runtime ran late by as much.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// How often the probe wakes.
pub const PROBE: Duration = Duration::from_millis(10);
/// Width of a bucket of the ring, ms.
const BUCKET_MS: u64 = 100;
/// Buckets kept: one minute.
const BUCKETS: usize = 600;
/// Bits of a slot holding the lag (ms); the rest hold the bucket's number.
const LAG_BITS: u32 = 24;

/// Each slot: (bucket number << LAG_BITS) | largest lag in that bucket, ms.
static RING: [AtomicU64; BUCKETS] = [const { AtomicU64::new(0) }; BUCKETS];
/// The instant the ring's clock counts from, and whether the probe runs.
static BASE: OnceLock<Instant> = OnceLock::new();
/// When the probe is next due to wake (ms on the ring's clock); `u64::MAX` before it runs.
/// A probe overdue now is lag not yet recorded (the task that asks may be polled first).
static DUE_MS: AtomicU64 = AtomicU64::new(u64::MAX);

fn base() -> Instant {
    *BASE.get_or_init(Instant::now)
}

fn millis(at: Instant) -> u64 {
    at.saturating_duration_since(base()).as_millis() as u64
}

/// Records that the runtime woke `lag` late at `at`.
pub fn record(at: Instant, lag: Duration) {
    let bucket = millis(at) / BUCKET_MS;
    let lag_ms = (lag.as_millis() as u64).min((1 << LAG_BITS) - 1);
    let slot = &RING[(bucket % BUCKETS as u64) as usize];
    let mut current = slot.load(Ordering::Relaxed);
    loop {
        let same_bucket = current >> LAG_BITS == bucket;
        if same_bucket && current & ((1 << LAG_BITS) - 1) >= lag_ms {
            return;
        }
        let next = (bucket << LAG_BITS) | lag_ms;
        match slot.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => current = actual,
        }
    }
}

/// The largest lag recorded between `from` and `to` (at most the last minute; zero when the
/// probe never ran then).
pub fn max_between(from: Instant, to: Instant) -> Duration {
    let first = millis(from) / BUCKET_MS;
    let last = millis(to) / BUCKET_MS;
    let first = first.max(last.saturating_sub(BUCKETS as u64 - 1));
    let mut largest = 0;
    for bucket in first..=last {
        let slot = RING[(bucket % BUCKETS as u64) as usize].load(Ordering::Relaxed);
        if slot >> LAG_BITS == bucket {
            largest = largest.max(slot & ((1 << LAG_BITS) - 1));
        }
    }
    Duration::from_millis(largest)
}

/// Whether a probe task is alive.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Marks the probe gone when its task is dropped (its runtime shut down), so that the next
/// [`start_probe`] starts another and a dead probe is never read as an overdue one.
struct ProbeAlive;

impl Drop for ProbeAlive {
    fn drop(&mut self) {
        DUE_MS.store(u64::MAX, Ordering::Relaxed);
        RUNNING.store(false, Ordering::Relaxed);
    }
}

/// Starts the probe on the current tokio runtime unless one is alive (one per process; a
/// runtime that shuts down takes its probe with it, and the next call starts another). Must
/// be called from within a runtime.
pub fn start_probe() {
    if RUNNING.swap(true, Ordering::Relaxed) {
        return;
    }
    base();
    tokio::spawn(async {
        let _alive = ProbeAlive;
        let mut deadline = Instant::now() + PROBE;
        loop {
            DUE_MS.store(millis(deadline), Ordering::Relaxed);
            tokio::time::sleep_until(deadline).await;
            let woke = Instant::now();
            record(woke, woke.saturating_duration_since(deadline));
            deadline = woke + PROBE;
        }
    });
}

/// Whether a scrape that ran from `started` to `ended` with `timeout` and timed out was
/// epicenter's own fault: the runtime woke at least a quarter of the timeout late (and at
/// least 25 ms) meanwhile, or the probe is that overdue at `ended` (when the runtime polls the
/// timed-out scrape before the probe after a stall). Returns that lag.
pub fn starved_during(started: Instant, ended: Instant, timeout: Duration) -> Option<Duration> {
    let due = DUE_MS.load(Ordering::Relaxed);
    let overdue = Duration::from_millis(millis(ended).saturating_sub(due));
    let lag = max_between(started, ended).max(overdue);
    let threshold = (timeout / 4).max(Duration::from_millis(25));
    (lag >= threshold).then_some(lag)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring keeps the largest lag per bucket and answers for a window; old buckets do not
    /// leak into a later window, and a quarter of the timeout (at least 25 ms) is starved.
    #[test]
    fn the_largest_lag_in_a_window_is_found_and_a_quarter_of_the_timeout_is_starved() {
        let start = base() + Duration::from_secs(3600);
        record(start, Duration::from_millis(5));
        record(start + Duration::from_millis(20), Duration::from_millis(40));
        record(start + Duration::from_millis(30), Duration::from_millis(10));
        record(start + Duration::from_millis(450), Duration::from_millis(70));
        assert_eq!(
            max_between(start, start + Duration::from_millis(99)),
            Duration::from_millis(40)
        );
        assert_eq!(
            max_between(start, start + Duration::from_millis(500)),
            Duration::from_millis(70)
        );
        assert_eq!(
            max_between(start + Duration::from_millis(100), start + Duration::from_millis(399)),
            Duration::ZERO
        );
        // A minute on, the same slots hold other buckets: the old lags are not read.
        let later = start + Duration::from_secs(60);
        assert_eq!(max_between(later, later + Duration::from_millis(500)), Duration::ZERO);
        // Timeout 200 ms: 50 ms of lag is starved, 40 is not; 80 ms timeout: 25 ms floor.
        let window = (start, start + Duration::from_millis(500));
        assert_eq!(
            starved_during(window.0, window.1, Duration::from_millis(200)),
            Some(Duration::from_millis(70))
        );
        assert_eq!(
            starved_during(start, start + Duration::from_millis(99), Duration::from_millis(200)),
            None
        );
        assert_eq!(
            starved_during(start, start + Duration::from_millis(99), Duration::from_millis(80)),
            Some(Duration::from_millis(40))
        );
    }
}
