//! The incident pages every alert links to: `/incidents` (open and recent verdicts) and
//! `/incidents/{id}` (one verdict: the sentence on-call reads first, the dependency graph as
//! SVG with the culprit and the callers pointing at it highlighted, the evidence, the ranked
//! alternatives, the timeline of its events, and the SQL to dig further). Server-rendered
//! HTML without scripts, from what the live detector published ([`crate::AppState`]);
//! every text taken from labels is HTML-escaped.
//!
//! Under the evidence table, each evidence signal is charted from the store, five minutes
//! either side of the onset ([`crate::charts`]; at most [`CHARTS`] signals).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use epicenter_detector::reference::GraphDocument;
use epicenter_detector::{Verdict, VerdictEvent};
use html_escape::encode_text as text;

use crate::AppState;

/// Evidence signals charted on a page, strongest first.
pub const CHARTS: usize = 8;

/// Width and height of one node's cell in the graph, pixels.
const CELL_WIDTH: usize = 150;
const CELL_HEIGHT: usize = 46;

/// The page's style: plain, readable on a phone, the culprit red and its callers amber.
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5rem;max-width:1200px}\
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left}\
.sentence{font-size:1.3rem;font-weight:600}pre{background:#f5f5f5;padding:.75rem;overflow-x:auto}\
svg text{font-size:11px}.node rect{fill:#eef;stroke:#889}.node.culprit rect{fill:#e33;stroke:#900}\
.node.caller rect{fill:#fc6;stroke:#a60}.edge{stroke:#ccc}.edge.path{stroke:#d22;stroke-width:2}\
#charts{display:flex;flex-wrap:wrap;gap:1rem}figure.chart{margin:0}figure.chart figcaption{font-size:.8rem;max-width:320px}\
svg.chart .frame{fill:#fafafa;stroke:#ddd}svg.chart .onset{stroke:#d22;stroke-dasharray:3 2}svg.chart .series{fill:none;stroke:#25a;stroke-width:1.5}";

/// The verdicts the book holds, by id: the events of each, oldest first.
fn by_id(history: &[VerdictEvent]) -> BTreeMap<String, Vec<VerdictEvent>> {
    let mut verdicts: BTreeMap<String, Vec<VerdictEvent>> = BTreeMap::new();
    for event in history {
        verdicts
            .entry(event.verdict.id.clone())
            .or_default()
            .push(event.clone());
    }
    verdicts
}

/// Milliseconds since the epoch as RFC 3339 UTC, to the second (`2026-12-03T08:14:52Z`).
fn when(ms: i64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(time).to_string()
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head><body>{body}</body></html>",
        text(title)
    ))
}

/// `GET /incidents`: every verdict the book holds (the last 100 events), newest first,
/// each with its latest state and a link to its page.
pub(crate) async fn list(State(state): State<Arc<AppState>>) -> Html<String> {
    let history = state
        .verdicts
        .lock()
        .map(|book| book.history.clone())
        .unwrap_or_default();
    let mut rows: Vec<(i64, String)> = by_id(&history)
        .into_iter()
        .filter_map(|(id, events)| {
            let last = events.last()?;
            let verdict = &last.verdict;
            Some((
                verdict.opened_ms,
                format!(
                    "<tr><td><a href=\"/incidents/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    text(&id),
                    text(&id),
                    text(&last.state),
                    text(&verdict.kind),
                    text(&verdict.dc),
                    text(&verdict.hosts.join(", ")),
                    text(&verdict.service)
                ),
            ))
        })
        .collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.0));
    let body = if rows.is_empty() {
        "<h1>Incidents</h1><p>No verdict yet.</p>".to_string()
    } else {
        format!(
            "<h1>Incidents</h1><table><tr><th>verdict</th><th>state</th><th>kind</th><th>dc</th><th>hosts</th><th>service</th></tr>{}</table>",
            rows.into_iter().map(|(_, row)| row).collect::<String>()
        )
    };
    page("epicenter: incidents", &body)
}

