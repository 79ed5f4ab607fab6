//! The run's state in one line, for a person watching `epicenter run`: targets up and down
//! (with the first down target and why), samples written per second, the writer's backlog
//! and the open verdict. The same figures are on `/metrics` and `/api/v1/*`; this is the
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
    /// The open incidents in a few words, oldest first, `; ` between them (`node_loss of
    /// redis-2-1 on dc-2-host-3 in dc-2`).
    pub open_verdict: Option<String>,
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
        Status {
            targets: self.targets.health(),
            samples_written: writer.sample_rows_written.load(Ordering::Relaxed),
            samples_failed: writer.sample_rows_failed.load(Ordering::Relaxed),
            writer_backlog: self.telemetry.writer_queue_depth.get(),
            open_verdict,
        }
    }
}

impl Status {
    /// One line: `targets 41 up, 1 down | 4210 samples/s | writer backlog 0 | no open verdict |
    /// down: redis http://127.0.0.1:9121/metrics: request failed: connection refused` (the
    /// URL without credentials or query, control characters as `?`);
    /// `samples_per_second` is the caller's rate over its last interval. Failed samples are
    /// shown only when there are any.
    pub fn line(&self, samples_per_second: f64) -> String {
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
        parts.push(match &self.open_verdict {
            Some(verdict) if verdict.contains("; ") => format!("open verdicts: {}", printable(verdict)),
            Some(verdict) => format!("open verdict: {}", printable(verdict)),
            None => "no open verdict".to_string(),
        });
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
            open_verdict: None,
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
    }
}
