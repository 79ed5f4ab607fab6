//! Property tests for the detector (docs/detector.md), the two STYLE.md names for the
//! statistics: ranking does not change when nodes are renamed, and a robust score does not
//! change with the signal's unit.
//!
//! * Renaming. A bijective renaming of datacenters, hosts, services and instances — applied to
//!   the instances' placement, to the label values that carry those names (`job`, `instance`,
//!   `dc`, and the peer labels `name`, `remote`, `pool`, `peer`) and to the dependency
//!   configuration — maps the ranking onto itself: the same candidates (renamed), the same
//!   scores, in the same order except among tied scores (ties are broken by name, so their
//!   order follows the new names). Checked on [`Detector::rank`] over arbitrary anomalies, and
//!   end to end (samples in, `observe` + `assess` every round) on small generated fleets with
//!   faults. Scores are compared to 1e-9 relative: a candidate's callers are summed in name
//!   order, so renaming may change the last bits of a sum. Domain: names without `:` (a peer
//!   value's `:port` suffix is stripped when it is resolved, and Lettuce's `remote` label is
//!   `redis/<node>:<port>`). Label values holding `,` or `=` once made two series share a
//!   key; [`series_whose_label_values_hold_separators_are_kept_apart`] keeps that fixed.
//!   Verdicts are compared too (kind, datacenter, instances, hosts) until the first round
//!   whose two best candidates tie: a verdict's kind comes from the roles the rules give an
//!   instance's families, never from a service's name.
//! * Scaling. Multiplying a signal's values by a constant c > 0 changes its score only
//!   through the rule's `floor`, an absolute amount in the signal's unit (the robust scale is
//!   at least floor / 5 and a change must be at least the floor). So the property that holds
//!   is a change of unit: values and floor scaled together keep every judgement (score,
//!   anomaly, onset) — checked on [`Signal`] for gauges, counters and means, and end to end on
//!   a generated fleet with every rule's floor scaled. With the floor kept, scaling keeps
//!   every judgement as long as the floor never binds: here, every interval value before and
//!   after scaling is at least 2 floors (then 0.1 × |median| ≥ floor / 5, and with the default
//!   threshold of 5 scales a score that counts already implies a change of at least the
//!   floor). Outside that domain the score does change;
//!   [`a_fixed_floor_changes_the_score_of_a_signal_scaled_below_it`] pins the minimal
//!   counterexample.
//!
//! Case counts keep the file to a few seconds in the dev profile (opt-level 2); raise them
//! with `PROPTEST_CASES` for a longer hunt.

use std::collections::{BTreeMap, HashMap, HashSet};

use epicenter_detector::engine::{
    Anomaly, Assessment, Candidate, Dependency, Detector, InstanceInfo, Settings, Verdict,
};
use epicenter_detector::rules::{self, Bad, Class, Rule, ValueKind};
use epicenter_detector::signal::{Signal, Tuning};
use proptest::prelude::*;
use proptest::sample::Index;

// === configuration ===

const RANK_CASES: u32 = 256;
const FLEET_CASES: u32 = 40;
const SIGNAL_CASES: u32 = 512;

/// Scrape interval of the generated fleets and signals, ms.
const INTERVAL_MS: i64 = 10_000;
/// First round's time, ms since the epoch.
const START_MS: i64 = 1_780_000_000_000;
/// Quiet rounds before a fleet's fault: the first reading plus the 12 values a baseline needs,
/// plus a margin.
const QUIET_ROUNDS: usize = 16;
/// Rounds the fault lasts.
const FAULT_ROUNDS: usize = 5;

/// A proptest configuration with `cases` cases (or `PROPTEST_CASES`, when set) and no
/// regression files written next to the tests.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(cases)
    }
}

/// Whether two scores agree to 1e-9, relative above 1.
fn close(left: f64, right: f64) -> bool {
    (left - right).abs() <= 1e-9 * left.abs().max(right.abs()).max(1.0)
}

