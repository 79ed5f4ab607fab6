//! The configuration file: each stage's sections composed into one document, read and checked
//! in one go. Every section's type and checks live in its stage's crate; this module only
//! names the sections (docs/configuration.md) and reports problems with the file's name.

use std::process::ExitCode;

use epicenter_collector::config::{GlobalConfig, Job, ScrapeConfig};
use epicenter_config::{ConfigError, Problems, PrometheusOnly};
use epicenter_detector::config::DetectorConfig;
use epicenter_oncall::config::NotifierConfig;
use epicenter_store::config::{BatchingConfig, PlacementConfig, StorageConfig};
use epicenter_web::config::ServerConfig;
use serde::Deserialize;

/// Exit status for a configuration that cannot be used (as linkerd2-proxy does).
pub(crate) const EXIT_CONFIG: u8 = 64;

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// Defaults for every scrape job.
    #[serde(default)]
    pub(crate) global: GlobalConfig,
    /// The jobs to scrape.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub(crate) scrape_configs: Vec<ScrapeConfig>,
    /// Where samples go. Without `clickhouse`, the embedded store is used.
    #[serde(default)]
    pub(crate) storage: StorageConfig,
    /// When the writer flushes a batch: whichever limit is reached first.
    #[serde(default)]
    pub(crate) batching: BatchingConfig,
    /// Which labels name the datacenter, host and service of a series.
    #[serde(default)]
    pub(crate) placement: PlacementConfig,
    /// epicenter's own HTTP server (`/metrics`, `/healthz`, `/readyz`, `/api/v1/…`).
    #[serde(default)]
    pub(crate) server: ServerConfig,
    /// The detector: service dependencies, signal rules, how often it judges.
    #[serde(default)]
    pub(crate) detector: DetectorConfig,
    /// Where verdicts are sent: Alertmanager, webhooks.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub(crate) notifiers: Vec<NotifierConfig>,
    /// Files holding more jobs (Prometheus 2.43's `scrape_config_files`: paths or globs,
    /// relative to this file's folder), read by `config_file::read`.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub(crate) scrape_config_files: Vec<String>,
    /// Sections of a Prometheus server's file, read so that a prometheus.yml works unchanged,
    /// and reported once each by [`Config::unsupported`] with what to use instead.
    #[serde(default)]
    pub(crate) rule_files: PrometheusOnly,
    /// See `rule_files`.
    #[serde(default)]
    pub(crate) alerting: PrometheusOnly,
    /// See `rule_files`.
    #[serde(default)]
    pub(crate) remote_write: PrometheusOnly,
    /// See `rule_files`.
    #[serde(default)]
    pub(crate) remote_read: PrometheusOnly,
    /// See `rule_files`.
    #[serde(default)]
    pub(crate) tracing: PrometheusOnly,
}

/// What each Prometheus-only top-level section is replaced by in epicenter.
const PROMETHEUS_ONLY: [(&str, &str); 5] = [
    ("rule_files", "keep evaluating these rules in Prometheus (check them with promtool check rules); epicenter's detector rules are detector.rules_file"),
    ("alerting", "epicenter sends its verdicts to the notifiers section (type: alertmanager, or webhook)"),
    ("remote_write", "epicenter writes samples to storage.clickhouse or storage.embedded"),
    ("remote_read", "query epicenter's store with SQL (epicenter sql, storage.http)"),
    ("tracing", "epicenter logs to standard error (EPICENTER_LOG sets the level)"),
];

impl Config {
    /// Reads a configuration from YAML text; an empty document is the default configuration.
    /// Errors name the key path, line and column; every unknown key is reported in one go.
    pub(crate) fn from_yaml(text: &str) -> Result<Config, Vec<ConfigError>> {
        epicenter_config::from_yaml_all(text).map_err(|mut errors| {
            for error in &mut errors {
                if error.message.starts_with("unknown field") {
                    if let Some(message) = epicenter_collector::config::unsupported_prometheus_key(&error.path) {
                        error.message = message;
                    }
                }
            }
            errors
        })
    }

    /// Makes every relative path written in the file relative to `directory`, the file's
    /// folder, as Prometheus reads the paths of its configuration: the scrape jobs' files,
    /// `storage` (the embedded store, the spool, password and TLS files), `server` (token and
    /// TLS files) and `detector.rules_file`. Absolute paths and paths not written (defaults)
    /// stay as they are. Called once, when the configuration is read from a file
    /// ([`crate::config_file::read`]); a configuration built in the program has no folder.
    pub(crate) fn set_directory(&mut self, directory: &std::path::Path) {
        for job in &mut self.scrape_configs {
            job.set_directory(directory);
        }
        self.storage.set_directory(directory);
        self.server.set_directory(directory);
        self.detector.set_directory(directory);
    }

    /// Checks every section (no network; TLS files are read) and returns the scrape jobs with
    /// their defaults resolved, or every problem. Problems come in a fixed order, whatever the
    /// file's: `global` and `scrape_configs`, `storage`, `notifiers`, `storage.retention`,
    /// `batching`, `server`, `placement`, `detector` (the order epicenter has always reported them in).
    pub(crate) fn validate(&self) -> Result<Vec<Job>, Vec<ConfigError>> {
        let mut problems = Problems::default();
        let jobs = epicenter_collector::config::jobs(&self.global, &self.scrape_configs, &mut problems);
        epicenter_collector::targets::static_target_problems(&jobs, &mut problems);
        self.storage.problems(&mut problems);
        epicenter_oncall::config::problems(&self.notifiers, &mut problems);
        self.storage.retention_problems(&mut problems);
        self.batching.problems(&mut problems);
        self.server.problems(&mut problems);
        self.placement.problems(&mut problems);
        self.detector.problems(&mut problems);
        if problems.is_empty() {
            Ok(jobs)
        } else {
            Err(problems.into_errors())
        }
    }

