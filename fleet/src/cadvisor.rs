//! A host's kubelet in the simulated fleet (with the fleet's `cadvisor`): the cAdvisor
//! families the kubelet serves at `/metrics/cadvisor`, one series per container of every
//! instance on the host, named by its `pod` (the instance's name), `container` (its service)
//! and `namespace` (github.com/google/cadvisor, docs/storage/prometheus.md; the kubelet's
//! label set as in rules/signals/examples/cadvisor.prom).
//!
//! Physics, per second, per container:
//! - CPU demand, in cores: the service's own ([`base_cores`]) times the instance's work (the
//!   fleet's [`Running::work`]: its traffic against the service's mean, and a warming JVM's
//!   JIT), with 5 % noise. The container's CFS quota allows `limit` cores: four times the
//!   service's mean demand normally, and `base_cores / factor` while a `cpu_throttling` fault
//!   holds it. So a surge of four times the traffic (a retry storm) reaches the quota too.
//! - CFS accounting over 100 ms periods, ten a second: the container uses `min(demand, limit)`
//!   seconds of CPU a second; a period ends throttled with probability `min(0.98, (demand /
//!   limit)^4)` (bursts reach the quota now and then even far below it); the time its threads
//!   waited throttled grows by `demand − limit` seconds a second above the quota (the work
//!   that had to wait), and by the bursts' share of a millisecond below it.
//! - The wait costs every operation of the instance `(1 − limit / demand) × 0.1` seconds above
//!   the quota (on average the rest of the period; [`Kubelet::extra_seconds`]), nothing below.
//!   Only in a fleet with `cadvisor` (a fleet on Kubernetes with CPU limits): without it no
//!   container has a limit, and the shipped scenarios' physics is unchanged.
//! - Memory: a working set of the service's size ([`base_bytes`]) with 2 % noise, against a
//!   limit of twice that. No container reaches it: `container_oom_events_total` stays 0 (a
//!   host's OOM kills are node_exporter's, not attributed to containers).
//! - A container is a new series (new `id` and `name`) after its process restarted, and is
//!   absent while its process is down (a lost Redis node).
//!
//! Noise comes from the kubelet's own ChaCha8 generator, so a fleet with `cadvisor` serves
//! every other instance exactly the samples it would serve without.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::text::Out;
use crate::topology::{fnv1a, Instance, Service};

/// CFS periods per second (the kernel's default 100 ms `cpu.cfs_period_us`).
const PERIODS_PER_SECOND: f64 = 10.0;
/// Seconds an operation waits, per unit of `1 − limit / demand`: the rest of a period.
const PERIOD_SECONDS: f64 = 0.1;

/// A service's CPU demand at the day's mean traffic, in cores.
pub fn base_cores(service: Service) -> f64 {
    match service {
        Service::Api => 0.25,
        Service::Backend => 0.6,
        Service::Redis => 0.15,
        Service::Db => 0.5,
        Service::Gateway => 0.2,
        Service::Voice | Service::Media => 0.3,
        Service::Node | Service::Kubelet => 0.05,
    }
}

/// A service's working set, bytes.
pub fn base_bytes(service: Service) -> f64 {
    const MIB: f64 = 1_048_576.0;
    match service {
        Service::Api => 256.0 * MIB,
        Service::Backend => 1_536.0 * MIB,
        Service::Redis => 2_048.0 * MIB,
        Service::Db => 4_096.0 * MIB,
        Service::Gateway | Service::Voice => 512.0 * MIB,
        Service::Media => 768.0 * MIB,
        Service::Node | Service::Kubelet => 64.0 * MIB,
    }
}

/// One container's cgroup counters.
#[derive(Debug, Clone, Default)]
struct Container {
    /// The fleet's index of the instance it runs.
    index: usize,
    cpu_seconds: f64,
    periods: f64,
    throttled_periods: f64,
    throttled_seconds: f64,
    working_set: f64,
    /// Simulated second its process started (a new container after a restart).
    started_at: u64,
}

/// One host's kubelet: the containers of the instances on the host.
#[derive(Debug, Clone)]
pub struct Kubelet {
    containers: Vec<Container>,
    rng: ChaCha8Rng,
}

/// What one container's instance is doing this second, as the fleet knows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Running {
    /// Its demand over the service's demand at mean traffic ([`base_cores`]): the day's
    /// traffic shape for most, its own traffic for API and backend instances (a retry storm
    /// multiplies it), three times that for a JVM that has just started cold (JIT).
    pub work: f64,
    /// The CPU limit a `cpu_throttling` fault set, in cores; `None`: the normal limit.
    pub limit_cores: Option<f64>,
    /// Simulated second the process started; `None` while it is down.
    pub started_at: Option<u64>,
}

