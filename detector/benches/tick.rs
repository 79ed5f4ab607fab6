//! Detector tick benchmark (issue acceptance: "One detector tick over 100,000 series from 5,000
//! instances takes ≤ 250 ms on this machine").
//!
//! The workload ([`Workload`]) is a fleet like the simulated one (docs/scenarios.md), scaled up:
//! 5,000 instances in 4 datacenters, 250 hosts per datacenter (5 instances a host, services
//! mixed), 20 series per instance, 100,000 series in all:
//! - 3,000 JVM backends (Micrometer): commons-pool2 and Lettuce series towards two Redis nodes
//!   each (`name`, `remote` peer labels), HikariCP towards their datacenter's database (`pool`),
//!   Jetty, server errors, process start time;
//! - 1,000 BEAM voice-state nodes: mailbox lengths (`erlang_vm_process_message_queue_len`),
//!   RPC counters towards 12 media servers each (`peer`), discovery registration;
//! - Redis nodes (`redis_exporter`), databases (`postgres_exporter`), API workers
//!   (`client_python`), session gateways and media servers, each with the families the shipped
//!   rules read plus, up to 20, families of the same exporter the rules do not read (fed anyway,
//!   as `epicenter eval` feeds whole expositions).
//!
//! Every series carries the target labels a scrape adds (`job`, `instance`, `dc`, `service`).
//! Setup prints how many series a shipped rule reads (about 85 %) and checks the peer edges.
//! Values are steady with small deterministic noise (gauges ±2 %, counter increases ±4 %);
//! counters only grow. The detector is warmed with [`WARM_UP_ROUNDS`] rounds, enough to fill
//! every baseline window (60 values), then criterion measures one tick: every instance's samples
//! observed at a new timestamp (the labels cloned per sample, as the live loop, detector/src/live.rs, does) and one
//! `assess`. Two benchmarks, on the same warmed detector:
//! - `tick/healthy`: a quiet fleet, no anomaly;
//! - `tick/fault`: one host (`dc-2-host-26`: a Redis node, a voice node, three backends) with
//!   every series read by a rule spiking the bad way, and its callers' series towards it
//!   (Lettuce latency, pool use) too, so that assess has anomalies to rank. A fault episode
//!   lasts [`FAULT_EPISODE_ROUNDS`] rounds (short of the detector's 30-round adaptation), then
//!   [`QUIET_ROUNDS`] untimed quiet rounds end it and the next timed tick opens a new one.
//!
//! Before each benchmark a few ticks are timed by phase (label cloning, observe, assess, and
//! the ranking inside assess); after criterion the median, minimum and maximum of every timed
//! tick are printed against the 250 ms budget.
//!
//! Run: `cargo bench -p epicenter-detector --bench tick`. `EPICENTER_TICK_SERIES=10000` or
//! `=1000000` sizes the fleet down to one datacenter of 500 instances or up to forty
//! datacenters ([`Shape`]); the 250 ms budget is checked at 100,000 series only.

#![allow(clippy::unwrap_used, reason = "benchmark: a panic is a failed run")]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use epicenter_detector::engine::{Assessment, Dependency, Detector, InstanceInfo, Settings};
use epicenter_detector::rules::{self, Bad, Rule, ValueKind};

/// Services and their instances per datacenter at 100,000 series and more (1,250 per
/// datacenter).
const FULL_COMPOSITION: [(Service, usize); 7] = [
    (Service::Api, 25),
    (Service::Backend, 750),
    (Service::Redis, 75),
    (Service::Db, 25),
    (Service::Gateway, 50),
    (Service::Voice, 250),
    (Service::Media, 75),
];
/// The same services at two fifths (500 instances per datacenter), for 10,000 series.
const SMALL_COMPOSITION: [(Service, usize); 7] = [
    (Service::Api, 10),
    (Service::Backend, 300),
    (Service::Redis, 30),
    (Service::Db, 10),
    (Service::Gateway, 20),
    (Service::Voice, 100),
    (Service::Media, 30),
];
/// Series every instance exposes.
const SERIES_PER_INSTANCE: usize = 20;
/// Scrape interval, ms.
const INTERVAL_MS: i64 = 10_000;
/// First round's time, ms since the epoch.
const START_MS: i64 = 1_780_000_000_000;
/// Rounds fed before anything is measured: the 60-value window, plus the first reading (which
/// only starts rates and means), plus a margin.
const WARM_UP_ROUNDS: u64 = 70;
/// Timed fault rounds in a row before the episode is ended (the detector folds a level that
/// lasts 30 rounds into the baseline; an episode stays well short of that).
const FAULT_EPISODE_ROUNDS: u32 = 20;
/// Untimed quiet rounds that end a fault episode.
const QUIET_ROUNDS: u32 = 2;
/// Ticks timed by phase before each benchmark.
const PHASE_TICKS: usize = 5;
/// The acceptance budget for one tick at 100,000 series.
const BUDGET: Duration = Duration::from_millis(250);

