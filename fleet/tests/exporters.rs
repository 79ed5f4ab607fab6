//! The simulated exporters against the parser and against real captures
//! (../shared/fixtures/exposition): every exposition parses strictly, and metric names, types
//! and label names match what the real exporters print. Same seed, same samples.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Validation};
use epicenter_fleet::model::API_BUCKETS;
use epicenter_fleet::{Fleet, Scenario, Service};

const START_MS: i64 = 1_780_000_000_000;

fn fleet(name: &str, seconds: u64) -> Fleet {
    let scenario = Scenario::load(name).unwrap();
    let mut fleet = Fleet::new(&scenario, START_MS);
    for _ in 0..seconds {
        fleet.step();
    }
    fleet
}

/// Family name → (type, label names without `le`/`quantile`).
fn families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let exposition = parse(
        text.as_bytes(),
        ParseOptions {
            format: FormatChoice::Text,
            validation: Validation::Strict,
        },
    )
    .unwrap_or_else(|error| panic!("{error}\n{text}"));
    assert!(exposition.warnings.is_empty(), "{:?}", exposition.warnings);
    let mut out = BTreeMap::new();
    for family in &exposition.families {
        let mut names = BTreeSet::new();
        for sample in exposition.samples_of(family) {
            for label in exposition.labels_in(sample.labels) {
                if label.name != "le" && label.name != "quantile" {
                    names.insert(label.name.to_string());
                }
            }
        }
        out.insert(
            family.name.to_string(),
            (family.metric_type.as_str().to_string(), names),
        );
    }
    out
}

/// The exposition of the first instance of `service` in the healthy scenario's fleet, with
/// `enable` applied to the scenario, after 120 simulated seconds.
fn first_of(service: Service, enable: impl Fn(&mut Scenario)) -> String {
    let mut scenario = Scenario::load("healthy").unwrap();
    enable(&mut scenario);
    let mut fleet = Fleet::new(&scenario, START_MS);
    for _ in 0..120 {
        fleet.step();
    }
    let index = fleet
        .instances()
        .iter()
        .position(|instance| instance.service == service)
        .unwrap();
    fleet.render(index)
}

#[path = "../../collector/tests/support.rs"]
mod support;

/// `path` under the team's shared data (`../shared` or `EPICENTER_SHARED`); `None` (the test
/// says SKIPPED) on a clone without it, a failure in CI.
fn shared(path: &str) -> Option<PathBuf> {
    Some(support::shared_dir("fleet exporters")?.join(path))
}

#[test]
fn every_exposition_parses_strictly_and_carries_the_simulated_time() {
    for (name, _) in epicenter_fleet::scenario::SHIPPED {
        let fleet = fleet(name, 200);
        for (index, instance) in fleet.instances().iter().enumerate() {
            let text = fleet.render(index);
            let exposition = parse(
                text.as_bytes(),
                ParseOptions {
                    format: FormatChoice::Text,
                    validation: Validation::Strict,
                },
            )
            .unwrap_or_else(|error| panic!("{name} {}: {error}", instance.name));
            assert!(
                exposition.warnings.is_empty(),
                "{name} {}: {:?}",
                instance.name,
                exposition.warnings
            );
            assert!(!exposition.samples.is_empty());
            for sample in &exposition.samples {
                assert_eq!(sample.timestamp_ms(), Some(START_MS + 200_000), "{}", sample.name);
                assert!(sample.value.is_finite(), "{} {}", sample.name, sample.value);
            }
        }
    }
}

#[test]
fn the_same_seed_gives_identical_samples_and_another_seed_does_not() {
    let a = fleet("redis-node-loss", 300);
    let b = fleet("redis-node-loss", 300);
    let texts =
        |fleet: &Fleet| -> Vec<String> { (0..fleet.instances().len()).map(|index| fleet.render(index)).collect() };
    assert_eq!(texts(&a), texts(&b));
    let mut scenario = Scenario::load("redis-node-loss").unwrap();
    scenario.seed += 1;
    let mut other = Fleet::new(&scenario, START_MS);
    for _ in 0..300 {
        other.step();
    }
    assert_ne!(texts(&a), texts(&other));
}

