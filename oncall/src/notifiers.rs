//! Notifiers: verdicts to the people on call. Each notifier has its own task and a bounded
//! queue, so delivery never blocks detection: a full queue drops the event (counted), a
//! failed request is retried with exponential backoff and jitter (0.5 s doubling to 10 s, for
//! up to 10 minutes: a receiver down for a few minutes loses nothing), events are
//! deduplicated by verdict id and state, and open verdicts are re-sent every
//! `resend_interval` (Alertmanager forgets an alert whose `endsAt` passes).
//!
//! Alertmanager API v2 (`POST /api/v2/alerts`, Alertmanager's OpenAPI spec): one alert per
//! verdict, labels `alertname="EpicenterRootCause"`, `dc`, `host`, `service`, `kind`,
//! `severity`; annotations `summary` (the answer in one line), `description` (the evidence),
//! `verdict_id`; `endsAt` four resend intervals ahead while open, now once resolved.
//! Webhook: `{"status": "firing"|"resolved", "summary": <the one-line answer>, "verdict": …}`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use epicenter_detector::{Verdict, VerdictEvent};

use crate::config::{NotifierConfig, NotifierKind};
use rand::Rng;
use tokio::sync::{mpsc, watch};

/// Events each notifier's queue holds; an event beyond them is dropped and counted
/// ([`NotifierStats::dropped`]).
pub const QUEUE_CAPACITY: usize = 100;

/// Delivery counters of one notifier. Every event taken from the queue ends as one `sent` or
/// one `failed` (unless epicenter stops while it is retried); `errors` counts requests.
#[derive(Debug, Default)]
pub struct NotifierStats {
    /// Notifications delivered (the receiver answered 2xx). A notification retried until it
    /// gets through counts once; each re-send of an open alert (`resend_interval`) is a
    /// notification of its own.
    pub sent: AtomicU64,
    /// Notifications given up: refused with a 4xx (not retried), or still failing after 10
    /// minutes of retries.
    pub failed: AtomicU64,
    /// Events dropped because the queue ([`QUEUE_CAPACITY`]) was full.
    pub dropped: AtomicU64,
    /// Attempts that failed (each retry counts; Prometheus's
    /// `prometheus_notifications_errors_total` counts the same way), so a receiver that is
    /// down shows at once, not only when an event is given up 10 minutes later.
    pub errors: AtomicU64,
    /// The last failure, as logged (no URL, so no secret).
    pub last_error: std::sync::Mutex<Option<String>>,
}

impl NotifierStats {
    fn record_error(&self, error: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(error);
        }
    }
}

/// `error` and its causes, outermost first, without the URL (a webhook's key is often in its
/// query): `error sending request: client error (Connect): tcp connect error: Connection
/// refused (os error 111)` where reqwest alone says `error sending request`.
fn describe(error: reqwest::Error) -> String {
    epicenter_config::describe_error(&error.without_url())
}

/// Where alerts say they come from, as Prometheus's notifier says it: `generatorURL` is
/// the verdict's incident page, `<external_url>/incidents/<verdict id>` (Prometheus:
/// `--web.external-url`), and
/// `global.external_labels` are added to every alert's labels unless the alert has the
/// label already (as Prometheus adds them to the alerts it sends).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlertSource {
    /// epicenter's own base URL as on-call reaches it (`server.external_url`), without a
    /// trailing `/`.
    pub external_url: String,
    /// `global.external_labels`.
    pub external_labels: BTreeMap<String, String>,
}

/// The running notifiers.
pub struct Notifiers {
    queues: Vec<(NotifierConfig, mpsc::Sender<VerdictEvent>, Arc<NotifierStats>)>,
}

/// One notifier's delivery at one moment, for epicenter's own metrics
/// ([`Notifiers::snapshot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliverySnapshot {
    /// The notifier's `name` in the configuration.
    pub name: String,
    /// [`NotifierStats::sent`].
    pub sent: u64,
    /// Requests that failed, each retry counted ([`NotifierStats::errors`]).
    pub failed_requests: u64,
    /// Notifications given up ([`NotifierStats::failed`]).
    pub given_up: u64,
    /// Events dropped at a full queue ([`NotifierStats::dropped`]).
    pub dropped_queue_full: u64,
    /// Events waiting in the queue, not counting the one being delivered or retried.
    pub queue_depth: usize,
    /// How many events the queue holds ([`QUEUE_CAPACITY`]).
    pub queue_capacity: usize,
}

