//! The embedded store: epicenter's tables in the chDB engine (ClickHouse as a library), the
//! default when no server is configured, with the same DDL and SQL as a ClickHouse server
//! (`../shared/DESIGN.md`, Storage).
//!
//! [`EmbeddedStore`] wraps one chDB connection behind a mutex (chDB runs one statement per
//! connection at a time) and is what `epicenter run` and `epicenter sql` use when
//! `storage.clickhouse` is not configured. Calls block: async callers go through
//! `tokio::task::spawn_blocking`.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use crate::chdb::{library_path, Chdb, ChdbError};
use crate::rows::{self, SampleRow, ScrapeReport};
use crate::schema::{self, Table};

/// Settings of a read-only connection ([`EmbeddedStore::open_read_only`]), set before it
/// is made read-only so no query can lift them (`readonly = 1` refuses `SET` and a
/// query's `SETTINGS` with `Code: 164 … (READONLY)`): one question may not run the
/// collector's machine out of memory or time while the incident is on. Past a limit the
/// query fails with ClickHouse's own error (`TIMEOUT_EXCEEDED`, `MEMORY_LIMIT_EXCEEDED`,
/// `TOO_MANY_ROWS_OR_BYTES`). 30 s of execution; 192 MiB of memory a query (with
/// [`crate::http::LIVE_QUERIES`] of them, 768 MiB at most); 32 MiB of result (the result
/// is held whole, by the engine then by the HTTP answer); two threads (the machine's
/// scraping and writing keep the rest).
pub const QUERY_LIMITS: [&str; 5] = [
    "SET max_execution_time = 30",
    "SET max_memory_usage = 201326592",
    "SET max_result_bytes = 33554432",
    "SET result_overflow_mode = 'throw'",
    "SET max_threads = 2",
];

/// [`QUERY_LIMITS`]' figures, for docs and tests: seconds of execution, bytes of memory,
/// bytes of result.
pub const QUERY_LIMIT_FIGURES: (u64, u64, u64) = (30, 201_326_592, 33_554_432);

/// Settings a reader gets before it is made read-only: ClickHouse's time-series aggregate
/// functions (`timeSeriesRateToGrid`, `timeSeriesIncreaseToGrid`, `timeSeriesDeltaToGrid`,
/// `timeSeriesResampleToGridWithStaleness`, …; ClickHouse 25.8+, experimental in 26.7), the
/// counter rates and increases with resets that docs/investigation.md builds on.
pub const READER_SETTINGS: [&str; 1] = ["SET allow_experimental_time_series_aggregate_functions = 1"];

/// The embedded store: chDB on a data directory, holding one database.
#[derive(Debug)]
pub struct EmbeddedStore {
    chdb: Mutex<Chdb>,
    database: String,
}

impl EmbeddedStore {
    /// Opens (creating if needed) the store at `data_path`, using database `database`, with
    /// the chDB library from [`library_path`].
    pub fn open(data_path: &Path, database: &str) -> Result<EmbeddedStore, ChdbError> {
        let chdb = Chdb::open(&library_path(), data_path)?;
        Ok(EmbeddedStore {
            chdb: Mutex::new(chdb),
            database: database.to_string(),
        })
    }

    /// Opens a connection to the store at `data_path` for a reader that must not write:
    /// `database` current, [`QUERY_LIMITS`] set, then the engine's `readonly = 1` (so no
    /// query can lift the limits). What `readonly` and the engine's grants
    /// ([`crate::access`]) leave open in the embedded engine is refused by
    /// [`crate::guard::read_only_refusal`] before a query gets here.
    pub fn open_read_only(data_path: &Path, database: &str) -> Result<EmbeddedStore, ChdbError> {
        let reader = EmbeddedStore::open(data_path, database)?;
        reader.use_database()?;
        for limit in QUERY_LIMITS {
            reader.query(limit, "TabSeparated")?;
        }
        reader.set_read_only()?;
        Ok(reader)
    }

    /// The database holding epicenter's tables.
    pub fn database(&self) -> &str {
        &self.database
    }

    fn with_chdb<T>(&self, work: impl FnOnce(&Chdb) -> T) -> T {
        let chdb = self.chdb.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        work(&chdb)
    }

    /// Creates the schema if it is missing (idempotent) with rows kept for `retention`. A
    /// store of schema 2 (a wide `samples` table) is upgraded first: its tables are set aside
    /// as `samples_v2` and `samples_1m_v2` and its samples copied into `sample_values` and
    /// `series` ([`schema::upgrade_from_wide_samples`], [`schema::copy_from_wide_samples`]).
    /// Errors: a statement the engine refuses, or a `samples` that is not the view afterwards.
    pub fn migrate(&self, retention: Duration) -> Result<(), ChdbError> {
        let run = |statement: &str, doing: &str| {
            self.with_chdb(|chdb| chdb.query(statement, "TabSeparated"))
                .map_err(|error| ChdbError::Query(format!("{doing}: {error}")))
        };
        let wide = run(&schema::wide_samples_query(&self.database, None), "reading the schema")?;
        let upgrading = String::from_utf8_lossy(&wide).trim() != "0";
        if upgrading {
            tracing::info!(
                "the store holds schema 2's wide `samples`: kept as `samples_v2` (and `samples_1m_v2`) and copied into `sample_values` and `series`"
            );
        }
        for statement in schema::migration(&self.database, retention, None, upgrading) {
            run(
                &statement,
                "migrating the schema (docs/schema.md: a schema-2 copy left unfinished is finished by hand)",
            )?;
        }
        if let Err(error) = run(
            &schema::merge_settings(&self.database, None),
            "setting how sample_values merges",
        ) {
            tracing::warn!(%error, "sample_values merges with the engine's defaults (docs/schema.md, Merges)");
        }
        let (query, expected) = schema::samples_engine_check(&self.database, None);
        let engine = run(&query, "reading the schema")?;
        let engine = String::from_utf8_lossy(&engine).trim().to_string();
        if engine != expected {
            return Err(ChdbError::Query(format!(
                "after the migration `{}.samples` has engine {engine:?}, not schema 3's {expected}: new samples would not show",
                self.database
            )));
        }
        Ok(())
    }