/// Compares the simulated exporter of `service` with real captures: every family the
/// simulator prints that a capture also has must match its type and label names, allowing
/// only `extra_labels` (tags newer versions add) and `histogram_for_summary` (Micrometer
/// timers become histograms when percentile histograms are on). Returns how many matched.
fn compare(
    service: Service,
    captures: &[&str],
    extra_labels: &[&str],
    histogram_for_summary: &[&str],
) -> Option<usize> {
    compare_with_own(service, captures, extra_labels, histogram_for_summary, &[])
}

/// [`compare`], where families starting with one of `own` are the simulated application's
/// own (documented in docs/scenarios.md), with no exporter to match.
fn compare_with_own(
    service: Service,
    captures: &[&str],
    extra_labels: &[&str],
    histogram_for_summary: &[&str],
    own: &[&str],
) -> Option<usize> {
    let mut real: Vec<BTreeMap<String, (String, BTreeSet<String>)>> = Vec::new();
    for capture in captures {
        let path = shared(&format!("fixtures/exposition/{capture}"))?;
        real.push(families(&std::fs::read_to_string(path).unwrap()));
    }
    // With node_exporter on every host, so that the hosts' exporter is compared too (the
    // other instances print the same either way: tested below).
    let simulated = families(&first_of(service, |scenario| scenario.fleet.node_exporter = true));
    let mut matched = 0;
    for (name, (kind, labels)) in &simulated {
        let seen: Vec<&(String, BTreeSet<String>)> = real.iter().filter_map(|capture| capture.get(name)).collect();
        if seen.is_empty() && own.iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        if seen.is_empty() {
            // No capture has it (commons-pool2, Lettuce): the name must be one NAMES.md lists
            // from the exporter's source.
            if let Some(names) = shared("fixtures/exposition/NAMES.md") {
                let reference = std::fs::read_to_string(names).unwrap();
                // NAMES.md writes a timer's gauge as `<name>_{count,sum} (+`_max` gauge)`.
                let base = name.strip_suffix("_max").unwrap_or(name);
                assert!(
                    reference.contains(name.as_str()) || reference.contains(&format!("{base}_{{count,sum}}")),
                    "{name}: in no capture and not in NAMES.md"
                );
            }
            continue;
        }
        let fits = seen.iter().any(|(real_kind, real_labels)| {
            let kind_ok = real_kind == kind
                || (histogram_for_summary.contains(&name.as_str()) && real_kind == "summary" && kind == "histogram");
            let extra: Vec<&String> = labels.difference(real_labels).collect();
            let missing: Vec<&String> = real_labels.difference(labels).collect();
            kind_ok && missing.is_empty() && extra.iter().all(|label| extra_labels.contains(&label.as_str()))
        });
        assert!(fits, "{name}: simulated {kind} {labels:?}, real {seen:?}");
        matched += 1;
    }
    eprintln!(
        "{service:?}: {matched} of {} simulated families found in the captures",
        simulated.len()
    );
    Some(matched)
}

#[test]
fn redis_nodes_print_what_redis_exporter_prints() {
    let Some(matched) = compare(
        Service::Redis,
        &["redis_exporter/redis-exporter-v1.27-redis6.2-master-3-replicas.prom"],
        &[],
        &[],
    ) else {
        return;
    };
    // redis_up, instance_info, clients, connections, commands, uptime, start time, errors…
    assert!(matched >= 12, "only {matched} families matched the capture");
}