impl Notifiers {
    /// Starts one task per configured notifier, each stopping when `shutdown` turns true.
    /// Must be called inside a tokio runtime (it spawns the tasks).
    pub fn start(configs: &[NotifierConfig], source: AlertSource, shutdown: watch::Receiver<bool>) -> Notifiers {
        let source = Arc::new(source);
        let client = reqwest::Client::builder()
            .user_agent(concat!("epicenter/", env!("CARGO_PKG_VERSION")))
            .use_rustls_tls()
            .build()
            .unwrap_or_default();
        let queues = configs
            .iter()
            .map(|config| {
                let (sender, inbox) = mpsc::channel(QUEUE_CAPACITY);
                let stats = Arc::new(NotifierStats::default());
                tokio::spawn(run(
                    config.clone(),
                    client.clone(),
                    source.clone(),
                    inbox,
                    stats.clone(),
                    shutdown.clone(),
                ));
                (config.clone(), sender, stats)
            })
            .collect();
        Notifiers { queues }
    }

    /// Hands an event to every notifier; never waits. Each notifier applies its own filter
    /// ([`matches`]): an event it does not match still resolves what it sent for that
    /// incident (a verdict whose confidence fell under `min_confidence`, or that became
    /// `unknown`, must not stay firing).
    pub fn notify(&self, event: &VerdictEvent) {
        for (config, queue, stats) in &self.queues {
            match queue.try_send(event.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(notifier = %config.name, "notifier queue full: event dropped");
                }
                // Shutting down: the notifier's task has stopped; nothing is sent any more.
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    tracing::debug!(notifier = %config.name, state = %event.state, "notifier stopped: event not sent");
                }
            }
        }
    }

    /// Per notifier, in configuration order: its counters and how full its queue is.
    pub fn snapshot(&self) -> Vec<DeliverySnapshot> {
        self.queues
            .iter()
            .map(|(config, queue, stats)| DeliverySnapshot {
                name: config.name.clone(),
                sent: stats.sent.load(Ordering::Relaxed),
                failed_requests: stats.errors.load(Ordering::Relaxed),
                given_up: stats.failed.load(Ordering::Relaxed),
                dropped_queue_full: stats.dropped.load(Ordering::Relaxed),
                queue_depth: queue.max_capacity() - queue.capacity(),
                queue_capacity: queue.max_capacity(),
            })
            .collect()
    }

    /// Per notifier: name, kind, url (as [`epicenter_config::redacted_url`] shows it: no
    /// password, no query values) and delivery counters.
    pub fn status(&self) -> Vec<serde_json::Value> {
        self.queues
            .iter()
            .map(|(config, _, stats)| {
                serde_json::json!({
                    "name": config.name,
                    "type": format!("{:?}", config.kind).to_lowercase(),
                    "url": epicenter_config::redacted_url(&config.url),
                    "sent": stats.sent.load(Ordering::Relaxed),
                    "failed": stats.failed.load(Ordering::Relaxed),
                    "dropped": stats.dropped.load(Ordering::Relaxed),
                    "errors": stats.errors.load(Ordering::Relaxed),
                    "lastError": stats.last_error.lock().ok().and_then(|last| last.clone()),
                })
            })
            .collect()
    }
}

/// Whether `verdict` passes the notifier's routing filter. An `unknown` verdict (evidence
/// without a kind the rules explain) pages only a notifier whose `kinds` lists `unknown`; it
/// is reported in the API and the tables either way.
pub fn matches(config: &NotifierConfig, verdict: &Verdict) -> bool {
    let kind = if config.kinds.is_empty() {
        verdict.kind != "unknown"
    } else {
        config.kinds.contains(&verdict.kind)
    };
    kind && (config.dcs.is_empty() || config.dcs.contains(&verdict.dc))
        && (config.services.is_empty() || config.services.contains(&verdict.service))
        && verdict.confidence >= config.min_confidence
}

fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

