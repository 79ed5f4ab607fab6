//! epicenter on call: verdict events to the people on call, through Alertmanager (API v2)
//! and JSON webhooks, with routing filters, bounded queues, retries and re-sends.
//!
//! **Enters:** verdict events ([`epicenter_detector::VerdictEvent`]) and the `notifiers`
//! section ([`config`]). **Leaves:** HTTP requests to Alertmanager and webhooks, and delivery
//! counters ([`notifiers::Notifiers::status`] for the API, [`notifiers::Notifiers::snapshot`]
//! for epicenter's own metrics). **Never:** blocks detection (a full queue drops the event and
//! counts it), retries a receiver's 4xx, or judges anything itself.

pub mod config;
pub mod notifiers;

pub use notifiers::{AlertSource, DeliverySnapshot, Notifiers};
