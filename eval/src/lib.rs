//! epicenter's scoring: the detector judged on data with a known answer.
//!
//! **Enters:** scenarios (run headless on the simulated fleet, [`scenarios`]), datasets with
//! ground truth (PetShop, [`petshop`]: loaded and adapted, ranked by the detector), stored
//! samples ([`replay`]), a Prometheus server's samples ([`prometheus`], replayed the same way),
//! labelled real incidents ([`cases`]: Sock Shop, Nezha, a user's own) replayed from a
//! Prometheus server and scored beside a naive z-score ([`realcases`], [`naive`]), and a demo
//! run's ground truth and verdicts ([`demo`]). **Leaves:** scores (AC@k at host and datacenter level,
//! Avg@5, time to detect, false verdicts, top-k recall, calibration), the printed report
//! ([`report`]), verdict events, `ground_truth` rows. **Never:** tunes the detector: it calls
//! the detector as the live path does, and nothing here is fitted to a dataset's test split
//! (docs/detector.md records what was consulted); the confidence model is fitted only when
//! asked (`eval --calibrate`), on calibration seeds.

pub mod cases;
pub mod demo;
pub mod load;
pub mod naive;
pub mod petshop;
pub mod prometheus;
pub mod realcases;
pub mod replay;
pub mod report;
pub mod scenarios;
