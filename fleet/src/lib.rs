//! epicenter's fleet simulator: datacenters, hosts and service instances whose metrics follow
//! from load and faults (see [`model`]), served as real exporters on 127.0.0.1 (see
//! [`serve`]), driven by scenario files (see [`scenario`], docs/scenarios.md), with the ground
//! truth of every injected fault (see [`truth`]).

pub(crate) mod expose;
pub mod model;
pub mod scenario;
pub mod serve;
pub mod truth;

pub use model::{Fleet, Instance, Service};
pub use scenario::Scenario;