#[test]
fn the_jvm_backend_prints_what_micrometer_prints() {
    let Some(matched) = compare(
        Service::Backend,
        &[
            "java/datadog-hikaricp-micrometer.prom",
            "java/spring-boot2-zuul-jetty-hystrix-actuator.prom",
            "java/spring-boot3-actuator-tomcat-learn.prom",
        ],
        // `gc` on jvm_gc_pause from Micrometer 1.11; `error` on http_server_requests in Boot 3.
        &["gc", "error"],
        &["http_server_requests_seconds"],
    ) else {
        return;
    };
    // Jetty threads (6), HikariCP (9), GC pause (2), HTTP requests (2), process start/uptime.
    assert!(matched >= 18, "only {matched} families matched the captures");
}

/// Issue 18: the hosts' exporter prints node_exporter's names, types and label names, as
/// its end-to-end fixture and a real scrape show them (every family it prints is in one).
#[test]
fn hosts_print_what_node_exporter_prints() {
    let Some(matched) = compare(
        Service::Node,
        &[
            "node_exporter/e2e-output-linux.prom",
            "node_exporter/nri-prometheus-node-exporter-real-scrape.prom",
        ],
        &[],
        &[],
    ) else {
        return;
    };
    // CPU, three pressure stalls, two meminfo, vmstat, load, disk, filesystem, six netdev,
    // netstat, uname.
    assert_eq!(matched, 18, "only {matched} families matched the captures");
}

/// `scenario`'s fleet without and with `enable` (an exporter per host), both run 300 s: the
/// second has one instance more per host, after all of the first's, which it lists and serves
/// exactly as the first does (the new exporters' noise has generators of their own).
fn one_more_per_host(mut scenario: Scenario, enable: impl Fn(&mut Scenario)) -> (Fleet, Fleet) {
    let mut without = Fleet::new(&scenario, START_MS);
    enable(&mut scenario);
    let mut with = Fleet::new(&scenario, START_MS);
    for _ in 0..300 {
        without.step();
        with.step();
    }
    let hosts = scenario.fleet.datacenters * scenario.fleet.hosts_per_datacenter;
    assert_eq!(with.instances().len(), without.instances().len() + hosts);
    for (index, instance) in without.instances().iter().enumerate() {
        assert_eq!(&with.instances()[index], instance);
        assert_eq!(with.render(index), without.render(index), "{}", instance.name);
    }
    (without, with)
}

/// node_exporter on every host adds one `node-<d>-<h>` per host after every other instance,
/// and leaves every other instance's exposition exactly as it was (its noise has its own
/// generator): turning it on does not move the fleet the confidence was fitted on.
#[test]
fn node_exporter_adds_one_instance_per_host_and_changes_nothing_else() {
    let scenario = Scenario::load("redis-node-loss").unwrap();
    let (without, with) = one_more_per_host(scenario.clone(), |scenario| scenario.fleet.node_exporter = true);
    let hosts = scenario.fleet.datacenters * scenario.fleet.hosts_per_datacenter;
    let nodes = &with.instances()[without.instances().len()..];
    assert_eq!(nodes[0].name, "node-1-1");
    assert_eq!(nodes[0].host, "dc-1-host-1");
    assert_eq!(
        nodes[hosts - 1].name,
        format!("node-3-{}", scenario.fleet.hosts_per_datacenter)
    );
    assert!(nodes.iter().all(|node| node.service == Service::Node));
    let first = with.render(without.instances().len());
    assert!(first.contains("nodename=\"dc-1-host-1\""), "{first}");
}

