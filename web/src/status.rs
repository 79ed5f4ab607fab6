//! The run's state in one line, for a person watching `epicenter run`: targets up and down
//! (with the first down target and why), samples written per second, the writer's backlog,
//! the spool's backlog and the store's trouble when there are any, and the open verdict. The same figures are on `/metrics` and `/api/v1/*`; this is the
//! glance that needs neither.

use epicenter_collector::targets::TargetHealth;
use epicenter_store::writer::WriterStats;

use crate::api::AppState;

/// What a status line shows, read from the running pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// Targets by health.
    pub targets: TargetHealth,
    /// Sample rows written so far.
    pub samples_written: u64,
    /// Sample rows in batches that failed.
    pub samples_failed: u64,
    /// Scrape outcomes waiting for the writer.
    pub writer_backlog: i64,
    /// The spool's backlog when a batch waits in it (`3 batches (1.4 MiB), the oldest 12 s
    /// old`, [`WriterStats::describe_backlog`]).
    pub spool_backlog: Option<String>,
    /// The store's trouble: why it has not answered since the start (its schema waits,
    /// `waiting for the store: …`), or `store failing` while delivery fails.
    pub store_trouble: Option<String>,
    /// The open incidents in a few words, oldest first, `; ` between them (`node_loss of
    /// redis-2-1 on dc-2-host-3 in dc-2`).
    pub open_verdict: Option<String>,
    /// `epicenter detect`'s store follower, in place of the targets and the writer.
    pub following: Option<Following>,
}

/// What `epicenter detect` reads back from the store ([`crate::telemetry::FollowTelemetry`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Following {
    /// Instances whose scrapes the collectors stored lately.
    pub instances: i64,
    /// Of those, instances kept as seen because their collector went quiet.
    pub lost: i64,
    /// Sample rows read back so far.
    pub rows_read: u64,
    /// The newest sample time fed to the detector, seconds since the epoch (0 before any).
    pub newest_fed_seconds: f64,
}

impl AppState {
    /// The pipeline's state now; `writer` is the writer's counters.
    pub fn status(&self, writer: &WriterStats) -> Status {
        use std::sync::atomic::Ordering;
        let open_verdict = self.verdicts.lock().ok().and_then(|book| {
            let described: Vec<String> = book
                .open
                .iter()
                .map(|verdict| {
                    format!(
                        "{} of {} on {} in {}",
                        verdict.kind,
                        verdict.instances.first().map_or("?", String::as_str),
                        verdict.hosts.first().map_or("?", String::as_str),
                        verdict.dc
                    )
                })
                .collect();
            (!described.is_empty()).then(|| described.join("; "))
        });
        let follow = self.telemetry.follow();
        let following = follow.is_active().then(|| Following {
            instances: follow.instances.get(),
            lost: follow.instances_lost.get(),
            rows_read: follow.sample_rows_read_total.get(),
            newest_fed_seconds: follow.newest_sample_timestamp_seconds.get(),
        });
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as i64);
        let spool_backlog = (writer.spool_batches.load(Ordering::Relaxed) > 0).then(|| writer.describe_backlog(now_ms));
        let waiting = self.store.as_ref().and_then(epicenter_store::Store::waiting_for_store);
        let store_trouble = match waiting {
            Some(why) => Some(format!("waiting for the store: {}", cause(&why))),
            None => writer
                .delivery_failing
                .load(Ordering::Relaxed)
                .then(|| "store failing: retrying".to_string()),
        };
        Status {
            spool_backlog,
            store_trouble,
            following,
            targets: self.targets.health(),
            samples_written: writer.sample_rows_written.load(Ordering::Relaxed),
            samples_failed: writer.sample_rows_failed.load(Ordering::Relaxed),
            writer_backlog: self.telemetry.writer_queue_depth.get(),
            open_verdict,
        }
    }
}

impl Status {
    /// The count whose rate the line shows: sample rows written (`run`), or read back from
    /// the store (`epicenter detect`).
    pub fn counted(&self) -> u64 {
        self.following
            .as_ref()
            .map_or(self.samples_written, |following| following.rows_read)
    }

