//! The same targets and the same scrape configuration, scraped by Prometheus 2.42 (Debian's
//! package) and by epicenter, store the same series with the same labels and values (issue
//! 16): ten exporters on 127.0.0.1 in ten jobs covering static labels, target relabeling
//! (replace, labelmap, drop), metric relabeling (drop by name, labeldrop, replace from
//! target labels), honor_labels on and off against a body that sets `job` and `instance`,
//! hashmod, metrics_path with params, and `sample_limit`, `label_limit` and
//! `label_value_length_limit` (three jobs past a limit, one within). Prometheus's series come from its HTTP API
//! (`/api/v1/query` of every series), epicenter's from `epicenter sql`. Values are compared
//! exactly, except `scrape_duration_seconds` (a wall-clock measurement; its labels are
//! compared). epicenter's file is Prometheus's with its `storage` and `server` appended.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{free_port, get_json, require, signal, spawn, wait_port, Guard, Signal};

/// Serves `body` as text 0.0.4 on every path, one connection at a time, closing each.
fn exporter(body: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut request = Vec::new();
            let mut buffer = [0u8; 1024];
            while !request.windows(4).any(|window| window == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => request.extend_from_slice(&buffer[..read]),
                }
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    address
}

/// Exporter `index`'s body: counters, a gauge, a histogram, a metric that `metric_relabel`
/// drops, and an info metric whose own `job`/`instance` clash with the target's (and an
/// empty label, which is no label).
fn body(index: usize) -> String {
    format!(
        "# HELP app_requests_total Requests.\n# TYPE app_requests_total counter\napp_requests_total{{path=\"/a\",code=\"200\"}} {}\napp_requests_total{{path=\"/b\",code=\"500\"}} {index}\n# TYPE app_temperature_celsius gauge\napp_temperature_celsius {}\n# TYPE go_goroutines gauge\ngo_goroutines 7\n# TYPE app_latency_seconds histogram\napp_latency_seconds_bucket{{le=\"0.1\"}} 3\napp_latency_seconds_bucket{{le=\"+Inf\"}} 5\napp_latency_seconds_sum 0.75\napp_latency_seconds_count 5\n# TYPE app_info gauge\napp_info{{job=\"inner\",instance=\"inner:1\",version=\"1.{index}\",empty=\"\"}} 1\n",
        100 + index,
        20.5 + index as f64
    )
}

/// (metric name, labels) → value.
type SeriesValues = BTreeMap<(String, BTreeMap<String, String>), f64>;

#[test]
fn prometheus_and_epicenter_store_the_same_series_labels_and_values() {
    let Some(binaries) = require(&["prometheus"]) else {
        return;
    };
    let targets: Vec<String> = (0..10).map(|index| exporter(body(index))).collect();
    let quoted = |indexes: &[usize]| -> String {
        indexes
            .iter()
            .map(|&index| format!("'{}'", targets[index]))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let dropped = targets[4].clone();
    let scrape = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 800ms}}
scrape_configs:
  - job_name: plain
    static_configs:
      - targets: [{plain}]
        labels: {{dc: dc-1, team: core}}
  - job_name: relabelled
    static_configs:
      - targets: [{relabelled}]
        labels: {{__meta_zone: z1, __tmp_rack: r2}}
    relabel_configs:
      - {{source_labels: [__address__], regex: '127.0.0.1:(\\d+)', target_label: port, replacement: 'p$1'}}
      - {{action: labelmap, regex: '__meta_(.+)'}}
      - {{source_labels: [__tmp_rack, zone], separator: '/', target_label: place}}
      - {{source_labels: [__address__], regex: '{dropped}', action: drop}}
  - job_name: metric-relabel
    static_configs:
      - targets: [{metric}]
    metric_relabel_configs:
      - {{source_labels: [__name__], regex: 'go_.*', action: drop}}
      - {{action: labeldrop, regex: code}}
      - {{source_labels: [job, path], separator: ':', target_label: route}}
  - job_name: honoured
    honor_labels: true
    static_configs:
      - targets: [{honoured}]
  - job_name: hashed
    static_configs:
      - targets: [{hashed}]
    relabel_configs:
      - {{source_labels: [__address__], modulus: 4, target_label: shard, action: hashmod}}
  - job_name: params
    metrics_path: /probe
    params: {{module: [http_2xx]}}
    static_configs:
      - targets: [{params}]
  - job_name: sample-limited
    sample_limit: 5
    static_configs:
      - targets: [{limited}]
  - job_name: label-limited
    label_limit: 4
    static_configs:
      - targets: [{limited}]
  - job_name: value-length-limited
    label_value_length_limit: 16
    static_configs:
      - targets: [{limited}]
  - job_name: within-limits
    sample_limit: 11
    label_limit: 6
    label_value_length_limit: 40
    static_configs:
      - targets: [{limited}]
