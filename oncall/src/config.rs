//! The `notifiers` section of the configuration file: where verdicts go (Alertmanager API
//! v2, JSON webhooks) and which.

use std::time::Duration;

use epicenter_config::{Problems, PromDuration};
use serde::Deserialize;

/// One `notifiers` entry: where verdicts go, and which.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifierConfig {
    /// Name in logs and metrics; unique.
    pub name: String,
    /// `alertmanager` (API v2, `POST <url>/api/v2/alerts`) or `webhook` (the verdict document
    /// with `status` firing/resolved, POSTed to `url`).
    #[serde(rename = "type")]
    pub kind: NotifierKind,
    /// Alertmanager's base URL (`http://127.0.0.1:9093`) or the webhook's URL.
    pub url: String,
    /// Per-request timeout. Default `5s`.
    #[serde(default = "default_notifier_timeout")]
    pub timeout: PromDuration,
    /// Re-send an open verdict this often (Alertmanager forgets alerts not re-sent before
    /// their `endsAt`). Default `1m`.
    #[serde(default = "default_resend")]
    pub resend_interval: PromDuration,
    /// Only these verdict kinds (empty: all).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Only verdicts in these datacenters (empty: all).
    #[serde(default)]
    pub dcs: Vec<String>,
    /// Only verdicts on these services (empty: all).
    #[serde(default)]
    pub services: Vec<String>,
    /// Only verdicts at least this confident (0..1). Default 0.
    #[serde(default)]
    pub min_confidence: f64,
}

/// Kinds of notifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifierKind {
    /// Prometheus Alertmanager, API v2.
    Alertmanager,
    /// A generic JSON webhook.
    Webhook,
}

fn default_notifier_timeout() -> PromDuration {
    PromDuration(Duration::from_secs(5))
}

fn default_resend() -> PromDuration {
    PromDuration(Duration::from_secs(60))
}

/// Records problems with `notifiers` (key paths `notifiers[i].…`): names empty or repeated,
/// URLs without http(s), a confidence outside 0..1, zero durations.
pub fn problems(notifiers: &[NotifierConfig], problems: &mut Problems) {
    let mut names = std::collections::HashSet::new();
    for (index, notifier) in notifiers.iter().enumerate() {
        let at = |key: &str| format!("notifiers[{index}].{key}");
        if notifier.name.is_empty() || !names.insert(notifier.name.clone()) {
            problems.push(at("name"), format!("'{}' must be non-empty and unique", notifier.name));
        }
        if !(notifier.url.starts_with("http://") || notifier.url.starts_with("https://")) {
            problems.push(
                at("url"),
                format!(
                    "'{}' must start with http:// or https://",
                    epicenter_config::redacted_url(&notifier.url)
                ),
            );
        }
        if !(0.0..=1.0).contains(&notifier.min_confidence) {
            problems.push(at("min_confidence"), "must be between 0 and 1");
        }
        if notifier.timeout.0.is_zero() || notifier.resend_interval.0.is_zero() {
            problems.push(at("timeout"), "timeout and resend_interval must be greater than 0");
        }
    }
}
