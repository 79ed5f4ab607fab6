//! epicenter's collecting half.
//!
//! Today this crate holds the exposition parser ([`exposition`]): the code that turns what a
//! `/metrics` endpoint prints (Prometheus text format 0.0.4 or OpenMetrics 1.0) into metric
//! families and samples; the configuration ([`config`]) and Prometheus-compatible relabeling
//! ([`relabel`]). Scraping, batching and the ClickHouse/chDB sinks land here next (see
//! `../shared/DESIGN.md`, Components).

pub mod batch;
pub mod config;
pub mod discovery;
pub mod exposition;
pub mod relabel;
pub mod scrape;
pub mod store;
