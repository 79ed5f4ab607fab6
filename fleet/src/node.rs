//! A host's own exporter in the simulated fleet (node_exporter, with the fleet's
//! `node_exporter`): what the host's kernel counts, one simulated second per
//! [`Node::step`], and the families node_exporter prints for it ([`Node::render`]).
//!
//! Physics, per second, from what the host's trouble is (the fleet's faults):
//! - CPU time by mode on [`CPUS`] CPUs: user follows the daily traffic shape, and steal is the
//!   share of time a noisy neighbour takes. A host whose operations take `extra` seconds longer
//!   than an operation's own work `w` (the backend's 12 ms) is stolen `extra / (extra + w)` of
//!   its time (the work is stretched by `1 / (1 − steal)`).
//! - Pressure stall information (Linux PSI, `/proc/pressure/*`, "some" lines as node_exporter's
//!   `pressure` collector exports them, seconds of stall per second): CPU stall grows with
//!   steal; memory stall is the share of time reclaim stretches the work, by the same
//!   arithmetic; I/O stall follows memory stall (swap and page-cache thrash) at half its size.
//! - Memory: `MemAvailable` holds near 45 % of [`MEMORY_BYTES`]; under memory pressure it falls
//!   towards 2 % with a 20 s time constant, and the OOM killer fires about once a minute
//!   while it is under 5 % (`/proc/vmstat` `oom_kill`).
//! - A stalled disk (the fleet's `slow_database` on the host) is busy 95 % of the time, with
//!   iowait at 30 % of each CPU and I/O pressure stall at 60 %.
//! - Network and disk: bytes and TCP retransmitted segments follow traffic; no interface
//!   errors or drops on a healthy host. A host losing packets counts the lost share of about
//!   8,000 packets a second as receive errors and as retransmitted segments.
//!
//! Noise comes from the node's own ChaCha8 generator seeded from the scenario's seed, so a
//! fleet with node_exporter serves every other instance exactly the samples it would serve
//! without.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// CPUs per simulated host.
pub const CPUS: usize = 4;
/// Memory per simulated host, bytes (32 GiB).
pub const MEMORY_BYTES: f64 = 34_359_738_368.0;
/// An operation's own work on an unstarved host, seconds: the backend's per-request work.
const WORK_SECONDS: f64 = 0.012;
/// CPU modes as node_exporter's `cpu` collector labels them, in the order [`Node::cpu`] keeps.
const MODES: [&str; 8] = ["idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"];

/// What troubles one host this second: extra seconds per operation from CPU steal and from
/// memory pressure (0 when none).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostTrouble {
    /// Extra seconds per operation from a noisy neighbour's steal.
    pub steal_seconds: f64,
    /// Extra seconds per operation from reclaim and swap; any value above 0 is memory pressure.
    pub memory_seconds: f64,
    /// Fraction of the packets its interface loses.
    pub packet_loss: f64,
    /// Whether its disk stalls (a slow database on it: `slow_database` is a stalled disk).
    pub disk_stalled: bool,
}

/// One host's kernel counters.
#[derive(Debug, Clone)]
pub struct Node {
    hostname: String,
    /// Seconds per CPU per mode ([`MODES`] order).
    cpu: [[f64; 8]; CPUS],
    psi_cpu: f64,
    psi_memory: f64,
    psi_io: f64,
    mem_available: f64,
    oom_kills: f64,
    oom_due: f64,
    load1: f64,
    disk_io: f64,
    rx_bytes: f64,
    tx_bytes: f64,
    rx_errors: f64,
    retransmits: f64,
    rng: ChaCha8Rng,
}

impl Node {
    /// A healthy host named `hostname`; `seed` is the scenario's seed, `index` tells hosts
    /// apart (their noise is independent).
    pub fn new(hostname: &str, seed: u64, index: usize) -> Node {
        let stream = seed ^ 0x6e6f_6465_5f65_7870 ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Node {
            hostname: hostname.to_string(),
            cpu: [[0.0; 8]; CPUS],
            psi_cpu: 0.0,
            psi_memory: 0.0,
            psi_io: 0.0,
            mem_available: MEMORY_BYTES * 0.45,
            oom_kills: 0.0,
            oom_due: 0.0,
            load1: 1.0,
            disk_io: 0.0,
            rx_bytes: 0.0,
            tx_bytes: 0.0,
            rx_errors: 0.0,
            retransmits: 0.0,
            rng: ChaCha8Rng::seed_from_u64(stream),
        }
    }

