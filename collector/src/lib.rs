//! epicenter's collector: targets, discovery (files, HTTP, DNS), relabeling, scraping and the
//! exposition parser, and the configuration of those (`global`, `scrape_configs`).
//!
//! **Enters:** the collector's configuration sections ([`config`]), target files
//! ([`discovery`]) and what `/metrics` endpoints answer (Prometheus text format 0.0.4 or
//! OpenMetrics 1.0, [`exposition`]). **Leaves:** one [`epicenter_store::ScrapeOutcome`] per
//! scrape (sample rows and the scrape's health report) on a bounded channel, and every
//! target's health ([`targets::TargetRegistry`]). **Never:** writes to storage, judges
//! incidents or blocks one target on another; nothing parsed from a body or a file may panic.
//!
//! Data flow: [`config::jobs`] → [`job::run_job`] (one per job; static and discovered target
//! groups through `relabel_configs` into [`targets::Target`]s) → [`scrape::run_target`] (one
//! task per target, on its own schedule) → [`scrape::Scraper::scrape`] (HTTP, [`exposition::parse`],
//! `metric_relabel_configs`, target labels, limits, synthetic series) → the outcome channel.

pub mod auth;
pub mod client;
pub mod config;
pub mod discovery;
pub mod dns_sd;
pub mod exposition;
pub mod headers;
pub mod job;
pub mod lag;
pub mod redis_observer;
pub mod relabel;
pub mod scrape;
pub mod shard;
pub mod targets;