/// The one-line answer: the kind, then where (instances, service, hosts, datacenter), how many
/// callers' evidence points at it, and the confidence, e.g. `node loss: redis-2-1 (service
/// redis on dc-2-redis-1, dc-2); 11 callers point at it; confidence 0.93`.
pub fn summary(verdict: &Verdict) -> String {
    let callers = verdict
        .evidence
        .iter()
        .filter(|a| a.peer.is_some())
        .map(|a| a.instance.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    format!(
        "{}: {} (service {} on {}, {}); {} {} at it; confidence {:.2}",
        verdict.kind.replace('_', " "),
        verdict.instances.join(", "),
        verdict.service,
        if verdict.hosts.is_empty() {
            "?".to_string()
        } else {
            verdict.hosts.join(", ")
        },
        verdict.dc,
        callers,
        if callers == 1 { "caller points" } else { "callers point" },
        verdict.confidence
    )
}

/// The Alertmanager v2 body for one verdict (API v2 `postableAlerts`: labels,
/// annotations, `startsAt`, `endsAt` four resend intervals ahead while firing, now when
/// resolved, and `generatorURL` from `source`).
pub fn alertmanager_body(
    verdict: &Verdict,
    resolved: bool,
    resend: Duration,
    source: &AlertSource,
) -> serde_json::Value {
    let now = SystemTime::now();
    let starts = SystemTime::UNIX_EPOCH + Duration::from_millis(verdict.opened_ms.max(0) as u64);
    let starts = starts.min(now);
    let ends = if resolved { now } else { now + resend * 4 };
    let evidence: Vec<String> = verdict
        .evidence
        .iter()
        .take(8)
        .map(|a| {
            format!(
                "{} {}{} ({:?}, {:.0} scales)",
                a.instance,
                a.metric,
                a.peer.as_ref().map(|p| format!(" -> {p}")).unwrap_or_default(),
                a.class,
                a.score
            )
        })
        .collect();
    let mut labels = serde_json::json!({
        "alertname": "EpicenterRootCause",
        "dc": verdict.dc,
        "host": verdict.hosts.first().cloned().unwrap_or_default(),
        "service": verdict.service,
        "kind": verdict.kind,
        "severity": "critical",
    });
    if let Some(labels) = labels.as_object_mut() {
        for (name, value) in &source.external_labels {
            labels.entry(name.clone()).or_insert_with(|| value.clone().into());
        }
    }
    serde_json::json!([{
        "labels": labels,
        "annotations": {
            "summary": summary(verdict),
            "description": format!("evidence: {}", evidence.join("; ")),
            "verdict_id": verdict.id,
        },
        "startsAt": rfc3339(starts),
        "endsAt": rfc3339(ends),
        "generatorURL": format!("{}/incidents/{}", source.external_url, verdict.id),
    }])
}

async fn run(
    config: NotifierConfig,
    client: reqwest::Client,
    source: Arc<AlertSource>,
    mut inbox: mpsc::Receiver<VerdictEvent>,
    stats: Arc<NotifierStats>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Open verdicts by id: the verdict and when it was last sent.
    let mut open: HashMap<String, (Verdict, std::time::Instant)> = HashMap::new();
    let mut last_state: HashMap<String, String> = HashMap::new();
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            event = inbox.recv() => {
                let Some(event) = event else { return };
                let matched = matches(&config, &event.verdict);
                for (verdict, resolved) in deliveries(&mut open, &mut last_state, &event, matched) {
                    deliver(&config, &client, &source, &verdict, resolved, &stats, &mut shutdown).await;
                }
            }
            _ = ticks.tick() => {
                if config.kind != NotifierKind::Alertmanager {
                    continue;
                }
                let due: Vec<Verdict> = open
                    .values_mut()
                    .filter(|(_, sent)| sent.elapsed() >= config.resend_interval.0)
                    .map(|(verdict, sent)| {
                        *sent = std::time::Instant::now();
                        verdict.clone()
                    })
                    .collect();
                for verdict in due {
                    deliver(&config, &client, &source, &verdict, false, &stats, &mut shutdown).await;
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// The alert labels of a verdict (what Alertmanager tells alerts apart by): dc, first host,
/// service, kind.
fn alert_identity(verdict: &Verdict) -> (&str, &str, &str, &str) {
    (
        verdict.dc.as_str(),
        verdict.hosts.first().map_or("", String::as_str),
        verdict.service.as_str(),
        verdict.kind.as_str(),
    )
}

/// What to send for `event`, in order: `(verdict, resolved)`, keeping `open` (what was sent
/// and is still firing, by incident id) and `last_state` (the last state sent, by incident
/// id). Every incident is handled on its own: an event touches only what was sent for its
/// own incident ([`Verdict::id`], which stays the same when the incident is updated or taken
/// over). A repeated state is sent once (updates always); an update that moves the incident
/// to other alert labels (another host, datacenter, service or kind) first resolves the
/// alert it was sent under, which would otherwise stay firing at the receiver until its
/// `endsAt` passed. An event the notifier's filter does not match (`matched` false) sends
/// nothing of its own but resolves what was sent for its incident (and stops its re-sending).
fn deliveries(
    open: &mut HashMap<String, (Verdict, std::time::Instant)>,
    last_state: &mut HashMap<String, String>,
    event: &VerdictEvent,
    matched: bool,
) -> Vec<(Verdict, bool)> {
    let id = event.verdict.id.clone();
    if !matched {
        last_state.remove(&id);
        return open
            .remove(&id)
            .map(|(verdict, _)| (verdict, true))
            .into_iter()
            .collect();
    }
    if last_state.get(&id) == Some(&event.state) && event.state != "updated" {
        return Vec::new();
    }
    last_state.insert(id.clone(), event.state.clone());
    let mut sends = Vec::new();
    // What was sent for this incident under other labels is resolved first.
    if let Some((held, _)) = open.remove(&id) {
        if alert_identity(&held) != alert_identity(&event.verdict) {
            sends.push((held, true));
        }
    }
    if event.state == "resolved" {
        last_state.remove(&id);
        sends.push((event.verdict.clone(), true));
        return sends;
    }
    open.insert(id, (event.verdict.clone(), std::time::Instant::now()));
    sends.push((event.verdict.clone(), false));
    sends
}

/// Sends one verdict, retrying with exponential backoff and jitter.
async fn deliver(
    config: &NotifierConfig,
    client: &reqwest::Client,
    source: &AlertSource,
    verdict: &Verdict,
    resolved: bool,
    stats: &NotifierStats,
    shutdown: &mut watch::Receiver<bool>,
) {
    let (url, body) = match config.kind {
        NotifierKind::Alertmanager => (
            format!("{}/api/v2/alerts", config.url.trim_end_matches('/')),
            alertmanager_body(verdict, resolved, config.resend_interval.0, source),
        ),
        NotifierKind::Webhook => (
            config.url.clone(),
            serde_json::json!({"status": if resolved { "resolved" } else { "firing" }, "summary": summary(verdict), "verdict": verdict}),
        ),
    };
    let payload = serde_json::to_vec(&body).unwrap_or_default();
    let mut delay = Duration::from_millis(500);
    let give_up = std::time::Instant::now() + GIVE_UP_AFTER;
    let mut attempt = 0u32;
    while std::time::Instant::now() < give_up {
        attempt += 1;
        let sent = client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(config.timeout.0)
            .body(payload.clone())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {
                stats.sent.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(response) if response.status().is_client_error() => {
                tracing::error!(notifier = %config.name, status = %response.status(), "notification refused; not retried");
                stats.record_error(format!("HTTP {}", response.status()));
                stats.failed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(response) => {
                tracing::warn!(notifier = %config.name, attempt, status = %response.status(), "notification failed");
                stats.record_error(format!("HTTP {}", response.status()));
            }
            Err(error) => {
                let error = describe(error);
                tracing::warn!(notifier = %config.name, attempt, %error, "notification failed");
                stats.record_error(error);
            }
        }
        let jitter = rand::rng().random_range(0.0..0.5);
        tokio::select! {
            _ = tokio::time::sleep(delay.mul_f64(1.0 + jitter)) => {}
            _ = shutdown.changed() => return,
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
    stats.failed.fetch_add(1, Ordering::Relaxed);
    tracing::error!(notifier = %config.name, attempt, "notification given up after 10 minutes of failures");
}

/// How long a notification is retried before it is counted failed.
const GIVE_UP_AFTER: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;
    use epicenter_config::PromDuration;

    fn verdict(kind: &str, dc: &str, confidence: f64) -> Verdict {
        Verdict {
            id: "2000-redis-2-1".into(),
            kind: kind.into(),
            dc: dc.into(),
            dcs: vec![dc.into()],
            hosts: vec!["dc-2-host-3".into()],
            service: "redis".into(),
            instances: vec!["redis-2-1".into()],
            confidence,
            leader_share: 0.5,
            candidates: Vec::new(),
            evidence: Vec::new(),
            onset_ms: 1_000,
            opened_ms: 2_000,
        }
    }

    fn config(kinds: &[&str], min_confidence: f64) -> NotifierConfig {
        NotifierConfig {
            name: "n".into(),
            kind: NotifierKind::Alertmanager,
            url: "http://127.0.0.1:9093".into(),
            timeout: PromDuration(Duration::from_secs(5)),
            resend_interval: PromDuration(Duration::from_secs(60)),
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            dcs: Vec::new(),
            services: Vec::new(),
            min_confidence,
        }
    }

    fn event(state: &str, verdict: &Verdict) -> VerdictEvent {
        VerdictEvent {
            time_ms: 0,
            state: state.to_string(),
            verdict: verdict.clone(),
        }
    }

    /// Found under a busy machine: a node-loss verdict updated to a slow node on another host
    /// left the first alert firing at Alertmanager (its labels name the first host) until its
    /// endsAt passed, and re-sent it every resend interval.
    #[test]
    fn an_update_to_another_host_resolves_the_alert_sent_for_the_first() {
        let mut open = HashMap::new();
        let mut last = HashMap::new();
        let first = verdict("node_loss", "dc-2", 0.9);
        let mut moved = verdict("slow_node", "dc-2", 0.6);
        moved.hosts = vec!["dc-2-redis-2".to_string()];
        moved.instances = vec!["redis-2-2".to_string()];
        let sent = |sends: Vec<(Verdict, bool)>| -> Vec<(String, String, bool)> {
            sends
                .into_iter()
                .map(|(verdict, resolved)| (verdict.kind, verdict.hosts[0].clone(), resolved))
                .collect()
        };
        let host = |verdict: &Verdict| verdict.hosts[0].clone();
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("opened", &first), true)),
            vec![("node_loss".to_string(), host(&first), false)]
        );
        // Opened twice (a repeat) is sent once.
        assert!(deliveries(&mut open, &mut last, &event("opened", &first), true).is_empty());
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("updated", &moved), true)),
            vec![
                ("node_loss".to_string(), host(&first), true),
                ("slow_node".to_string(), host(&moved), false)
            ]
        );
        // Only the moved verdict is left to re-send.
        assert_eq!(open.len(), 1);
        // An update that keeps the labels (more evidence) re-sends without resolving.
        let mut stronger = moved.clone();
        stronger.confidence = 0.8;
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("updated", &stronger), true)),
            vec![("slow_node".to_string(), host(&moved), false)]
        );
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("resolved", &stronger), true)),
            vec![("slow_node".to_string(), host(&moved), true)]
        );
        assert!(open.is_empty());
    }

    /// Found by a reviewer with two incidents open at once: the update of one resolved the
    /// other's alert, and a resolve resolved both. Each incident's events touch its own alerts
    /// only.
    #[test]
    fn each_incident_resolves_only_its_own_alerts() {
        let mut open = HashMap::new();
        let mut last = HashMap::new();
        let node = verdict("node_loss", "dc-1", 0.9);
        let mut database = verdict("pool_exhaustion", "dc-3", 0.9);
        database.id = "3000-db-3-1".into();
        database.hosts = vec!["dc-3-host-4".into()];
        database.instances = vec!["db-3-1".into()];
        let sent = |sends: Vec<(Verdict, bool)>| -> Vec<(String, bool)> {
            sends
                .into_iter()
                .map(|(verdict, resolved)| (verdict.kind, resolved))
                .collect()
        };
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("opened", &node), true)),
            [("node_loss".to_string(), false)]
        );
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("opened", &database), true)),
            [("pool_exhaustion".to_string(), false)]
        );
        // The database incident moves to another kind: only its own alert is resolved.
        let mut storm = database.clone();
        storm.kind = "retry_storm".into();
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("updated", &storm), true)),
            [
                ("pool_exhaustion".to_string(), true),
                ("retry_storm".to_string(), false)
            ]
        );
        assert_eq!(open.len(), 2);
        // The node's incident resolves: the other stays firing (and is re-sent).
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("resolved", &node), true)),
            [("node_loss".to_string(), true)]
        );
        assert_eq!(open.keys().cloned().collect::<Vec<_>>(), [database.id.clone()]);
        // Filtered out: only its own alert is resolved.
        assert_eq!(
            sent(deliveries(&mut open, &mut last, &event("updated", &storm), false)),
            [("retry_storm".to_string(), true)]
        );
        assert!(open.is_empty());
    }

    /// Found reading the filter: with `min_confidence: 0.5`, a verdict sent at 0.8 and then
    /// updated to 0.4 and resolved at 0.4 was never resolved at the receiver (both events
    /// were filtered out) and was re-sent as firing every resend interval.
    #[test]
    fn an_event_the_filter_drops_still_resolves_what_was_sent() {
        let mut open = HashMap::new();
        let mut last = HashMap::new();
        let sure = verdict("node_loss", "dc-2", 0.8);
        let mut doubtful = sure.clone();
        doubtful.confidence = 0.4;
        let filter = config(&[], 0.5);
        let send = |open: &mut HashMap<_, _>, last: &mut HashMap<_, _>, state: &str, verdict: &Verdict| {
            deliveries(open, last, &event(state, verdict), matches(&filter, verdict))
                .into_iter()
                .map(|(verdict, resolved)| (verdict.confidence, resolved))
                .collect::<Vec<_>>()
        };
        assert_eq!(send(&mut open, &mut last, "opened", &sure), vec![(0.8, false)]);
        // Under the threshold: what was sent is resolved, nothing is left to re-send.
        assert_eq!(send(&mut open, &mut last, "updated", &doubtful), vec![(0.8, true)]);
        assert!(open.is_empty());
        assert!(send(&mut open, &mut last, "resolved", &doubtful).is_empty());
        // Above it again: sent again as firing, then resolved.
        assert_eq!(send(&mut open, &mut last, "updated", &sure), vec![(0.8, false)]);
        assert_eq!(send(&mut open, &mut last, "resolved", &sure), vec![(0.8, true)]);
    }

    #[test]
    fn routing_filters_and_the_alert_body() {
        let loss = verdict("node_loss", "dc-2", 0.8);
        assert!(matches(&config(&[], 0.0), &loss));
        assert!(!matches(&config(&["cold_start"], 0.0), &loss));
        assert!(!matches(&config(&[], 0.9), &loss));
        // `unknown` is reported but pages only where `kinds` asks for it.
        let unknown = verdict("unknown", "dc-2", 0.8);
        assert!(!matches(&config(&[], 0.0), &unknown));
        assert!(matches(&config(&["unknown"], 0.0), &unknown));
        assert_eq!(loss.id, "2000-redis-2-1");
        let source = AlertSource {
            external_url: "https://epicenter.example:9464".into(),
            external_labels: [("region", "eu"), ("dc", "from-external-labels")]
                .into_iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
        };
        let body = alertmanager_body(&loss, true, Duration::from_secs(60), &source);
        let alert = &body[0];
        assert_eq!(alert["labels"]["alertname"], "EpicenterRootCause");
        assert_eq!(
            alert["generatorURL"],
            "https://epicenter.example:9464/incidents/2000-redis-2-1"
        );
        // External labels are added; the alert's own label wins a clash (as in Prometheus).
        assert_eq!(alert["labels"]["region"], "eu");
        assert_eq!(alert["labels"]["dc"], "dc-2");
        assert_eq!(alert["labels"]["host"], "dc-2-host-3");
        assert_eq!(
            alert["annotations"]["summary"],
            "node loss: redis-2-1 (service redis on dc-2-host-3, dc-2); 0 callers point at it; confidence 0.80"
        );
        // Resolved: endsAt is now, after startsAt (the verdict opened at 2 s after the epoch).
        assert_eq!(alert["startsAt"], "1970-01-01T00:00:02.000Z");
        assert!(alert["endsAt"].as_str().unwrap() > "2026");
    }
}
