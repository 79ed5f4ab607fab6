//! A discovery job running in the background, for the collector's HTTP and DNS discovery
//! tests (`mod running;`); kept apart from support.rs, which other crates' tests include.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]
#![allow(dead_code, unreachable_pub, reason = "each test crate uses a different subset")]

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
            ..Default::default()
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
        // A job with only static targets may have ended already (nothing to watch).
        let _ = self.stop.send(true);
        tokio::time::timeout(std::time::Duration::from_secs(10), self.running)
            .await
            .unwrap()
            .unwrap();
    }
}