/// splitmix64 (Steele, Lea, Flood 2014): deterministic test data from a seed.
fn splitmix(mut state: u64) -> u64 {
    state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    state = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    state = (state ^ (state >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    state ^ (state >> 31)
}

/// A number in [0, 1) from `seed` and two more inputs.
fn unit(seed: u64, first: u64, second: u64) -> f64 {
    let bits = splitmix(seed ^ splitmix(first ^ splitmix(second)));
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

// === renaming ===

/// Characters of generated names: letters, digits, punctuation, spaces and non-ASCII letters,
/// but no `:`, `,` or `=` (see the module docs).
const NAME_ALPHABET: &[char] = &[
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w',
    'x', 'y', 'z', 'A', 'B', 'Q', 'Z', '0', '1', '2', '7', '9', '-', '_', '.', '/', '|', ' ', '"', 'é', 'ß', '日',
];

/// A bijective renaming of names, one map per namespace (datacenters, hosts, services,
/// instances; peers that name no instance count as instances).
#[derive(Debug, Default)]
struct Renaming {
    dcs: HashMap<String, String>,
    hosts: HashMap<String, String>,
    services: HashMap<String, String>,
    instances: HashMap<String, String>,
}

impl Renaming {
    /// New names for every name in the four lists, random (from `seed`), distinct from each
    /// other: sorting them gives an order unrelated to the original one.
    fn random(seed: u64, dcs: &[String], hosts: &[String], services: &[String], instances: &[String]) -> Renaming {
        let mut taken: HashSet<String> = HashSet::new();
        let mut counter = 0u64;
        let mut fresh = |_: &String| loop {
            counter += 1;
            let length = 1 + (splitmix(seed ^ counter) % 10) as usize;
            let name: String = (0..length)
                .map(|position| {
                    let pick = splitmix(seed ^ counter.rotate_left(20) ^ position as u64);
                    NAME_ALPHABET[(pick % NAME_ALPHABET.len() as u64) as usize]
                })
                .collect();
            if taken.insert(name.clone()) {
                return name;
            }
        };
        let mut map = |names: &[String]| -> HashMap<String, String> {
            names.iter().map(|name| (name.clone(), fresh(name))).collect()
        };
        Renaming {
            dcs: map(dcs),
            hosts: map(hosts),
            services: map(services),
            instances: map(instances),
        }
    }

    fn dc(&self, name: &str) -> String {
        self.dcs[name].clone()
    }

    fn host(&self, name: &str) -> String {
        self.hosts[name].clone()
    }

    fn service(&self, name: &str) -> String {
        self.services[name].clone()
    }

    fn instance(&self, name: &str) -> String {
        self.instances[name].clone()
    }

    fn info(&self, info: &InstanceInfo) -> InstanceInfo {
        InstanceInfo {
            name: self.instance(&info.name),
            dc: self.dc(&info.dc),
            host: self.host(&info.host),
            service: self.service(&info.service),
        }
    }

    fn dependency(&self, dependency: &Dependency) -> Dependency {
        Dependency {
            caller: self.service(&dependency.caller),
            callee: self.service(&dependency.callee),
            same_dc: dependency.same_dc,
        }
    }

    fn anomaly(&self, anomaly: &Anomaly) -> Anomaly {
        Anomaly {
            instance: self.instance(&anomaly.instance),
            peer: anomaly.peer.as_deref().map(|peer| self.instance(peer)),
            // The series' labels are carried through as scraped (names in them are not mapped).
            labels: BTreeMap::new(),
            ..anomaly.clone()
        }
    }
}

/// Checks that `renamed` is `original` under `renaming`: the same candidates with their names
/// mapped, the same scores and onsets, and at every position the same score (so the same
/// candidate, unless its score is tied with another's).
fn same_ranking(original: &[Candidate], renamed: &[Candidate], renaming: &Renaming) -> Result<(), TestCaseError> {
    prop_assert_eq!(original.len(), renamed.len(), "{:?}\nvs\n{:?}", original, renamed);
    let by_name: HashMap<&str, &Candidate> = renamed
        .iter()
        .map(|candidate| (candidate.instance.as_str(), candidate))
        .collect();
    for (position, candidate) in original.iter().enumerate() {
        let name = renaming.instance(&candidate.instance);
        let Some(twin) = by_name.get(name.as_str()) else {
            return Err(TestCaseError::fail(format!(
                "{} ({name}) is not ranked after renaming",
                candidate.instance
            )));
        };
        prop_assert_eq!(&twin.dc, &renaming.dc(&candidate.dc));
        prop_assert_eq!(&twin.host, &renaming.host(&candidate.host));
        prop_assert_eq!(&twin.service, &renaming.service(&candidate.service));
        prop_assert!(close(twin.score, candidate.score), "{:?} vs {:?}", candidate, twin);
        prop_assert_eq!(twin.onset_ms, candidate.onset_ms);
        prop_assert!(
            close(renamed[position].score, candidate.score),
            "position {}: {:?} vs {:?}",
            position,
            candidate,
            renamed[position]
        );
        let tied = original
            .iter()
            .filter(|other| close(other.score, candidate.score))
            .count();
        if tied == 1 {
            prop_assert_eq!(&renamed[position].instance, &name);
        }
    }
    Ok(())
}

/// The same verdict under the renaming: its kind (from the rules' roles, never a name), its
/// datacenter, instances and hosts renamed.
fn same_verdict(
    original: Option<&Verdict>,
    renamed: Option<&Verdict>,
    renaming: &Renaming,
) -> Result<(), TestCaseError> {
    match (original, renamed) {
        (None, None) => Ok(()),
        (Some(before), Some(after)) => {
            prop_assert_eq!(&before.kind, &after.kind);
            prop_assert_eq!(renaming.dc(&before.dc), after.dc.clone());
            let set = |names: Vec<String>| names.into_iter().collect::<std::collections::BTreeSet<_>>();
            prop_assert_eq!(
                set(before.instances.iter().map(|name| renaming.instance(name)).collect()),
                set(after.instances.clone())
            );
            prop_assert_eq!(
                set(before.hosts.iter().map(|name| renaming.host(name)).collect()),
                set(after.hosts.clone())
            );
            Ok(())
        }
        (before, after) => Err(TestCaseError::fail(format!("verdict {before:?} became {after:?}"))),
    }
}

/// Anomalies in a canonical order (by name, then everything else), to compare sets whose
/// equal-score members may come in another order.
fn canonical(mut anomalies: Vec<Anomaly>) -> Vec<Anomaly> {
    anomalies.sort_by(|a, b| {
        (&a.instance, &a.metric, a.class, &a.peer, a.onset_ms, a.rounds)
            .cmp(&(&b.instance, &b.metric, b.class, &b.peer, b.onset_ms, b.rounds))
            .then(a.score.total_cmp(&b.score))
    });
    anomalies
}

// --- rank over arbitrary anomalies ---

/// A fleet's placement and an arbitrary set of anomalies on it, for [`Detector::rank`].
#[derive(Debug, Clone)]
struct RankCase {
    services: usize,
    /// Per instance: service, datacenter, host (indices).
    instances: Vec<(usize, usize, usize)>,
    /// Service pairs (caller, callee, same_dc).
    dependencies: Vec<(usize, usize, bool)>,
    /// Instance index, class, peer (an instance, or `ghosts` + k for a name no instance has),
    /// score, onset in ms.
    anomalies: Vec<(Index, Class, Option<Index>, f64, i64)>,
    rename_seed: u64,
}

const CLASSES: [Class; 6] = [
    Class::Availability,
    Class::Errors,
    Class::Latency,
    Class::Saturation,
    Class::Traffic,
    Class::Restart,
];

/// Up to 4 services, 3 datacenters, 4 hosts per datacenter and 14 instances; up to 24
/// anomalies with any class, a peer one time in two (sometimes a name no instance has), scores
/// from 0 to 30 and onsets on and off the interval grid.
fn rank_cases() -> impl Strategy<Value = RankCase> {
    (1usize..=4, 1usize..=3, 1usize..=4).prop_flat_map(|(services, dcs, hosts)| {
        (
            Just(services),
            prop::collection::vec((0..services, 0..dcs, 0..hosts), 1..=14),
            prop::collection::vec((0..services, 0..services, any::<bool>()), 0..=4),
            prop::collection::vec(
                (
                    any::<Index>(),
                    prop::sample::select(CLASSES.to_vec()),
                    prop::option::of(any::<Index>()),
                    0.0f64..30.0,
                    prop_oneof![(0i64..6).prop_map(|step| step * INTERVAL_MS), 0i64..60_000],
                ),
                0..=24,
            ),
            any::<u64>(),
        )
            .prop_map(|(services, instances, dependencies, anomalies, rename_seed)| RankCase {
                services,
                instances,
                dependencies,
                anomalies,
                rename_seed,
            })
    })
}

/// Names of a [`RankCase`]: per-instance infos, the dependency list, the anomalies, and the
/// name lists (datacenters, hosts, services, instances and ghost peers).
fn rank_inputs(case: &RankCase) -> (Vec<InstanceInfo>, Vec<Dependency>, Vec<Anomaly>, [Vec<String>; 4]) {
    let infos: Vec<InstanceInfo> = case
        .instances
        .iter()
        .enumerate()
        .map(|(index, &(service, dc, host))| InstanceInfo {
            name: format!("i{index}"),
            dc: format!("dc-{dc}"),
            host: format!("dc-{dc}-host-{host}"),
            service: format!("svc{service}"),
        })
        .collect();
    let ghosts = 2;
    let dependencies = case
        .dependencies
        .iter()
        .map(|&(caller, callee, same_dc)| Dependency {
            caller: format!("svc{caller}"),
            callee: format!("svc{callee}"),
            same_dc,
        })
        .collect();
    let anomalies = case
        .anomalies
        .iter()
        .map(|(instance, class, peer, score, onset_ms)| Anomaly {
            instance: infos[instance.index(infos.len())].name.clone(),
            metric: format!("{class:?}").to_lowercase(),
            class: *class,
            peer: peer.as_ref().map(|peer| {
                let index = peer.index(infos.len() + ghosts);
                infos
                    .get(index)
                    .map_or_else(|| format!("ghost{}", index - infos.len()), |info| info.name.clone())
            }),
            score: *score,
            onset_ms: *onset_ms,
            rounds: 1,
            labels: BTreeMap::new(),
            value: 0.0,
            baseline: 0.0,
            deviation: 0.0,
            resource: None,
            outbound: false,
        })
        .collect();
    let unique = |names: Vec<String>| -> Vec<String> {
        let mut names = names;
        names.sort();
        names.dedup();
        names
    };
    let mut instance_names: Vec<String> = infos.iter().map(|info| info.name.clone()).collect();
    instance_names.extend((0..ghosts).map(|ghost| format!("ghost{ghost}")));
    let names = [
        unique(infos.iter().map(|info| info.dc.clone()).collect()),
        unique(infos.iter().map(|info| info.host.clone()).collect()),
        unique((0..case.services).map(|service| format!("svc{service}")).collect()),
        instance_names,
    ];
    (infos, dependencies, anomalies, names)
}

/// A detector that knows `infos` (observed once, without samples) and has no rules: enough for
/// [`Detector::rank`].
fn ranking_detector(infos: &[InstanceInfo], dependencies: Vec<Dependency>) -> Detector {
    let mut detector = Detector::new(Vec::new(), dependencies, INTERVAL_MS, Settings::default());
    for info in infos {
        detector.observe(0, info, Vec::new());
    }
    detector
}

proptest! {
    #![proptest_config(config(RANK_CASES))]

    /// Renaming every datacenter, host, service and instance (and peer) consistently maps
    /// [`Detector::rank`]'s ranking of any set of anomalies onto itself: the ranking reads
    /// names only to tell them apart, never to order evidence.
    #[test]
    fn rank_is_invariant_under_renaming(case in rank_cases()) {
        let (infos, dependencies, anomalies, [dcs, hosts, services, instances]) = rank_inputs(&case);
        let renaming = Renaming::random(case.rename_seed, &dcs, &hosts, &services, &instances);
        let original = ranking_detector(&infos, dependencies.clone());
        let renamed_infos: Vec<InstanceInfo> = infos.iter().map(|info| renaming.info(info)).collect();
        let renamed = ranking_detector(
            &renamed_infos,
            dependencies.iter().map(|dependency| renaming.dependency(dependency)).collect(),
        );
        let renamed_anomalies: Vec<Anomaly> = anomalies.iter().map(|anomaly| renaming.anomaly(anomaly)).collect();
        same_ranking(&original.rank(&anomalies), &renamed.rank(&renamed_anomalies), &renaming)?;
    }
}

// === generated fleets, samples in ===

/// Roles of a generated fleet (the simulated fleet's services, docs/scenarios.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Api,
    Backend,
    Redis,
    Db,
    Voice,
    Media,
}

const ROLES: [Role; 6] = [
    Role::Api,
    Role::Backend,
    Role::Redis,
    Role::Db,
    Role::Voice,
    Role::Media,
];

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Api => "api",
            Role::Backend => "backend",
            Role::Redis => "redis",
            Role::Db => "db",
            Role::Voice => "voice",
            Role::Media => "media",
        }
    }
}