/// Issue 18: a host's kubelet prints cAdvisor's container families with the names and types
/// of a real kubelet scrape (nri-prometheus's capture) and its label names, written as
/// Kubernetes 1.16 renamed them (`container_name` → `container`, `pod_name` → `pod`; the
/// capture predates it, and its per-CPU `cpu` label on the usage counter is gone too);
/// `container_oom_events_total`, newer than the capture, as the spec-derived example in
/// rules/signals/examples/cadvisor.prom has it.
#[test]
fn kubelets_print_what_cadvisor_prints() {
    let Some(path) = shared("fixtures/exposition/edge_cases/cadvisor-kubelet-large-1.4MB.prom") else {
        return;
    };
    let real = families(&std::fs::read_to_string(path).unwrap());
    let example = families(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../rules/signals/examples/cadvisor.prom"
        ))
        .unwrap(),
    );
    let simulated = families(&first_of(Service::Kubelet, |scenario| scenario.fleet.cadvisor = true));
    assert_eq!(simulated.len(), 8, "{simulated:?}");
    let renamed = |labels: &BTreeSet<String>| -> BTreeSet<String> {
        labels
            .iter()
            .filter(|name| *name != "cpu")
            .map(|name| match name.as_str() {
                "container_name" => "container".to_string(),
                "pod_name" => "pod".to_string(),
                other => other.to_string(),
            })
            .collect()
    };
    for (name, (kind, labels)) in &simulated {
        let (real_kind, real_labels) = real
            .get(name)
            .or_else(|| example.get(name))
            .unwrap_or_else(|| panic!("{name}: in neither the capture nor the example"));
        assert_eq!(kind, real_kind, "{name}");
        assert_eq!(labels, &renamed(real_labels), "{name}");
    }
}

/// The kubelets add one `kubelet-<d>-<h>` per host after every other instance (node_exporters
/// included), each printing one container per instance on its host (named by `pod`), and
/// leave every other instance's exposition exactly as it was.
#[test]
fn cadvisor_adds_one_kubelet_per_host_and_changes_nothing_else() {
    let mut scenario = Scenario::load("backend-cold-start").unwrap();
    scenario.fleet.node_exporter = true;
    let (without, with) = one_more_per_host(scenario, |scenario| scenario.fleet.cadvisor = true);
    for (offset, kubelet) in with.instances()[without.instances().len()..].iter().enumerate() {
        assert_eq!(kubelet.service, Service::Kubelet);
        let text = with.render(without.instances().len() + offset);
        let exposition = parse(
            text.as_bytes(),
            ParseOptions {
                format: FormatChoice::Text,
                validation: Validation::Prometheus,
            },
        )
        .unwrap();
        let mut pods: BTreeSet<String> = BTreeSet::new();
        for sample in exposition
            .samples
            .iter()
            .filter(|sample| sample.name.as_ref() == "container_cpu_cfs_periods_total")
        {
            let labels = exposition.label_map(sample);
            pods.insert(labels["pod"].clone());
            // Ten 100 ms periods a second for the 300 s run (the backend's restart at 3m
            // started a new container with its own count).
            assert!(
                sample.value == 3000.0 || (labels["container"] == "backend" && sample.value < 3000.0),
                "{labels:?} {}",
                sample.value
            );
        }
        let expected: BTreeSet<String> = without
            .instances()
            .iter()
            .filter(|instance| instance.host == kubelet.host && instance.service != Service::Node)
            .map(|instance| instance.name.clone())
            .collect();
        assert_eq!(pods, expected, "{}", kubelet.name);
    }
    assert_eq!(with.instances()[without.instances().len()].name, "kubelet-1-1");
}

#[test]
fn the_api_tier_uses_client_pythons_default_buckets() {
    let Some(path) = shared("fixtures/exposition/python_client/client-python-histogram-default-buckets.prom") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap();
    let real: Vec<f64> = text
        .lines()
        .filter_map(|line| {
            line.split_once("le=\"")?
                .1
                .split_once('"')
                .map(|(le, _)| le.to_string())
        })
        .filter(|le| le != "+Inf")
        .map(|le| le.parse().unwrap())
        .collect();
    assert_eq!(real, API_BUCKETS.to_vec());
}

