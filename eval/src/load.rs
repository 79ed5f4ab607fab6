//! Load beside a run: busy threads that compete with it for the machine's cores, as a noisy
//! neighbour or a compile job would (`epicenter eval --load N`, and the quiet test's four CPU
//! hogs). Issue 17: "0 false verdicts … while 4 CPU hogs run beside it".

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `count` threads that each spin on an add until the value is dropped (then they are
/// stopped and joined). Each keeps one core busy in user time; the kernel shares the cores
/// between them and everything else as it would with any CPU-bound neighbour.
pub struct BusyThreads {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyThreads {
    /// Starts `count` busy threads (none for 0). Errors: the system refused a thread (the
    /// ones already started are stopped before returning).
    pub fn start(count: usize) -> std::io::Result<BusyThreads> {
        let mut busy = BusyThreads {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::with_capacity(count),
        };
        for index in 0..count {
            let stop = Arc::clone(&busy.stop);
            let thread = std::thread::Builder::new()
                .name(format!("busy-{index}"))
                .spawn(move || {
                    let mut spins = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        spins = std::hint::black_box(spins.wrapping_add(1));
                    }
                })?;
            busy.threads.push(thread);
        }
        Ok(busy)
    }

    /// How many threads are busy.
    pub fn count(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for BusyThreads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]
    use super::*;

    /// The threads run while the value lives (they burn CPU time that the process's own
    /// clock sees) and are gone after it is dropped.
    #[test]
    fn busy_threads_burn_cpu_until_dropped() {
        let cpu = || {
            let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
            // utime is field 14 (after the command name in parentheses), in clock ticks.
            let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            rest.split_whitespace()
                .nth(11)
                .and_then(|ticks| ticks.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let before = cpu();
        let busy = BusyThreads::start(2).unwrap();
        assert_eq!(busy.count(), 2);
        let started = std::time::Instant::now();
        while cpu() < before + 5 && started.elapsed() < std::time::Duration::from_secs(30) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(cpu() >= before + 5, "no CPU time burnt in 30 s");
        drop(busy);
        assert_eq!(BusyThreads::start(0).unwrap().count(), 0);
    }
}
