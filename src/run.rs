//! `epicenter run`: scrape the configured targets into the store until stopped.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use epicenter_collector::batch::{run_writer, WriterStats};
use epicenter_collector::config::StaticConfig;
use epicenter_collector::config::{parse_duration, Config, Job};
use epicenter_collector::discovery::FileDiscovery;
use epicenter_collector::relabel::Labels;
use epicenter_collector::scrape::{
    run_target, targets_for_groups, targets_for_job, ScrapeContext, ScrapeOutcome, Scraper,
};
use epicenter_collector::store::clickhouse::ClickHouseStore;
use epicenter_collector::store::EmbeddedStore;
use tokio::sync::{mpsc, watch};

use crate::server::{app, AppState, TargetRegistry, Telemetry};

/// Exit status for a configuration that cannot be used (as linkerd2-proxy does).
pub(crate) const EXIT_CONFIG: u8 = 64;

/// The database holding epicenter's tables in the embedded store.
pub(crate) const EMBEDDED_DATABASE: &str = "epicenter";

/// Arguments of `epicenter run`.
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// Configuration file (see docs/configuration.md; `epicenter check config` validates it).
    #[arg(long, short, value_name = "FILE")]
    config: PathBuf,

    /// Stop after this long (e.g. `30s`, `5m`) instead of waiting for Ctrl-C: for demos,
    /// benchmarks and tests.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    run_for: Option<Duration>,
}

/// Reads and validates a configuration file, printing every problem.
pub(crate) fn load_config(path: &PathBuf) -> Result<(Config, Vec<Job>), ExitCode> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| {
        eprintln!("error: cannot read {source}: {error}");
        ExitCode::from(EXIT_CONFIG)
    })?;
    let config = Config::from_yaml(&text).map_err(|error| {
        eprintln!("error: {source}:{error}");
        ExitCode::from(EXIT_CONFIG)
    })?;
    match config.validate() {
        Ok(jobs) => Ok((config, jobs)),
        Err(errors) => {
            for error in errors {
                eprintln!("error: {source}: {error}");
            }
            Err(ExitCode::from(EXIT_CONFIG))
        }
    }
}

/// The store a configuration names.
#[derive(Clone)]
pub(crate) enum Store {
    /// The embedded chDB engine.
    Embedded(Arc<EmbeddedStore>),
    /// A ClickHouse server over HTTP.
    Server(Arc<ClickHouseStore>),
}

impl Store {
    /// Runs a query and returns its output in `format`.
    pub(crate) fn query(&self, runtime: &tokio::runtime::Runtime, sql: &str, format: &str) -> Result<Vec<u8>, String> {
        match self {
            Store::Embedded(store) => store.query(sql, format).map_err(|error| error.to_string()),
            Store::Server(store) => runtime
                .block_on(store.query(sql, format))
                .map_err(|error| error.to_string()),
        }
    }

    /// Runs a statement (an insert) from async code: on the blocking pool for the embedded
    /// engine, over HTTP for a server.
    pub(crate) async fn execute(&self, sql: String) -> Result<(), String> {
        match self {
            Store::Embedded(store) => {
                let store = store.clone();
                tokio::task::spawn_blocking(move || store.query(&sql, "TabSeparated").map(|_| ()))
                    .await
                    .map_err(|error| error.to_string())?
                    .map_err(|error| error.to_string())
            }
            Store::Server(store) => store
                .query(&sql, "TabSeparated")
                .await
                .map(|_| ())
                .map_err(|error| error.to_string()),
        }
    }

    fn describe(&self, config: &Config) -> String {
        match self {
            Store::Embedded(_) => format!("the embedded store at {}", config.storage.embedded_path().display()),
            Store::Server(store) => format!("{store:?}"),
        }
    }
}

