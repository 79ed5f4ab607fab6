//! epicenter's HTTP API (axum): `/metrics` (its own metrics), `/healthz`, `/readyz`,
//! `/api/v1/targets` (what Prometheus's targets page shows), `/api/v1/verdicts`,
//! `/api/v1/graph` and `/api/v1/notifiers`. Responses follow Prometheus's API envelope
//! (`{"status": "success", "data": …}`).

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use epicenter_collector::targets::{TargetRegistry, TargetStatus};
use epicenter_detector::live::Round;
use epicenter_detector::reference::GraphDocument;
use epicenter_detector::{Verdict, VerdictEvent};
use epicenter_oncall::Notifiers;
use serde::Serialize;

use crate::telemetry::Telemetry;

/// What the handlers share.
pub struct AppState {
    /// epicenter's own metrics.
    pub telemetry: Telemetry,
    /// Every target's health (the collector updates it).
    pub targets: Arc<TargetRegistry>,
    /// The open incidents and the history of verdict events.
    pub verdicts: Mutex<VerdictBook>,
    /// The dependency graph the detector reasons over (after its first round).
    pub graph: Mutex<Option<Arc<GraphDocument>>>,
    /// The notifiers, for their delivery counters at `/api/v1/notifiers` (the binary pages
    /// through the same handle; the web server never sends a notification).
    pub notifiers: Arc<Notifiers>,
    /// The store the collector writes, read for the incident page's evidence charts; `None`
    /// draws no charts.
    pub store: Option<epicenter_store::Store>,
}

/// Verdict events kept for `/api/v1/verdicts`.
const HISTORY: usize = 100;

impl AppState {
    /// Publishes one round of the live detector: the open incidents and the events (kept, the
    /// last 100), the graph, and the detector's own metrics ([`Telemetry::observe_round`]).
    pub fn publish(&self, round: &Round) {
        if let Ok(mut slot) = self.graph.lock() {
            *slot = Some(round.graph.clone());
        }
        if let Ok(mut book) = self.verdicts.lock() {
            book.open = round.open.clone();
            book.history.extend(round.events.iter().cloned());
            let excess = book.history.len().saturating_sub(HISTORY);
            book.history.drain(..excess);
        }
        self.telemetry.observe_round(round);
    }
}

/// What `/api/v1/verdicts` serves.
#[derive(Debug, Default, Clone, Serialize)]
pub struct VerdictBook {
    /// Every open incident's verdict, oldest first (empty when nothing is wrong).
    pub open: Vec<Verdict>,
    /// Verdict events, oldest first: `opened`, `updated` (the answer changed) and
    /// `resolved`, with their time (ms since the epoch); the last 100.
    pub history: Vec<VerdictEvent>,
}

/// The router: `/metrics`, `/healthz`, `/readyz`, `/api/v1/targets`, `/api/v1/verdicts`,
/// `/api/v1/graph`, `/api/v1/notifiers`. With a bearer token configured
/// (`server.bearer_token_env` or `…_file`, read here), the `/api/v1/` endpoints answer 401
/// without `Authorization: Bearer <token>` (RFC 6750); `/metrics`, `/healthz` and `/readyz`
/// stay open for Prometheus and probes. Errors: the token cannot be read (names the key).
pub fn app(state: Arc<AppState>, server: &crate::config::ServerConfig) -> Result<Router, String> {
    let mut api = Router::new()
        .route("/api/v1/targets", get(targets))
        .route("/api/v1/verdicts", get(verdicts))
        .route("/api/v1/graph", get(graph))
        .route("/api/v1/notifiers", get(notifiers))
        .route("/incidents", get(crate::incident::list))
        .route("/incidents/{id}", get(crate::incident::show));
    if let Some(token) = server.bearer_token()? {
        let token = Arc::new(token);
        api = api.layer(axum::middleware::from_fn(move |request, next| {
            require_bearer(token.clone(), request, next)
        }));
    }
    Ok(Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .merge(api)
        .with_state(state))
}