/// Who calls whom, as `epicenter eval` has it for the simulated fleet.
const DEPENDENCIES: [(Role, Role, bool); 4] = [
    (Role::Api, Role::Backend, true),
    (Role::Backend, Role::Redis, false),
    (Role::Backend, Role::Db, true),
    (Role::Voice, Role::Media, true),
];

/// One faulty instance.
#[derive(Debug, Clone)]
struct FaultSpec {
    instance: Index,
    /// Stops answering during the fault (an availability anomaly of its own).
    silent: bool,
    /// How far its series (and its callers' series towards it) move the bad way.
    factor: f64,
    /// The share of those series that move.
    share: f64,
}

/// The shape of a generated fleet: instances per role and datacenter, hosts, noise and faults.
#[derive(Debug, Clone)]
struct Shape {
    dcs: usize,
    /// Instances per datacenter, in [`ROLES`] order.
    counts: [usize; 6],
    hosts: usize,
    placement_seed: u64,
    noise_seed: u64,
    /// Relative noise of gauges and counter increases.
    noise: f64,
    faults: Vec<FaultSpec>,
    rename_seed: u64,
}

/// One to three datacenters with up to 2 API workers, 1–4 backends, 1–3 Redis nodes, a
/// database, up to 2 voice nodes and 1–3 media servers each, on 1–4 hosts per datacenter;
/// noise up to 8 %; one to three faulty instances (a quarter of them silent), their series
/// moving by a factor of 1.5 to 20.
fn shapes() -> impl Strategy<Value = Shape> {
    let fault = (any::<Index>(), prop::bool::weighted(0.25), 1.5f64..20.0, 0.3f64..=1.0).prop_map(
        |(instance, silent, factor, share)| FaultSpec {
            instance,
            silent,
            factor,
            share,
        },
    );
    (
        1usize..=3,
        (0usize..=2, 1usize..=4, 1usize..=3, 0usize..=2, 1usize..=3),
        1usize..=4,
        any::<u64>(),
        any::<u64>(),
        prop_oneof![Just(0.0), 0.0f64..0.08],
        prop::collection::vec(fault, 1..=3),
        any::<u64>(),
    )
        .prop_map(
            |(
                dcs,
                (apis, backends, redis, voices, media),
                hosts,
                placement_seed,
                noise_seed,
                noise,
                faults,
                rename_seed,
            )| {
                Shape {
                    dcs,
                    counts: [apis, backends, redis, 1, voices, media],
                    hosts,
                    placement_seed,
                    noise_seed,
                    noise,
                    faults,
                    rename_seed,
                }
            },
        )
}

