//! epicenter's store: ClickHouse, embedded (chDB, the default) or a server, with the same
//! schema and SQL for both (`../shared/DESIGN.md`, Storage; docs/schema.md).
//!
//! **Enters:** rows ([`rows`]): each scrape's samples and health report from the collector
//! (through the writer's inbox, [`writer::run_writer`]), anomalies and verdict events from the
//! detector ([`Store::write_anomalies`], [`Store::write_verdict`]), and SQL from people and
//! tools ([`Store::query`], and the ClickHouse HTTP interface in [`http`]).
//! **Leaves:** stored rows, query results, the writer's counters ([`writer::WriterStats`]).
//! **Never:** imports the collector, the detector or any stage above it; parses expositions
//! or judges incidents. A failed flush never stops scraping: the writer counts it and goes on.
//!
//! Modules: [`config`] (the `storage`, `batching` and `placement` sections), [`rows`] (the
//! row types and their RowBinary form), [`rowbinary`] (the format), [`schema`] (DDL,
//! migrations), [`writer`] (batching and the [`writer::Sink`] seam), [`embedded`] over
//! [`chdb`] (the workspace's one FFI module), [`clickhouse`] (the server sink, official
//! `clickhouse` crate), [`backend`] ([`Store`], the handle the binary opens), [`http`] (the
//! ClickHouse HTTP interface served over the embedded engine), [`endpoint`] (that interface,
//! read-only and authenticated, over the store `run` writes), [`access`] (what the engine
//! lets any connection do) and [`guard`] (what a reader's statement may hold: the second wall).

pub mod access;
pub mod backend;
pub mod chdb;
pub mod clickhouse;
pub mod config;
pub mod embedded;
pub mod endpoint;
pub mod guard;
pub mod http;
pub mod rowbinary;
pub mod rows;
pub mod schema;
pub mod spool;
pub mod writer;

pub use backend::{OpenError, ReplayRun, Store, EMBEDDED_DATABASE};
pub use chdb::{exit_now, library_path, Chdb, ChdbError, CHDB_VERSION};
pub use embedded::EmbeddedStore;
pub use rows::{Labels, Placement, SampleRow, ScrapeOutcome, ScrapeReport, Series};
pub use schema::Table;