#[test]
fn scenario_mistakes_name_their_path() {
    let unknown =
        Scenario::from_yaml("name: x\nfaults:\n  - kind: node_loss\n    select: {}\n    at: 1m\n    durtion: 2m\n")
            .unwrap_err()
            .to_string();
    assert!(unknown.starts_with("faults[0].durtion"), "{unknown}");
    assert!(unknown.contains("line 6"), "{unknown}");
    let late = Scenario::from_yaml("name: x\nduration: 1m\nfaults:\n  - {kind: cold_start, select: {}, at: 2m}\n")
        .unwrap_err()
        .to_string();
    assert_eq!(late, "faults[0].at: 2m is not before the end of the run (1m)");
    let wrong = Scenario::from_yaml("name: x\nfaults:\n  - {kind: slow_node, select: {service: api}, at: 1m}\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        wrong,
        "faults[0].select.service: slow_node applies to 'redis', not 'api'"
    );
    let speed = Scenario::from_yaml("name: x\nspeed: 0\n").unwrap_err().to_string();
    assert_eq!(speed, "speed: 0 must be in (0, 1000]");
    let fast = Scenario::from_yaml("name: x\nspeed: 200\nscrape_interval: 10s\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        fast,
        "speed: 200 is faster than 100 (the 10s scrape interval must stay at least 100 ms of wall time)"
    );
    let nothing =
        Scenario::from_yaml("name: x\nfaults:\n  - {kind: node_loss, select: {instance: redis-9-9}, at: 1m}\n")
            .unwrap_err()
            .to_string();
    assert!(
        nothing.starts_with("faults[0].select: selects no redis instance"),
        "{nothing}"
    );
    // A link needs both of its ends, and two different ones; a host fault needs its host.
    let error = |yaml: &str| Scenario::from_yaml(yaml).unwrap_err().to_string();
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: link_degradation, select: {dc: dc-1}, at: 1m}\n"),
        "faults[0].peer_dc: link_degradation needs both ends: select.dc and peer_dc"
    );
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: link_degradation, select: {dc: dc-1}, peer_dc: dc-1, at: 1m}\n"),
        "faults[0].peer_dc: is dc-1, the same datacenter as select.dc: a link joins two"
    );
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: slow_node, select: {}, peer_dc: dc-2, at: 1m}\n"),
        "faults[0].peer_dc: applies to link_degradation only, not slow_node"
    );
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: host_saturation, select: {dc: dc-1}, at: 1m}\n"),
        "faults[0].select.host: host_saturation needs the host it starves"
    );
    // A parameter of another kind would be ignored: it is an error naming it; so is a value
    // the physics cannot mean (a loss above 1, a negative latency, a storm that lowers traffic).
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: node_loss, select: {instance: redis-1-1}, at: 1m, latency_seconds: 0.1}\n"),
        "faults[0].latency_seconds: applies to slow_node, slow_database, dc_degradation, link_degradation, host_saturation, host_memory_pressure, host_packet_loss only, not node_loss"
    );
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: slow_node, select: {}, at: 1m, loss: 0.1}\n"),
        "faults[0].loss: applies to dc_degradation, link_degradation, host_packet_loss only, not slow_node"
    );
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: dc_degradation, select: {dc: dc-1}, at: 1m, loss: 1.5}\n"),
        "faults[0].loss: 1.5 must be above 0 up to 1"
    );
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: slow_node, select: {}, at: 1m, latency_seconds: -0.2}\n"),
        "faults[0].latency_seconds: -0.2 must be above 0 up to 3600"
    );
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: retry_storm, select: {dc: dc-1}, at: 1m, factor: 0.5}\n"),
        "faults[0].factor: 0.5 must be from 1 up to 1000"
    );
    assert_eq!(
        error("name: x\nfaults:\n  - {kind: session_loss, select: {dc: dc-1}, at: 1m, fraction: 0}\n"),
        "faults[0].fraction: 0 must be above 0 up to 1"
    );
    // Places that do not exist are named with the key that names them.
    let misplaced = |yaml: &str| Scenario::from_yaml(yaml).unwrap_err().to_string();
    assert_eq!(
        misplaced("name: x\nfaults:\n  - {kind: link_degradation, select: {dc: dc-1}, peer_dc: dc-9, at: 1m}\n"),
        "faults[0].peer_dc: no datacenter dc-9 in this fleet (it has dc-1 … dc-3)"
    );
    assert_eq!(
        misplaced("name: x\nfaults:\n  - {kind: host_saturation, select: {host: dc-1-host-9}, at: 1m}\n"),
        "faults[0].select.host: no host dc-1-host-9 in this fleet (hosts are dc-<n>-host-<m>, n in 1..=3, m in 1..=4)"
    );
    let unknown_kind = Scenario::from_yaml("name: x\nfaults:\n  - {kind: meteor, select: {}, at: 1m}\n")
        .unwrap_err()
        .to_string();
    assert!(
        !unknown_kind.contains("faults[0].kind: faults[0].kind"),
        "{unknown_kind}"
    );
}

