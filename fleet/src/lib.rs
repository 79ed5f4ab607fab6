//! epicenter's fleet simulator: datacenters, hosts and service instances whose metrics follow
//! from load and faults (see [`model`]), served as real exporters on 127.0.0.1 (see
//! [`serve`]), driven by scenario files (see [`scenario`], docs/scenarios.md), with the ground
//! truth of every injected fault (see [`truth`]); seeded random scenarios (see [`random`]).
//!
//! **Enters:** a scenario (YAML: the fleet's shape, faults, planned operations, speed) and a
//! start time. **Leaves:** expositions as the real exporters print them, one simulated second
//! at a time ([`Fleet::step`], [`Fleet::render`]), served on loopback ports, and the ground
//! truth. **Never:** knows about the collector, the store or the detector: it is judged, not
//! judging; the same seed gives the same fleet.

pub mod cadvisor;
pub(crate) mod expose;
pub(crate) mod instrument;
pub mod model;
pub mod node;
pub mod random;
pub mod scenario;
pub mod serve;
pub(crate) mod text;
pub mod topology;
pub mod truth;

pub use model::Fleet;
pub use scenario::Scenario;
pub use topology::{Instance, Service};