/// `GET /incidents/{id}`: one verdict's page; 404 with a link to the list for an id the
/// book does not hold (it keeps the last 100 events; older verdicts are in the `verdicts`
/// table).
pub(crate) async fn show(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    let history = state
        .verdicts
        .lock()
        .map(|book| book.history.clone())
        .unwrap_or_default();
    let graph = state.graph.lock().ok().and_then(|graph| graph.clone());
    let Some(events) = by_id(&history).remove(&id) else {
        let body = format!(
            "<h1>No verdict {}</h1><p>epicenter keeps the last 100 verdict events in memory; older ones are in the <code>verdicts</code> table. <a href=\"/incidents\">All incidents</a>.</p>",
            text(&id)
        );
        return (StatusCode::NOT_FOUND, page("epicenter: no such verdict", &body)).into_response();
    };
    let Some(last) = events.last() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let charts = match (&state.store, open_answer(&events)) {
        (Some(store), Some(verdict)) => evidence_charts(store, verdict).await,
        _ => String::new(),
    };
    page(
        &format!("epicenter: {}", last.verdict.kind),
        &incident_body(&id, &events, graph.as_deref(), &charts),
    )
    .into_response()
}

/// The verdict as it was while open: a `resolved` event carries the verdict with the
/// evidence of its last round, when the anomalies have mostly ended.
fn open_answer(events: &[VerdictEvent]) -> Option<&Verdict> {
    events
        .iter()
        .rev()
        .find(|event| event.state != "resolved")
        .or(events.last())
        .map(|event| &event.verdict)
}

/// The evidence charts of `verdict` ([`crate::charts`]), one query per signal; a query that
/// fails gives a figure saying why instead of a chart.
async fn evidence_charts(store: &epicenter_store::Store, verdict: &Verdict) -> String {
    let mut out = String::from("<div id=\"charts\">");
    for anomaly in verdict.evidence.iter().take(CHARTS) {
        let sql = crate::charts::evidence_query(anomaly, verdict.onset_ms);
        match store.fetch(sql, "TabSeparated").await {
            Ok(rows) => {
                let rows = String::from_utf8_lossy(&rows);
                let exact = crate::charts::has_exact(&anomaly.metric, &rows);
                let points = crate::charts::points(&anomaly.metric, &rows);
                out.push_str(&crate::charts::chart(anomaly, verdict.onset_ms, &points, exact));
            }
            Err(error) => {
                let _ = write!(
                    out,
                    "<figure class=\"chart\" data-points=\"0\"><p>The store did not answer: {}</p></figure>",
                    text(&error)
                );
            }
        }
    }
    out.push_str("</div>");
    out
}

/// The body of one verdict's page; `charts` is the evidence charts' HTML.
fn incident_body(id: &str, events: &[VerdictEvent], graph: Option<&GraphDocument>, charts: &str) -> String {
    let Some(last) = events.last() else {
        return String::new();
    };
    let Some(verdict) = open_answer(events) else {
        return String::new();
    };
    let mut body = String::new();
    let _ = write!(
        body,
        "<p><a href=\"/incidents\">All incidents</a></p><h1>{} ({})</h1><p class=\"sentence\" id=\"sentence\">{}</p>",
        text(&verdict.kind),
        text(&last.state),
        text(&epicenter_oncall::notifiers::summary(verdict))
    );
    body.push_str("<h2>Dependency graph</h2>");
    match graph {
        Some(graph) => body.push_str(&svg(graph, verdict)),
        None => body.push_str("<p>The detector has not published a graph yet.</p>"),
    }
    body.push_str("<h2>Evidence</h2><table id=\"evidence\"><tr><th>instance</th><th>metric</th><th>class</th><th>peer</th><th>score</th><th>onset (UTC)</th></tr>");
    for anomaly in &verdict.evidence {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{:?}</td><td>{}</td><td>{:.1}</td><td>{}</td></tr>",
            text(&anomaly.instance),
            text(&anomaly.metric),
            anomaly.class,
            text(anomaly.peer.as_deref().unwrap_or("")),
            anomaly.score,
            when(anomaly.onset_ms)
        );
    }
    body.push_str("</table>");
    body.push_str(charts);
    body.push_str("<h2>Alternatives</h2><table id=\"alternatives\"><tr><th>rank</th><th>instance</th><th>host</th><th>dc</th><th>service</th><th>score</th></tr>");
    for (rank, candidate) in verdict.candidates.iter().enumerate() {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td></tr>",
            rank + 1,
            text(&candidate.instance),
            text(&candidate.host),
            text(&candidate.dc),
            text(&candidate.service),
            candidate.score
        );
    }
    body.push_str("</table><h2>Timeline</h2><table id=\"timeline\"><tr><th>time (UTC)</th><th>event</th><th>kind</th><th>hosts</th><th>confidence</th></tr>");
    for event in events {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
            when(event.time_ms),
            text(&event.state),
            text(&event.verdict.kind),
            text(&event.verdict.hosts.join(", ")),
            event.verdict.confidence
        );
    }
    let quoted = id.replace('\\', "\\\\").replace('\'', "\\'");
    let _ = write!(
        body,
        "</table><h2>Dig further</h2><p>With <code>epicenter sql</code>, or any ClickHouse client on the live SQL endpoint; more questions in docs/investigation.md.</p><pre>{}</pre>",
        text(&format!(
            "-- every event of this verdict\nSELECT time, state, kind, dc, hosts, confidence FROM verdicts WHERE id = '{quoted}' ORDER BY time;\n\n-- its evidence, as rows\nSELECT JSONExtractString(item, 'instance') AS instance, JSONExtractString(item, 'metric') AS metric,\n       JSONExtractString(item, 'peer') AS peer, JSONExtractFloat(item, 'score') AS score\nFROM (SELECT arrayJoin(JSONExtractArrayRaw(argMax(evidence, time))) AS item FROM verdicts WHERE id = '{quoted}' AND state != 'resolved');\n\n-- anomalies around the onset\nSELECT onset, instance, metric, class, peer, score FROM anomalies\nWHERE onset BETWEEN fromUnixTimestamp64Milli({}) - INTERVAL 2 MINUTE AND fromUnixTimestamp64Milli({}) + INTERVAL 2 MINUTE ORDER BY onset;",
            verdict.onset_ms, verdict.onset_ms
        ))
    );
    body
}