    /// Settings this build accepts but cannot act on yet, as sentences for warnings.
    pub(crate) fn unsupported(&self) -> Vec<String> {
        let present = [
            &self.rule_files,
            &self.alerting,
            &self.remote_write,
            &self.remote_read,
            &self.tracing,
        ];
        let mut warnings: Vec<String> = PROMETHEUS_ONLY
            .iter()
            .zip(present)
            .filter(|(_, section)| section.is_some())
            .map(|((path, instead), _)| epicenter_config::prometheus_only_warning(path, instead))
            .collect();
        warnings.extend(epicenter_collector::config::warnings(
            &self.global,
            &self.scrape_configs,
        ));
        warnings.extend(self.storage.warnings());
        warnings
    }
}

/// Prints `error: <error>` and gives the configuration exit code (64).
pub(crate) fn config_error(error: &str) -> ExitCode {
    eprintln!("error: {error}");
    ExitCode::from(EXIT_CONFIG)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_empty_file_is_the_default_configuration() {
        let config = Config::from_yaml("").unwrap();
        assert_eq!(config.global.scrape_interval.0, Duration::from_secs(60));
        assert_eq!(config.storage.embedded_path(), PathBuf::from("./data"));
        assert!(config.validate().unwrap().is_empty());
    }

    #[test]
    fn unknown_keys_name_their_path_and_line() {
        let yaml = "global:\n  scrape_interval: 15s\nscrape_configs:\n  - job_name: a\n    static_configs:\n      - targets: ['127.0.0.1:9100']\n        lables: {dc: dc-1}\n";
        let error = Config::from_yaml(yaml).unwrap_err().remove(0);
        assert_eq!(error.path, "scrape_configs[0].static_configs[0].lables");
        assert_eq!(error.location.map(|(line, _)| line), Some(7));
        assert!(error.message.starts_with("unknown field `lables`"), "{error}");
        let error = Config::from_yaml("storage:\n  clickhouse:\n    url: http://x:8123\n    pasword_env: P\n")
            .unwrap_err()
            .remove(0);
        assert_eq!(error.path, "storage.clickhouse.pasword_env");
        let error = Config::from_yaml("global:\n  scrape_interval: 15\n")
            .unwrap_err()
            .remove(0);
        assert_eq!(error.path, "global.scrape_interval");
        assert!(error.message.contains("add a unit"), "{error}");
    }

    #[test]
    fn validation_reports_every_problem_with_its_path() {
        let yaml = "
global: {scrape_interval: 15s, scrape_timeout: 20s}
scrape_configs:
  - job_name: redis
    scrape_interval: 5s
    scrape_timeout: 6s
    static_configs:
      - targets: ['127.0.0.1:9121', 'http://127.0.0.1:9122', '127.0.0.1:0', '127.0.0.1:9121']
    relabel_configs:
      - {action: hashmod, target_label: shard}
  - job_name: redis
    metrics_path: metrics
storage:
  embedded: {path: /tmp/x}
  clickhouse: {url: '127.0.0.1:8123'}
batching: {max_rows: 0}
";
        let config = Config::from_yaml(yaml).unwrap();
        let errors = config.validate().unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "global.scrape_timeout",
                "scrape_configs[0].scrape_timeout",
                "scrape_configs[0].static_configs[0].targets[1]",
                "scrape_configs[0].static_configs[0].targets[2]",
                "scrape_configs[0].static_configs[0].targets[3]",
                "scrape_configs[0].relabel_configs[0].modulus",
                "scrape_configs[1].job_name",
                "scrape_configs[1].metrics_path",
                "storage",
                "storage.clickhouse.url",
                "batching.max_rows",
            ],
            "{errors:#?}"
        );
    }

    #[test]
    fn every_section_is_checked_and_problems_come_in_a_fixed_order() {
        let yaml = "
storage: {retention: 0s}
batching: {max_bytes: 0, max_age: 0s}
server: {listen_address: 'localhost'}
placement: {dc_label: 'data-center'}
detector: {counter_glitch_fraction: 1.5}
notifiers:
  - {name: pager, type: webhook, url: 'ftp://x', min_confidence: 2}
  - {name: pager, type: alertmanager, url: 'http://127.0.0.1:9093', timeout: 0s}
";
        let errors = Config::from_yaml(yaml).unwrap().validate().unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "notifiers[0].url",
                "notifiers[0].min_confidence",
                "notifiers[1].name",
                "notifiers[1].timeout",
                "storage.retention",
                "batching.max_bytes",
                "batching.max_age",
                "server.listen_address",
                "placement.dc_label",
                "detector.counter_glitch_fraction",
            ],
            "{errors:#?}"
        );
        assert!(
            errors[9].to_string().contains("1.5 must be a fraction from 0"),
            "{}",
            errors[9]
        );
        assert!(
            errors[4]
                .to_string()
                .starts_with("storage.retention: must be greater than 0"),
            "{}",
            errors[4]
        );
    }
}
