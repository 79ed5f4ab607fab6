//! epicenter's detector: signals from raw series, baselines and spike detection, the service
//! dependency graph and root-cause ranking. Nothing here yet: it lands with issue 5 (see
//! `../shared/DESIGN.md`, Detector). The crate exists so the workspace has its final shape.
