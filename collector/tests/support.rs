//! Helpers shared by the collector's integration tests: where `../shared` is, and a canonical
//! text dump of a parsed body for golden files.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]
#![allow(dead_code, unreachable_pub, reason = "each test crate uses a different subset")]

use std::fmt::Write;
use std::path::PathBuf;

use epicenter_collector::exposition::{Exposition, Sample};

/// The project's `../shared` folder (beside the repository), or `EPICENTER_SHARED`.
///
/// Returns `None` (after saying so on stderr) when it is missing on a user's clone; panics
/// when it is missing in CI (`CI` set), where a missing test input is a failure.
pub fn shared_dir(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("EPICENTER_SHARED") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")),
    };
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {} is missing; CI must provide ../shared", dir.display());
    }
    let hint = if std::env::var_os("EPICENTER_SHARED").is_some() {
        "EPICENTER_SHARED points at a missing folder"
    } else {
        "set EPICENTER_SHARED to the team's shared/ folder"
    };
    eprintln!(
        "{test}: SKIPPED for lack of test data: {} not found ({hint})",
        dir.display()
    );
    None
}

/// Formats a value exactly: shortest round-trip decimal, `NaN`, `+Inf`, `-Inf`.
pub fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value == f64::INFINITY {
        "+Inf".to_string()
    } else if value == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        format!("{value:?}")
    }
}

/// One sample as a canonical line: name, labels in body order, value, timestamp in seconds,
/// exemplar.
pub fn sample_line(exposition: &Exposition<'_>, sample: &Sample<'_>) -> String {
    let mut out = String::new();
    let labels: Vec<String> = exposition
        .labels_in(sample.labels)
        .iter()
        .map(|label| format!("{:?}={:?}", label.name, label.value))
        .collect();
    write!(
        out,
        "{:?}{{{}}} {}",
        sample.name,
        labels.join(","),
        number(sample.value)
    )
    .unwrap();
    if let Some(timestamp) = sample.timestamp {
        write!(out, " @{}", number(timestamp)).unwrap();
    }
    if let Some(exemplar) = &sample.exemplar {
        let labels: Vec<String> = exposition
            .labels_in(exemplar.labels)
            .iter()
            .map(|label| format!("{:?}={:?}", label.name, label.value))
            .collect();
        write!(out, " # {{{}}} {}", labels.join(","), number(exemplar.value)).unwrap();
        if let Some(timestamp) = exemplar.timestamp {
            write!(out, " @{}", number(timestamp)).unwrap();
        }
    }
    out
}

/// FNV-1a, 64 bits: a stable digest that pins text without reproducing it.
pub fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A compact golden summary of a parse: per family its type, unit, whether it has HELP, sample
/// count, the first sample in full, and a digest of every sample line and the HELP text, so any
/// change in any value, label, timestamp or exemplar shows as a diff without the golden file
/// transcribing the capture.
pub fn golden_summary(exposition: &Exposition<'_>) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "format {} families={} samples={}",
        exposition.format.as_str(),
        exposition.families.len(),
        exposition.sample_count()
    )
    .unwrap();
    for family in &exposition.families {
        let samples = exposition.samples_of(family);
        let mut all = family.help.as_deref().unwrap_or("").to_string();
        for sample in samples {
            all.push('\n');
            all.push_str(&sample_line(exposition, sample));
        }
        writeln!(
            out,
            "family {:?} type={} unit={:?} help={} samples={} digest={:016x}",
            family.name,
            family.metric_type.as_str(),
            family.unit,
            family.help.is_some(),
            samples.len(),
            fnv1a(&all)
        )
        .unwrap();
        if let Some(first) = samples.first() {
            writeln!(out, "  first {}", sample_line(exposition, first)).unwrap();
        }
    }
    out
}

/// A job running in the background ([`run_job`](epicenter_collector::job::run_job)) with its
/// target registry; outcomes are drained. [`RunningJob::stop`] ends it within 10 s.
pub struct RunningJob {
    /// The job's targets, as `/api/v1/targets` lists them.
    pub registry: std::sync::Arc<epicenter_collector::targets::TargetRegistry>,
    stop: tokio::sync::watch::Sender<bool>,
    running: tokio::task::JoinHandle<()>,
}

impl RunningJob {
    /// Starts `job` with a plain scraper and default placement.
    pub fn start(job: epicenter_collector::config::Job) -> RunningJob {
        use std::sync::Arc;
        let registry = Arc::new(epicenter_collector::targets::TargetRegistry::default());
        let (sender, mut receiver) = tokio::sync::mpsc::channel(1024);
        tokio::spawn(async move { while receiver.recv().await.is_some() {} });
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let context = Arc::new(epicenter_collector::scrape::ScrapeContext {
            placement: epicenter_store::config::PlacementConfig::default(),
            external_labels: epicenter_store::rows::Labels::new(),
        });
        let running = tokio::spawn(epicenter_collector::job::run_job(
            Arc::new(job),
            epicenter_collector::scrape::Scraper::new().unwrap(),
            context,
            sender,
            shutdown,
            registry.clone(),
        ));
        RunningJob {
            registry,
            stop,
            running,
        }
    }

    /// (scrapeUrl, labels) of every active target, sorted by URL.
    pub fn active(&self) -> Vec<(String, serde_json::Value)> {
        let mut targets: Vec<(String, serde_json::Value)> = serde_json::to_value(self.registry.statuses())
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|status| {
                (
                    status["scrapeUrl"].as_str().unwrap().to_string(),
                    status["labels"].clone(),
                )
            })
            .collect();
        targets.sort_by(|a, b| a.0.cmp(&b.0));
        targets
    }

    /// Waits up to 30 s for `check` to hold on the active targets; panics naming `what`.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&[(String, serde_json::Value)]) -> bool) {
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(30) {
            if check(&self.active()) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("{what} not reached within 30 s: {:?}", self.active());
    }

    /// Stops the job and waits for it to end.
    pub async fn stop(self) {
        self.stop.send(true).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), self.running)
            .await
            .unwrap()
            .unwrap();
    }
}
