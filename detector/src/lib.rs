//! epicenter's detector: signals from rules (`rules/signals/signals.yml`), robust spike
//! detection with back-tracked onsets ([`signal`]), root-cause ranking over the dependency
//! graph and verdicts ([`engine`]), verdict events ([`events`]), the live loop ([`live`]), the
//! reference rankings from the literature ([`reference`]), the standard scores ([`score`]),
//! and the batches `epicenter detect` and `replay` make from stored rows ([`follow`]).
//! docs/detector.md explains the method.
//!
//! **Enters:** samples with their instance's placement ([`Detector::observe`], or
//! [`live::Batch`]es made from scrape outcomes by [`live::extract`], or from rows read back
//! from the store by [`follow::Follower`] for `epicenter detect`), the service dependencies
//! and the signal rules ([`config`]). **Leaves:** assessments (anomalies, ranked candidates,
//! the open [`Verdict`]), verdict events, and `anomalies`/`verdicts` rows for the store
//! ([`events`]). **Never:** does I/O of its own beyond reading a configured rules file: the
//! live loop's judgements go to a channel the binary wires to the store, the web server and
//! on-call. It must never hold scraping up: its inbox is bounded, and the binary feeds it with
//! `try_send` (a full inbox drops the batch).

pub mod config;
pub mod engine;
pub mod events;
pub mod follow;
pub mod live;
pub mod reference;
pub mod rules;
pub mod score;
pub mod signal;

pub use engine::{
    Anomaly, Assessment, Candidate, ConfidenceModel, Dependency, Detector, InstanceInfo, Settings, Verdict,
};
pub use events::{VerdictEvent, VerdictTracker};