",
        plain = quoted(&[0, 1]),
        relabelled = quoted(&[2, 3, 4]),
        metric = quoted(&[5, 6]),
        honoured = quoted(&[7]),
        hashed = quoted(&[8, 9]),
        params = quoted(&[0]),
        limited = quoted(&[1])
    );
    let dir = std::env::temp_dir().join(format!("epicenter-parity-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut guard = Guard::default();

    // Prometheus, on the file as written.
    std::fs::write(dir.join("prometheus.yml"), &scrape).unwrap();
    let prometheus_port = free_port();
    let prometheus = format!("127.0.0.1:{prometheus_port}");
    guard.keep(spawn(
        Command::new(&binaries[0])
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address={prometheus}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap()),
    ));
    // epicenter, on the same file with its storage and server appended.
    let server = format!("127.0.0.1:{}", free_port());
    let config = dir.join("epicenter.yml");
    std::fs::write(
        &config,
        format!(
            "{scrape}storage:\n  embedded: {{path: '{}'}}\nserver: {{listen_address: '{server}'}}\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("epicenter.log")).unwrap();
    let epicenter = guard.keep(spawn(
        Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(["run", "--config"])
            .arg(&config)
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    ));
    assert!(
        wait_port(prometheus_port, Duration::from_secs(30)),
        "prometheus did not start"
    );
    let epicenter_port = server.rsplit_once(':').unwrap().1.parse().unwrap();
    assert!(
        wait_port(epicenter_port, Duration::from_secs(30)),
        "epicenter did not start"
    );

    // Both have scraped every target (fourteen: the fifteenth is dropped by relabeling; three
    // fail their limits and are down) a few times.
    let scraped_by = |api: &str| -> usize {
        get_json(api, "/api/v1/targets")["data"]["activeTargets"]
            .as_array()
            .map_or(0, |active| {
                active.iter().filter(|target| target["health"] == "up").count()
            })
    };
    let started = Instant::now();
    while (scraped_by(&prometheus) < 11 || scraped_by(&server) < 11) && started.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        (scraped_by(&prometheus), scraped_by(&server)),
        (11, 11),
        "targets up after 90 s\nprometheus's down targets: {:?}\nepicenter: {}",
        get_json(&prometheus, "/api/v1/targets")["data"]["activeTargets"]
            .as_array()
            .map(|active| {
                active
                    .iter()
                    .filter(|target| target["health"] != "up")
                    .map(|target| format!("{} {}", target["scrapePool"], target["lastError"]))
                    .collect::<Vec<_>>()
            }),
        std::fs::read_to_string(dir.join("epicenter.log")).unwrap_or_default()
    );
    std::thread::sleep(Duration::from_secs(3));

    // Prometheus: every series' latest sample.
    let answer = get_json(&prometheus, "/api/v1/query?query=%7B__name__%3D~%22.%2B%22%7D");
    let mut from_prometheus = SeriesValues::new();
    for sample in answer["data"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
    {
        let mut labels: BTreeMap<String, String> = sample["metric"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, value)| (name.clone(), value.as_str().unwrap().to_string()))
            .collect();
        let name = labels.remove("__name__").unwrap();
        let value: f64 = sample["value"][1].as_str().unwrap().parse().unwrap();
        from_prometheus.insert((name, labels), value);
    }

    // epicenter: stopped (every scrape flushed), then read from its store.
    signal(&guard.0[epicenter], Signal::SIGTERM);
    let _ = guard.0[epicenter].wait();
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--format", "TabSeparated", "--config"])
        .arg(&config)
        .arg("SELECT metric, toJSONString(labels), toString(argMax(value, time)) FROM samples GROUP BY metric, labels")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut from_epicenter = SeriesValues::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let labels: BTreeMap<String, String> = serde_json::from_str(&fields[1].replace("\\\\", "\\")).unwrap();
        from_epicenter.insert((fields[0].to_string(), labels), fields[2].parse().unwrap());
    }

    let timing = |key: &(String, BTreeMap<String, String>)| key.0 == "scrape_duration_seconds";
    let only_in = |left: &SeriesValues, right: &SeriesValues| -> Vec<String> {
        left.keys()
            .filter(|key| !right.contains_key(*key))
            .map(|(name, labels)| format!("{name}{labels:?}"))
            .collect()
    };
    let missing = only_in(&from_prometheus, &from_epicenter);
    let extra = only_in(&from_epicenter, &from_prometheus);
    let differing: Vec<String> = from_prometheus
        .iter()
        .filter(|(key, _)| !timing(key))
        .filter_map(|(key, value)| {
            let ours = from_epicenter.get(key)?;
            (ours != value).then(|| format!("{}{:?}: prometheus {value}, epicenter {ours}", key.0, key.1))
        })
        .collect();
    eprintln!(
        "prometheus {} series, epicenter {}; only in prometheus {}, only in epicenter {}, values differing {}",
        from_prometheus.len(),
        from_epicenter.len(),
        missing.len(),
        extra.len(),
        differing.len()
    );
    assert!(
        missing.is_empty() && extra.is_empty() && differing.is_empty(),
        "only in prometheus:\n{}\nonly in epicenter:\n{}\ndiffering:\n{}",
        missing.join("\n"),
        extra.join("\n"),
        differing.join("\n")
    );
    // Fourteen targets, each with 11 body series at most and the five synthetic ones.
    assert!(from_prometheus.len() > 100, "{}", from_prometheus.len());
    let targets_seen: std::collections::BTreeSet<(&str, &str)> = from_prometheus
        .keys()
        .filter(|(name, _)| name == "up")
        .map(|(_, labels)| (labels["job"].as_str(), labels["instance"].as_str()))
        .collect();
    assert_eq!(targets_seen.len(), 14, "{targets_seen:?}");
    // The three jobs past a limit: down in both, with no body series stored. (The metric
    // name counts as the value of `__name__` for label_value_length_limit: epicenter did not
    // count it until this comparison showed Prometheus does.)
    for job in ["sample-limited", "label-limited", "value-length-limited"] {
        let up = from_prometheus
            .iter()
            .find(|((name, labels), _)| name == "up" && labels["job"] == job)
            .map(|(_, value)| *value);
        assert_eq!(up, Some(0.0), "{job}");
        assert!(!from_prometheus
            .keys()
            .any(|(name, labels)| name == "app_temperature_celsius" && labels["job"] == job));
    }
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}
