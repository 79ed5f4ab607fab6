//! DNS service discovery (Prometheus `<dns_sd_config>`, issue 16) against a DNS server the
//! test starts on 127.0.0.1 (dnslib from PyPI, in the venv scripts/test makes; its records
//! come from a JSON file the test rewrites): SRV, A, AAAA and MX lookups give the addresses
//! and `__meta_dns_*` labels Prometheus 2.42 gives; a running job follows a changed SRV
//! record, keeps its targets while the server is down, and drops them when the name is gone
//! (NXDOMAIN). Waits are bounded and assert on the state reached.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use epicenter_collector::config::{jobs_from_yaml, parse_dns_servers, DnsSdConfig, StaticConfig};
use epicenter_collector::dns_sd::{lookup, resolver};
use running::RunningJob;

mod running;

/// A DNS server answering from `zone.json` (re-read on every query): `{name: {type: [rdata]}}`;
/// a name not in the file is NXDOMAIN. Prints its UDP port, then serves until killed.
const SERVER: &str = r#"
import json, sys, time
from dnslib import RR, QTYPE, RCODE, A, AAAA, MX, SRV, PTR, DNSLabel
from dnslib.server import DNSServer, BaseResolver, DNSLogger

zone_path = sys.argv[1]

class Zone(BaseResolver):
    def resolve(self, request, handler):
        reply = request.reply()
        name = str(request.q.qname)
        kind = QTYPE[request.q.qtype]
        with open(zone_path) as f:
            zone = json.load(f)
        if name not in zone:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        for data in zone[name].get(kind, []):
            if kind == "SRV":
                rdata = SRV(priority=data[0], weight=data[1], port=data[2], target=data[3])
            elif kind == "MX":
                rdata = MX(data[1], data[0])
            elif kind == "A":
                rdata = A(data)
            elif kind == "AAAA":
                rdata = AAAA(data)
            elif kind == "PTR":
                rdata = PTR(data)
            reply.add_answer(RR(name, request.q.qtype, rdata=rdata, ttl=60))
        return reply

server = DNSServer(Zone(), port=0, address="127.0.0.1", logger=DNSLogger(logf=lambda line: None))
server.start_thread()
print(server.server.server_address[1], flush=True)
while True:
    time.sleep(1)
"#;

/// The DNS server process; killed when dropped.
struct Dns {
    child: Child,
    port: u16,
    zone: PathBuf,
}

impl Drop for Dns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The venv's Python with dnslib, or `None` outside CI when scripts/test has not made it.
fn python() -> Option<PathBuf> {
    let folder = std::env::var_os("EPICENTER_CLIENTS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/clients"),
        PathBuf::from,
    );
    let python = folder.join("venv/bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args(["-c", "import dnslib.server"])
            .status()
            .is_ok_and(|status| status.success());
    if ready {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} lacks dnslib: scripts/test installs it",
        python.display()
    );
    eprintln!(
        "SKIPPED: no venv with dnslib at {} (scripts/test installs it)",
        python.display()
    );
    None
}