    fn normal(&mut self) -> f64 {
        let u1: f64 = self.rng.random::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = self.rng.random::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// One simulated second: `daily` is the fleet's traffic factor (about 0.7–1.3), `trouble`
    /// what starves the host now.
    pub fn step(&mut self, daily: f64, trouble: HostTrouble) {
        let steal = stretch_share(trouble.steal_seconds);
        let reclaim = stretch_share(trouble.memory_seconds);
        let pressed = trouble.memory_seconds > 0.0;
        for cpu in 0..CPUS {
            let noise = 1.0 + 0.05 * self.normal();
            let user = (0.22 * daily * noise).clamp(0.0, 0.9) * (1.0 - steal);
            let system = 0.05 * daily * (1.0 - steal);
            let iowait = 0.008 + 0.2 * reclaim + if trouble.disk_stalled { 0.3 } else { 0.0 };
            let small = [0.004, 0.0, 0.002];
            let stolen = 0.002 + steal;
            let busy = user + system + iowait + stolen + small.iter().sum::<f64>();
            let idle = (1.0 - busy).max(0.0);
            for (slot, value) in [idle, iowait, small[0], small[1], small[2], stolen, system, user]
                .into_iter()
                .enumerate()
            {
                self.cpu[cpu][slot] += value;
            }
        }
        let noise = 1.0 + 0.1 * self.normal();
        self.psi_cpu += (0.01 * daily * noise).max(0.0) + 1.2 * steal;
        self.psi_memory += 0.0005 + reclaim;
        let stalled = if trouble.disk_stalled { 1.0 } else { 0.0 };
        self.psi_io += 0.004 + 0.5 * reclaim + 0.6 * stalled;
        self.disk_io += (0.03 + 0.6 * reclaim).max(0.95 * stalled);
        let wanted = if pressed {
            MEMORY_BYTES * 0.02
        } else {
            MEMORY_BYTES * 0.45
        };
        let drift = 20_000_000.0 * self.normal();
        self.mem_available += (wanted - self.mem_available) / 20.0 + drift;
        self.mem_available = self.mem_available.clamp(0.0, MEMORY_BYTES);
        if self.mem_available < MEMORY_BYTES * 0.05 {
            self.oom_due += 1.0 / 60.0;
            if self.oom_due >= 1.0 {
                self.oom_due -= 1.0;
                self.oom_kills += 1.0;
            }
        } else {
            self.oom_due = 0.0;
        }
        let runnable = CPUS as f64 * (0.3 * daily + 1.5 * steal + reclaim);
        self.load1 += (runnable - self.load1) * (1.0 - (-1.0f64 / 60.0).exp());
        let traffic = daily * (1.0 + 0.05 * self.normal());
        self.rx_bytes += (6_000_000.0 * traffic).max(0.0);
        self.tx_bytes += (9_000_000.0 * traffic).max(0.0);
        // About 8,000 packets a second each way: the lost ones are frames with errors on the
        // way in, and segments TCP sends again on the way out.
        let lost = 8_000.0 * traffic.max(0.0) * trouble.packet_loss;
        self.rx_errors += lost;
        self.retransmits += (3.0 * traffic * (1.0 + 0.1 * self.normal())).max(0.0) + lost;
    }

    /// node_exporter's families for this host now (text format 0.0.4 lines, each sample
    /// stamped `timestamp_ms`), names and labels as node_exporter 1.x prints them (its `cpu`,
    /// `pressure`, `meminfo`, `vmstat`, `diskstats`, `filesystem`, `netdev`, `netstat`,
    /// `loadavg` and `uname` collectors; ../shared/fixtures/exposition/node_exporter).
    pub fn render(&self, timestamp_ms: i64) -> String {
        use std::fmt::Write;
        let mut text = String::with_capacity(8 * 1024);
        let family = |text: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        let sample = |text: &mut String, name: &str, labels: &str, value: f64| {
            let _ = writeln!(text, "{name}{labels} {value} {timestamp_ms}");
        };
        family(
            &mut text,
            "node_cpu_seconds_total",
            "counter",
            "Seconds the CPUs spent in each mode.",
        );
        for (cpu, modes) in self.cpu.iter().enumerate() {
            for (mode, seconds) in MODES.iter().zip(modes) {
                let labels = format!("{{cpu=\"{cpu}\",mode=\"{mode}\"}}");
                sample(&mut text, "node_cpu_seconds_total", &labels, round_ms(*seconds));
            }
        }
        for (name, value, help) in [
            (
                "node_pressure_cpu_waiting_seconds_total",
                self.psi_cpu,
                "Total time in seconds that processes have waited for CPU time",
            ),
            (
                "node_pressure_memory_waiting_seconds_total",
                self.psi_memory,
                "Total time in seconds that processes have waited for memory",
            ),
            (
                "node_pressure_io_waiting_seconds_total",
                self.psi_io,
                "Total time in seconds that processes have waited due to IO congestion",
            ),
        ] {
            family(&mut text, name, "counter", help);
            sample(&mut text, name, "", round_ms(value));
        }
        family(
            &mut text,
            "node_memory_MemTotal_bytes",
            "gauge",
            "Memory information field MemTotal_bytes.",
        );
        sample(&mut text, "node_memory_MemTotal_bytes", "", MEMORY_BYTES);
        family(
            &mut text,
            "node_memory_MemAvailable_bytes",
            "gauge",
            "Memory information field MemAvailable_bytes.",
        );
        sample(
            &mut text,
            "node_memory_MemAvailable_bytes",
            "",
            (self.mem_available / 4096.0).round() * 4096.0,
        );
        family(
            &mut text,
            "node_vmstat_oom_kill",
            "untyped",
            "/proc/vmstat information field oom_kill.",
        );
        sample(&mut text, "node_vmstat_oom_kill", "", self.oom_kills);
        family(&mut text, "node_load1", "gauge", "1m load average.");
        sample(&mut text, "node_load1", "", (self.load1 * 100.0).round() / 100.0);
        family(
            &mut text,
            "node_disk_io_time_seconds_total",
            "counter",
            "Total seconds spent doing I/Os.",
        );
        sample(
            &mut text,
            "node_disk_io_time_seconds_total",
            "{device=\"nvme0n1\"}",
            round_ms(self.disk_io),
        );
        family(
            &mut text,
            "node_filesystem_avail_bytes",
            "gauge",
            "Filesystem space available to non-root users in bytes.",
        );
        sample(
            &mut text,
            "node_filesystem_avail_bytes",
            "{device=\"/dev/nvme0n1p1\",fstype=\"ext4\",mountpoint=\"/\"}",
            42_949_672_960.0,
        );
        let eth0 = "{device=\"eth0\"}";
        for (name, value, help) in [
            (
                "node_network_receive_bytes_total",
                self.rx_bytes.floor(),
                "Network device statistic receive_bytes.",
            ),
            (
                "node_network_transmit_bytes_total",
                self.tx_bytes.floor(),
                "Network device statistic transmit_bytes.",
            ),
            (
                "node_network_receive_errs_total",
                self.rx_errors.floor(),
                "Network device statistic receive_errs.",
            ),
            (
                "node_network_transmit_errs_total",
                0.0,
                "Network device statistic transmit_errs.",
            ),
            (
                "node_network_receive_drop_total",
                0.0,
                "Network device statistic receive_drop.",
            ),
            (
                "node_network_transmit_drop_total",
                0.0,
                "Network device statistic transmit_drop.",
            ),
        ] {
            family(&mut text, name, "counter", help);
            sample(&mut text, name, eth0, value);
        }
        family(
            &mut text,
            "node_netstat_Tcp_RetransSegs",
            "untyped",
            "Statistic TcpRetransSegs.",
        );
        sample(&mut text, "node_netstat_Tcp_RetransSegs", "", self.retransmits.floor());
        family(
            &mut text,
            "node_uname_info",
            "gauge",
            "Labeled system information as provided by the uname system call.",
        );
        let uname = format!(
            "{{domainname=\"(none)\",machine=\"x86_64\",nodename=\"{}\",release=\"6.1.0-28-amd64\",sysname=\"Linux\",version=\"#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1\"}}",
            self.hostname
        );
        sample(&mut text, "node_uname_info", &uname, 1.0);
        text
    }
}

/// The share of time a host loses when each operation's own work (the backend's 12 ms) takes
/// `extra` seconds longer: the work is stretched by `1 / (1 − share)`.
fn stretch_share(extra: f64) -> f64 {
    if extra > 0.0 {
        extra / (extra + WORK_SECONDS)
    } else {
        0.0
    }
}

/// Counters of seconds as node_exporter prints them from `/proc`: to the millisecond.
fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }

    #[test]
    fn steal_is_the_share_of_time_the_stretched_work_loses() {
        // 20 ms extra on 12 ms of work: the work takes 32 ms, 20/32 of the time is stolen.
        assert!((stretch_share(0.02) - 0.625).abs() < 1e-12);
        let mut node = Node::new("dc-1-host-1", 7, 0);
        let trouble = HostTrouble {
            steal_seconds: 0.02,
            ..HostTrouble::default()
        };
        for _ in 0..100 {
            node.step(1.0, trouble);
        }
        let text = node.render(0);
        let stolen = value(&text, "node_cpu_seconds_total{cpu=\"2\",mode=\"steal\"}");
        // 100 s at 0.625 + the 0.002 baseline, to the millisecond.
        assert!((stolen - 62.7).abs() < 0.002, "{stolen}");
        // Every CPU's modes add up to the seconds elapsed.
        let total: f64 = MODES
            .iter()
            .map(|mode| value(&text, &format!("node_cpu_seconds_total{{cpu=\"2\",mode=\"{mode}\"}}")))
            .sum();
        assert!((total - 100.0).abs() < 0.01, "{total}");
    }

    #[test]
    fn memory_pressure_drains_memory_available_and_wakes_the_oom_killer() {
        let mut node = Node::new("dc-1-host-1", 7, 0);
        for _ in 0..60 {
            node.step(1.0, HostTrouble::default());
        }
        let healthy = value(&node.render(0), "node_memory_MemAvailable_bytes");
        assert!((healthy / MEMORY_BYTES - 0.45).abs() < 0.01, "{healthy}");
        let pressed = HostTrouble {
            memory_seconds: 0.012,
            ..HostTrouble::default()
        };
        for _ in 0..300 {
            node.step(1.0, pressed);
        }
        let text = node.render(0);
        let available = value(&text, "node_memory_MemAvailable_bytes");
        assert!(available < MEMORY_BYTES * 0.03, "{available}");
        // Under 5 % after 52 s (0.45 → 0.02 + 0.43 × (19/20)^n < 0.05: n > ln 14.3 / ln 1.053),
        // then one kill per 60 s: 4 kills in the remaining 248 s.
        assert_eq!(value(&text, "node_vmstat_oom_kill"), 4.0);
        // Half the time stalled on reclaim (12 ms extra on 12 ms of work), for 300 s.
        let stalled = value(&text, "node_pressure_memory_waiting_seconds_total");
        assert!((stalled - (360.0 * 0.0005 + 300.0 * 0.5)).abs() < 0.01, "{stalled}");
    }

    #[test]
    fn a_lossy_interface_counts_receive_errors_and_retransmits() {
        let mut node = Node::new("dc-1-host-1", 7, 0);
        let lossy = HostTrouble {
            packet_loss: 0.02,
            ..HostTrouble::default()
        };
        for _ in 0..100 {
            node.step(1.0, lossy);
        }
        let text = node.render(0);
        // 2 % of 8,000 packets a second (× the traffic noise, ±5 %) for 100 s.
        let errors = value(&text, "node_network_receive_errs_total{device=\"eth0\"}");
        assert!((errors - 16_000.0).abs() < 16_000.0 * 0.02, "{errors}");
        let retransmits = value(&text, "node_netstat_Tcp_RetransSegs");
        assert!(
            retransmits > errors && retransmits < errors + 400.0,
            "{retransmits} {errors}"
        );
        let healthy = Node::new("dc-1-host-2", 7, 1);
        assert_eq!(
            value(&healthy.render(0), "node_network_receive_errs_total{device=\"eth0\"}"),
            0.0
        );
    }
}
