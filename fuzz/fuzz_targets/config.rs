//! Fuzz target: the configuration file, as `epicenter check config` and `epicenter run` read it.
//!
//! The file's type (`Config` in the binary's `src/config.rs`) is not reachable from a library,
//! so this target composes the same public sections with the same attributes and runs the same
//! reader (`epicenter_config::from_yaml`: `check_shape`, then `serde_norway` with key paths)
//! and the same checks in the same order. Keep the two in step.
//!
//! `tls_config` is cleared before the checks: they read the named PEM files from disk and
//! build an HTTP client, which is file I/O, not parsing (a fuzzer that names `/dev/zero`
//! would hang it).
#![no_main]

use epicenter_collector::config::{GlobalConfig, ScrapeConfig};
use epicenter_config::Problems;
use epicenter_detector::config::DetectorConfig;
use epicenter_oncall::config::NotifierConfig;
use epicenter_store::config::{BatchingConfig, PlacementConfig, StorageConfig};
use epicenter_web::config::ServerConfig;
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;

/// Mirror of `src/config.rs`'s `Config`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Config {
    #[serde(default)]
    global: GlobalConfig,
    #[serde(default)]
    scrape_configs: Vec<ScrapeConfig>,
    #[serde(default)]
    storage: StorageConfig,
    #[serde(default)]
    batching: BatchingConfig,
    #[serde(default)]
    placement: PlacementConfig,
    #[serde(default)]
    server: ServerConfig,
    #[serde(default)]
    detector: DetectorConfig,
    #[serde(default)]
    notifiers: Vec<NotifierConfig>,
    #[serde(default)]
    rule_files: epicenter_config::PrometheusOnly,
    #[serde(default)]
    alerting: epicenter_config::PrometheusOnly,
    #[serde(default)]
    remote_write: epicenter_config::PrometheusOnly,
    #[serde(default)]
    remote_read: epicenter_config::PrometheusOnly,
    #[serde(default)]
    tracing: epicenter_config::PrometheusOnly,
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = epicenter_config::check_shape(text);
    // Every unknown key in one run: the blanking of keys runs on whatever the input is.
    let Ok(mut config) = epicenter_config::from_yaml_all::<Config>(text) else {
        return;
    };
    for scrape in &mut config.scrape_configs {
        scrape.tls_config = None;
        for sd in &mut scrape.http_sd_configs {
            sd.tls_config = None;
        }
    }
    let mut problems = Problems::default();
    let jobs = epicenter_collector::config::jobs(&config.global, &config.scrape_configs, &mut problems);
    epicenter_collector::targets::static_target_problems(&jobs, &mut problems);
    config.storage.problems(&mut problems);
    epicenter_oncall::config::problems(&config.notifiers, &mut problems);
    config.storage.retention_problems(&mut problems);
    config.batching.problems(&mut problems);
    config.server.problems(&mut problems);
    config.placement.problems(&mut problems);
    config.detector.problems(&mut problems);
    let _ = epicenter_collector::config::warnings(&config.global, &config.scrape_configs);
    let _ = config.storage.warnings();
    let _ = config.detector.dependencies();
    let _ = config.detector.settings();
    assert!(jobs.len() <= config.scrape_configs.len(), "more jobs than scrape_configs");
});