/// Opens the store the configuration names and creates the schema (idempotent).
pub(crate) fn open_store(config: &Config, runtime: &tokio::runtime::Runtime) -> Result<Store, ExitCode> {
    if let Some(clickhouse) = &config.storage.clickhouse {
        let password = clickhouse.password().map_err(|error| {
            eprintln!("error: {error}");
            ExitCode::from(EXIT_CONFIG)
        })?;
        let store = ClickHouseStore::new(clickhouse, password);
        runtime
            .block_on(store.migrate(config.storage.retention()))
            .map_err(|error| {
                eprintln!("error: creating the schema: {error}");
                ExitCode::from(1)
            })?;
        return Ok(Store::Server(Arc::new(store)));
    }
    let path = config.storage.embedded_path();
    let store = EmbeddedStore::open(&path, EMBEDDED_DATABASE).map_err(|error| {
        eprintln!("error: {error}");
        ExitCode::from(1)
    })?;
    store
        .migrate(config.storage.retention())
        .and_then(|()| store.use_database())
        .map_err(|error| {
            eprintln!("error: embedded store at {}: {error}", path.display());
            ExitCode::from(1)
        })?;
    Ok(Store::Embedded(Arc::new(store)))
}

/// A tokio runtime for the command, or the reason it could not start.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("error: cannot start the async runtime: {error}");
            ExitCode::from(1)
        })
}