impl Kubelet {
    /// The kubelet of a host running the instances at `indices`; `seed` is the scenario's,
    /// `number` tells hosts apart.
    pub fn new(indices: &[usize], seed: u64, number: usize) -> Kubelet {
        let stream = seed ^ 0x6b75_6265_6c65_7421 ^ (number as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Kubelet {
            containers: indices
                .iter()
                .map(|&index| Container {
                    index,
                    ..Container::default()
                })
                .collect(),
            rng: ChaCha8Rng::seed_from_u64(stream),
        }
    }

    /// The CPU limit of a container of `service` under `limit_cores` (a fault's) or the
    /// normal one, cores.
    pub fn limit(service: Service, limit_cores: Option<f64>) -> f64 {
        limit_cores.unwrap_or(4.0 * base_cores(service))
    }

    /// Extra seconds per operation of an instance of `service` doing `work` (see
    /// [`Running::work`]) under a CPU limit of `limit_cores`: the rest of a CFS period, in the
    /// share its demand exceeds the quota by.
    pub fn extra_seconds(service: Service, work: f64, limit_cores: f64) -> f64 {
        let demand = base_cores(service) * work;
        if demand <= limit_cores {
            return 0.0;
        }
        (1.0 - limit_cores / demand) * PERIOD_SECONDS
    }

    /// One simulated second: `running(index)` says what the instance at `index` does.
    pub fn step(&mut self, instances: &[Instance], running: impl Fn(usize) -> Running) {
        for container in &mut self.containers {
            let now = running(container.index);
            let Some(started_at) = now.started_at else {
                continue;
            };
            if started_at != container.started_at {
                // A new container: its counters start from zero.
                *container = Container {
                    index: container.index,
                    started_at,
                    ..Container::default()
                };
            }
            let service = instances[container.index].service;
            let noise: f64 = {
                let u1: f64 = self.rng.random::<f64>().max(f64::MIN_POSITIVE);
                let u2: f64 = self.rng.random::<f64>();
                (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            };
            let demand = (base_cores(service) * now.work * (1.0 + 0.05 * noise)).max(0.0);
            let limit = Kubelet::limit(service, now.limit_cores);
            let ratio = demand / limit;
            let throttled_share = ratio.powi(4).min(0.98);
            container.cpu_seconds += demand.min(limit);
            container.periods += PERIODS_PER_SECOND;
            container.throttled_periods += PERIODS_PER_SECOND * throttled_share;
            container.throttled_seconds += (demand - limit).max(0.0) + throttled_share * 0.001;
            container.working_set = base_bytes(service) * (1.0 + 0.02 * noise.abs().min(3.0));
        }
    }

    /// The kubelet's cAdvisor families for this host now, each sample stamped (in `out`);
    /// `start_ms` is the simulated clock's start (ms since the epoch). Containers whose
    /// process is down (`running(index).started_at` is `None`) are absent.
    pub(crate) fn render(
        &self,
        out: &mut Out,
        instances: &[Instance],
        start_ms: i64,
        running: impl Fn(usize) -> Running,
    ) {
        // (container, instance, `name`, `id`, `image`) of each live container.
        let live: Vec<(&Container, &Instance, String, String, String)> = self
            .containers
            .iter()
            .filter(|container| running(container.index).started_at.is_some())
            .map(|container| {
                let instance = &instances[container.index];
                let pod = fnv1a(instance.name.as_bytes());
                let id = fnv1a(format!("{}/{}", instance.name, container.started_at).as_bytes());
                (
                    container,
                    instance,
                    format!("{id:016x}"),
                    format!("/kubepods/burstable/pod{pod:016x}/{id:016x}"),
                    format!("registry.local/{}:1.0", instance.service.name()),
                )
            })
            .collect();
        type Figure = fn(&Container, &Instance, i64) -> f64;
        let families: [(&str, &str, &str, Figure); 8] = [
            (
                "container_cpu_usage_seconds_total",
                "counter",
                "Cumulative cpu time consumed in seconds.",
                |container, _, _| round_ms(container.cpu_seconds),
            ),
            (
                "container_cpu_cfs_periods_total",
                "counter",
                "Number of elapsed enforcement period intervals.",
                |container, _, _| container.periods.floor(),
            ),
            (
                "container_cpu_cfs_throttled_periods_total",
                "counter",
                "Number of throttled period intervals.",
                |container, _, _| container.throttled_periods.floor(),
            ),
            (
                "container_cpu_cfs_throttled_seconds_total",
                "counter",
                "Total time duration the container has been throttled.",
                |container, _, _| round_ms(container.throttled_seconds),
            ),
            (
                "container_memory_working_set_bytes",
                "gauge",
                "Current working set in bytes.",
                |container, _, _| container.working_set.round(),
            ),
            (
                "container_spec_memory_limit_bytes",
                "gauge",
                "Memory limit for the container.",
                |_, instance, _| 2.0 * base_bytes(instance.service),
            ),
            (
                "container_oom_events_total",
                "counter",
                "Count of out of memory events observed for the container",
                |_, _, _| 0.0,
            ),
            (
                "container_start_time_seconds",
                "gauge",
                "Start time of the container since unix epoch in seconds.",
                |container, _, start_ms| (start_ms / 1000) as f64 + container.started_at as f64,
            ),
        ];
        for (name, kind, help, figure) in families {
            out.family(name, kind, help);
            for (container, instance, id, path, image) in &live {
                let labels = [
                    ("container", instance.service.name()),
                    ("id", path.as_str()),
                    ("image", image.as_str()),
                    ("name", id.as_str()),
                    ("namespace", "prod"),
                    ("pod", instance.name.as_str()),
                ];
                out.sample(name, &labels, figure(container, instance, start_ms));
            }
        }
    }
}

/// Counters of seconds to the millisecond, as cAdvisor prints its nanosecond counters.
fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}