/// The dependency graph as SVG: one column per datacenter, one row per service, the named
/// instances red (`class="node culprit"`), the instances whose evidence points at them
/// amber (`caller`), and the edges from those callers to the culprit (the path the failure
/// took) drawn red (`class="edge path"`).
fn svg(graph: &GraphDocument, verdict: &Verdict) -> String {
    let culprits: BTreeSet<&str> = verdict.instances.iter().map(String::as_str).collect();
    let callers: BTreeSet<&str> = verdict
        .evidence
        .iter()
        .filter(|anomaly| anomaly.peer.as_deref().is_some_and(|peer| culprits.contains(peer)))
        .map(|anomaly| anomaly.instance.as_str())
        .collect();
    let dcs: BTreeSet<&str> = graph.nodes.iter().map(|node| node.dc.as_str()).collect();
    let services: Vec<&str> = {
        let mut seen = Vec::new();
        for node in &graph.nodes {
            if !seen.contains(&node.service.as_str()) {
                seen.push(node.service.as_str());
            }
        }
        seen
    };
    // Within a (dc, service) cell group, instances side by side.
    let mut per_cell: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut widest: BTreeMap<&str, usize> = BTreeMap::new();
    let mut place: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for node in &graph.nodes {
        let slot = per_cell.entry((node.dc.as_str(), node.service.as_str())).or_default();
        let row = services
            .iter()
            .position(|service| *service == node.service)
            .unwrap_or(0);
        place.insert(node.name.as_str(), (*slot, row));
        *slot += 1;
        let width = widest.entry(node.dc.as_str()).or_default();
        *width = (*width).max(*slot);
    }
    let mut dc_left: BTreeMap<&str, usize> = BTreeMap::new();
    let mut left = 0;
    for dc in &dcs {
        dc_left.insert(dc, left);
        left += widest.get(dc).copied().unwrap_or(1) * CELL_WIDTH + 30;
    }
    let centre = |name: &str| -> Option<(usize, usize)> {
        let node = graph.nodes.iter().find(|node| node.name == name)?;
        let (slot, row) = place.get(name)?;
        Some((
            dc_left.get(node.dc.as_str())? + slot * CELL_WIDTH + CELL_WIDTH / 2,
            30 + row * (CELL_HEIGHT + 24) + CELL_HEIGHT / 2,
        ))
    };
    let height = 40 + services.len() * (CELL_HEIGHT + 24);
    let mut out = format!(
        "<svg id=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{left}\" height=\"{height}\" viewBox=\"0 0 {left} {height}\">"
    );
    for dc in &dcs {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"16\" font-weight=\"bold\">{}</text>",
            dc_left[dc] + 4,
            text(dc)
        );
    }
    for edge in &graph.edges {
        let (Some((x1, y1)), Some((x2, y2))) = (centre(&edge.caller), centre(&edge.callee)) else {
            continue;
        };
        let on_path = culprits.contains(edge.callee.as_str()) && callers.contains(edge.caller.as_str());
        let _ = write!(
            out,
            "<line class=\"edge{}\" x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\"/>",
            if on_path { " path" } else { "" }
        );
    }
    for node in &graph.nodes {
        let Some((x, y)) = centre(&node.name) else { continue };
        let class = if culprits.contains(node.name.as_str()) {
            "node culprit"
        } else if callers.contains(node.name.as_str()) {
            "node caller"
        } else {
            "node"
        };
        let _ = write!(
            out,
            "<g class=\"{class}\" data-instance=\"{}\"><title>{} on {} ({})</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
            html_escape::encode_double_quoted_attribute(&node.name),
            text(&node.name),
            text(&node.host),
            text(&node.dc),
            x - CELL_WIDTH / 2 + 6,
            y - CELL_HEIGHT / 2,
            CELL_WIDTH - 12,
            CELL_HEIGHT,
            y - 3,
            text(&node.name),
            y + 12,
            text(&node.host)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use epicenter_detector::reference::GraphEdge;
    use epicenter_detector::rules::Class;
    use epicenter_detector::{Anomaly, Candidate, InstanceInfo};

    fn node(name: &str, dc: &str, service: &str) -> InstanceInfo {
        InstanceInfo {
            name: name.into(),
            dc: dc.into(),
            host: format!("{dc}-host"),
            service: service.into(),
        }
    }

    #[test]
    fn the_culprit_and_its_callers_are_highlighted_and_labels_are_escaped() {
        let graph = GraphDocument {
            nodes: vec![
                node("backend-1", "dc-1", "backend"),
                node("backend-2", "dc-1", "backend"),
                node("redis-1", "dc-1", "redis"),
                node("<script>x</script>", "dc-2", "redis"),
            ],
            edges: ["backend-1", "backend-2"]
                .iter()
                .flat_map(|caller| {
                    ["redis-1", "<script>x</script>"].iter().map(move |callee| GraphEdge {
                        caller: (*caller).into(),
                        callee: (*callee).into(),
                        source: "configured".into(),
                    })
                })
                .collect(),
        };
        let anomaly = |instance: &str, peer: Option<&str>| Anomaly {
            instance: instance.into(),
            metric: "lettuce_command_completion_seconds".into(),
            class: Class::Latency,
            peer: peer.map(Into::into),
            score: 40.0,
            onset_ms: 1_000,
            rounds: 2,
            labels: BTreeMap::new(),
            value: 0.0,
            baseline: 0.0,
            deviation: 0.0,
            resource: None,
            outbound: false,
        };
        let verdict = Verdict {
            id: "2000-redis-1".into(),
            kind: "node_loss".into(),
            dc: "dc-1".into(),
            dcs: vec!["dc-1".into()],
            hosts: vec!["dc-1-host".into()],
            service: "redis".into(),
            instances: vec!["redis-1".into()],
            confidence: 0.8,
            leader_share: 0.5,
            candidates: vec![Candidate {
                instance: "redis-1".into(),
                dc: "dc-1".into(),
                host: "dc-1-host".into(),
                service: "redis".into(),
                score: 9.0,
                onset_ms: 1_000,
            }],
            evidence: vec![anomaly("backend-1", Some("redis-1")), anomaly("backend-2", None)],
            onset_ms: 1_000,
            opened_ms: 2_000,
        };
        let drawn = svg(&graph, &verdict);
        assert_eq!(drawn.matches("class=\"node culprit\"").count(), 1, "{drawn}");
        assert!(
            drawn.contains("<g class=\"node culprit\" data-instance=\"redis-1\">"),
            "{drawn}"
        );
        // backend-1's evidence names redis-1 as its peer; backend-2's names no peer.
        assert!(
            drawn.contains("<g class=\"node caller\" data-instance=\"backend-1\">"),
            "{drawn}"
        );
        assert!(
            drawn.contains("<g class=\"node\" data-instance=\"backend-2\">"),
            "{drawn}"
        );
        assert_eq!(drawn.matches("class=\"edge path\"").count(), 1, "{drawn}");
        assert_eq!(drawn.matches("<line ").count(), 4, "{drawn}");
        assert!(!drawn.contains("<script>"), "{drawn}");
        assert!(drawn.contains("&lt;script&gt;"), "{drawn}");
        let event = VerdictEvent {
            time_ms: 2_000,
            state: "opened".into(),
            verdict,
        };
        let body = incident_body("2000-redis-1", &[event], Some(&graph), "<div id=\"charts\"></div>");
        assert!(body.contains("id=\"sentence\">node loss: redis-1"), "{body}");
        assert!(body.contains("WHERE id = '2000-redis-1'"), "{body}");
        assert_eq!(body.matches("<tr><td>").count(), 2 + 1 + 1, "{body}");
    }
}
