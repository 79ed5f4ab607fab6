//! The `detector` section of the configuration file: whether the detector runs, the service
//! dependencies it reasons over, its signal rules and how often it judges (docs/detector.md).

use std::path::PathBuf;
use std::time::Duration;

use epicenter_config::{Problems, PromDuration};
use serde::Deserialize;

use crate::engine::{Dependency, Settings};
use crate::rules::{self, Rule};

/// The live detector never judges more often than this.
pub const FASTEST_TICK: Duration = Duration::from_millis(100);

/// `detector`: what the root-cause detector needs to know (docs/detector.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectorConfig {
    /// Run the detector on what is scraped. Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Which service calls which (by the placement `service` label): faults spread to
    /// callers, load to callees.
    #[serde(default)]
    pub dependencies: Vec<DependencyConfig>,
    /// Signal rules file (the shape of rules/signals/signals.yml); default the shipped rules.
    #[serde(default)]
    pub rules_file: Option<PathBuf>,
    /// How often the detector judges what arrived. Default: `global.scrape_interval`; never
    /// under 100 ms ([`DetectorConfig::tick`]).
    #[serde(default)]
    pub interval: Option<PromDuration>,
    /// A counter that falls by less than this fraction of its value is a glitch (that reading
    /// skipped), not a reset. Default 0.1; 0 reads every decrease as a reset (Prometheus).
    #[serde(default)]
    pub counter_glitch_fraction: Option<f64>,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            enabled: true,
            dependencies: Vec::new(),
            rules_file: None,
            interval: None,
            counter_glitch_fraction: None,
        }
    }
}

fn default_true() -> bool {
    true
}

/// One `detector.dependencies` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyConfig {
    /// Calling service.
    pub caller: String,
    /// Called service.
    pub callee: String,
    /// Calls stay within the caller's datacenter. Default false.
    #[serde(default)]
    pub same_dc: bool,
}

impl DetectorConfig {
    /// The rules `rules_file` names, else the shipped ones (rules/signals/signals.yml). Reads
    /// the file; errors name the key and the problem
    /// (`detector.rules_file rules.yml: rules[2].metric: …`).
    pub fn load_rules(&self) -> Result<Vec<Rule>, String> {
        let text = match &self.rules_file {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|error| format!("detector.rules_file: cannot read {}: {error}", path.display()))?,
            None => rules::SHIPPED.to_string(),
        };
        rules::parse(&text).map_err(|error| format!("{}: {error}", self.rules_source()))
    }

    /// How messages about the rules name where they come from: `detector.rules_file <path>`
    /// (the path as resolved), or `the shipped rules`. A rule's key path follows it
    /// (`detector.rules_file x.yml: signals[3]: …`).
    pub fn rules_source(&self) -> String {
        match &self.rules_file {
            Some(path) => format!("detector.rules_file {}", path.display()),
            None => "the shipped rules".to_string(),
        }
    }

    /// Makes `rules_file` relative to `directory`, the folder of the configuration file, when
    /// it is relative (as Prometheus reads its `rule_files`).
    pub fn set_directory(&mut self, directory: &std::path::Path) {
        if let Some(path) = &mut self.rules_file {
            epicenter_config::resolve_relative(directory, path);
        }
    }

    /// How often the live detector judges: `interval`, else `scrape_interval` (the
    /// configuration's `global.scrape_interval`), and never under [`FASTEST_TICK`].
    pub fn tick(&self, scrape_interval: Duration) -> Duration {
        self.interval
            .map_or(scrape_interval, |interval| interval.0)
            .max(FASTEST_TICK)
    }

    /// The detector's settings: the defaults ([`Settings::default`]) with what this section
    /// sets.
    pub fn settings(&self) -> Settings {
        let mut settings = Settings::default();
        if let Some(fraction) = self.counter_glitch_fraction {
            settings.counter_glitch = fraction;
        }
        settings
    }

    /// Records what in this section cannot be used: a `counter_glitch_fraction` outside
    /// 0 ..= 0.9.
    pub fn problems(&self, problems: &mut Problems) {
        if let Some(fraction) = self.counter_glitch_fraction {
            if !(0.0..=0.9).contains(&fraction) {
                problems.push(
                    "detector.counter_glitch_fraction",
                    format!("{fraction} must be a fraction from 0 (every decrease is a reset) to 0.9"),
                );
            }
        }
    }

    /// `dependencies` as the detector takes them.
    pub fn dependencies(&self) -> Vec<Dependency> {
        self.dependencies
            .iter()
            .map(|dependency| Dependency {
                caller: dependency.caller.clone(),
                callee: dependency.callee.clone(),
                same_dc: dependency.same_dc,
            })
            .collect()
    }
}
