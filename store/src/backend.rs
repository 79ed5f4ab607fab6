//! [`Store`]: the store a configuration names, embedded or a server, behind one handle that
//! opens it (creating the schema), answers queries and writes the detector's rows
//! (`anomalies`, `verdicts`) and a demo's `ground_truth`.
//!
//! Samples and scrapes do not go through here: the writer ([`crate::writer`]) streams them
//! as RowBinary through its [`crate::writer::Sink`].

use std::fmt;
use std::sync::Arc;

use crate::clickhouse::ClickHouseStore;
use crate::config::StorageConfig;
use crate::embedded::EmbeddedStore;
use crate::rows::{AnomalyRow, GroundTruthRow, VerdictRow};

/// The database holding epicenter's tables in the embedded store.
pub const EMBEDDED_DATABASE: &str = "epicenter";

/// The store a configuration names.
#[derive(Clone)]
pub enum Store {
    /// The embedded chDB engine.
    Embedded(Arc<EmbeddedStore>),
    /// A ClickHouse server over HTTP.
    Server(Arc<ClickHouseStore>),
}

/// Why a store could not be opened. The message names the setting or the place.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenError {
    /// The configuration cannot be used (a password that cannot be read): exit 64.
    Config(String),
    /// The store could not be opened or migrated, or is not an epicenter store: exit 1.
    Failed(String),
    /// The embedded store is held by another process (a running `epicenter run` or `demo`,
    /// whose live SQL endpoint [`Store::open_live`] reaches): exit 1.
    Held(String),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Config(message) | OpenError::Failed(message) | OpenError::Held(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for OpenError {}

impl Store {
    /// Runs the writer into this store until `inbox` closes ([`crate::writer::run_writer`],
    /// or [`crate::writer::run_spooled_writer`] through `spool` when one is given).
    pub async fn run_writer(
        self,
        limits: crate::config::BatchingConfig,
        inbox: tokio::sync::mpsc::Receiver<crate::rows::ScrapeOutcome>,
        stats: Arc<crate::writer::WriterStats>,
        spool: Option<crate::spool::Spool>,
    ) {
        use crate::writer::{run_spooled_writer, run_writer};
        match (self, spool) {
            (Store::Embedded(sink), Some(spool)) => run_spooled_writer(sink, limits, inbox, stats, spool).await,
            (Store::Server(sink), Some(spool)) => run_spooled_writer(sink, limits, inbox, stats, spool).await,
            (Store::Embedded(sink), None) => run_writer(sink, limits, inbox, stats).await,
            (Store::Server(sink), None) => run_writer(sink, limits, inbox, stats).await,
        }
    }

    /// Serves this store's live SQL endpoint ([`crate::endpoint::serve`]) under
    /// `config.http` until `shutdown` changes. `Ok(None)` for a ClickHouse server (query the
    /// server itself) or when the endpoint is off.
    ///
    /// # Errors
    /// As [`crate::endpoint::serve`]: a sentence naming the key path.
    pub async fn serve_sql(
        &self,
        config: &StorageConfig,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<Option<crate::endpoint::LiveEndpoint>, String> {
        match self {
            Store::Embedded(_) => {
                crate::endpoint::serve(&config.embedded_path(), EMBEDDED_DATABASE, &config.http, shutdown).await
            }
            Store::Server(_) => Ok(None),
        }
    }

    /// Opens the store `config` names and creates the schema (idempotent); a server is
    /// reached through `runtime`. The embedded store is created when missing.
    pub fn open(config: &StorageConfig, runtime: &tokio::runtime::Runtime) -> Result<Store, OpenError> {
        if let Some(clickhouse) = &config.clickhouse {
            let password = clickhouse.password().map_err(OpenError::Config)?;
            let store = ClickHouseStore::new(clickhouse, password).map_err(OpenError::Config)?;
            runtime
                .block_on(store.migrate(config.retention()))
                .map_err(|error| OpenError::Failed(format!("creating the schema: {error}")))?;
            return Ok(Store::Server(Arc::new(store)));
        }
        let path = config.embedded_path();
        let store =
            EmbeddedStore::open(&path, EMBEDDED_DATABASE).map_err(|error| OpenError::Failed(error.to_string()))?;
        store
            .migrate(config.retention())
            .and_then(|()| store.use_database())
            .map_err(|error| OpenError::Failed(format!("embedded store at {}: {error}", path.display())))?;
        Ok(Store::Embedded(Arc::new(store)))
    }

    /// [`Store::open`], except that a ClickHouse server that does not answer (connection
    /// refused, a timeout, a server-side failure: a retryable error) is no error: the store is
    /// returned with its schema left to the first write that finds the server answering, and
    /// [`Store::waiting_for_store`] says why until then. The writer's inserts wait for it
    /// (retried while the spool holds their batches). Errors as [`Store::open`] otherwise
    /// (a wrong password, an unusable configuration, a schema the server refuses).
    pub fn open_or_wait(config: &StorageConfig, runtime: &tokio::runtime::Runtime) -> Result<Store, OpenError> {
        let Some(clickhouse) = &config.clickhouse else {
            return Store::open(config, runtime);
        };
        let password = clickhouse.password().map_err(OpenError::Config)?;
        let store = ClickHouseStore::new(clickhouse, password).map_err(OpenError::Config)?;
        match runtime.block_on(store.migrate(config.retention())) {
            Ok(()) => {}
            Err(error) if error.retryable => store.defer_schema(config.retention(), &error),
            Err(error) => return Err(OpenError::Failed(format!("creating the schema: {error}"))),
        }
        Ok(Store::Server(Arc::new(store)))
    }

    /// While a server store opened by [`Store::open_or_wait`] has not answered yet (its
    /// schema is still to be created): why not, as the last attempt failed (the server's URL
    /// without credentials, and the error). `None` for the embedded store and once the
    /// server has answered.
    pub fn waiting_for_store(&self) -> Option<String> {
        match self {
            Store::Embedded(_) => None,
            Store::Server(store) => store.waiting_for_schema(),
        }
    }

    /// Opens the store `config` names for reading, changing nothing in it: no schema step
    /// (a reader never runs DDL, and a read-only ClickHouse user is enough), and a missing
    /// embedded store, or a folder that is not one, is an error (rather than a new empty store
    /// written into it).
    pub fn open_existing(config: &StorageConfig, _runtime: &tokio::runtime::Runtime) -> Result<Store, OpenError> {
        if let Some(clickhouse) = &config.clickhouse {
            let password = clickhouse.password().map_err(OpenError::Config)?;
            let store = ClickHouseStore::new(clickhouse, password).map_err(OpenError::Config)?;
            return Ok(Store::Server(Arc::new(store)));
        }
        {
            let path = config.embedded_path();
            check_embedded_store(&path)?;
            let store = EmbeddedStore::open(&path, EMBEDDED_DATABASE).map_err(|error| match error {
                crate::chdb::ChdbError::Held { .. } => OpenError::Held(error.to_string()),
                error => OpenError::Failed(error.to_string()),
            })?;
            store
                .use_database()
                .map_err(|error| OpenError::Failed(format!("embedded store at {}: {error}", path.display())))?;
            Ok(Store::Embedded(Arc::new(store)))
        }
    }

    /// Opens the store `config` names to write into it, as [`Store::open`] does (the schema
    /// made current), but only if it exists: the same checks as [`Store::open_existing`]
    /// (an embedded store's folder must hold the `epicenter` database), so a mistyped path
    /// is an error rather than a new empty store.
    pub fn open_existing_for_writing(
        config: &StorageConfig,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<Store, OpenError> {
        if config.clickhouse.is_none() {
            check_embedded_store(&config.embedded_path())?;
        }
        Store::open(config, runtime)
    }

    /// The live SQL endpoint ([`crate::endpoint`]) of the epicenter that holds the embedded
    /// store `config` names, as a store to query (read-only), and its URL: the address that
    /// epicenter wrote into the store's directory, else `storage.http.listen_address` when
    /// configured; the first of `storage.http.users` (its password read now), else
    /// `default` without a password.
    ///
    /// # Errors
    /// [`OpenError::Failed`] when no endpoint is known (it is off, or the holder is not an
    /// epicenter that serves one), [`OpenError::Config`] for a password that cannot be read.
    pub fn open_live(config: &StorageConfig) -> Result<(Store, String), OpenError> {
        let path = config.embedded_path();
        let url = crate::endpoint::advertised(&path)
            .or_else(|| config.http.listen_address.as_ref().filter(|address| !address.trim().is_empty()).map(|address| format!("http://{address}")))
            .ok_or_else(|| {
                OpenError::Failed(format!(
                    "its holder serves no live SQL endpoint for it (no {} in {}; storage.http.listen_address turns it on)",
                    crate::endpoint::ENDPOINT_FILE,
                    path.display()
                ))
            })?;
        let (user, password) = config
            .http
            .credentials()
            .map_err(OpenError::Config)?
            .into_iter()
            .next()
            .unwrap_or_else(|| ("default".to_string(), None));
        let server = crate::config::ClickHouseConfig {
            url: url.clone(),
            database: EMBEDDED_DATABASE.to_string(),
            user,
            password_env: None,
            password_file: None,
            tls: None,
            cluster: None,
        };
        let store = ClickHouseStore::new(&server, password).map_err(OpenError::Config)?;
        Ok((Store::Server(Arc::new(store)), url))
    }

    /// Runs a query and returns its output in `format` (any ClickHouse output format).
    /// Blocks; a server is reached through `runtime`. Errors are the engine's or the server's
    /// message (`Code: 62. DB::Exception: Syntax error …`, or the server's URL and why).
    pub fn query(&self, runtime: &tokio::runtime::Runtime, sql: &str, format: &str) -> Result<Vec<u8>, String> {
        match self {
            Store::Embedded(store) => store.query(sql, format).map_err(|error| error.to_string()),
            Store::Server(store) => runtime
                .block_on(store.query(sql, format))
                .map_err(|error| error.to_string()),
        }
    }

    /// Runs a query that may only read: the engine's or the server's `readonly = 1` setting
    /// refuses anything that writes, changes settings or calls a table function, with an
    /// error that [`is_read_only_refusal`] recognises. The embedded connection stays
    /// read-only afterwards. Blocks as [`Store::query`].
    pub fn query_read_only(
        &self,
        runtime: &tokio::runtime::Runtime,
        sql: &str,
        format: &str,
    ) -> Result<Vec<u8>, String> {
        match self {
            Store::Embedded(store) => {
                if let Some(refusal) = crate::guard::read_only_refusal(sql) {
                    return Err(refusal);
                }
                store
                    .set_read_only()
                    .and_then(|()| store.query(sql, format))
                    .map_err(|error| error.to_string())
            }
            Store::Server(store) => runtime
                .block_on(store.query_read_only(sql, format))
                .map_err(|error| error.to_string()),
        }
    }

    /// Runs a statement (an insert) from async code: on the blocking pool for the embedded
    /// engine, over HTTP for a server (creating the schema first when [`Store::open_or_wait`]
    /// left that for later). Errors as [`Store::query`].
    pub async fn execute(&self, sql: String) -> Result<(), String> {
        match self {
            Store::Embedded(store) => {
                let store = store.clone();
                tokio::task::spawn_blocking(move || store.query(&sql, "TabSeparated").map(|_| ()))
                    .await
                    .map_err(|error| error.to_string())?
                    .map_err(|error| error.to_string())
            }
            Store::Server(store) => {
                store.ensure_schema().await.map_err(|error| error.to_string())?;
                store
                    .query(&sql, "TabSeparated")
                    .await
                    .map(|_| ())
                    .map_err(|error| error.to_string())
            }
        }
    }

    /// Runs a query from async code and returns its output in `format`: on the blocking pool
    /// for the embedded engine, over HTTP for a server. Errors as [`Store::query`].
    pub async fn fetch(&self, sql: String, format: &'static str) -> Result<Vec<u8>, String> {
        match self {
            Store::Embedded(store) => {
                let store = store.clone();
                tokio::task::spawn_blocking(move || store.query(&sql, format))
                    .await
                    .map_err(|error| error.to_string())?
                    .map_err(|error| error.to_string())
            }
            Store::Server(store) => store.query(&sql, format).await.map_err(|error| error.to_string()),
        }
    }

    /// Where the store is, for a person: `the embedded store at ./data`, or the server's URL
    /// and database (never its password).
    pub fn describe(&self, config: &StorageConfig) -> String {
        match self {
            Store::Embedded(_) => format!("the embedded store at {}", config.embedded_path().display()),
            Store::Server(store) => store.to_string(),
        }
    }

    /// Appends rows to `anomalies`. Nothing is sent for no rows.
    pub async fn write_anomalies(&self, rows: &[AnomalyRow]) -> Result<(), String> {
        if rows.is_empty() {
            return Ok(());
        }
        let values: Vec<String> = rows
            .iter()
            .map(|row| {
                format!(
                    "(fromUnixTimestamp64Milli({}), {}, {}, {}, {}, {}, {}, {}, {}, fromUnixTimestamp64Milli({}))",
                    row.time_ms,
                    quote(&row.instance),
                    quote(&row.placement.dc),
                    quote(&row.placement.host),
                    quote(&row.placement.service),
                    quote(&row.metric),
                    quote(&row.class),
                    quote(&row.peer),
                    if row.score.is_finite() { row.score } else { 0.0 },
                    row.onset_ms
                )
            })
            .collect();
        self.execute(format!(
            "INSERT INTO anomalies (time, instance, dc, host, service, metric, class, peer, score, onset) VALUES {}",
            values.join(", ")
        ))
        .await
    }

    /// Appends one verdict event to `verdicts`.
    pub async fn write_verdict(&self, row: &VerdictRow) -> Result<(), String> {
        self.execute(format!(
            "INSERT INTO verdicts ({VERDICT_COLUMNS}) VALUES ({})",
            verdict_values(row)
        ))
        .await
    }

    /// Appends the verdict events of one replay (`epicenter replay --write`) to
    /// `replayed_verdicts` (created with the schema, [`Store::open`]), each row stamped with
    /// `run`: its id, what was replayed and when. Inserts of at most 500 rows, so a long
    /// replay is a few parts, not one per event. Each run appends: replaying a period twice
    /// stores its events twice, under two run ids. Errors: the engine's or server's answer to
    /// the insert that failed (the rows of earlier inserts of the run stay).
    pub async fn write_replayed_verdicts(&self, run: &ReplayRun, rows: &[VerdictRow]) -> Result<(), String> {
        let time = |ms: Option<i64>| ms.map_or("NULL".to_string(), |ms| format!("fromUnixTimestamp64Milli({ms})"));
        let stamp = format!(
            "{}, {}, {}, {}, fromUnixTimestamp64Milli({})",
            quote(&run.run_id),
            quote(&run.source),
            time(run.from_ms),
            time(run.to_ms),
            run.replayed_at_ms
        );
        for chunk in rows.chunks(500) {
            let values: Vec<String> = chunk
                .iter()
                .map(|row| format!("({}, {stamp})", verdict_values(row)))
                .collect();
            self.execute(format!(
                "INSERT INTO replayed_verdicts ({VERDICT_COLUMNS}, run_id, source, period_from, period_to, replayed_at) VALUES {}",
                values.join(", ")
            ))
            .await?;
        }
        Ok(())
    }

    /// Creates `ground_truth` when missing ([`crate::schema::GROUND_TRUTH`]) and appends `rows`
    /// (what a simulated run injected). Blocks; a server is reached through `runtime`.
    pub fn write_ground_truth(&self, runtime: &tokio::runtime::Runtime, rows: &[GroundTruthRow]) -> Result<(), String> {
        self.query(runtime, crate::schema::GROUND_TRUTH, "TabSeparated")?;
        for row in rows {
            let sql = format!(
                "INSERT INTO ground_truth VALUES ({}, {}, {}, {}, {}, {}, fromUnixTimestamp64Milli({}), {})",
                quote(&row.scenario),
                quote(&row.kind),
                quote(&row.service),
                array(&row.dcs),
                array(&row.hosts),
                array(&row.instances),
                row.onset_ms,
                row.end_ms
                    .map_or("NULL".to_string(), |end| format!("fromUnixTimestamp64Milli({end})"))
            );
            self.query(runtime, &sql, "TabSeparated")?;
        }
        Ok(())
    }
}

/// Whether a query error is ClickHouse refusing it for the `readonly` setting (error code 164,
/// `READONLY`).
pub fn is_read_only_refusal(message: &str) -> bool {
    message.contains("(READONLY)") || message.contains("Code: 164.")
}

pub use crate::schema::quote;

/// Whether `path` holds an epicenter embedded store: an error naming the path when it does
/// not exist or holds no `epicenter` database (see [`Store::open_existing`]).
fn check_embedded_store(path: &std::path::Path) -> Result<(), OpenError> {
    if !path.exists() {
        return Err(OpenError::Failed(format!(
            "no epicenter store at {} (relative paths are read from the current directory): run `epicenter run` first, or pass --config or --data naming the store",
            path.display()
        )));
    }
    // chDB makes any directory a store on open; a folder without the `epicenter`
    // database's definition (`metadata/epicenter.sql`, which `run` and `demo` leave) is
    // someone else's, and reading it must not write a store into it.
    if !path.join("metadata").join("epicenter.sql").is_file() {
        return Err(OpenError::Failed(format!(
            "{} is not an epicenter store (no metadata/epicenter.sql in it, as `epicenter run` and `epicenter demo` leave): pass --config or --data naming the store",
            path.display()
        )));
    }
    Ok(())
}

/// The columns of `verdicts`, in the order [`verdict_values`] gives them.
const VERDICT_COLUMNS: &str =
    "time, id, state, kind, dc, dcs, hosts, service, instances, confidence, onset, opened, evidence";

/// One verdict event as SQL values for [`VERDICT_COLUMNS`] (without the parentheses).
fn verdict_values(row: &VerdictRow) -> String {
    format!(
        "fromUnixTimestamp64Milli({}), {}, {}, {}, {}, {}, {}, {}, {}, {}, fromUnixTimestamp64Milli({}), fromUnixTimestamp64Milli({}), {}",
        row.time_ms,
        quote(&row.id),
        quote(&row.state),
        quote(&row.kind),
        quote(&row.dc),
        array(&row.dcs),
        array(&row.hosts),
        quote(&row.service),
        array(&row.instances),
        row.confidence,
        row.onset_ms,
        row.opened_ms,
        quote(&row.evidence_json)
    )
}

/// One run of `epicenter replay --write`, as [`Store::write_replayed_verdicts`] stamps its
/// rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRun {
    /// This run's id: 32 random hex digits, printed by the command so its rows can be found.
    pub run_id: String,
    /// Where the samples came from: `store`, or `prometheus` (the server's address is not
    /// kept: it may carry credentials).
    pub source: String,
    /// The period replayed, ms since the epoch; `None` where it was left open (from the first
    /// or to the last stored sample).
    pub from_ms: Option<i64>,
    /// See `from_ms`.
    pub to_ms: Option<i64>,
    /// When the run wrote, ms since the epoch (the wall clock).
    pub replayed_at_ms: i64,
}

impl ReplayRun {
    /// A run starting now, with a new random id.
    pub fn new(source: &str, from_ms: Option<i64>, to_ms: Option<i64>) -> ReplayRun {
        ReplayRun {
            run_id: format!("{:032x}", rand::random::<u128>()),
            source: source.to_string(),
            from_ms,
            to_ms,
            replayed_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_millis() as i64),
        }
    }
}

/// A ClickHouse `Array(String)` literal of `values`: `['a', 'b']`.
pub fn array(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|value| quote(value)).collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_literals_escape_quotes_and_backslashes() {
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote(r"it's a \ path"), r"'it\'s a \\ path'");
        assert_eq!(array(&["a".to_string(), "b'c".to_string()]), r"['a', 'b\'c']");
        assert_eq!(array(&[]), "[]");
    }
}
