//! The wiring of `epicenter run` (and of `demo`, which runs the same pipeline on a simulated
//! fleet): the stages started as tasks and joined by channels, then shut down in order.
//!
//! ```text
//! run_job × jobs ─► run_target × targets ─ ScrapeOutcome ─► mpsc(1024) ─► observer
//!   observer ─► telemetry, target health; ─► mpsc(1024) ─► run_writer ─► Sink (store)
//!            └─ live::extract ─► mpsc(4096, try_send) ─► live::run ─ Round ─► mpsc(16)
//!                 ─► publisher ─► store (anomalies, verdicts), web state, stdout, notifiers
//! ```
//! ARCHITECTURE.md draws the same picture with every channel and trait named.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use epicenter_collector::config::Job;
use epicenter_collector::job::run_job;
use epicenter_collector::scrape::{Clock, ScrapeContext, Scraper};
use epicenter_collector::targets::{targets_for_job, TargetRegistry};
use epicenter_detector::live::{self, Batch, Round};
use epicenter_oncall::{AlertSource, Notifiers};
use epicenter_store::spool::Spool;
use epicenter_store::writer::WriterStats;
use epicenter_store::{ScrapeOutcome, Store};
use epicenter_web::{AppState, Telemetry, VerdictBook};
use tokio::sync::{mpsc, watch};

use crate::config::{config_error, Config};

/// Scrape outcomes waiting between the targets and the observer, and between the observer
/// and the writer.
const OUTCOME_QUEUE: usize = 1024;
/// Batches waiting for the detector; beyond this they are dropped (a slow detector never
/// holds scraping up).
const DETECTOR_QUEUE: usize = 4096;
/// Judgements waiting to be stored, published and paged.
const ROUND_QUEUE: usize = 16;

/// What feeds the pipeline.
pub(crate) enum Input {
    /// Scrapes of these jobs (`run`, `demo`, `eval --load`).
    Scrape(Vec<Job>),
    /// No scraping: the detector polls the store that sharded collectors write
    /// (`epicenter detect`); `longest_interval` is the longest scrape interval of their jobs.
    Store { longest_interval: Duration },
}