/// An instance of a generated fleet, by identity (names come from a [`Naming`]).
#[derive(Debug, Clone)]
struct Member {
    role: Role,
    dc: usize,
    ordinal: usize,
    host: usize,
}

/// A label value, by identity.
#[derive(Debug, Clone)]
enum Value {
    Fixed(&'static str),
    /// An instance's name.
    Name(usize),
    /// Lettuce's `remote`: `redis/<name>:6379`.
    Remote(usize),
}

/// How a series' value moves from round to round.
#[derive(Debug, Clone, Copy)]
enum Model {
    Constant(f64),
    Gauge(f64),
    Counter(f64),
    Sum {
        rate: f64,
        mean: f64,
    },
    /// A summary's `_count`: a number of observations, not in the family's unit (never scaled).
    Count(f64),
}

/// One series of a generated fleet.
#[derive(Debug, Clone)]
struct SeriesSpec {
    member: usize,
    metric: &'static str,
    labels: Vec<(&'static str, Value)>,
    model: Model,
    peer: Option<usize>,
    /// The bad direction and floor of the rule that reads the value, if one does.
    spike: Option<(Bad, f64)>,
}

/// A generated fleet: members, their series, and who is faulty.
#[derive(Debug)]
struct Fleet {
    shape: Shape,
    members: Vec<Member>,
    series: Vec<SeriesSpec>,
    /// Per member: (factor, share, silent) while the fault is on.
    faults: HashMap<usize, (f64, f64, bool)>,
}

/// The rule that reads a sample's value (not a `_count` half, not a restart), as
/// `Detector::observe` finds rules: by family name and `match` labels.
fn value_rule<'a>(rules: &'a [Rule], metric: &str, labels: &BTreeMap<String, String>) -> Option<&'a Rule> {
    rules.iter().find(|rule| {
        let family = rule.spec.metric.as_str();
        let named = if rule.spec.kind == ValueKind::Mean {
            metric.strip_prefix(family) == Some("_sum")
        } else {
            metric == family
        };
        named && rule.spec.kind != ValueKind::Restart && rule.matches(labels)
    })
}

impl Fleet {
    fn new(shape: &Shape) -> Fleet {
        let mut members = Vec::new();
        for dc in 0..shape.dcs {
            for (role, count) in ROLES.into_iter().zip(shape.counts) {
                for ordinal in 0..count {
                    let index = members.len() as u64;
                    let host = (splitmix(shape.placement_seed ^ index) % shape.hosts as u64) as usize;
                    members.push(Member {
                        role,
                        dc,
                        ordinal,
                        host,
                    });
                }
            }
        }
        let of = |role: Role, dc: usize| -> Vec<usize> {
            (0..members.len())
                .filter(|&index| members[index].role == role && members[index].dc == dc)
                .collect()
        };
        let mut series = Vec::new();
        let mut add = |member: usize, metric, labels: Vec<(&'static str, Value)>, model, peer| {
            series.push(SeriesSpec {
                member,
                metric,
                labels,
                model,
                peer,
                spike: None,
            });
        };
        for (index, member) in members.iter().enumerate() {
            use Model::{Constant, Count, Counter, Gauge, Sum};
            use Value::{Fixed, Name, Remote};
            add(index, "up", vec![], Constant(1.0), None);
            match member.role {
                Role::Api => {
                    for (code, rate) in [("200", 400.0), ("503", 0.1)] {
                        add(
                            index,
                            "http_requests_total",
                            vec![("code", Fixed(code))],
                            Counter(rate),
                            None,
                        );
                    }
                    let latency = Sum {
                        rate: 400.0,
                        mean: 0.05,
                    };
                    add(index, "http_request_duration_seconds_sum", vec![], latency, None);
                    add(index, "http_request_duration_seconds_count", vec![], Count(400.0), None);
                    add(index, "api_workers_busy", vec![], Gauge(12.0), None);
                }
                Role::Backend => {
                    add(index, "jetty_threads_busy", vec![], Gauge(40.0), None);
                    for db in of(Role::Db, member.dc) {
                        let pool = || vec![("pool", Name(db))];
                        add(index, "hikaricp_connections_pending", pool(), Gauge(0.0), Some(db));
                        let acquire = Sum {
                            rate: 50.0,
                            mean: 0.000_4,
                        };
                        add(
                            index,
                            "hikaricp_connections_acquire_seconds_sum",
                            pool(),
                            acquire,
                            Some(db),
                        );
                        add(
                            index,
                            "hikaricp_connections_acquire_seconds_count",
                            pool(),
                            Count(50.0),
                            Some(db),
                        );
                    }
                    // Every Redis node of its datacenter, and the first of the next one.
                    let mut nodes = of(Role::Redis, member.dc);
                    if shape.dcs > 1 {
                        nodes.extend(of(Role::Redis, (member.dc + 1) % shape.dcs).first());
                    }
                    for node in nodes {
                        let pool = || vec![("name", Name(node)), ("type", Fixed("GenericObjectPool"))];
                        add(
                            index,
                            "commons_pool2_num_waiters_threads",
                            pool(),
                            Gauge(0.0),
                            Some(node),
                        );
                        add(
                            index,
                            "commons_pool2_num_active_objects",
                            pool(),
                            Gauge(3.0),
                            Some(node),
                        );
                        let lettuce = || vec![("command", Fixed("GET")), ("remote", Remote(node))];
                        let completion = Sum {
                            rate: 300.0,
                            mean: 0.000_5,
                        };
                        add(
                            index,
                            "lettuce_command_completion_seconds_sum",
                            lettuce(),
                            completion,
                            Some(node),
                        );
                        add(
                            index,
                            "lettuce_command_completion_seconds_count",
                            lettuce(),
                            Count(300.0),
                            Some(node),
                        );
                    }
                }
                Role::Redis => {
                    add(index, "redis_up", vec![], Constant(1.0), None);
                    add(index, "redis_connected_clients", vec![], Gauge(120.0), None);
                    add(index, "redis_commands_processed_total", vec![], Counter(12_000.0), None);
                    let started = Constant((START_MS / 1000 - 86_400) as f64);
                    add(index, "process_start_time_seconds", vec![], started, None);
                }
                Role::Db => {
                    add(index, "pg_up", vec![], Constant(1.0), None);
                    for (state, level) in [("active", 12.0), ("idle", 18.0)] {
                        add(
                            index,
                            "pg_stat_activity_count",
                            vec![("state", Fixed(state))],
                            Gauge(level),
                            None,
                        );
                    }
                }
                Role::Voice => {
                    let queue = vec![("registered_name", Fixed("voice_state_sup"))];
                    add(index, "erlang_vm_process_message_queue_len", queue, Gauge(40.0), None);
                    for media in of(Role::Media, member.dc) {
                        let peer = vec![("peer", Name(media))];
                        add(index, "voice_state_media_rpc_total", peer, Counter(60.0), Some(media));
                    }
                }
                Role::Media => {
                    add(index, "media_rpc_received_total", vec![], Counter(2_400.0), None);
                }
            }
        }
        let mut faults = HashMap::new();
        for fault in &shape.faults {
            faults.insert(
                fault.instance.index(members.len()),
                (fault.factor, fault.share, fault.silent),
            );
        }
        let mut fleet = Fleet {
            shape: shape.clone(),
            members,
            series,
            faults,
        };
        let rules = rules::parse(rules::SHIPPED).expect("the shipped rules parse");
        let naming = Naming::canonical(&fleet);
        for index in 0..fleet.series.len() {
            let labels = naming.labels(&fleet, &fleet.series[index]);
            let spike =
                value_rule(&rules, fleet.series[index].metric, &labels).map(|rule| (rule.spec.bad, rule.spec.floor));
            fleet.series[index].spike = spike;
        }
        fleet
    }