/// The fleet's size, from `EPICENTER_TICK_SERIES` (10000, 100000 or 1000000; 100000 when
/// unset): 10,000 series are one datacenter of 500 instances on 100 hosts; 100,000 are four
/// datacenters of 1,250 instances on 250 hosts each; 1,000,000 are forty such datacenters.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// Datacenters of the fleet.
    datacenters: usize,
    /// Hosts per datacenter.
    hosts_per_datacenter: usize,
    /// Services and their instances per datacenter.
    composition: [(Service, usize); 7],
}

impl Shape {
    /// The shape `EPICENTER_TICK_SERIES` asks for; panics naming the accepted values otherwise.
    fn from_env() -> Shape {
        let series = std::env::var("EPICENTER_TICK_SERIES").unwrap_or_else(|_| "100000".to_string());
        match series.as_str() {
            "10000" => Shape {
                datacenters: 1,
                hosts_per_datacenter: 100,
                composition: SMALL_COMPOSITION,
            },
            "100000" => Shape {
                datacenters: 4,
                hosts_per_datacenter: 250,
                composition: FULL_COMPOSITION,
            },
            "1000000" => Shape {
                datacenters: 40,
                hosts_per_datacenter: 250,
                composition: FULL_COMPOSITION,
            },
            other => panic!("EPICENTER_TICK_SERIES is {other:?}: use 10000, 100000 or 1000000"),
        }
    }

    /// Instances in one datacenter.
    fn per_datacenter(&self) -> usize {
        self.composition.iter().map(|(_, count)| count).sum()
    }

    /// Instances in the fleet.
    fn instances(&self) -> usize {
        self.datacenters * self.per_datacenter()
    }

    /// Instances of `service` in the fleet.
    fn count(&self, service: Service) -> usize {
        let per_datacenter: usize = self
            .composition
            .iter()
            .filter(|(other, _)| *other == service)
            .map(|(_, count)| count)
            .sum();
        self.datacenters * per_datacenter
    }

    /// The instance whose host fails in `tick/fault`: a Redis node of the second datacenter
    /// (the first when there is one).
    fn faulty_instance(&self) -> String {
        format!("redis-{}-1", self.datacenters.min(2))
    }
}

// === the fleet ===

/// A service of the benchmark fleet (the simulated fleet's services).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    Api,
    Backend,
    Redis,
    Db,
    Gateway,
    Voice,
    Media,
}

impl Service {
    /// The service's name, as the instance names and the dependencies spell it.
    fn name(self) -> &'static str {
        match self {
            Service::Api => "api",
            Service::Backend => "backend",
            Service::Redis => "redis",
            Service::Db => "db",
            Service::Gateway => "gateway",
            Service::Voice => "voice",
            Service::Media => "media",
        }
    }

    /// The port its exporter listens on (part of the `instance` label).
    fn port(self) -> u16 {
        match self {
            Service::Api => 8000,
            Service::Backend => 8080,
            Service::Redis => 9121,
            Service::Db => 9187,
            Service::Gateway | Service::Voice | Service::Media => 9568,
        }
    }
}

/// The services' dependencies, as `epicenter eval` gives them for the simulated fleet.
fn dependencies() -> Vec<Dependency> {
    [
        ("api", "backend", true),
        ("backend", "redis", false),
        ("backend", "db", true),
        ("gateway", "voice", true),
        ("voice", "media", true),
    ]
    .into_iter()
    .map(|(caller, callee, same_dc)| Dependency {
        caller: caller.to_string(),
        callee: callee.to_string(),
        same_dc,
    })
    .collect()
}

/// How a series' value moves from round to round.
#[derive(Debug, Clone, Copy)]
enum Model {
    /// Always the same value (`up`, a process start time).
    Constant(f64),
    /// A gauge around a level, ±2 % noise.
    Gauge(f64),
    /// A counter growing by a rate per second, ±4 % noise on each increase.
    Counter(f64),
    /// A summary's `_sum`: `rate` observations per second of `mean` each, ±4 % noise.
    Sum { rate: f64, mean: f64 },
    /// A summary's `_count`: `rate` observations per second.
    Count(f64),
}

/// How a fault shows on a series: the bad direction and floor of the rule that reads it.
#[derive(Debug, Clone, Copy)]
struct Spike {
    bad: Bad,
    floor: f64,
}

/// One series of the workload.
#[derive(Debug, Clone)]
struct Series {
    metric: &'static str,
    labels: BTreeMap<String, String>,
    model: Model,
    /// The instance the series talks to, for client series.
    peer: Option<usize>,
    /// `None` when no rule reads the value (filler families, `_count` halves, restarts).
    spike: Option<Spike>,
}