/// Passes a request on only with `Authorization: Bearer <token>`, compared in constant time;
/// otherwise 401 with `WWW-Authenticate: Bearer` and the API's error envelope.
async fn require_bearer(
    token: Arc<epicenter_config::Secret>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, token)| token.trim());
    if !token.matches(given) {
        let reason = if given.is_empty() {
            "no bearer token"
        } else {
            "wrong bearer token"
        };
        let body = serde_json::json!({"status": "error", "errorType": "unauthorized", "error": format!("{reason}: this endpoint needs Authorization: Bearer <token> (server.bearer_token_env or bearer_token_file)")});
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            Json(body),
        )
            .into_response();
    }
    next.run(request).await
}

/// `/api/v1/graph`: the instance dependency graph as JSON (`{"status", "data": {"nodes",
/// "edges"}}`), or Graphviz DOT with `?format=dot`. 503 before the detector's first round.
async fn graph(
    State(state): State<Arc<AppState>>,
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> axum::response::Response {
    let document = state
        .graph
        .lock()
        .map(|graph| graph.clone())
        .unwrap_or_else(|poisoned| poisoned.into_inner().clone());
    let Some(document) = document else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the detector has not judged a round yet\n",
        )
            .into_response();
    };
    if query.get("format").map(String::as_str) == Some("dot") {
        return (
            [(header::CONTENT_TYPE, "text/vnd.graphviz; charset=utf-8")],
            epicenter_detector::reference::to_dot(&document),
        )
            .into_response();
    }
    Json(serde_json::json!({"status": "success", "data": &*document})).into_response()
}

/// `/api/v1/notifiers`: per notifier, name, type, url and delivery counters (sent, failed,
/// dropped).
async fn notifiers(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    Json(serde_json::json!({"status": "success", "data": state.notifiers.status()}))
}

/// `/api/v1/verdicts`: `{"status": "success", "data": {"open": [verdict, …], "history": […]}}`
/// (every open incident, oldest first; the last 100 events).
async fn verdicts(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let book = state
        .verdicts
        .lock()
        .map(|book| book.clone())
        .unwrap_or_else(|poisoned| poisoned.into_inner().clone());
    Json(serde_json::json!({"status": "success", "data": book}))
}

/// `/metrics`: epicenter's own metrics, in OpenMetrics 1.0 when the `Accept` header prefers
/// it ([`crate::openmetrics::wants_openmetrics`]), else in text format 0.0.4.
async fn metrics(State(state): State<Arc<AppState>>, headers: axum::http::HeaderMap) -> impl IntoResponse {
    let accept = headers.get(header::ACCEPT).and_then(|value| value.to_str().ok());
    if crate::openmetrics::wants_openmetrics(accept) {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, crate::openmetrics::OPENMETRICS_CONTENT_TYPE)],
            state.telemetry.render_openmetrics(),
        );
    }
    match state.telemetry.render() {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, crate::openmetrics::TEXT_CONTENT_TYPE)],
            text,
        ),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot encode metrics: {error}\n"),
        ),
    }
}

async fn ready(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    // A ClickHouse server that did not answer at start has its schema created when it does;
    // until then the scrapes go to the spool and epicenter is not ready.
    if let Some(why) = state.store.as_ref().and_then(epicenter_store::Store::waiting_for_store) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: waiting for the store ({why}); scrapes are spooled meanwhile\n"),
        );
    }
    // The store's schema is in place; the first round of scrapes is what remains.
    match state.targets.first_round_done() {
        (true, _) => (StatusCode::OK, "ready\n".to_string()),
        (false, waiting) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {waiting} targets not scraped yet\n"),
        ),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TargetsData {
    active_targets: Vec<TargetStatus>,
}

#[derive(Serialize)]
struct TargetsResponse {
    status: &'static str,
    data: TargetsData,
}

async fn targets(State(state): State<Arc<AppState>>) -> Json<TargetsResponse> {
    let active_targets = state.targets.statuses();
    Json(TargetsResponse {
        status: "success",
        data: TargetsData { active_targets },
    })
}