    /// Every member's series' values in `round` (totals kept in `state`), in original units.
    fn values(&self, round: usize, state: &mut [f64]) {
        let seconds = INTERVAL_MS as f64 / 1000.0;
        let fault_on = round >= QUIET_ROUNDS;
        for (index, (spec, value)) in self.series.iter().zip(state.iter_mut()).enumerate() {
            let jitter = self.shape.noise * (2.0 * unit(self.shape.noise_seed, index as u64, round as u64) - 1.0);
            // The fault moves this series when it belongs to, or points at, a faulty member.
            let fault = [Some(spec.member), spec.peer]
                .into_iter()
                .flatten()
                .find_map(|member| self.faults.get(&member))
                .filter(|&&(_, share, _)| fault_on && unit(self.shape.noise_seed, index as u64, u64::MAX) < share);
            let moved = |value: f64, unit_amount: f64| match (fault, spec.spike) {
                (Some(&(factor, _, _)), Some((Bad::Up, floor))) => {
                    factor * value + (factor - 1.0) * floor * unit_amount
                }
                (Some(&(factor, _, _)), Some((Bad::Down, _))) => value / factor,
                _ => value,
            };
            *value = match spec.model {
                Model::Constant(constant) => match (fault, spec.spike) {
                    (Some(_), Some((Bad::Down, _))) => 0.0,
                    _ => constant,
                },
                Model::Gauge(level) => moved(level * (1.0 + jitter), 1.0),
                Model::Counter(rate) => *value + moved(rate * seconds * (1.0 + jitter), seconds),
                Model::Sum { rate, mean } => {
                    let observations = rate * seconds;
                    *value + moved(observations * mean * (1.0 + jitter), observations)
                }
                Model::Count(rate) => *value + rate * seconds,
            };
        }
    }

    /// Whether `member` is silent in `round`.
    fn silent(&self, member: usize, round: usize) -> bool {
        round >= QUIET_ROUNDS && self.faults.get(&member).is_some_and(|&(_, _, silent)| silent)
    }
}

/// The names of a generated fleet's datacenters, hosts, services and instances.
#[derive(Debug, Clone)]
struct Naming {
    dcs: Vec<String>,
    /// Per datacenter, per host.
    hosts: Vec<Vec<String>>,
    /// In [`ROLES`] order.
    services: Vec<String>,
    instances: Vec<String>,
}

impl Naming {
    /// The simulated fleet's names: `dc-2`, `dc-2-host-3`, `redis`, `redis-2-1`.
    fn canonical(fleet: &Fleet) -> Naming {
        let dcs = fleet.shape.dcs;
        Naming {
            dcs: (1..=dcs).map(|dc| format!("dc-{dc}")).collect(),
            hosts: (1..=dcs)
                .map(|dc| {
                    (1..=fleet.shape.hosts)
                        .map(|host| format!("dc-{dc}-host-{host}"))
                        .collect()
                })
                .collect(),
            services: ROLES.iter().map(|role| role.name().to_string()).collect(),
            instances: fleet
                .members
                .iter()
                .map(|member| format!("{}-{}-{}", member.role.name(), member.dc + 1, member.ordinal + 1))
                .collect(),
        }
    }

    /// This naming under `renaming`.
    fn renamed(&self, renaming: &Renaming) -> Naming {
        Naming {
            dcs: self.dcs.iter().map(|dc| renaming.dc(dc)).collect(),
            hosts: self
                .hosts
                .iter()
                .map(|hosts| hosts.iter().map(|host| renaming.host(host)).collect())
                .collect(),
            services: self.services.iter().map(|service| renaming.service(service)).collect(),
            instances: self
                .instances
                .iter()
                .map(|instance| renaming.instance(instance))
                .collect(),
        }
    }