    /// Runs a query and returns its output in `format`.
    pub fn query(&self, sql: &str, format: &str) -> Result<Vec<u8>, ChdbError> {
        self.with_chdb(|chdb| chdb.query(sql, format))
    }

    /// Makes the connection read-only from now on, with the engine's own `readonly = 1`
    /// setting (it cannot be undone on this connection): statements that write, change
    /// settings or call table functions (`file`, `url`, `remote`, …) are refused with
    /// `Code: 164 … (READONLY)`. Before that it enables [`READER_SETTINGS`] (the
    /// `timeSeries*ToGrid` functions), which a read-only connection could not.
    pub fn set_read_only(&self) -> Result<(), ChdbError> {
        self.with_chdb(|chdb| {
            for setting in READER_SETTINGS {
                // On a connection already read-only this is refused, and already set.
                let _ = chdb.query(setting, "TabSeparated");
            }
            chdb.query("SET readonly = 1", "TabSeparated")
        })
        .map(|_| ())
    }

    /// Runs a query with `database` as the current database (for the HTTP interface's
    /// `database` parameter, a name the caller has checked) after the `bindings`
    /// (`SET param_… = '…'` statements binding query parameters), all while holding the
    /// connection; the connection's current database is restored afterwards.
    pub fn query_in(
        &self,
        database: Option<&str>,
        bindings: &[String],
        sql: &str,
        format: &str,
    ) -> Result<Vec<u8>, ChdbError> {
        self.with_chdb(|chdb| {
            for binding in bindings {
                chdb.query(binding, "TabSeparated")?;
            }
            let Some(database) = database else {
                return chdb.query(sql, format);
            };
            chdb.query(&format!("USE {database}"), "TabSeparated")?;
            let result = chdb.query(sql, format);
            let _ = chdb.query(&format!("USE {}", self.database), "TabSeparated");
            result
        })
    }

    /// Streams `data` in `format` into `insert` (`INSERT INTO t (cols)`, no FORMAT clause).
    pub fn insert_raw(&self, insert: &str, format: &str, data: &[u8]) -> Result<u64, ChdbError> {
        self.with_chdb(|chdb| chdb.insert(insert, format, data))
    }

    /// Writes sample rows to `sample_values`, and to `series` the rows of series not yet
    /// written (`rows::encode_samples`). Returns the rows chDB reports written to
    /// `sample_values`.
    pub fn write_samples(&self, rows: &[SampleRow]) -> Result<u64, ChdbError> {
        let mut values = Vec::with_capacity(rows.len() * 40);
        let mut series = Vec::new();
        rows::encode_samples(rows, &mut values, &mut series);
        let token = crate::schema::new_batch_token();
        self.insert_encoded(Table::Series, &series, &token)?;
        self.insert_encoded(Table::SampleValues, &values, &token)
    }

    /// Writes scrape reports to `scrapes`.
    pub fn write_scrapes(&self, reports: &[ScrapeReport]) -> Result<u64, ChdbError> {
        let mut data = Vec::with_capacity(reports.len() * 96);
        rows::encode_scrapes(reports, &mut data);
        self.insert_encoded(Table::Scrapes, &data, &crate::schema::new_batch_token())
    }

    /// Inserts rows already encoded as RowBinary in `table`'s column order (what the batcher
    /// accumulates). Empty data writes nothing.
    pub fn insert_encoded(&self, table: Table, data: &[u8], token: &str) -> Result<u64, ChdbError> {
        if data.is_empty() {
            return Ok(0);
        }
        let insert = crate::schema::insert_statement(&self.database, table, token);
        self.with_chdb(|chdb| chdb.insert(&insert, "RowBinary", data))
    }
}

impl EmbeddedStore {
    /// Makes `database` the connection's current database, so queries may name tables
    /// without it.
    pub fn use_database(&self) -> Result<(), ChdbError> {
        let statement = format!("USE {}", self.database);
        self.with_chdb(|chdb| chdb.query(&statement, "TabSeparated"))
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_figures_are_the_limits_set() {
        let (seconds, memory, result) = QUERY_LIMIT_FIGURES;
        for expected in [
            format!("SET max_execution_time = {seconds}"),
            format!("SET max_memory_usage = {memory}"),
            format!("SET max_result_bytes = {result}"),
        ] {
            assert!(QUERY_LIMITS.contains(&expected.as_str()), "{expected}");
        }
    }
}