/// Runs `epicenter run`.
pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let (config, jobs) = match load_config(&args.config) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    for warning in unsupported(&config) {
        eprintln!("warning: {warning}");
    }
    // A detector rules file that cannot be used stops the run before the store is touched.
    if config.detector.enabled {
        if let Err(error) = crate::live::load_rules(&config) {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let store = match open_store(&config, &runtime) {
        Ok(store) => store,
        Err(code) => return code,
    };
    runtime.block_on(serve(config, jobs, store, args.run_for))
}

/// Scrapes `jobs` into `store` until `run_for` passes or a signal comes, serving epicenter's
/// own endpoints; flushes before returning.
pub(crate) async fn serve(config: Config, jobs: Vec<Job>, store: Store, run_for: Option<Duration>) -> ExitCode {
    // One HTTP client per job: each job may have its own tls_config.
    let mut scrapers = Vec::with_capacity(jobs.len());
    for (index, job) in jobs.iter().enumerate() {
        match Scraper::with_tls(job.config.tls_config.as_ref()) {
            Ok(scraper) => scrapers.push(scraper),
            Err(error) => {
                eprintln!(
                    "error: scrape_configs[{index}] (job '{}'): {error}",
                    job.config.job_name
                );
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    }
    let external_labels: Labels = config.global.external_labels.clone();
    let context = Arc::new(ScrapeContext {
        placement: config.placement.clone(),
        external_labels,
    });
    let (sender, mut scraped) = mpsc::channel::<ScrapeOutcome>(1024);
    let (to_writer, inbox) = mpsc::channel::<ScrapeOutcome>(1024);
    let (stop, shutdown) = watch::channel(false);
    let stats = Arc::new(WriterStats::default());
    let telemetry = match Telemetry::new(stats.clone()) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("error: cannot register epicenter's own metrics: {error}");
            return ExitCode::from(1);
        }
    };
    let state = Arc::new(AppState {
        telemetry,
        targets: TargetRegistry::default(),
        verdicts: std::sync::Mutex::new(crate::server::VerdictBook::default()),
        graph: std::sync::Mutex::new(None),
        notifiers: crate::notify::Notifiers::start(&config.notifiers, shutdown.clone()),
    });
    let listener = match tokio::net::TcpListener::bind(&config.server.listen_address).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!(
                "error: server.listen_address {}: cannot listen: {error}",
                config.server.listen_address
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let bound = listener
        .local_addr()
        .map_or_else(|_| config.server.listen_address.clone(), |address| address.to_string());
    let mut server_shutdown = shutdown.clone();
    let router = app(state.clone());
    let server = tokio::spawn(async move {
        let served = axum::serve(listener, router).with_graceful_shutdown(async move {
            let _ = server_shutdown.changed().await;
        });
        if let Err(error) = served.await {
            tracing::error!(%error, "own HTTP server stopped");
        }
    });
    let where_to = store.describe(&config);
    let writer = match &store {
        Store::Embedded(store) => {
            tokio::spawn(run_writer(store.clone(), config.batching.clone(), inbox, stats.clone()))
        }
        Store::Server(store) => tokio::spawn(run_writer(store.clone(), config.batching.clone(), inbox, stats.clone())),
    };
    // The detector reads what a signal rule names, beside the writer.
    let (to_detector, detector_inbox) = mpsc::channel::<crate::live::Batch>(4096);
    let detector_rules = if config.detector.enabled {
        match crate::live::load_rules(&config) {
            Ok(rules) => Some(rules),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    } else {
        None
    };
    let rule_metrics = detector_rules
        .as_deref()
        .map(crate::live::rule_metrics)
        .unwrap_or_default();
    let detector_task = detector_rules.map(|rules| {
        let tick = config
            .detector
            .interval
            .map_or(config.global.scrape_interval.0, |interval| interval.0)
            .max(Duration::from_millis(100));
        tokio::spawn(crate::live::run(
            rules,
            crate::live::dependencies(&config),
            tick,
            detector_inbox,
            state.clone(),
            store.clone(),
            shutdown.clone(),
        ))
    });
    // Between the targets and the writer: target health and epicenter's own metrics.
    let observer_state = state.clone();
    let observer = tokio::spawn(async move {
        while let Some(outcome) = scraped.recv().await {
            observer_state.telemetry.observe(&outcome);
            observer_state.targets.observe(&outcome);
            if !rule_metrics.is_empty() {
                if let Some(batch) = crate::live::extract(&outcome, &rule_metrics) {
                    // A slow detector never holds scraping up: batches beyond its queue drop.
                    let _ = to_detector.try_send(batch);
                }
            }
            observer_state
                .telemetry
                .writer_queue_depth
                .set((to_writer.max_capacity() - to_writer.capacity()) as i64);
            if to_writer.send(outcome).await.is_err() {
                break;
            }
        }
    });
    let mut tasks = Vec::new();
    let mut target_count = 0;
    for (job, scraper) in jobs.into_iter().zip(scrapers) {
        let job = Arc::new(job);
        target_count += targets_for_job(&job).0.len();
        tasks.push(tokio::spawn(run_job(
            job,
            scraper.clone(),
            context.clone(),
            sender.clone(),
            shutdown.clone(),
            state.clone(),
        )));
    }
    drop(sender);
    eprintln!(
        "epicenter: scraping {} (plus any file_sd targets) into {where_to}; own endpoints on http://{} ({})",
        if target_count == 1 {
            "1 static target".to_string()
        } else {
            format!("{target_count} static targets")
        },
        bound,
        match run_for {
            Some(duration) => format!("stopping after {duration:?}"),
            None => "Ctrl-C stops".to_string(),
        }
    );
    let limit = async {
        match run_for {
            Some(duration) => tokio::time::sleep(duration).await,
            None => std::future::pending().await,
        }
    };
    let stopped_by = tokio::select! {
        _ = limit => "time limit",
        signal = stop_signal() => signal,
    };
    let _ = stop.send(true);
    eprintln!(
        "epicenter: stopping ({stopped_by}): flushing what was scraped; a second Ctrl-C or SIGTERM exits at once"
    );
    // A second signal during the flush exits without waiting, and without the embedded
    // engine's exit-time destructors (they crash while its threads run; see `exit_now`).
    let flushed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flushed_seen = Arc::clone(&flushed);
    tokio::spawn(async move {
        let signal = stop_signal().await;
        if flushed_seen.load(Ordering::SeqCst) {
            eprintln!("epicenter: {signal} again: everything was already written; exiting");
        } else {
            eprintln!("epicenter: {signal} again: exiting without flushing");
        }
        epicenter_collector::store::exit_now(130);
    });
    for task in tasks {
        let _ = task.await;
    }
    let _ = observer.await;
    if let Some(task) = detector_task {
        let _ = task.await;
    }
    let _ = writer.await;
    flushed.store(true, Ordering::SeqCst);
    let _ = server.await;
    eprintln!(
        "epicenter: stopped ({stopped_by}): {} scrapes and {} samples written, {} samples failed",
        stats.scrape_rows_written.load(Ordering::Relaxed),
        stats.sample_rows_written.load(Ordering::Relaxed),
        stats.sample_rows_failed.load(Ordering::Relaxed),
    );
    if stats.sample_rows_failed.load(Ordering::Relaxed) > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// How often file_sd files are checked for changes (at most; `refresh_interval` if shorter).
const FILE_SD_POLL: Duration = Duration::from_secs(5);

/// Runs one job: its static targets, and the targets of its `file_sd_configs`, started and
/// stopped as the files change. Returns after shutdown, once every target task has ended.
async fn run_job(
    job: Arc<Job>,
    scraper: Scraper,
    context: Arc<ScrapeContext>,
    sender: mpsc::Sender<ScrapeOutcome>,
    mut shutdown: watch::Receiver<bool>,
    state: Arc<AppState>,
) {
    let patterns: Vec<String> = job
        .config
        .file_sd_configs
        .iter()
        .flat_map(|file_sd| file_sd.files.iter().cloned())
        .collect();
    let poll_every = job
        .config
        .file_sd_configs
        .iter()
        .map(|file_sd| file_sd.refresh_interval.0)
        .fold(FILE_SD_POLL, Duration::min);
    let mut discovery = (!patterns.is_empty()).then(|| FileDiscovery::new(patterns));
    let mut discovered: Vec<StaticConfig> = Vec::new();
    let mut running: HashMap<u64, tokio::task::JoinHandle<()>> = HashMap::new();
    let mut first = true;
    loop {
        let mut changed = first;
        first = false;
        if let Some(discovery) = discovery.as_mut() {
            let (groups, errors) = discovery.poll();
            for error in errors {
                tracing::warn!(job = %job.config.job_name, %error, "file_sd: cannot read target file; keeping its previous targets");
            }
            if let Some(groups) = groups {
                discovered = groups;
                changed = true;
            }
        }
        if changed {
            let mut groups = job.config.static_configs.clone();
            groups.extend(discovered.iter().cloned());
            let (targets, dropped) = targets_for_groups(&job, &groups);
            tracing::info!(job = %job.config.job_name, targets = targets.len(), dropped, interval = ?job.interval, "targets");
            let current: HashSet<u64> = targets.iter().map(|target| target.identity).collect();
            running.retain(|identity, handle| {
                if current.contains(identity) {
                    return true;
                }
                handle.abort();
                state.targets.remove(*identity);
                false
            });
            for target in targets {
                if running.contains_key(&target.identity) {
                    continue;
                }
                state.targets.add(&target);
                let identity = target.identity;
                let handle = tokio::spawn(run_target(
                    target,
                    job.clone(),
                    scraper.clone(),
                    context.clone(),
                    sender.clone(),
                    shutdown.clone(),
                ));
                running.insert(identity, handle);
            }
        }
        if discovery.is_none() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(poll_every) => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(sender);
    for (_, handle) in running {
        let _ = handle.await;
    }
}

/// Waits for Ctrl-C (SIGINT) or SIGTERM (what `kill`, systemd and `docker stop` send) and says
/// which.
async fn stop_signal() -> &'static str {
    let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops epicenter cleanly");
            let _ = tokio::signal::ctrl_c().await;
            return "Ctrl-C";
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = terminate.recv() => "SIGTERM",
    }
}

/// Settings this build accepts but cannot act on yet, as sentences for warnings.
pub(crate) fn unsupported(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    for (index, job) in config.scrape_configs.iter().enumerate() {
        if job.tls_config.is_some() && job.scheme != epicenter_collector::config::Scheme::Https {
            warnings.push(format!(
                "scrape_configs[{index}].tls_config: has no effect: job '{}' scrapes over plain http (set scheme: https)",
                job.job_name
            ));
        }
    }
    if let Some(clickhouse) = &config.storage.clickhouse {
        if clickhouse.tls.is_some() {
            warnings.push("storage.clickhouse.tls: not used yet (no TLS towards ClickHouse in this build)".to_string());
        }
        if clickhouse.url.starts_with("https://") {
            warnings.push(format!(
                "storage.clickhouse.url: '{}' needs TLS, which this build's ClickHouse client lacks; writes will fail (use the http:// port, 8123 by default, through a TLS-terminating proxy if needed)",
                clickhouse.url
            ));
        }
    }
    warnings
}