    /// The renaming that keeps every name here.
    fn identity(&self) -> Renaming {
        let keep = |names: &mut dyn Iterator<Item = &String>| -> HashMap<String, String> {
            names.map(|name| (name.clone(), name.clone())).collect()
        };
        Renaming {
            dcs: keep(&mut self.dcs.iter()),
            hosts: keep(&mut self.hosts.iter().flatten()),
            services: keep(&mut self.services.iter()),
            instances: keep(&mut self.instances.iter()),
        }
    }

    /// A random renaming of every name here.
    fn random_renaming(&self, seed: u64) -> Renaming {
        let hosts: Vec<String> = self.hosts.iter().flatten().cloned().collect();
        Renaming::random(seed, &self.dcs, &hosts, &self.services, &self.instances)
    }

    fn service(&self, role: Role) -> &str {
        let position = ROLES.iter().position(|other| *other == role).unwrap_or(0);
        &self.services[position]
    }

    fn info(&self, fleet: &Fleet, member: usize) -> InstanceInfo {
        let identity = &fleet.members[member];
        InstanceInfo {
            name: self.instances[member].clone(),
            dc: self.dcs[identity.dc].clone(),
            host: self.hosts[identity.dc][identity.host].clone(),
            service: self.service(identity.role).to_string(),
        }
    }

    fn dependencies(&self) -> Vec<Dependency> {
        DEPENDENCIES
            .iter()
            .map(|&(caller, callee, same_dc)| Dependency {
                caller: self.service(caller).to_string(),
                callee: self.service(callee).to_string(),
                same_dc,
            })
            .collect()
    }

    /// A series' labels: the target labels a scrape adds (`job`, `instance`, `dc`) and the
    /// family's own.
    fn labels(&self, fleet: &Fleet, spec: &SeriesSpec) -> BTreeMap<String, String> {
        let member = &fleet.members[spec.member];
        let mut labels: BTreeMap<String, String> = BTreeMap::new();
        labels.insert("job".to_string(), self.service(member.role).to_string());
        labels.insert("instance".to_string(), format!("{}:9100", self.instances[spec.member]));
        labels.insert("dc".to_string(), self.dcs[member.dc].clone());
        for (name, value) in &spec.labels {
            let value = match value {
                Value::Fixed(text) => text.to_string(),
                Value::Name(index) => self.instances[*index].clone(),
                Value::Remote(index) => format!("redis/{}:6379", self.instances[*index]),
            };
            labels.insert(name.to_string(), value);
        }
        labels
    }
}

/// Feeds a generated fleet to a detector over `rules`, named by `naming`, every value in the
/// family's unit multiplied by `scale` (`_count`s are counts: not scaled); one assessment per
/// round.
fn run_fleet(fleet: &Fleet, naming: &Naming, rules: Vec<Rule>, scale: f64) -> Vec<Assessment> {
    let mut detector = Detector::new(rules, naming.dependencies(), INTERVAL_MS, Settings::default());
    let infos: Vec<InstanceInfo> = (0..fleet.members.len())
        .map(|member| naming.info(fleet, member))
        .collect();
    let labels: Vec<BTreeMap<String, String>> = fleet.series.iter().map(|spec| naming.labels(fleet, spec)).collect();
    let mut state = vec![0.0; fleet.series.len()];
    let mut assessments = Vec::new();
    for round in 0..QUIET_ROUNDS + FAULT_ROUNDS {
        fleet.values(round, &mut state);
        let time_ms = START_MS + round as i64 * INTERVAL_MS;
        for (member, info) in infos.iter().enumerate() {
            if fleet.silent(member, round) {
                continue;
            }
            let samples = fleet
                .series
                .iter()
                .enumerate()
                .filter(|(_, spec)| spec.member == member)
                .map(|(index, spec)| {
                    let factor = if matches!(spec.model, Model::Count(_)) {
                        1.0
                    } else {
                        scale
                    };
                    (spec.metric, labels[index].clone(), state[index] * factor)
                });
            detector.observe(time_ms, info, samples);
        }
        assessments.push(detector.assess(time_ms));
    }
    assessments
}