    /// One line: `targets 41 up, 1 down | 4210 samples/s | writer backlog 0 | no open verdict |
    /// down: redis http://127.0.0.1:9121/metrics: request failed: connection refused` (the
    /// spool's backlog, `spooled 20 batches (1.4 MiB), the oldest 95 s old`, and the store's
    /// trouble, `waiting for the store: …` or `store failing: retrying`, before the verdict
    /// when there are any;
    /// URL without credentials or query, control characters as `?`);
    /// `samples_per_second` is the caller's rate over its last interval. Failed samples are
    /// shown only when there are any.
    /// `epicenter detect`'s line instead: `following 42 instances (3 kept as seen) | 812
    /// samples/s read back | newest sample fed 1.3 s ago | no open verdict`, `now_seconds`
    /// being the wall clock.
    pub fn line(&self, samples_per_second: f64) -> String {
        let now_seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        self.line_at(samples_per_second, now_seconds)
    }

    /// [`Status::line`] at `now_seconds` (seconds since the epoch).
    pub fn line_at(&self, samples_per_second: f64, now_seconds: f64) -> String {
        if let Some(following) = &self.following {
            let mut first = format!(
                "following {} instance{}",
                following.instances,
                if following.instances == 1 { "" } else { "s" }
            );
            if following.lost > 0 {
                first.push_str(&format!(" ({} kept as seen: collector quiet)", following.lost));
            }
            let newest = if following.newest_fed_seconds > 0.0 {
                format!(
                    "newest sample fed {:.1} s ago",
                    (now_seconds - following.newest_fed_seconds).max(0.0)
                )
            } else {
                "no sample fed yet".to_string()
            };
            return [
                first,
                format!("{samples_per_second:.0} samples/s read back"),
                newest,
                self.verdict_part(),
            ]
            .join(" | ");
        }
        let targets = &self.targets;
        let mut parts = vec![format!("targets {} up, {} down", targets.up, targets.down)];
        if targets.unknown > 0 {
            parts[0].push_str(&format!(", {} not scraped yet", targets.unknown));
        }
        parts.push(format!("{samples_per_second:.0} samples/s"));
        if self.samples_failed > 0 {
            parts.push(format!("{} samples failed", self.samples_failed));
        }
        parts.push(format!("writer backlog {}", self.writer_backlog));
        if let Some(backlog) = &self.spool_backlog {
            parts.push(format!("spooled {backlog}"));
        }
        if let Some(trouble) = &self.store_trouble {
            parts.push(printable(trouble));
        }
        parts.push(self.verdict_part());
        // Last, so that a narrow terminal cuts the detail rather than the counts.
        if let Some(down) = &targets.first_down {
            parts.push(format!(
                "down: {} {}: {}",
                printable(&down.job),
                printable(&epicenter_config::redacted_url(&down.url)),
                printable(&cause(&down.error))
            ));
        }
        parts.join(" | ")
    }
}

impl Status {
    /// `no open verdict`, `open verdict: …` or `open verdicts: …; …`.
    fn verdict_part(&self) -> String {
        match &self.open_verdict {
            Some(verdict) if verdict.contains("; ") => format!("open verdicts: {}", printable(verdict)),
            Some(verdict) => format!("open verdict: {}", printable(verdict)),
            None => "no open verdict".to_string(),
        }
    }
}

