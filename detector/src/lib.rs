//! epicenter's detector: signals from rules (`rules/signals/signals.yml`), robust spike detection
//! with back-tracked onsets ([`signal`]), root-cause ranking over the dependency graph and
//! verdicts ([`engine`]), the reference rankings from the literature ([`reference`]) and the
//! standard scores ([`score`]). docs/detector.md explains the method.

pub mod engine;
pub mod reference;
pub mod rules;
pub mod score;
pub mod signal;

pub use engine::{Anomaly, Assessment, Candidate, Dependency, Detector, InstanceInfo, Settings, Verdict};