proptest! {
    #![proptest_config(config(FLEET_CASES))]

    /// End to end: a fleet whose names (placement, target and peer label values, dependency
    /// configuration) are all renamed gives, round after round, the same anomalies and the
    /// same ranking under the renaming. Series keys, peer resolution and the ranking see only
    /// names, and each only to tell instances apart.
    #[test]
    fn assessments_are_invariant_under_renaming(shape in shapes()) {
        let fleet = Fleet::new(&shape);
        let rules = rules::parse(rules::SHIPPED).expect("the shipped rules parse");
        let naming = Naming::canonical(&fleet);
        let renaming = naming.random_renaming(shape.rename_seed);
        let original = run_fleet(&fleet, &naming, rules.clone(), 1.0);
        let renamed = run_fleet(&fleet, &naming.renamed(&renaming), rules, 1.0);
        let mut anomalous_rounds = 0;
        // Incidents follow leaders, and a tie is broken by name: compare them until the first
        // round with a tie at the top of the whole ranking or at the top of any evidence an
        // incident was judged on (the detector says so: `tie_broken_by_name`).
        let mut untied = true;
        for (before, after) in original.iter().zip(&renamed) {
            let mapped: Vec<Anomaly> = before.anomalies.iter().map(|anomaly| renaming.anomaly(anomaly)).collect();
            let renamed: Vec<Anomaly> = after
                .anomalies
                .iter()
                .map(|anomaly| Anomaly { labels: BTreeMap::new(), ..anomaly.clone() })
                .collect();
            prop_assert_eq!(canonical(mapped), canonical(renamed), "round at {}", before.time_ms);
            same_ranking(&before.candidates, &after.candidates, &renaming)?;
            anomalous_rounds += usize::from(!before.anomalies.is_empty());
            untied &= match before.candidates.as_slice() {
                [first, second, ..] => !close(first.score, second.score),
                _ => true,
            } && !before.tie_broken_by_name
                && !after.tie_broken_by_name;
            if untied {
                prop_assert_eq!(before.incidents.len(), after.incidents.len(), "round at {}", before.time_ms);
                // Incidents opened in one round come in their leaders' order, which a tie
                // left after the first one took its evidence may decide: matched by what
                // they name, not by position.
                for before in &before.incidents {
                    let named: std::collections::BTreeSet<String> =
                        before.instances.iter().map(|name| renaming.instance(name)).collect();
                    let after = after
                        .incidents
                        .iter()
                        .find(|after| after.instances.iter().cloned().collect::<std::collections::BTreeSet<_>>() == named);
                    same_verdict(Some(before), after, &renaming)?;
                }
            }
        }
        // Only fleets where the fault shows count: the property is not checked on quiet
        // fleets alone (a mild fault on a few series may show nothing).
        prop_assume!(anomalous_rounds > 0);
    }

    /// End to end: a fleet measured in another unit — every value, and every rule's floor,
    /// multiplied by c (from 1/1000 to 1000) — gives the same anomalies with the same scores,
    /// and the same ranking: the detector's statistics are relative to the baseline and the
    /// floors are the only absolute amounts.
    #[test]
    fn assessments_are_invariant_under_a_change_of_unit(shape in shapes(), exponent in -3.0f64..3.0) {
        let scale = 10f64.powf(exponent);
        let fleet = Fleet::new(&shape);
        let rules = rules::parse(rules::SHIPPED).expect("the shipped rules parse");
        let mut scaled_rules = rules.clone();
        for rule in &mut scaled_rules {
            rule.spec.floor *= scale;
        }
        let naming = Naming::canonical(&fleet);
        let original = run_fleet(&fleet, &naming, rules, 1.0);
        let scaled = run_fleet(&fleet, &naming, scaled_rules, scale);
        let identity = naming.identity();
        for (before, after) in original.iter().zip(&scaled) {
            let (before_anomalies, after_anomalies) = (canonical(before.anomalies.clone()), canonical(after.anomalies.clone()));
            prop_assert_eq!(before_anomalies.len(), after_anomalies.len(), "round at {}", before.time_ms);
            for (one, other) in before_anomalies.iter().zip(&after_anomalies) {
                prop_assert!(close(one.score, other.score), "{:?} vs {:?}", one, other);
                // Values, baselines and deviations are in the fleet's unit (but a target's
                // silence, `up` 1 -> 0, which has none).
                let unit = if one.metric == "up" && one.labels.is_empty() { 1.0 } else { scale };
                for (before_value, after_value) in [(one.value, other.value), (one.baseline, other.baseline), (one.deviation, other.deviation)] {
                    prop_assert!(close(before_value * unit, after_value), "{:?} vs {:?}", one, other);
                }
                let unitless = |anomaly: &Anomaly| Anomaly { score: 0.0, value: 0.0, baseline: 0.0, deviation: 0.0, ..anomaly.clone() };
                prop_assert_eq!(unitless(one), unitless(other));
            }
            same_ranking(&before.candidates, &after.candidates, &identity)?;
        }
    }
}

// === one signal, scaled ===

/// A signal's interval values (and, for a mean, the observations counted per interval), with
/// the rule's kind, bad direction and floor.
#[derive(Debug, Clone)]
struct Trace {
    kind: ValueKind,
    bad: Bad,
    floor: f64,
    values: Vec<f64>,
    counts: Vec<f64>,
}

impl Trace {
    /// The readings a scrape would give: the value (gauge), the running total (counter), or
    /// the running sum and count (mean); the first reading only starts a counter or a mean.
    fn readings(&self, scale: f64) -> Vec<(i64, f64, f64)> {
        let seconds = INTERVAL_MS as f64 / 1000.0;
        let (mut total, mut count) = (1_000.0 * self.floor, 100.0);
        let mut readings = vec![(START_MS, total * scale, count)];
        for (step, (value, observations)) in self.values.iter().zip(&self.counts).enumerate() {
            let reading = match self.kind {
                ValueKind::Gauge => *value,
                ValueKind::Counter => {
                    total += value * seconds;
                    total
                }
                _ => {
                    total += value * observations;
                    count += observations;
                    total
                }
            };
            readings.push((START_MS + (step as i64 + 1) * INTERVAL_MS, reading * scale, count));
        }
        readings
    }