/// Ground truth follows from the scenario and the placement rule in docs/scenarios.md.
#[test]
fn ground_truth_names_the_faulty_instances_hosts_and_datacenters() {
    let fleet = fleet("backend-cold-start", 0);
    let truth = epicenter_fleet::truth::ground_truth(&fleet);
    assert_eq!(truth.len(), 1);
    assert_eq!(truth[0].kind, "cold_start");
    assert_eq!(truth[0].instances, ["backend-1-1", "backend-1-2"]);
    // n-th backend instance on host ((n - 1 + 1) mod 4) + 1.
    assert_eq!(truth[0].hosts, ["dc-1-host-2", "dc-1-host-3"]);
    assert_eq!(truth[0].dcs, ["dc-1"]);
    assert_eq!(truth[0].onset_ms, START_MS + 180_000);
    assert_eq!(truth[0].end_ms, None);
    let loss = epicenter_fleet::truth::ground_truth(&fleet_of("redis-node-loss"));
    assert_eq!(loss[0].hosts, ["dc-2-host-3"]);
    assert_eq!(loss[0].end_ms, Some(START_MS + 420_000));
}

fn fleet_of(name: &str) -> Fleet {
    fleet(name, 0)
}

#[test]
fn the_beam_services_print_what_prometheus_erl_prints() {
    let Some(matched) = compare_with_own(
        Service::Voice,
        &["beam/emqx-prometheus-erl-vm.prom"],
        &[],
        &[],
        // The application's own families, and epicenter's mailbox family (DESIGN.md: no
        // standard exporter reports a named process's message queue).
        &["voice_state_", "erlang_vm_process_message_queue_len"],
    ) else {
        return;
    };
    // process count and limit, reductions, memory by kind.
    assert!(matched >= 4, "only {matched} families matched the capture");
}

/// Six simulated hours of the healthy scenario, deploys included: nothing goes wrong.
#[test]
fn the_healthy_fleet_stays_healthy_through_deploys_and_a_day_shape() {
    let scenario = Scenario::load("healthy").unwrap();
    let mut fleet = Fleet::new(&scenario, START_MS);
    let (mut lowest_rate, mut highest_rate) = (f64::MAX, 0.0f64);
    for _ in 0..scenario.duration.0.as_secs() {
        fleet.step();
        let figures = fleet.headline();
        assert!(
            figures.backend_error_fraction < 0.001,
            "{} s: {figures:?}",
            fleet.second()
        );
        assert!(figures.longest_mailbox < 100.0, "{} s: {figures:?}", fleet.second());
        assert!(
            figures.db_pending < 1.0 && figures.pool_waiters < 1.0,
            "{} s: {figures:?}",
            fleet.second()
        );
        lowest_rate = lowest_rate.min(figures.api_requests_per_second);
        highest_rate = highest_rate.max(figures.api_requests_per_second);
    }
    // From 08:00 to 14:00 the daily shape climbs: traffic is not flat.
    assert!(highest_rate > 1.3 * lowest_rate, "{lowest_rate} .. {highest_rate}");
    assert!(epicenter_fleet::truth::ground_truth(&fleet).is_empty());
}