/// An instance while the fleet is built.
struct Member {
    info: InstanceInfo,
    service: Service,
    /// 0-based datacenter.
    dc: usize,
    /// 0-based ordinal within its service and datacenter.
    ordinal: usize,
}

/// The 5,000 instances, their 100,000 series (instance `i` owns series `20 i .. 20 i + 20`)
/// and the state that generates each round's values.
struct Workload {
    /// The fleet's size.
    shape: Shape,
    instances: Vec<InstanceInfo>,
    series: Vec<Series>,
    /// Running totals of counters and summaries; the latest gauge values.
    values: Vec<f64>,
    /// Whether a series spikes while the fault is on.
    faulty: Vec<bool>,
    round: u64,
    detector: Detector,
    /// Timed fault rounds in the current episode.
    episode: u32,
    /// Every tick criterion timed, per benchmark.
    healthy_ticks: Vec<Duration>,
    fault_ticks: Vec<Duration>,
    /// Anomalies and candidates seen in timed fault ticks: (fewest, most).
    fault_anomalies: (usize, usize),
    fault_candidates: (usize, usize),
}

/// Adds one instance's series: its exporter's families, then the synthetic `up`.
struct SeriesBuilder<'a> {
    target: BTreeMap<String, String>,
    rules: &'a [Rule],
    out: Vec<Series>,
}

impl SeriesBuilder<'_> {
    fn add(&mut self, metric: &'static str, labels: &[(&str, &str)], model: Model, peer: Option<usize>) {
        let mut all = self.target.clone();
        for (name, value) in labels {
            all.insert(name.to_string(), value.to_string());
        }
        let spike = spike_of(self.rules, metric, &all);
        self.out.push(Series {
            metric,
            labels: all,
            model,
            peer,
            spike,
        });
    }
}

/// The rules that read a sample, as `Detector::observe` finds them: by family name (with
/// `_sum`/`_count` for means) and the rule's `match` labels.
fn readers<'a>(rules: &'a [Rule], metric: &str, labels: &BTreeMap<String, String>) -> Vec<(&'a Rule, bool)> {
    rules
        .iter()
        .filter_map(|rule| {
            let family = rule.spec.metric.as_str();
            let (named, reads_value) = if rule.spec.kind == ValueKind::Mean {
                match metric.strip_prefix(family) {
                    Some("_sum") => (true, true),
                    Some("_count") => (true, false),
                    _ => (false, false),
                }
            } else {
                (metric == family, true)
            };
            (named && rule.matches(labels)).then_some((rule, reads_value))
        })
        .collect()
}

/// How a fault shows on a series: from the first rule that reads its value (not a `_count`
/// half, not a restart).
fn spike_of(rules: &[Rule], metric: &str, labels: &BTreeMap<String, String>) -> Option<Spike> {
    readers(rules, metric, labels)
        .into_iter()
        .find(|(rule, reads_value)| *reads_value && rule.spec.kind != ValueKind::Restart)
        .map(|(rule, _)| Spike {
            bad: rule.spec.bad,
            floor: rule.spec.floor,
        })
}