    /// The smallest interval value.
    fn smallest(&self) -> f64 {
        self.values.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

/// Gauges, counters and means going either way; a floor from 1/1000 to 1000; 20–70 intervals
/// around a level (`levels` floors; 0 gives a flat zero series) with up to 50 % noise (or none),
/// and spikes (×1–30 the bad way) one interval in seven.
fn traces(levels: std::ops::Range<f64>) -> impl Strategy<Value = Trace> {
    (
        prop::sample::select(vec![ValueKind::Gauge, ValueKind::Counter, ValueKind::Mean]),
        prop::sample::select(vec![Bad::Up, Bad::Down]),
        -3.0f64..3.0,
        levels,
        prop_oneof![Just(0.0), 0.0f64..0.5],
        prop::collection::vec(
            (-1.0f64..1.0, prop::option::weighted(1.0 / 7.0, 1.0f64..30.0), 1u32..200),
            20..70,
        ),
    )
        .prop_map(|(kind, bad, floor_exponent, level, noise, steps)| {
            let floor = 10f64.powf(floor_exponent);
            let (values, counts) = steps
                .into_iter()
                .map(|(jitter, spike, observations)| {
                    let value = floor * level * (1.0 + noise * jitter);
                    let value = match (spike, bad) {
                        (Some(factor), Bad::Up) => value * factor,
                        (Some(factor), Bad::Down) => value / factor,
                        (None, _) => value,
                    };
                    (value, f64::from(observations))
                })
                .unzip();
            Trace {
                kind,
                bad,
                floor,
                values,
                counts,
            }
        })
}

/// Per reading: `None` when it gives no interval value (the first one), else the interval
/// value, score, anomaly, and the signal's onset and run length after the judgement.
type Judged = Vec<Option<(f64, f64, bool, Option<i64>, u32)>>;

/// Feeds `trace`'s readings × `scale` to a signal with `floor` and default tuning.
fn judge(trace: &Trace, scale: f64, floor: f64) -> Judged {
    let tuning = Tuning::default();
    let mut signal = Signal::new(trace.kind, trace.bad, floor);
    trace
        .readings(scale)
        .into_iter()
        .map(|(time_ms, value, count)| {
            let interval_value = signal.interval_value(time_ms, value, count)?;
            let judgement = signal.judge(time_ms, interval_value, &tuning);
            Some((
                interval_value,
                judgement.score,
                judgement.anomalous,
                signal.onset_ms,
                signal.anomalous_for,
            ))
        })
        .collect()
}

/// Checks that `scaled` is `original` with every interval value × `scale` and every
/// judgement (score, anomaly, onset, run length) the same.
fn same_judgements(original: &Judged, scaled: &Judged, scale: f64) -> Result<(), TestCaseError> {
    prop_assert_eq!(original.len(), scaled.len());
    for (step, (one, other)) in original.iter().zip(scaled).enumerate() {
        match (one, other) {
            (None, None) => {}
            (
                Some((value, score, anomalous, onset, rounds)),
                Some((scaled_value, scaled_score, scaled_anomalous, scaled_onset, scaled_rounds)),
            ) => {
                prop_assert!(
                    close(value * scale, *scaled_value)
                        || (value * scale - scaled_value).abs() <= 1e-9 * scale.max(1.0),
                    "step {}: value {} × {} vs {}",
                    step,
                    value,
                    scale,
                    scaled_value
                );
                prop_assert!(
                    close(*score, *scaled_score),
                    "step {}: score {} vs {}",
                    step,
                    score,
                    scaled_score
                );
                prop_assert_eq!(anomalous, scaled_anomalous, "step {}", step);
                prop_assert_eq!(onset, scaled_onset, "step {}", step);
                prop_assert_eq!(rounds, scaled_rounds, "step {}", step);
            }
            _ => prop_assert!(false, "step {}: {:?} vs {:?}", step, one, other),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(SIGNAL_CASES))]

    /// A change of unit — values and floor multiplied by the same c > 0 — keeps every
    /// judgement of a gauge, counter or mean: median, MAD and all three terms of the robust
    /// scale scale with c, so the score (deviation / scale) does not move.
    #[test]
    fn scaling_values_and_floor_together_keeps_every_judgement(trace in traces(0.0..50.0), exponent in -3.0f64..3.0) {
        let scale = 10f64.powf(exponent);
        let original = judge(&trace, 1.0, trace.floor);
        let scaled = judge(&trace, scale, trace.floor * scale);
        same_judgements(&original, &scaled, scale)?;
    }

    /// With the rule's floor kept, scaling a signal by c keeps every judgement as long as the
    /// floor never binds: here every interval value, before and after scaling, is at least 2
    /// floors (so 0.1 × |median| ≥ floor / 5, and a score of 5 already means a change of at
    /// least the floor). c runs from the smallest such value up to 1000 times more.
    #[test]
    fn scaling_values_above_the_floor_keeps_every_judgement(trace in traces(3.0..50.0), position in 0.0f64..=1.0) {
        let smallest_scale = 2.0 * trace.floor / trace.smallest();
        let (low, high) = (smallest_scale.ln(), (1_000.0 * smallest_scale.max(1.0)).ln());
        let scale = (low + (high - low) * position).exp();
        prop_assume!(trace.smallest() * scale >= 2.0 * trace.floor);
        let original = judge(&trace, 1.0, trace.floor);
        let scaled = judge(&trace, scale, trace.floor);
        same_judgements(&original, &scaled, scale)?;
    }
}

/// The minimal counterexample to "scaling a signal by c > 0 keeps its score" with the rule's
/// floor kept: a flat gauge (floor 1) at 10 that jumps to 20 is 10 scales up (the scale is 10 %
/// of the median, 1) and anomalous; the same gauge × 0.01 (0.1 jumping to 0.2) is judged
/// against the floor's share of the scale, 1 / 5, so it scores 0.5, and the change (0.1) is
/// below the floor: not anomalous. This is the floor doing its job (a change smaller than the
/// smallest that can matter never counts), which is why the properties above scale the floor
/// too or stay above it.
#[test]
fn a_fixed_floor_changes_the_score_of_a_signal_scaled_below_it() {
    let tuning = Tuning::default();
    let judge_last = |scale: f64| {
        let mut signal = Signal::new(ValueKind::Gauge, Bad::Up, 1.0);
        for step in 0..12 {
            signal.judge(step * INTERVAL_MS, 10.0 * scale, &tuning);
        }
        signal.judge(12 * INTERVAL_MS, 20.0 * scale, &tuning)
    };
    let original = judge_last(1.0);
    let scaled = judge_last(0.01);
    assert!(original.anomalous && close(original.score, 10.0), "{original:?}");
    assert!(!scaled.anomalous && close(scaled.score, 0.5), "{scaled:?}");
}

/// Known bug, kept as the regression test for its fix: two series of one instance and rule
/// whose label sets differ — `{a="1", b="2"}` and `{a="1,b=2"}` — get the same key in
/// `Detector::observe` (labels written as `name=value,`), so they share one signal and the
/// later sample of a round overwrites the earlier. Here the first series jumps from 40 to 1000
/// and no anomaly is seen, because the second (steady) one is judged in its place. Renaming a
/// label value to one holding `,` or `=` can therefore merge series, which is why the renaming
/// properties keep those characters out of names.
#[test]
fn series_whose_label_values_hold_separators_are_kept_apart() {
    let rules = rules::parse(rules::SHIPPED).expect("the shipped rules parse");
    let mut detector = Detector::new(rules, Vec::new(), INTERVAL_MS, Settings::default());
    let info = InstanceInfo {
        name: "backend-1-1".to_string(),
        dc: "dc-1".to_string(),
        host: "dc-1-host-1".to_string(),
        service: "backend".to_string(),
    };
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    };
    let mut anomalies = 0;
    for round in 0..20 {
        let time_ms = START_MS + round * INTERVAL_MS;
        let jumping = if round >= 15 { 1_000.0 } else { 40.0 };
        let samples = vec![
            ("jetty_threads_busy", labels(&[("a", "1"), ("b", "2")]), jumping),
            ("jetty_threads_busy", labels(&[("a", "1,b=2")]), 40.0),
        ];
        detector.observe(time_ms, &info, samples);
        anomalies += detector.assess(time_ms).anomalies.len();
    }
    assert_eq!(
        anomalies, 5,
        "the jump of the first series must be seen in each of its 5 rounds"
    );
}