/// `--speed` is bounded by the scenario's scrape interval: at most 100 ms of wall time per
/// interval (10 s at 100x), never zero, negative or not a number.
#[test]
fn a_speed_is_checked_against_the_scrape_interval() {
    let mut scenario = Scenario::load("redis-node-loss").unwrap();
    assert_eq!(scenario.max_speed(), 100.0);
    scenario.set_speed(100.0).unwrap();
    assert_eq!(scenario.speed, 100.0);
    for bad in [0.0, -1.0, 100.5, f64::NAN, f64::INFINITY] {
        let message = scenario.set_speed(bad).unwrap_err();
        assert!(
            message.contains("at most 100") && message.contains("10s"),
            "{bad}: {message}"
        );
        assert_eq!(scenario.speed, 100.0, "a refused speed leaves the scenario's");
    }
}

/// The file_sd document of a served fleet names every instance with its placement labels.
#[tokio::test]
async fn a_served_fleet_lists_itself_for_file_sd() {
    let scenario = Scenario::load("redis-node-loss").unwrap();
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let fleet = epicenter_fleet::serve::start(&scenario, 1_780_000_000_000, shutdown)
        .await
        .unwrap();
    let document = fleet.file_sd();
    let groups = document.as_array().unwrap();
    assert_eq!(groups.len(), fleet.served.len());
    assert_eq!(groups.len(), 42);
    let redis = groups
        .iter()
        .find(|group| group["labels"]["pod"] == "redis-2-1")
        .unwrap();
    assert_eq!(redis["labels"]["host"], "dc-2-host-3");
    assert_eq!(redis["labels"]["service"], "redis");
    let served = fleet
        .served
        .iter()
        .find(|served| served.instance.name == "redis-2-1")
        .unwrap();
    assert_eq!(redis["targets"][0], served.address.as_str());
    let _ = stop.send(true);
}