fn start_dns(python: &Path, directory: &Path, zone: &serde_json::Value) -> Dns {
    let zone_path = directory.join("zone.json");
    std::fs::write(&zone_path, zone.to_string()).unwrap();
    let script = directory.join("dns_server.py");
    std::fs::write(&script, SERVER).unwrap();
    let mut child = Command::new(python)
        .arg(&script)
        .arg(&zone_path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the DNS server printed {line:?}"));
    Dns {
        child,
        port,
        zone: zone_path,
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("epicenter-dns-sd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sd(yaml: &str) -> DnsSdConfig {
    serde_norway::from_str(yaml).unwrap()
}

fn group(address: &str, labels: &[(&str, &str)]) -> StaticConfig {
    StaticConfig {
        targets: vec![address.to_string()],
        labels: labels
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect::<BTreeMap<_, _>>(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_record_type_gives_prometheus_s_addresses_and_meta_labels() {
    let Some(python) = python() else { return };
    let dir = temp_dir("types");
    let zone = serde_json::json!({
        "_metrics._tcp.example.test.": {"SRV": [[10, 5, 9100, "node-a.example.test."], [20, 5, 9200, "node-b.example.test."]]},
        "db.example.test.": {"A": ["10.0.0.7", "10.0.0.8"], "AAAA": ["2001:db8::7"]},
        "mail.example.test.": {"MX": [[10, "mx1.example.test."]]},
        "empty.example.test.": {},
    });
    let dns = start_dns(&python, &dir, &zone);
    let server: SocketAddr = format!("127.0.0.1:{}", dns.port).parse().unwrap();
    let resolver = resolver(&[server], Duration::from_secs(2)).unwrap();

    let srv = sd("names: ['_metrics._tcp.example.test.']");
    let name = "_metrics._tcp.example.test.";
    assert_eq!(
        lookup(&resolver, &srv, name).await.unwrap(),
        vec![
            group(
                "node-a.example.test:9100",
                &[
                    ("__meta_dns_name", name),
                    ("__meta_dns_srv_record_target", "node-a.example.test."),
                    ("__meta_dns_srv_record_port", "9100")
                ]
            ),
            group(
                "node-b.example.test:9200",
                &[
                    ("__meta_dns_name", name),
                    ("__meta_dns_srv_record_target", "node-b.example.test."),
                    ("__meta_dns_srv_record_port", "9200")
                ]
            ),
        ]
    );
    let a = sd("{names: ['db.example.test.'], type: a, port: 5432}");
    assert_eq!(
        lookup(&resolver, &a, "db.example.test.").await.unwrap(),
        vec![
            group("10.0.0.7:5432", &[("__meta_dns_name", "db.example.test.")]),
            group("10.0.0.8:5432", &[("__meta_dns_name", "db.example.test.")]),
        ]
    );
    let aaaa = sd("{names: ['db.example.test.'], type: AAAA, port: 5432}");
    assert_eq!(
        lookup(&resolver, &aaaa, "db.example.test.").await.unwrap(),
        vec![group("[2001:db8::7]:5432", &[("__meta_dns_name", "db.example.test.")])]
    );
    let mx = sd("{names: ['mail.example.test.'], type: MX, port: 25}");
    assert_eq!(
        lookup(&resolver, &mx, "mail.example.test.").await.unwrap(),
        vec![group(
            "mx1.example.test:25",
            &[
                ("__meta_dns_name", "mail.example.test."),
                ("__meta_dns_mx_record_target", "mx1.example.test.")
            ]
        )]
    );
    // No record of the type, or no such name: no targets, not an error.
    assert_eq!(lookup(&resolver, &srv, "empty.example.test.").await.unwrap(), vec![]);
    assert_eq!(lookup(&resolver, &srv, "gone.example.test.").await.unwrap(), vec![]);
    drop(dns);
    // The server gone: an error naming the name and type.
    let error = lookup(&resolver, &srv, name).await.unwrap_err();
    assert!(error.contains(name) && error.contains("SRV"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_follows_its_srv_record_and_keeps_targets_while_dns_is_down() {
    let Some(python) = python() else { return };
    let dir = temp_dir("job");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        axum::serve(
            listener,
            Router::new().route("/metrics", get(|| async { "up_metric 1\n" })),
        )
        .await
        .unwrap()
    });
    let name = "_exporter._tcp.fleet.test.";
    let srv = |host: &str| serde_json::json!({ name: {"SRV": [[0, 0, port, host]]} });
    let mut dns = start_dns(&python, &dir, &srv("localhost."));
    let yaml = format!(
        "scrape_configs:
  - job_name: dns
    scrape_interval: 200ms
    scrape_timeout: 150ms
    dns_sd_configs:
      - names: ['{name}']
        refresh_interval: 200ms
    relabel_configs:
      - {{source_labels: [__meta_dns_srv_record_target], regex: '([^.]+)\\..*', target_label: host}}
      - {{source_labels: [__meta_dns_name], target_label: srv_name}}
"
    );
    let mut job = jobs_from_yaml(&yaml)
        .unwrap_or_else(|errors| panic!("{errors:?}"))
        .remove(0);
    job.dns_servers = vec![format!("127.0.0.1:{}", dns.port).parse().unwrap()];
    let running = RunningJob::start(job);

    running.wait_for("the SRV target", |targets| targets.len() == 1).await;
    let targets = running.active();
    assert_eq!(targets[0].0, format!("http://localhost:{port}/metrics"));
    assert_eq!(targets[0].1["host"], "localhost");
    assert_eq!(targets[0].1["srv_name"], name);
    assert_eq!(targets[0].1["instance"], format!("localhost:{port}"));
    assert!(targets[0].1.get("__meta_dns_name").is_none());

    // The record changes: the old target stops, the new one starts.
    std::fs::write(&dns.zone, srv("127.0.0.1.").to_string()).unwrap();
    running
        .wait_for("the changed record", |targets| {
            targets.len() == 1 && targets[0].0 == format!("http://127.0.0.1:{port}/metrics")
        })
        .await;

    // The DNS server down: lookups fail and the target stays.
    let _ = dns.child.kill();
    let _ = dns.child.wait();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let kept = running.active();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].0, format!("http://127.0.0.1:{port}/metrics"));

    running.stop().await;
    drop(dns);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_disappears_takes_its_targets_with_it() {
    let Some(python) = python() else { return };
    let dir = temp_dir("gone");
    let name = "_gone._tcp.fleet.test.";
    let dns = start_dns(
        &python,
        &dir,
        &serde_json::json!({ name: {"SRV": [[0, 0, 9, "127.0.0.1."]]} }),
    );
    let yaml = format!(
        "scrape_configs:\n  - job_name: dns\n    scrape_interval: 1s\n    dns_sd_configs: [{{names: ['{name}'], refresh_interval: 200ms}}]\n"
    );
    let mut job = jobs_from_yaml(&yaml).unwrap().remove(0);
    job.dns_servers = vec![format!("127.0.0.1:{}", dns.port).parse().unwrap()];
    let running = RunningJob::start(job);
    running.wait_for("the SRV target", |targets| targets.len() == 1).await;
    std::fs::write(&dns.zone, "{}").unwrap();
    running.wait_for("no targets after NXDOMAIN", <[_]>::is_empty).await;
    running.stop().await;
    drop(dns);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Redis observer's reverse-DNS names of callers (`redis_observer.reverse_dns`): a PTR
/// record names 10.7.0.2 (its trailing dot dropped), 10.7.0.3 has none (NXDOMAIN), and the
/// answers are cached: with the server gone, the names stay. (Loopback addresses are not
/// asked: the resolver names them `localhost` itself, RFC 6761.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_observer_names_callers_by_their_ptr_records_and_caches_them() {
    let Some(python) = python() else { return };
    let dir = temp_dir("reverse");
    let zone = serde_json::json!({
        "2.0.7.10.in-addr.arpa.": {"PTR": ["dc-7-host-2.example.test."]},
    });
    let dns = start_dns(&python, &dir, &zone);
    let server: SocketAddr = format!("127.0.0.1:{}", dns.port).parse().unwrap();
    let resolver = resolver(&[server], Duration::from_millis(300)).unwrap();
    let mut names = epicenter_collector::redis_observer::ReverseNames::default();
    let (named, nameless) = ("10.7.0.2".parse().unwrap(), "10.7.0.3".parse().unwrap());
    names.refresh(&resolver, &[named, nameless]).await;
    assert_eq!(names.name(&named), Some("dc-7-host-2.example.test"));
    assert_eq!(names.name(&nameless), None);
    drop(dns);
    names.refresh(&resolver, &[named, nameless]).await;
    assert_eq!(names.name(&named), Some("dc-7-host-2.example.test"), "cached");
}

#[test]
fn dns_sd_settings_are_checked_with_prometheus_s_rules() {
    let cases = [
        (
            "{names: []}",
            "scrape_configs[0].dns_sd_configs[0].names",
            "at least one",
        ),
        (
            "{names: [db.example.org], type: A}",
            "scrape_configs[0].dns_sd_configs[0].port",
            "required for A records",
        ),
        (
            "{names: [x], refresh_interval: 0s}",
            "scrape_configs[0].dns_sd_configs[0].refresh_interval",
            "greater than 0",
        ),
        (
            "{names: [x], type: TXT}",
            "scrape_configs[0].dns_sd_configs[0].type",
            "SRV, A, AAAA or MX",
        ),
    ];
    for (entry, path, message) in cases {
        let yaml = format!("scrape_configs:\n  - job_name: j\n    dns_sd_configs: [{entry}]\n");
        let errors = jobs_from_yaml(&yaml).unwrap_err();
        assert_eq!(errors.len(), 1, "{entry}: {errors:?}");
        assert!(errors[0].path.starts_with(path), "{entry}: {}", errors[0].path);
        assert!(errors[0].message.contains(message), "{entry}: {}", errors[0].message);
    }
    // Defaults are Prometheus's: SRV, every 30 s; the type is read in any case.
    let yaml = "scrape_configs:\n  - job_name: j\n    dns_sd_configs: [{names: ['_a._tcp.x.'], type: srv}]\n";
    let job = jobs_from_yaml(yaml).unwrap().remove(0);
    assert_eq!(job.config.dns_sd_configs[0].refresh_interval.0, Duration::from_secs(30));
    assert_eq!(job.config.dns_sd_configs[0].record_type.as_str(), "SRV");
    // The servers' override: ip:port or ip (port 53); anything else named.
    assert_eq!(
        parse_dns_servers("127.0.0.1:8600, ::1").unwrap(),
        vec![
            "127.0.0.1:8600".parse::<SocketAddr>().unwrap(),
            "[::1]:53".parse::<SocketAddr>().unwrap()
        ]
    );
    assert!(parse_dns_servers("127.0.0.1:8600,consul")
        .unwrap_err()
        .contains("'consul'"));
}