/// splitmix64 (Steele, Lea, Flood 2014): deterministic noise, not for anything but test data.
fn splitmix(mut state: u64) -> u64 {
    state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    state = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    state = (state ^ (state >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    state ^ (state >> 31)
}

/// Noise in [-1, 1) for series `series` in round `round`.
fn noise(series: usize, round: u64) -> f64 {
    let bits = splitmix((series as u64) << 24 ^ round);
    (bits >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// `value` (in `unit`s of the rule's floor) as the fault shows it: four times as high plus
/// three floors when rising is bad; a tenth when falling is.
fn spiked(value: f64, spike: Spike, unit: f64) -> f64 {
    match spike.bad {
        Bad::Up => 4.0 * value + 3.0 * spike.floor * unit,
        Bad::Down => 0.1 * value,
    }
}

impl Workload {
    /// The fleet, a fresh detector over the shipped rules, and no round yet.
    fn new() -> Workload {
        let rules = rules::parse(rules::SHIPPED).unwrap();
        let shape = Shape::from_env();
        let mut members: Vec<Member> = Vec::with_capacity(shape.instances());
        for dc in 0..shape.datacenters {
            let mut in_dc = 0;
            for (service, count) in shape.composition {
                for ordinal in 0..count {
                    let host = in_dc % shape.hosts_per_datacenter + 1;
                    members.push(Member {
                        info: InstanceInfo {
                            name: format!("{}-{}-{}", service.name(), dc + 1, ordinal + 1),
                            dc: format!("dc-{}", dc + 1),
                            host: format!("dc-{}-host-{host}", dc + 1),
                            service: service.name().to_string(),
                        },
                        service,
                        dc,
                        ordinal,
                    });
                    in_dc += 1;
                }
            }
        }
        assert_eq!(members.len(), shape.instances());
        let index_of = |service: Service, dc: usize, ordinal: usize| -> usize {
            let mut index = dc * shape.per_datacenter();
            for (other, count) in shape.composition {
                if other == service {
                    return index + ordinal % count;
                }
                index += count;
            }
            unreachable!("every service is in the composition")
        };
        let mut series = Vec::with_capacity(shape.instances() * SERIES_PER_INSTANCE);
        for member in &members {
            let info = &member.info;
            let target: BTreeMap<String, String> = [
                ("job", info.service.clone()),
                ("instance", format!("{}:{}", info.name, member.service.port())),
                ("dc", info.dc.clone()),
                ("service", info.service.clone()),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
            let mut builder = SeriesBuilder {
                target,
                rules: &rules,
                out: Vec::with_capacity(SERIES_PER_INSTANCE),
            };
            let peer = |service: Service, ordinal: usize| {
                let index = index_of(service, member.dc, ordinal);
                (index, members[index].info.name.clone())
            };
            add_series(&mut builder, member, &peer);
            builder.add("up", &[], Model::Constant(1.0), None);
            assert_eq!(
                builder.out.len(),
                SERIES_PER_INSTANCE,
                "{} ({}) exposes {} series",
                info.name,
                info.service,
                builder.out.len()
            );
            series.extend(builder.out);
        }
        let faulty_host = members
            .iter()
            .find(|member| member.info.name == shape.faulty_instance())
            .map(|member| member.info.host.clone())
            .unwrap();
        let on_faulty_host = |index: usize| members[index].info.host == faulty_host;
        let faulty: Vec<bool> = series
            .iter()
            .enumerate()
            .map(|(index, one)| {
                one.spike.is_some()
                    && (on_faulty_host(index / SERIES_PER_INSTANCE) || one.peer.is_some_and(on_faulty_host))
            })
            .collect();
        let values = vec![0.0; series.len()];
        Workload {
            shape,
            instances: members.into_iter().map(|member| member.info).collect(),
            series,
            values,
            faulty,
            round: 0,
            detector: Detector::new(rules, dependencies(), INTERVAL_MS, Settings::default()),
            episode: 0,
            healthy_ticks: Vec::new(),
            fault_ticks: Vec::new(),
            fault_anomalies: (usize::MAX, 0),
            fault_candidates: (usize::MAX, 0),
        }
    }

    /// Moves every series to the next round (untimed: this is the fleet, not the detector) and
    /// returns the round's time.
    fn advance(&mut self, fault: bool) -> i64 {
        let seconds = INTERVAL_MS as f64 / 1000.0;
        let round = self.round;
        for (index, (one, value)) in self.series.iter().zip(self.values.iter_mut()).enumerate() {
            let spike = one.spike.filter(|_| fault && self.faulty[index]);
            let jitter = noise(index, round);
            let with_spike = |value: f64, unit: f64| spike.map_or(value, |spike| spiked(value, spike, unit));
            *value = match one.model {
                Model::Constant(constant) => match spike {
                    Some(Spike { bad: Bad::Down, .. }) => 0.0,
                    _ => constant,
                },
                Model::Gauge(level) => with_spike(level * (1.0 + 0.02 * jitter), 1.0),
                Model::Counter(rate) => *value + with_spike(rate * seconds * (1.0 + 0.04 * jitter), seconds),
                Model::Sum { rate, mean } => {
                    let observations = rate * seconds;
                    *value + with_spike(observations * mean * (1.0 + 0.04 * jitter), observations)
                }
                Model::Count(rate) => *value + rate * seconds,
            };
        }
        self.round += 1;
        START_MS + round as i64 * INTERVAL_MS
    }

    /// One detector tick at `time_ms`: every instance's samples observed, labels cloned per
    /// sample as the live loop (detector/src/live.rs) does, then `assess`.
    fn tick(&mut self, time_ms: i64) -> Assessment {
        for (index, info) in self.instances.iter().enumerate() {
            let range = index * SERIES_PER_INSTANCE..(index + 1) * SERIES_PER_INSTANCE;
            let samples = self.series[range.clone()]
                .iter()
                .zip(&self.values[range])
                .map(|(one, value)| (one.metric, one.labels.clone(), *value));
            self.detector.observe(time_ms, info, samples);
        }
        self.detector.assess(time_ms)
    }

    /// The workload after [`WARM_UP_ROUNDS`] quiet rounds, with what setup found printed.
    fn warmed() -> Workload {
        let started = Instant::now();
        let mut workload = Workload::new();
        let rules = rules::parse(rules::SHIPPED).unwrap();
        let read = workload
            .series
            .iter()
            .filter(|one| !readers(&rules, one.metric, &one.labels).is_empty())
            .count();
        let judged = workload.series.iter().filter(|one| one.spike.is_some()).count();
        let faulty = workload.faulty.iter().filter(|&&faulty| faulty).count();
        println!(
            "workload: {} instances, {} series; {read} read by a shipped rule ({:.1} %), {judged} of them \
             judged as values (the rest: _count halves, restarts); fault spikes {faulty} series",
            workload.instances.len(),
            workload.series.len(),
            100.0 * read as f64 / workload.series.len() as f64,
        );
        let shape = workload.shape;
        assert_eq!(workload.instances.len(), shape.instances());
        assert_eq!(workload.series.len(), shape.instances() * SERIES_PER_INSTANCE);
        assert!(
            read * 10 >= workload.series.len() * 8,
            "only {read} series are read by a rule"
        );
        let mut last = None;
        for _ in 0..WARM_UP_ROUNDS {
            let time_ms = workload.advance(false);
            last = Some(workload.tick(time_ms));
        }
        let last = last.unwrap();
        let edges = workload.detector.peer_edges().len();
        println!(
            "warm-up: {WARM_UP_ROUNDS} rounds in {:.1} s; {} instances known, {edges} caller→peer edges, \
             {} anomalies in the last round",
            started.elapsed().as_secs_f64(),
            workload.detector.instances().len(),
            last.anomalies.len(),
        );
        assert_eq!(workload.detector.instances().len(), shape.instances());
        // Backends: two Redis nodes and a database each; voice nodes: 12 media servers each.
        assert_eq!(
            edges,
            shape.count(Service::Backend) * 3 + shape.count(Service::Voice) * 12
        );
        assert!(
            last.anomalies.is_empty(),
            "a quiet fleet shows anomalies: {:?}",
            &last.anomalies[..1]
        );
        workload
    }

    /// One timed fault tick (ending the episode first, untimed, when it has run its course);
    /// its duration.
    fn timed_fault_tick(&mut self) -> Duration {
        if self.episode >= FAULT_EPISODE_ROUNDS {
            for _ in 0..QUIET_ROUNDS {
                let time_ms = self.advance(false);
                black_box(self.tick(time_ms));
            }
            self.episode = 0;
        }
        let time_ms = self.advance(true);
        let started = Instant::now();
        let assessment = black_box(self.tick(time_ms));
        let elapsed = started.elapsed();
        self.episode += 1;
        let (anomalies, candidates) = (assessment.anomalies.len(), assessment.candidates.len());
        self.fault_anomalies = (
            self.fault_anomalies.0.min(anomalies),
            self.fault_anomalies.1.max(anomalies),
        );
        self.fault_candidates = (
            self.fault_candidates.0.min(candidates),
            self.fault_candidates.1.max(candidates),
        );
        drop(assessment);
        elapsed
    }

    /// One timed quiet tick; its duration.
    fn timed_healthy_tick(&mut self) -> Duration {
        let time_ms = self.advance(false);
        let started = Instant::now();
        let assessment = black_box(self.tick(time_ms));
        drop(assessment);
        started.elapsed()
    }

    /// Times [`PHASE_TICKS`] ticks by phase and prints the medians: the observe pass (every
    /// instance's samples, labels cloned on the fly as in [`Workload::tick`]), `assess`, and
    /// `rank` over the same anomalies (part of `assess`); plus, on the same values but feeding
    /// nothing, the label cloning alone (part of the observe pass).
    fn print_phases(&mut self, fault: bool) {
        let mut phases: [Vec<Duration>; 4] = Default::default();
        let mut anomalies = 0;
        for _ in 0..PHASE_TICKS {
            if fault && self.episode >= FAULT_EPISODE_ROUNDS {
                for _ in 0..QUIET_ROUNDS {
                    let time_ms = self.advance(false);
                    black_box(self.tick(time_ms));
                }
                self.episode = 0;
            }
            let time_ms = self.advance(fault);
            self.episode += u32::from(fault);
            let started = Instant::now();
            for (index, one) in self.series.iter().enumerate() {
                black_box((one.metric, one.labels.clone(), self.values[index]));
            }
            phases[0].push(started.elapsed());
            let started = Instant::now();
            for (index, info) in self.instances.iter().enumerate() {
                let range = index * SERIES_PER_INSTANCE..(index + 1) * SERIES_PER_INSTANCE;
                let samples = self.series[range.clone()]
                    .iter()
                    .zip(&self.values[range])
                    .map(|(one, value)| (one.metric, one.labels.clone(), *value));
                self.detector.observe(time_ms, info, samples);
            }
            let observed = Instant::now();
            let assessment = self.detector.assess(time_ms);
            let assessed = Instant::now();
            let ranked = black_box(self.detector.rank(&assessment.anomalies));
            phases[3].push(assessed.elapsed());
            anomalies = assessment.anomalies.len();
            drop((ranked, assessment));
            phases[1].push(observed - started);
            phases[2].push(assessed - observed);
        }
        let [clone, observe, assess, rank] = phases.map(|mut times| median(&mut times));
        println!(
            "phases ({}, median of {PHASE_TICKS} ticks): observe {:.1} ms (of which cloning labels {:.1} ms), \
             assess {:.1} ms (of which rank {:.2} ms over {anomalies} anomalies); tick {:.1} ms",
            if fault { "fault" } else { "healthy" },
            millis(observe),
            millis(clone),
            millis(assess),
            millis(rank),
            millis(observe + assess),
        );
    }
}

/// Each service's families: what the rules read, then filler from the same exporter up to 19
/// (the 20th is `up`).
fn add_series(builder: &mut SeriesBuilder<'_>, member: &Member, peer: &dyn Fn(Service, usize) -> (usize, String)) {
    use Model::{Constant, Count, Counter, Gauge, Sum};
    let started = Constant((START_MS / 1000 - 86_400) as f64);
    let ordinal = member.ordinal;
    match member.service {
        Service::Backend => {
            builder.add("jetty_threads_busy", &[], Gauge(40.0), None);
            builder.add("process_start_time_seconds", &[], started, None);
            builder.add(
                "http_server_requests_seconds_count",
                &[
                    ("error", "none"),
                    ("exception", "none"),
                    ("method", "GET"),
                    ("outcome", "SERVER_ERROR"),
                    ("status", "500"),
                    ("uri", "/api/v1/session"),
                ],
                Counter(0.05),
                None,
            );
            let (db, db_name) = peer(Service::Db, ordinal);
            let pool = [("pool", db_name.as_str())];
            builder.add("hikaricp_connections_pending", &pool, Gauge(0.0), Some(db));
            builder.add("hikaricp_connections_timeout_total", &pool, Counter(0.0), Some(db));
            let acquire = Sum {
                rate: 50.0,
                mean: 0.000_4,
            };
            builder.add("hikaricp_connections_acquire_seconds_sum", &pool, acquire, Some(db));
            builder.add(
                "hikaricp_connections_acquire_seconds_count",
                &pool,
                Count(50.0),
                Some(db),
            );
            let usage = Sum {
                rate: 50.0,
                mean: 0.012,
            };
            builder.add("hikaricp_connections_usage_seconds_sum", &pool, usage, Some(db));
            builder.add("hikaricp_connections_usage_seconds_count", &pool, Count(50.0), Some(db));
            for shard in 0..2 {
                let (redis, redis_name) = peer(Service::Redis, ordinal + shard);
                let pool = [
                    ("factoryType", "io.lettuce.core.support.ConnectionPoolSupport"),
                    ("name", redis_name.as_str()),
                    ("type", "GenericObjectPool"),
                ];
                builder.add("commons_pool2_num_active_objects", &pool, Gauge(3.0), Some(redis));
                builder.add("commons_pool2_num_waiters_threads", &pool, Gauge(0.0), Some(redis));
                builder.add("commons_pool2_created_objects_total", &pool, Counter(0.01), Some(redis));
                let remote = format!("redis/{redis_name}:6379");
                let lettuce = [("command", "GET"), ("local", "local:any"), ("remote", remote.as_str())];
                let completion = Sum {
                    rate: 300.0,
                    mean: 0.000_5,
                };
                builder.add(
                    "lettuce_command_completion_seconds_sum",
                    &lettuce,
                    completion,
                    Some(redis),
                );
                builder.add(
                    "lettuce_command_completion_seconds_count",
                    &lettuce,
                    Count(300.0),
                    Some(redis),
                );
            }
        }
        Service::Voice => {
            for (name, level) in [
                ("voice_state_sup", 40.0),
                ("voice_state_registry", 0.0),
                ("logger", 0.0),
            ] {
                builder.add(
                    "erlang_vm_process_message_queue_len",
                    &[("registered_name", name)],
                    Gauge(level),
                    None,
                );
            }
            for media in 0..12 {
                let (index, name) = peer(Service::Media, ordinal * 12 + media);
                builder.add(
                    "voice_state_media_rpc_total",
                    &[("peer", &name)],
                    Counter(60.0),
                    Some(index),
                );
            }
            builder.add("voice_state_discovery_registered", &[], Constant(1.0), None);
            builder.add("voice_state_discovery_heartbeat_wait_seconds", &[], Gauge(0.05), None);
            builder.add("erlang_vm_statistics_run_queues_length", &[], Gauge(1.0), None);
            builder.add("process_start_time_seconds", &[], started, None);
        }
        Service::Api => {
            let get = [("method", "GET")];
            for (code, rate) in [("200", 400.0), ("429", 0.2), ("503", 0.1)] {
                builder.add(
                    "http_requests_total",
                    &[("code", code), ("method", "GET")],
                    Counter(rate),
                    None,
                );
            }
            let latency = Sum {
                rate: 400.3,
                mean: 0.05,
            };
            builder.add("http_request_duration_seconds_sum", &get, latency, None);
            builder.add("http_request_duration_seconds_count", &get, Count(400.3), None);
            builder.add("api_workers_busy", &[], Gauge(12.0), None);
            builder.add("process_start_time_seconds", &[], started, None);
            for (le, share) in [
                ("0.005", 0.01),
                ("0.01", 0.03),
                ("0.025", 0.15),
                ("0.05", 0.55),
                ("0.075", 0.75),
                ("0.1", 0.85),
                ("0.25", 0.95),
                ("0.5", 0.98),
                ("0.75", 0.99),
                ("1.0", 0.995),
                ("2.5", 0.999),
                ("+Inf", 1.0),
            ] {
                builder.add(
                    "http_request_duration_seconds_bucket",
                    &[("le", le), ("method", "GET")],
                    Count(400.3 * share),
                    None,
                );
            }
        }
        Service::Redis => {
            builder.add("redis_up", &[], Constant(1.0), None);
            builder.add("redis_connected_clients", &[], Gauge(120.0), None);
            builder.add("redis_connections_received_total", &[], Counter(0.2), None);
            builder.add("redis_commands_processed_total", &[], Counter(12_000.0), None);
            builder.add("process_start_time_seconds", &[], started, None);
            for (metric, model) in [
                ("redis_blocked_clients", Gauge(0.0)),
                ("redis_max_clients", Constant(10_000.0)),
                ("redis_rejected_connections_total", Counter(0.0)),
                ("redis_uptime_in_seconds", Counter(1.0)),
                ("redis_memory_used_bytes", Gauge(2.1e9)),
                ("redis_memory_max_bytes", Constant(8.0e9)),
                ("redis_keyspace_hits_total", Counter(11_000.0)),
                ("redis_keyspace_misses_total", Counter(900.0)),
                ("redis_expired_keys_total", Counter(40.0)),
            ] {
                builder.add(metric, &[], model, None);
            }
            for cmd in ["get", "set"] {
                builder.add("redis_commands_total", &[("cmd", cmd)], Counter(6_000.0), None);
                builder.add(
                    "redis_commands_duration_seconds_total",
                    &[("cmd", cmd)],
                    Counter(2.4),
                    None,
                );
            }
            builder.add("redis_db_keys", &[("db", "db0")], Gauge(4.0e6), None);
        }
        Service::Db => {
            builder.add("pg_up", &[], Constant(1.0), None);
            builder.add("process_start_time_seconds", &[], started, None);
            let app = ("datname", "app");
            for (state, level) in [("active", 12.0), ("idle", 18.0), ("idle in transaction", 1.0)] {
                builder.add("pg_stat_activity_count", &[app, ("state", state)], Gauge(level), None);
            }
            for (metric, rate) in [
                ("pg_stat_database_xact_commit", 1_200.0),
                ("pg_stat_database_xact_rollback", 2.0),
                ("pg_stat_database_blks_read", 300.0),
                ("pg_stat_database_blks_hit", 90_000.0),
                ("pg_stat_database_tup_returned", 40_000.0),
                ("pg_stat_database_tup_fetched", 9_000.0),
                ("pg_stat_database_tup_inserted", 400.0),
                ("pg_stat_database_tup_updated", 700.0),
                ("pg_stat_database_tup_deleted", 50.0),
                ("pg_stat_database_deadlocks", 0.0),
                ("pg_stat_database_conflicts", 0.0),
                ("pg_stat_database_temp_bytes", 1.0e5),
            ] {
                builder.add(metric, &[("datid", "16384"), app], Counter(rate), None);
            }
            builder.add(
                "pg_stat_database_numbackends",
                &[("datid", "16384"), app],
                Gauge(30.0),
                None,
            );
            builder.add("pg_settings_max_connections", &[], Constant(200.0), None);
        }
        Service::Gateway => {
            builder.add("gateway_sessions", &[], Gauge(40_000.0), None);
            builder.add("gateway_session_connects_total", &[], Counter(300.0), None);
            builder.add("gateway_session_disconnects_total", &[], Counter(295.0), None);
            builder.add("erlang_vm_statistics_run_queues_length", &[], Gauge(2.0), None);
            builder.add("process_start_time_seconds", &[], started, None);
            beam_filler(builder, 14);
        }
        Service::Media => {
            builder.add("media_rpc_received_total", &[], Counter(2_400.0), None);
            builder.add("process_start_time_seconds", &[], started, None);
            builder.add("media_active_calls", &[], Gauge(900.0), None);
            beam_filler(builder, 16);
        }
    }
}

/// A family without series of its own: name, labels, model.
type Family = (&'static str, &'static [(&'static str, &'static str)], Model);

/// The first `count` of prometheus.erl's VM families (none of them read by a rule).
fn beam_filler(builder: &mut SeriesBuilder<'_>, count: usize) {
    use Model::{Constant, Counter, Gauge};
    let families: [Family; 16] = [
        ("erlang_vm_process_count", &[], Gauge(41_000.0)),
        ("erlang_vm_port_count", &[], Gauge(60.0)),
        ("erlang_vm_atom_count", &[], Gauge(52_000.0)),
        ("erlang_vm_ets_tables", &[], Gauge(80.0)),
        ("erlang_vm_schedulers_online", &[], Constant(8.0)),
        ("erlang_vm_memory_bytes_total", &[("kind", "processes")], Gauge(1.4e8)),
        ("erlang_vm_memory_bytes_total", &[("kind", "system")], Gauge(1.1e8)),
        ("erlang_vm_statistics_reductions_total", &[], Counter(3.0e8)),
        ("erlang_vm_statistics_context_switches", &[], Counter(2.0e5)),
        (
            "erlang_vm_statistics_garbage_collection_number_of_gcs",
            &[],
            Counter(9.0e4),
        ),
        (
            "erlang_vm_statistics_garbage_collection_words_reclaimed",
            &[],
            Counter(4.0e8),
        ),
        ("erlang_vm_statistics_bytes_received_total", &[], Counter(3.0e6)),
        ("erlang_vm_statistics_bytes_output_total", &[], Counter(3.5e6)),
        ("erlang_vm_statistics_runtime_milliseconds", &[], Counter(7_000.0)),
        (
            "erlang_vm_statistics_wallclock_time_milliseconds",
            &[],
            Counter(1_000.0),
        ),
        ("erlang_vm_dirty_cpu_schedulers_online", &[], Constant(8.0)),
    ];
    for (metric, labels, model) in families.into_iter().take(count) {
        builder.add(metric, labels, model, None);
    }
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

// === criterion ===

/// `tick/healthy` then `tick/fault` on one warmed workload (built on first use, so a filter
/// that selects neither skips the warm-up). Flat sampling with 10 samples: a tick takes a good
/// fraction of a second, and a fault episode must stay shorter than the detector's adaptation.
fn bench_tick(c: &mut Criterion) {
    let workload: RefCell<Option<Workload>> = RefCell::new(None);
    // Each size keeps its own criterion history (`tick` is the 100,000-series fleet).
    let series = std::env::var("EPICENTER_TICK_SERIES").unwrap_or_default();
    let group_name = if series.is_empty() || series == "100000" {
        "tick".to_string()
    } else {
        format!("tick-{series}")
    };
    let mut group = c.benchmark_group(group_name);
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for fault in [false, true] {
        let mut phases_printed = false;
        group.bench_function(if fault { "fault" } else { "healthy" }, |b| {
            let mut slot = workload.borrow_mut();
            let workload = slot.get_or_insert_with(Workload::warmed);
            if !phases_printed {
                workload.print_phases(fault);
                phases_printed = true;
            }
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let elapsed = if fault {
                        workload.timed_fault_tick()
                    } else {
                        workload.timed_healthy_tick()
                    };
                    if fault {
                        workload.fault_ticks.push(elapsed);
                    } else {
                        workload.healthy_ticks.push(elapsed);
                    }
                    total += elapsed;
                }
                total
            });
        });
    }
    group.finish();
    if let Some(workload) = workload.into_inner().as_mut() {
        print_summary(workload);
    }
}

/// Median, minimum and maximum of every tick criterion timed (warm-up included), with the
/// fleet's size; against the budget at 100,000 series, and the median per series at any size.
fn print_summary(workload: &mut Workload) {
    let series = workload.series.len();
    for (name, ticks) in [
        ("tick/healthy", &mut workload.healthy_ticks),
        ("tick/fault", &mut workload.fault_ticks),
    ] {
        if ticks.is_empty() {
            continue;
        }
        let count = ticks.len();
        let middle = median(ticks);
        let (fastest, slowest) = (ticks[0], ticks[count - 1]);
        let budget = if series == 100_000 {
            format!(
                "; budget {:.0} ms: {}",
                millis(BUDGET),
                if middle <= BUDGET { "met" } else { "NOT met" }
            )
        } else {
            String::new()
        };
        println!(
            "{name}: {series} series, median {:.1} ms over {count} ticks (min {:.1}, max {:.1}), {:.2} µs per series{budget}",
            millis(middle),
            millis(fastest),
            millis(slowest),
            middle.as_secs_f64() * 1e6 / series as f64,
        );
    }
    if !workload.fault_ticks.is_empty() {
        println!(
            "tick/fault: {}..{} anomalies and {}..{} candidates per timed tick",
            workload.fault_anomalies.0,
            workload.fault_anomalies.1,
            workload.fault_candidates.0,
            workload.fault_candidates.1,
        );
    }
}

// `criterion_group!` defines `pub fn benches()`, which runs [`bench_tick`] with the command
// line's settings; the macro cannot carry a doc comment.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench_tick);
}

/// Runs criterion's `tick` group, then its summary.
fn main() {
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}
