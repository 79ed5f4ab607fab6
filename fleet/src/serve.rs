//! Runs a fleet in real time (× the scenario's speed) and serves every instance's exposition
//! on its own port of 127.0.0.1, as `/metrics`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::http::header;
use axum::routing::get;
use axum::Router;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::model::{Fleet, Headline, Instance};
use crate::scenario::Scenario;

/// One served instance.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedInstance {
    /// Which instance.
    pub instance: Instance,
    /// `127.0.0.1:<port>` where its `/metrics` answers.
    pub address: String,
}

/// A fleet running in the background.
pub struct RunningFleet {
    /// Every instance with its address, in [`Fleet::instances`] order.
    pub served: Vec<ServedInstance>,
    /// The simulated second, updated after every step.
    pub clock: watch::Receiver<u64>,
    fleet: Arc<Mutex<Fleet>>,
}

impl RunningFleet {
    /// Fleet-wide figures now (see [`Headline`]).
    pub fn headline(&self) -> Headline {
        self.fleet.lock().unwrap_or_else(PoisonError::into_inner).headline()
    }

    /// A function returning the headline figures now, for a task that outlives this borrow.
    pub fn headline_source(&self) -> impl Fn() -> Headline + Send + Sync + 'static {
        let fleet = self.fleet.clone();
        move || fleet.lock().unwrap_or_else(PoisonError::into_inner).headline()
    }

    /// The fleet's simulated start, milliseconds since the epoch.
    pub fn start_ms(&self) -> i64 {
        self.fleet.lock().unwrap_or_else(PoisonError::into_inner).start_ms()
    }

    /// Every served instance as a Prometheus file_sd document (JSON): `[{"targets":
    /// ["127.0.0.1:<port>"], "labels": {"dc", "host", "service", "pod"}}]`, one group per
    /// instance, for Prometheus's or epicenter's `file_sd_configs`. A kubelet's group has no
    /// `pod`: its cAdvisor series name their own pods, which a target label would overwrite.
    pub fn file_sd(&self) -> serde_json::Value {
        let groups = self
            .served
            .iter()
            .map(|served| {
                let mut labels = serde_json::json!({
                    "dc": served.instance.dc,
                    "host": served.instance.host,
                    "service": served.instance.service.name(),
                });
                if served.instance.service != crate::topology::Service::Kubelet {
                    labels["pod"] = served.instance.name.clone().into();
                }
                serde_json::json!({"targets": [served.address], "labels": labels})
            })
            .collect();
        serde_json::Value::Array(groups)
    }

    /// Ground truth of the scenario's faults (see [`crate::truth::ground_truth`]).
    pub fn ground_truth(&self) -> Vec<crate::truth::Truth> {
        crate::truth::ground_truth(&self.fleet.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Starts `scenario`'s fleet with its clock at `start_ms`: binds one port per instance on
/// 127.0.0.1 and steps the simulation once per simulated second (every `1 / speed` wall
/// seconds) until the scenario's duration (then the state holds still) or `shutdown`.
/// Errors if a port cannot be bound.
pub async fn start(
    scenario: &Scenario,
    start_ms: i64,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<RunningFleet> {
    let fleet = Arc::new(Mutex::new(Fleet::new(scenario, start_ms)));
    let instances = fleet
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .instances()
        .to_vec();
    let mut served = Vec::with_capacity(instances.len());
    for (index, instance) in instances.into_iter().enumerate() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let shared = fleet.clone();
        let app = Router::new().route(
            "/metrics",
            get(move || {
                let shared = shared.clone();
                async move {
                    let text = shared.lock().unwrap_or_else(PoisonError::into_inner).render(index);
                    (
                        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                        text,
                    )
                }
            }),
        );
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                })
                .await;
        });
        served.push(ServedInstance { instance, address });
    }
    let (tick, clock) = watch::channel(0u64);
    let period = Duration::from_secs_f64(1.0 / scenario.speed);
    let end = scenario.duration.0.as_secs();
    let stepper = fleet.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = shutdown.wait_for(|stopped| *stopped) => return,
            }
            let second = {
                let mut fleet = stepper.lock().unwrap_or_else(PoisonError::into_inner);
                if fleet.second() >= end {
                    return;
                }
                fleet.step();
                fleet.second()
            };
            let _ = tick.send(second);
        }
    });
    Ok(RunningFleet { served, clock, fleet })
}