/// Scrapes the jobs of `input` into `store` (for [`Input::Store`], follows the store instead)
/// until `run_for` passes or a signal comes, serving epicenter's own endpoints and running the
/// detector; flushes before returning. Scrapes are stamped
/// by `clock` (the wall clock, or a demo fleet's simulated one). With `tap` (`eval --load`),
/// every detector round is also sent there once published, and verdict events are not
/// printed on stdout (the caller reports).
pub(crate) async fn serve(
    config: Config,
    input: Input,
    store: Store,
    run_for: Option<Duration>,
    live_status: bool,
    clock: Clock,
    tap: Option<mpsc::UnboundedSender<Round>>,
) -> ExitCode {
    let mut signals = crate::signals::StopSignals::listen();
    let tapped = tap.is_some();
    let (jobs, follow_every) = match input {
        Input::Scrape(jobs) => (jobs, None),
        Input::Store { longest_interval } => (Vec::new(), Some(longest_interval)),
    };
    // One HTTP client per job: each job may have its own tls_config and proxy.
    let mut scrapers = Vec::with_capacity(jobs.len());
    for (index, job) in jobs.iter().enumerate() {
        match Scraper::for_job(&job.config) {
            Ok(scraper) => scrapers.push(scraper),
            Err(error) => {
                return config_error(&format!(
                    "scrape_configs[{index}] (job '{}'): {error}",
                    job.config.job_name
                ))
            }
        }
    }
    let detector_rules = if config.detector.enabled {
        match config.detector.load_rules() {
            Ok(rules) => Some(rules),
            Err(error) => return config_error(&error.to_string()),
        }
    } else {
        None
    };
    let targets = Arc::new(TargetRegistry::default());
    let context = Arc::new(ScrapeContext {
        placement: config.placement.clone(),
        external_labels: config.global.external_labels.clone(),
        clock,
        targets: Some(targets.clone()),
    });
    let (sender, scraped) = mpsc::channel::<ScrapeOutcome>(OUTCOME_QUEUE);
    let (to_writer, inbox) = mpsc::channel::<ScrapeOutcome>(OUTCOME_QUEUE);
    let (stop, shutdown) = watch::channel(false);
    let stats = Arc::new(WriterStats::default());
    let telemetry = match Telemetry::new(stats.clone()) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("error: cannot register epicenter's own metrics: {error}");
            return ExitCode::from(1);
        }
    };
    // The SQL endpoint before the API binds: once its port takes connections, `sql --data`
    // finds the endpoint file.
    let live_sql = match store.serve_sql(&config.storage, shutdown.clone()).await {
        Ok(live_sql) => live_sql,
        Err(error) => return config_error(&error),
    };
    let (listener, external_url) = match epicenter_web::bind(&config.server).await {
        Ok(bound) => bound,
        Err(error) => return config_error(&error),
    };
    let source = AlertSource {
        external_url: external_url.clone(),
        external_labels: config.global.external_labels.clone(),
    };
    let notifiers = Arc::new(Notifiers::start(&config.notifiers, source, shutdown.clone()));
    let watched = telemetry.watch_targets(targets.clone());
    if let Err(error) = watched.and_then(|()| telemetry.watch_notifiers(notifiers.clone())) {
        eprintln!("error: cannot register epicenter's own metrics: {error}");
        return ExitCode::from(1);
    }
    let state = Arc::new(AppState {
        telemetry,
        targets,
        verdicts: std::sync::Mutex::new(VerdictBook::default()),
        graph: std::sync::Mutex::new(None),
        notifiers,
        store: Some(store.clone()),
    });
    let server = match epicenter_web::start(state.clone(), &config.server, listener, shutdown.clone()) {
        Ok(server) => server,
        Err(error) => return config_error(&error),
    };
    let spool = match config.storage.spool().as_ref().map(Spool::open).transpose() {
        Ok(spool) => spool,
        Err(error) => return config_error(&format!("storage.spool: {error}")),
    };
    let batching = config.batching.clone();
    let writer = tokio::spawn(store.clone().run_writer(batching, inbox, stats.clone(), spool));
    // The detector reads what a signal rule names, beside the writer.
    let (to_detector, detector_inbox) = mpsc::channel::<Batch>(DETECTOR_QUEUE);
    let dropped = Arc::new(AtomicU64::new(0));
    let rule_metrics = detector_rules.as_deref().map(live::rule_metrics).unwrap_or_default();
    let tick = config.detector.tick(config.global.scrape_interval.0);
    // Read back from a store, batches come in lumps a poll apart: rounds follow their clock.
    let pacing = if follow_every.is_some() {
        live::Pacing::SampleTime
    } else {
        live::Pacing::Arrival
    };
    if let (Some(longest), true) = (follow_every, detector_rules.is_some()) {
        tokio::spawn(crate::stages::follow_store(
            (store.clone(), state.clone()),
            rule_metrics.clone(),
            (tick, longest, config.batching.max_age.0),
            to_detector.clone(),
            shutdown.clone(),
        ));
    }
    let detector_tasks = detector_rules.map(|rules| {
        let (judged, rounds) = mpsc::channel::<Round>(ROUND_QUEUE);
        let detector = tokio::spawn(live::run(
            rules,
            config.detector.dependencies(),
            config.detector.settings(),
            (tick, pacing),
            detector_inbox,
            dropped.clone(),
            judged,
            shutdown.clone(),
        ));
        (
            detector,
            tokio::spawn(crate::stages::publish(rounds, state.clone(), store.clone(), tap)),
        )
    });
    let to_detector = (to_detector, dropped);
    let observer = tokio::spawn(crate::stages::observe(
        scraped,
        to_writer,
        to_detector,
        rule_metrics,
        state.clone(),
    ));
    let mut tasks = Vec::new();
    let mut target_count = 0;
    for (job, scraper) in jobs.into_iter().zip(scrapers) {
        let job = Arc::new(job);
        target_count += targets_for_job(&job).0.len();
        tasks.push(tokio::spawn(run_job(
            job,
            scraper,
            context.clone(),
            sender.clone(),
            shutdown.clone(),
            state.targets.clone(),
        )));
    }
    drop(sender);
    let what = if follow_every.is_some() {
        format!(
            "detecting from what the collectors store in {}",
            store.describe(&config.storage)
        )
    } else {
        format!(
            "scraping {} (plus any file_sd targets) into {}",
            if target_count == 1 {
                "1 static target".to_string()
            } else {
                format!("{target_count} static targets")
            },
            store.describe(&config.storage)
        )
    };
    eprintln!(
        "epicenter: {what}; own endpoints on {external_url}{} ({})",
        live_sql
            .as_ref()
            .map_or(String::new(), |live| format!("; SQL on {}", live.url)),
        match run_for {
            Some(duration) => format!("stopping after {duration:?}"),
            None => "Ctrl-C stops".to_string(),
        }
    );
    if live_status {
        tokio::spawn(crate::status::report(state.clone(), stats.clone(), shutdown.clone()));
    }
    let limit = async {
        match run_for {
            Some(duration) => tokio::time::sleep(duration).await,
            None => std::future::pending().await,
        }
    };
    let stopped_by = tokio::select! {
        _ = limit => "time limit",
        signal = signals.next() => signal,
    };
    let _ = stop.send(true);
    crate::style::clear_status();
    eprintln!(
        "epicenter: stopping ({stopped_by}): flushing what was scraped; a second Ctrl-C or SIGTERM exits at once"
    );
    // A second signal during the flush exits without waiting, and without the embedded
    // engine's exit-time destructors (they crash while its threads run; see `exit_now`).
    let flushed = Arc::new(AtomicBool::new(false));
    let flushed_seen = Arc::clone(&flushed);
    let second_signal = tokio::spawn(async move {
        let signal = signals.next().await;
        if flushed_seen.load(Ordering::SeqCst) {
            eprintln!("epicenter: {signal} again: everything was already written; exiting");
        } else {
            eprintln!("epicenter: {signal} again: exiting without flushing");
        }
        epicenter_store::exit_now(130);
    });
    for task in tasks {
        let _ = task.await;
    }
    let _ = observer.await;
    if let Some((detector, publisher)) = detector_tasks {
        let _ = detector.await;
        let _ = publisher.await;
        if !tapped {
            crate::stages::say_still_open(&state);
        }
    }
    let _ = writer.await;
    flushed.store(true, Ordering::SeqCst);
    if tapped {
        // `eval --load` goes on with its next scenario on this runtime: a later signal is
        // that run's (and the caller's), not this one's.
        second_signal.abort();
    }
    let _ = server.await;
    if let Some(live) = live_sql {
        let _ = live.task.await;
    }
    let count = crate::style::count;
    eprintln!(
        "epicenter: stopped ({stopped_by}): {} and {} written, {} failed",
        count(stats.scrape_rows_written.load(Ordering::Relaxed), "scrape", "scrapes"),
        count(stats.sample_rows_written.load(Ordering::Relaxed), "sample", "samples"),
        count(stats.sample_rows_failed.load(Ordering::Relaxed), "sample", "samples"),
    );
    if stats.sample_rows_failed.load(Ordering::Relaxed) > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