/// `fleet.instrumentation` changes names, never requests: every exposition of the API tier
/// and the backend still parses strictly; its counters (`_total`, and every histogram's
/// `_bucket`, `_count` and `_sum`) never decrease from one second to the next, through a
/// datacenter degradation that fails requests and a retry storm that throttles them; and
/// OpenTelemetry's and the sidecars' counts per status equal what the default instrumentation
/// counts on the same seed (client_python's `http_requests_total{code}`, Micrometer's
/// `http_server_requests_seconds_count{status}`).
#[test]
fn instrumented_request_families_count_the_same_requests_and_only_grow() {
    use epicenter_fleet::scenario::{ApiInstrumentation, BackendInstrumentation, Instrumentation, Mesh};
    /// Series key (`name{labels}`) → value, of the counters in `text`.
    fn counters(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| {
                let mut fields = line.rsplitn(3, ' ');
                let (_, value, series) = (fields.next()?, fields.next()?, fields.next()?);
                let name = series.split('{').next().unwrap();
                ["_total", "_bucket", "_count", "_sum"]
                    .iter()
                    .any(|suffix| name.ends_with(suffix))
                    .then(|| (series.to_string(), value.parse().unwrap()))
            })
            .collect()
    }
    let otel_istio = Instrumentation {
        api: ApiInstrumentation::Otel,
        backend: BackendInstrumentation::Otel,
        mesh: Mesh::Istio,
    };
    let grpc_linkerd = Instrumentation {
        api: ApiInstrumentation::ClientPython,
        backend: BackendInstrumentation::Grpc,
        mesh: Mesh::Linkerd,
    };
    for name in ["dc-network-degradation", "api-retry-storm"] {
        let mut scenario = Scenario::load(name).unwrap();
        let mut plain = Fleet::new(&scenario, START_MS);
        scenario.fleet.instrumentation = otel_istio;
        let mut first = Fleet::new(&scenario, START_MS);
        scenario.fleet.instrumentation = grpc_linkerd;
        let mut second = Fleet::new(&scenario, START_MS);
        let serving: Vec<usize> = plain
            .instances()
            .iter()
            .enumerate()
            .filter(|(_, instance)| matches!(instance.service, Service::Api | Service::Backend))
            .map(|(index, _)| index)
            .collect();
        let mut before: BTreeMap<(usize, usize), BTreeMap<String, f64>> = BTreeMap::new();
        let mut errors_seen = 0.0;
        for second_of_run in 1..=600 {
            plain.step();
            first.step();
            second.step();
            if second_of_run % 5 != 0 {
                continue;
            }
            for &index in &serving {
                let texts = [plain.render(index), first.render(index), second.render(index)];
                for (variant, text) in texts.iter().enumerate() {
                    let exposition = parse(
                        text.as_bytes(),
                        ParseOptions {
                            format: FormatChoice::Text,
                            validation: Validation::Strict,
                        },
                    )
                    .unwrap_or_else(|error| panic!("{name} variant {variant}: {error}"));
                    assert!(exposition.warnings.is_empty(), "{:?}", exposition.warnings);
                    let now = counters(text);
                    if let Some(earlier) = before.get(&(index, variant)) {
                        for (series, value) in &now {
                            let old = earlier.get(series).copied().unwrap_or(0.0);
                            assert!(
                                *value >= old,
                                "{name} variant {variant} at {second_of_run}s: {series} fell from {old} to {value}"
                            );
                        }
                    }
                    before.insert((index, variant), now);
                }
                let [plain_text, first_text, second_text] = &texts;
                let (plain, first, second) = (counters(plain_text), counters(first_text), counters(second_text));
                let sum = |map: &BTreeMap<String, f64>, name: &str, label: &str| -> f64 {
                    map.iter()
                        .filter(|(series, _)| series.starts_with(&format!("{name}{{")) && series.contains(label))
                        .map(|(_, value)| value)
                        .sum()
                };
                let service = plain_text.contains("api_workers_busy");
                if service {
                    for (code, otel_code) in [
                        ("code=\"200\"", "http_response_status_code=\"200\""),
                        ("code=\"429\"", "http_response_status_code=\"429\""),
                        ("code=\"503\"", "http_response_status_code=\"503\""),
                    ] {
                        let expected = sum(&plain, "http_requests_total", code);
                        assert_eq!(
                            sum(&first, "http_server_request_duration_seconds_count", otel_code),
                            expected,
                            "{name} {code}"
                        );
                        assert_eq!(
                            sum(
                                &first,
                                "istio_requests_total",
                                &otel_code.replace("http_response_status_code", "response_code")
                            ),
                            expected,
                            "{name} istio {code}"
                        );
                        assert_eq!(
                            sum(
                                &second,
                                "response_total",
                                &otel_code.replace("http_response_status_code", "status_code")
                            ),
                            expected,
                            "{name} linkerd {code}"
                        );
                    }
                } else {
                    let ok = sum(&plain, "http_server_requests_seconds_count", "status=\"200\"");
                    let failed = sum(&plain, "http_server_requests_seconds_count", "status=\"500\"");
                    errors_seen += failed;
                    assert_eq!(
                        sum(
                            &first,
                            "http_server_request_duration_seconds_count",
                            "http_response_status_code=\"500\""
                        ),
                        failed,
                        "{name}"
                    );
                    assert_eq!(
                        sum(&second, "grpc_server_handled_total", "grpc_code=\"OK\""),
                        ok,
                        "{name}"
                    );
                    assert_eq!(
                        sum(&second, "grpc_server_handled_total", "grpc_code=\"Unavailable\""),
                        failed,
                        "{name}"
                    );
                    // Started counts every call, floored once: at most one more than the
                    // handled ones floored apiece (a call in flight, as a server would show).
                    let started = sum(&second, "grpc_server_started_total", "");
                    assert!(
                        (ok + failed..=ok + failed + 1.0).contains(&started),
                        "{name}: {started} started, {ok} + {failed} handled"
                    );
                }
            }
        }
        if name == "dc-network-degradation" {
            assert!(
                errors_seen > 0.0,
                "{name}: no backend request failed, the check proved nothing"
            );
        }
    }
}
