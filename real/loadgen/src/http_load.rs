//! `epicenter-loadgen http`: HTTP GETs at a fixed rate to each target, latency per target as
//! Micrometer's `http_client_requests_seconds`, on one /metrics endpoint.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus::{Encoder, HistogramOpts, HistogramVec, Registry};

use crate::{
    check_targets_file, expose, finish, parse_all, runtime, until_stopped, write_targets, HttpArgs, Placement,
};

/// Runs `epicenter-loadgen http` until `--for` passes or Ctrl-C.
pub(crate) fn run(args: &HttpArgs) -> ExitCode {
    let targets = match parse_all(&args.targets, "--target").and_then(|targets| {
        check_targets_file(args.targets_file.as_deref())?;
        Ok(targets)
    }) {
        Ok(targets) => targets,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    if !args.path.starts_with('/') {
        eprintln!("error: --path '{}' must start with '/', e.g. /work", args.path);
        return ExitCode::from(2);
    }
    if args.timeout.is_zero() {
        eprintln!("error: --timeout must be greater than 0");
        return ExitCode::from(2);
    }
    let latency = match HistogramVec::new(
        HistogramOpts::new("http_client_requests_seconds", "Timer of HTTP client requests, seconds").buckets(vec![
            0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
        ]),
        &["client_name", "method", "outcome", "status", "uri"],
    ) {
        Ok(latency) => latency,
        Err(error) => {
            eprintln!("error: metrics: {error}");
            return ExitCode::from(1);
        }
    };
    let registry = Registry::new();
    if let Err(error) = registry.register(Box::new(latency.clone())) {
        eprintln!("error: metrics: {error}");
        return ExitCode::from(1);
    }
    let client = match reqwest::Client::builder().timeout(args.timeout).build() {
        Ok(client) => client,
        Err(error) => {
            eprintln!("error: HTTP client: {error}");
            return ExitCode::from(1);
        }
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let code = runtime.block_on(async move {
        let gathered = registry.clone();
        let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(move || {
            let mut buffer = Vec::new();
            let _ = prometheus::TextEncoder::new().encode(&gathered.gather(), &mut buffer);
            String::from_utf8(buffer).unwrap_or_default()
        });
        let placement = Placement {
            name: &args.name,
            dc: &args.dc,
            host: &args.host,
            service: &args.service,
        };
        let group = match expose(render, &placement).await {
            Ok(group) => group,
            Err(code) => return code,
        };
        if let Some(path) = &args.targets_file {
            if let Err(code) = write_targets(path, vec![group]) {
                return code;
            }
        }
        for target in targets {
            let (client, latency, uri) = (client.clone(), latency.clone(), args.path.clone());
            let url = format!("http://{}{}", target.address, args.path);
            let period = Duration::from_secs_f64(1.0 / args.rate);
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval(period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticker.tick().await;
                    let (client, latency, url, uri, name) = (
                        client.clone(),
                        latency.clone(),
                        url.clone(),
                        uri.clone(),
                        target.name.clone(),
                    );
                    tokio::spawn(async move {
                        let sent = Instant::now();
                        let result = client.get(&url).send().await;
                        let (outcome, status) = match &result {
                            Ok(response) => {
                                let code = response.status();
                                let outcome = match code.as_u16() {
                                    200..=299 => "SUCCESS",
                                    300..=399 => "REDIRECTION",
                                    400..=499 => "CLIENT_ERROR",
                                    _ => "SERVER_ERROR",
                                };
                                (outcome, code.as_u16().to_string())
                            }
                            Err(_) => ("UNKNOWN", "IO_ERROR".to_string()),
                        };
                        if let Ok(response) = result {
                            let _ = response.bytes().await;
                        }
                        latency
                            .with_label_values(&[name.as_str(), "GET", outcome, status.as_str(), uri.as_str()])
                            .observe(sent.elapsed().as_secs_f64());
                    });
                }
            });
        }
        until_stopped(args.run_for).await;
        ExitCode::SUCCESS
    });
    finish(runtime, code)
}
