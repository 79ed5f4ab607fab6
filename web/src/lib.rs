//! epicenter's own HTTP server (axum): its metrics at `/metrics` (text 0.0.4, or OpenMetrics
//! 1.0 when asked for: [`openmetrics`]), `/healthz`, `/readyz`, and the API an investigation
//! reads while the incident is on (`/api/v1/targets`, `/api/v1/verdicts`, `/api/v1/graph`,
//! `/api/v1/notifiers`), over plain HTTP or TLS (`server.tls`, [`tls`]), and the incident page
//! every alert links to (`/incidents/{id}`, [`incident`]).
//!
//! **Enters:** scrape outcomes (for its own metrics, [`telemetry::Telemetry::observe`]), the
//! collector's target health, the live detector's judgements ([`api::AppState::publish`]),
//! the writer's and the notifiers' counters, the `server` section ([`config`]), and, for the
//! incident page's evidence charts only, samples read from the store.
//! **Leaves:** HTTP responses. **Never:** writes to the store, changes what is scraped, or
//! blocks the pipeline (handlers read snapshots behind short locks; the chart queries run on
//! the blocking pool or over HTTP).

pub mod api;
mod charts;
pub mod config;
pub mod incident;
pub mod openmetrics;
pub mod status;
pub mod telemetry;
pub mod tls;

pub use api::{app, AppState, VerdictBook};
pub use telemetry::Telemetry;
pub use tls::{bind, serve, start};
