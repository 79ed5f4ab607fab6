//! Scrapes through a proxy (Prometheus `proxy_url`, `no_proxy`; issue 16) against a proxy on
//! 127.0.0.1 that answers for any target itself: the target's name does not resolve, so a
//! scrape that is up went through the proxy. The proxy sees the absolute URL and the
//! `Proxy-Authorization` from the URL's user information and the `proxy_connect_header`
//! headers; `no_proxy` hosts go direct.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use epicenter_collector::config::jobs_from_yaml;
use epicenter_collector::scrape::{ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{Labels, ScrapeOutcome};

/// Request lines, `Proxy-Authorization` and `X-Proxy-Tenant` values the proxy received.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

fn proxy() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut authorization = String::new();
            let mut tenant = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("proxy-authorization") {
                        authorization = value.trim().to_string();
                    }
                    if name.eq_ignore_ascii_case("x-proxy-tenant") {
                        tenant = value.trim().to_string();
                    }
                }
            }
            record
                .lock()
                .unwrap()
                .push((request_line.trim_end().to_string(), authorization, tenant));
            let body = "via_proxy 1\n";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (address, seen)
}

async fn scrape(target: &str, extra: &str) -> ScrapeOutcome {
    let yaml =
        format!("scrape_configs:\n  - job_name: proxied\n    static_configs: [{{targets: ['{target}']}}]\n{extra}");
    let job = jobs_from_yaml(&yaml)
        .unwrap_or_else(|errors| panic!("{errors:?}"))
        .remove(0);
    let (targets, _) = targets_for_job(&job);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Labels::new(),
        ..Default::default()
    };
    Scraper::for_job(&job.config)
        .unwrap()
        .scrape(&targets[0], &job, &context, &mut TargetState::default())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_go_through_proxy_url_except_for_no_proxy_hosts() {
    let (proxy, seen) = proxy();
    let through = scrape(
        "exporter.invalid:9100",
        &format!("    proxy_url: 'http://scraper:pr0xy@{proxy}'\n"),
    )
    .await;
    assert!(through.report.up, "{:?}", through.report.error);
    assert!(through
        .rows
        .iter()
        .any(|row| row.series.name == "via_proxy" && row.value == 1.0));
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].0, "GET http://exporter.invalid:9100/metrics HTTP/1.1");
        // base64("scraper:pr0xy")
        assert_eq!(seen[0].1, "Basic c2NyYXBlcjpwcjB4eQ==");
    }
    // proxy_connect_header: sent to the proxy with the request it forwards.
    let with_header = scrape(
        "exporter.invalid:9100",
        &format!("    proxy_url: 'http://{proxy}'\n    proxy_connect_header: {{X-Proxy-Tenant: [t3nant]}}\n"),
    )
    .await;
    assert!(with_header.report.up, "{:?}", with_header.report.error);
    assert_eq!(seen.lock().unwrap().pop().unwrap().2, "t3nant");
    // A no_proxy host goes direct: the name does not resolve, so the scrape fails, and the
    // proxy sees nothing.
    let direct = scrape(
        "exporter.invalid:9100",
        &format!("    proxy_url: 'http://{proxy}'\n    no_proxy: 'localhost,.invalid'\n"),
    )
    .await;
    assert!(!direct.report.up);
    let error = direct.report.error.unwrap();
    assert!(error.contains("request failed"), "{error}");
    assert_eq!(seen.lock().unwrap().len(), 1);
    // Without proxy settings nothing goes to a proxy.
    let plain = scrape("exporter.invalid:9100", "").await;
    assert!(!plain.report.up);
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn proxy_settings_are_checked_and_the_password_never_shown() {
    let cases = [
        (
            "    proxy_url: 'ftp://u:s3cret-proxy@127.0.0.1:21'\n",
            "scrape_configs[0].proxy_url",
        ),
        (
            "    proxy_url: 'http://127.0.0.1:3128'\n    proxy_from_environment: true\n",
            "scrape_configs[0].proxy_from_environment",
        ),
        ("    no_proxy: 'localhost'\n", "scrape_configs[0].no_proxy"),
        (
            "    proxy_connect_header: {X-A: [s3cret-proxy]}\n",
            "scrape_configs[0].proxy_connect_header",
        ),
    ];
    for (extra, path) in cases {
        let yaml =
            format!("scrape_configs:\n  - job_name: j\n    static_configs: [{{targets: ['127.0.0.1:1']}}]\n{extra}");
        let errors = jobs_from_yaml(&yaml).unwrap_err();
        assert_eq!(errors.len(), 1, "{extra}: {errors:?}");
        assert_eq!(errors[0].path, path);
        assert!(!errors[0].message.contains("s3cret-proxy"), "{}", errors[0].message);
    }
}
