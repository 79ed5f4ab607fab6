//! One scrape job at run time: its targets (static, and from `file_sd_configs`,
//! `http_sd_configs` and `dns_sd_configs` as they change) each scraped by its own task, the way Prometheus's scrape manager keeps one scrape
//! pool per job and a loop per target.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use epicenter_store::rows::ScrapeOutcome;
use tokio::sync::{mpsc, watch};

use crate::config::{Job, StaticConfig};
use crate::discovery::{fetch_http_targets, FileDiscovery};
use crate::dns_sd;
use crate::scrape::{run_target, ScrapeContext, Scraper};
use crate::targets::{targets_for_groups, TargetRegistry};

/// Longest wait for an HTTP SD answer (or the `refresh_interval`, if shorter).
pub const HTTP_SD_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest wait for one DNS answer, per attempt (two attempts per name and refresh).
pub const DNS_SD_TIMEOUT: Duration = Duration::from_secs(5);

/// How often file_sd files are checked for changes (at most; `refresh_interval` if shorter).
pub const FILE_SD_POLL: Duration = Duration::from_secs(5);

/// Runs one job: its static targets, and the targets of its `file_sd_configs`,
/// `http_sd_configs` and `dns_sd_configs`, started and stopped as the files and lists change (each in its own
/// [`run_target`] task, registered in `health` for `/api/v1/targets`), every outcome sent to
/// `sender`. A target file that cannot be read, or a target list that cannot be fetched,
/// or a DNS name that cannot be looked up, keeps its previous targets (logged as a warning). Returns after `shutdown` turns true,
/// once every target task has ended.
pub async fn run_job(
    job: Arc<Job>,
    scraper: Scraper,
    context: Arc<ScrapeContext>,
    sender: mpsc::Sender<ScrapeOutcome>,
    mut shutdown: watch::Receiver<bool>,
    health: Arc<TargetRegistry>,
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
    // Each http_sd_configs entry's last good target list and when it is next fetched.
    let http_sd = &job.config.http_sd_configs;
    let mut http_groups: Vec<Vec<StaticConfig>> = vec![Vec::new(); http_sd.len()];
    let mut http_due: Vec<tokio::time::Instant> = vec![tokio::time::Instant::now(); http_sd.len()];
    // Each dns_sd_configs entry's last good targets per name, and when it is next looked up.
    let dns_sd = &job.config.dns_sd_configs;
    let mut dns_groups: Vec<Vec<Vec<StaticConfig>>> =
        dns_sd.iter().map(|sd| vec![Vec::new(); sd.names.len()]).collect();
    let mut dns_due: Vec<tokio::time::Instant> = vec![tokio::time::Instant::now(); dns_sd.len()];
    let resolver = if dns_sd.is_empty() {
        None
    } else {
        match dns_sd::resolver(&job.dns_servers, DNS_SD_TIMEOUT) {
            Ok(resolver) => Some(resolver),
            Err(error) => {
                tracing::error!(job = %job.config.job_name, %error, "dns_sd: no resolver; this job's DNS targets are not discovered");
                dns_due.clear();
                None
            }
        }
    };
    let mut running: HashMap<u64, tokio::task::JoinHandle<()>> = HashMap::new();
    // Targets registered down, unscraped, while the job is past its target_limit.
    let mut limited: Vec<u64> = Vec::new();
    let mut first = true;
    loop {
        let mut changed = first;
        first = false;
        if let Some(mut files) = discovery.take() {
            // File I/O and parsing off the runtime: a huge or hostile file delays only this
            // job's discovery, never a scrape or the API.
            let Ok((files, (groups, errors))) = tokio::task::spawn_blocking(move || {
                let polled = files.poll();
                (files, polled)
            })
            .await
            else {
                tracing::error!(job = %job.config.job_name, "file_sd: the discovery task failed; this job's targets stay as they are");
                break;
            };
            discovery = Some(files);
            for error in errors {
                tracing::warn!(job = %job.config.job_name, %error, "file_sd: cannot read target file; keeping its previous targets");
            }
            if let Some(groups) = groups {
                discovered = groups;
                changed = true;
            }
        }
        for (index, (sd, (client, auth))) in http_sd.iter().zip(&job.http_sd).enumerate() {
            if tokio::time::Instant::now() < http_due[index] {
                continue;
            }
            let refresh = sd.refresh_interval.0;
            http_due[index] = tokio::time::Instant::now() + refresh;
            let timeout = refresh.min(HTTP_SD_TIMEOUT);
            let fetched = tokio::select! {
                fetched = fetch_http_targets(client, &sd.url, auth.as_deref(), refresh, timeout) => fetched,
                _ = shutdown.changed() => break,
            };
            match fetched {
                Ok(groups) if groups != http_groups[index] => {
                    http_groups[index] = groups;
                    changed = true;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(job = %job.config.job_name, %error, "http_sd: cannot fetch the target list; keeping its previous targets");
                }
            }
        }
        if let Some(resolver) = &resolver {
            for (index, sd) in dns_sd.iter().enumerate() {
                if tokio::time::Instant::now() < dns_due[index] {
                    continue;
                }
                dns_due[index] = tokio::time::Instant::now() + sd.refresh_interval.0;
                // Every name at once: one slow name does not hold up the others.
                let lookups = sd.names.iter().map(|name| dns_sd::lookup(resolver, sd, name));
                let found = tokio::select! {
                    found = futures_util::future::join_all(lookups) => found,
                    _ = shutdown.changed() => break,
                };
                for (slot, result) in dns_groups[index].iter_mut().zip(found) {
                    match result {
                        Ok(groups) if groups != *slot => {
                            *slot = groups;
                            changed = true;
                        }
                        Ok(_) => {}
                        Err(error) => {
                            tracing::warn!(job = %job.config.job_name, %error, "dns_sd: keeping the name's previous targets");
                        }
                    }
                }
            }
        }
        if *shutdown.borrow() {
            break;
        }
        if changed {
            let mut groups = job.config.static_configs.clone();
            groups.extend(discovered.iter().cloned());
            groups.extend(http_groups.iter().flatten().cloned());
            groups.extend(dns_groups.iter().flatten().flatten().cloned());
            let (targets, dropped) = targets_for_groups(&job, &groups);
            tracing::info!(job = %job.config.job_name, targets = targets.len(), dropped, interval = ?job.interval, "targets");
            // Targets shown down for the job's target_limit are listed again below, if at all.
            for identity in limited.drain(..) {
                health.remove(identity);
            }
            let limit = job.limits.targets;
            let targets = if limit > 0 && targets.len() as u64 > limit {
                // Prometheus's rule: past target_limit, none of the job's targets is scraped.
                let reason = format!(
                    "target_limit exceeded (number of targets: {}, limit: {limit})",
                    targets.len()
                );
                tracing::error!(job = %job.config.job_name, %reason, "none of this job's targets is scraped");
                for (identity, handle) in running.drain() {
                    handle.abort();
                    health.remove(identity);
                }
                for target in &targets {
                    health.add(target);
                    health.mark_down(target.identity, &reason);
                    limited.push(target.identity);
                }
                Vec::new()
            } else {
                targets
            };
            let current: HashSet<u64> = targets.iter().map(|target| target.identity).collect();
            running.retain(|identity, handle| {
                if current.contains(identity) {
                    return true;
                }
                handle.abort();
                health.remove(*identity);
                false
            });
            for target in targets {
                if running.contains_key(&target.identity) {
                    continue;
                }
                health.add(&target);
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
        if discovery.is_none() && http_sd.is_empty() && dns_due.is_empty() {
            break;
        }
        let mut wake = tokio::time::Instant::now() + poll_every;
        if discovery.is_none() {
            wake = tokio::time::Instant::now() + Duration::from_secs(3600);
        }
        let wake = http_due
            .iter()
            .chain(&dns_due)
            .copied()
            .fold(wake, tokio::time::Instant::min);
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(sender);
    for (_, handle) in running {
        let _ = handle.await;
    }
}