/// `text` with control characters (escape sequences, newlines from a target's error or a
/// label value) shown as `?`, so that nothing a target sends steers the terminal.
fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// The end of an error chain (`a: b: c: connection refused (os error 111)` → its last two
/// parts), where the cause is, at most 100 characters.
fn cause(error: &str) -> String {
    let parts: Vec<&str> = error.split(": ").collect();
    let tail = parts[parts.len().saturating_sub(2)..].join(": ");
    if tail.chars().count() > 100 {
        let skip = tail.chars().count() - 99;
        format!("…{}", tail.chars().skip(skip).collect::<String>())
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use epicenter_collector::targets::DownTarget;

    #[test]
    fn the_cause_is_the_end_of_the_error_chain() {
        assert_eq!(
            cause("request failed: error sending request for url (http://x/metrics): client error (Connect): tcp connect error: Connection refused (os error 111)"),
            "tcp connect error: Connection refused (os error 111)"
        );
        assert_eq!(cause("HTTP 500"), "HTTP 500");
        assert_eq!(printable("bad\x1b[31m\nline"), "bad?[31m?line");
        assert_eq!(
            epicenter_config::redacted_url("http://u:secret@10.0.0.1:9100/probe?target=x&token=t"),
            "http://u:xxxxx@10.0.0.1:9100/probe?target=xxxxx&token=xxxxx"
        );
    }

    #[test]
    fn the_line_names_the_first_down_target_and_the_open_verdict() {
        let mut status = Status {
            targets: TargetHealth {
                up: 41,
                down: 1,
                unknown: 0,
                first_down: Some(DownTarget {
                    job: "redis".into(),
                    url: "http://127.0.0.1:9121/metrics".into(),
                    error: "request failed: connection refused".into(),
                }),
            },
            samples_written: 10,
            samples_failed: 0,
            writer_backlog: 3,
            spool_backlog: None,
            store_trouble: None,
            open_verdict: None,
            following: None,
        };
        assert_eq!(
            status.line(4210.4),
            "targets 41 up, 1 down | 4210 samples/s | writer backlog 3 | no open verdict | down: redis http://127.0.0.1:9121/metrics: request failed: connection refused"
        );
        status.targets = TargetHealth {
            up: 0,
            down: 0,
            unknown: 2,
            first_down: None,
        };
        status.samples_failed = 7;
        status.open_verdict = Some("node_loss of redis-2-1 on dc-2-host-3 in dc-2".into());
        assert_eq!(
            status.line(0.0),
            "targets 0 up, 0 down, 2 not scraped yet | 0 samples/s | 7 samples failed | writer backlog 3 | open verdict: node_loss of redis-2-1 on dc-2-host-3 in dc-2"
        );
        assert_eq!(status.counted(), 10);
        // Through an outage: the spool's backlog and the store's trouble, before the verdict.
        let stats = WriterStats::default();
        stats.spool_batches.store(20, std::sync::atomic::Ordering::Relaxed);
        stats
            .spool_bytes
            .store(3 * 1024 * 1024 / 2, std::sync::atomic::Ordering::Relaxed);
        stats
            .spool_oldest_written_ms
            .store(1_000_000, std::sync::atomic::Ordering::Relaxed);
        status.spool_backlog = Some(stats.describe_backlog(1_095_400));
        status.store_trouble = Some("waiting for the store: Connection refused (os error 111)".into());
        assert_eq!(
            status.line(0.0),
            "targets 0 up, 0 down, 2 not scraped yet | 0 samples/s | 7 samples failed | writer backlog 3 | spooled 20 batches (1.5 MiB), the oldest 95 s old | waiting for the store: Connection refused (os error 111) | open verdict: node_loss of redis-2-1 on dc-2-host-3 in dc-2"
        );
        status.spool_backlog = None;
        status.store_trouble = None;
        // `epicenter detect` tells of what it reads back instead of targets and writer.
        status.following = Some(Following {
            instances: 42,
            lost: 3,
            rows_read: 900,
            newest_fed_seconds: 1_000.0,
        });
        assert_eq!(status.counted(), 900);
        assert_eq!(
            status.line_at(812.0, 1_001.3),
            "following 42 instances (3 kept as seen: collector quiet) | 812 samples/s read back | newest sample fed 1.3 s ago | open verdict: node_loss of redis-2-1 on dc-2-host-3 in dc-2"
        );
        status.following = Some(Following {
            instances: 1,
            lost: 0,
            rows_read: 0,
            newest_fed_seconds: 0.0,
        });
        status.open_verdict = None;
        assert_eq!(
            status.line_at(0.0, 1_001.0),
            "following 1 instance | 0 samples/s read back | no sample fed yet | no open verdict"
        );
    }
}
