//! Splitting one fleet's targets between several collectors (`epicenter run --shard I/N`).
//!
//! Each collector keeps the targets whose address hashes to its index, the way Prometheus
//! users shard scraping (Prometheus configuration reference, `<relabel_config>`, action
//! `hashmod`): after a job's own `relabel_configs`, `__address__` is hashed with `hashmod`
//! (MD5, its last 8 bytes as a big-endian integer, modulo N) into `__tmp_epicenter_shard`,
//! and `keep` drops every target whose value is not I. The shard label starts with `__`, so
//! no series carries it; targets of other shards show as dropped in `/api/v1/targets`. N
//! collectors started with `0/N` … `N-1/N` over the same configuration scrape every target
//! exactly once, and a target stays with its shard across restarts and configuration reloads
//! (its address alone decides).

use std::fmt;
use std::str::FromStr;

use crate::config::Job;
use crate::relabel::{Action, RelabelConfig};

/// The temporary label the shard's hash is written to (Prometheus reserves `__tmp_` for
/// such labels); gone once relabeling ends.
pub const SHARD_LABEL: &str = "__tmp_epicenter_shard";

/// Which share of the targets a collector scrapes: shard `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This collector's shard, `0..count`.
    pub index: u64,
    /// How many collectors share the targets (at least 1).
    pub count: u64,
}

impl FromStr for Shard {
    type Err = String;

    /// Reads `INDEX/COUNT`, e.g. `0/3`: `COUNT` at least 1, `INDEX` from 0 to `COUNT - 1`.
    /// The error is a sentence that names what was given and what is wanted.
    fn from_str(text: &str) -> Result<Shard, String> {
        let wanted = "wants INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/3 for the first of three collectors";
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| format!("'{text}' has no '/': the shard {wanted}"))?;
        let number = |part: &str, what: &str| {
            part.trim()
                .parse::<u64>()
                .map_err(|_| format!("{what} '{part}' in '{text}' is not a whole number: the shard {wanted}"))
        };
        let (index, count) = (number(index, "INDEX")?, number(count, "COUNT")?);
        if count == 0 {
            return Err(format!("COUNT is 0 in '{text}': the shard {wanted}"));
        }
        if index >= count {
            return Err(format!(
                "INDEX {index} is not below COUNT {count} in '{text}' (shards are numbered from 0): the shard {wanted}"
            ));
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// The two relabeling steps that keep this shard's targets: `hashmod` of `__address__`
    /// modulo `count` into [`SHARD_LABEL`], then `keep` where it equals `index`. Written out,
    /// they are the configuration a Prometheus user would add by hand.
    pub fn relabel_configs(&self) -> [RelabelConfig; 2] {
        let step = |source: &str, regex: String, modulus: u64, action: Action| RelabelConfig {
            source_labels: vec![source.to_string()],
            separator: ";".to_string(),
            regex,
            modulus,
            target_label: if action == Action::HashMod {
                SHARD_LABEL.to_string()
            } else {
                String::new()
            },
            replacement: "$1".to_string(),
            action,
        };
        [
            step("__address__", "(.*)".to_string(), self.count, Action::HashMod),
            step(SHARD_LABEL, self.index.to_string(), 0, Action::Keep),
        ]
    }

    /// Appends [`Shard::relabel_configs`] to every job's compiled `relabel_configs`, after the
    /// job's own steps (so the address they leave is the one hashed). A single shard (`0/1`)
    /// changes nothing.
    pub fn apply(&self, jobs: &mut [Job]) {
        if self.count == 1 {
            return;
        }
        for job in jobs {
            for step in self.relabel_configs() {
                // Both steps are built valid: a non-zero modulus, a target label, a number
                // as the regex.
                if let Ok(compiled) = step.compile() {
                    job.relabel.push(compiled);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::jobs_from_yaml;
    use crate::targets::targets_for_job;

    #[test]
    fn shards_are_read_and_bad_ones_explained() {
        assert_eq!("0/3".parse::<Shard>(), Ok(Shard { index: 0, count: 3 }));
        assert_eq!(" 2 / 3 ".trim().parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(Shard { index: 1, count: 4 }.to_string(), "1/4");
        let error = "3/3".parse::<Shard>().unwrap_err();
        assert!(error.contains("INDEX 3 is not below COUNT 3 in '3/3'"), "{error}");
        let error = "1-3".parse::<Shard>().unwrap_err();
        assert!(error.contains("'1-3' has no '/'"), "{error}");
        let error = "a/3".parse::<Shard>().unwrap_err();
        assert!(error.contains("INDEX 'a' in 'a/3' is not a whole number"), "{error}");
        let error = "0/0".parse::<Shard>().unwrap_err();
        assert!(error.contains("COUNT is 0"), "{error}");
    }

    /// 600 targets over three shards: every target in exactly one shard, each shard the
    /// targets whose address hashes there (MD5's last 8 bytes, big-endian, mod 3: computed
    /// here from the digest, not through relabeling), none empty-handed, and no shard
    /// label left on a target.
    #[test]
    fn three_shards_split_the_targets_exactly_once() {
        use md5::{Digest, Md5};
        let addresses: Vec<String> = (0..600)
            .map(|index| format!("10.{}.{}.7:9100", index / 200, index % 200))
            .collect();
        let list: Vec<String> = addresses.iter().map(|address| format!("'{address}'")).collect();
        let yaml = format!(
            "scrape_configs:\n  - job_name: node\n    static_configs: [{{targets: [{}]}}]\n",
            list.join(", ")
        );
        let mut owner = std::collections::HashMap::new();
        for index in 0..3 {
            let mut jobs = jobs_from_yaml(&yaml).unwrap();
            Shard { index, count: 3 }.apply(&mut jobs);
            let (targets, dropped) = targets_for_job(&jobs[0]);
            assert_eq!(targets.len() + dropped, 600);
            assert!(targets.len() > 150, "shard {index} has only {} targets", targets.len());
            for target in targets {
                assert!(!target.labels.contains_key(SHARD_LABEL));
                let address = target.instance().to_string();
                let digest = Md5::digest(address.as_bytes());
                let hash = u64::from_be_bytes(digest[8..16].try_into().unwrap());
                assert_eq!(hash % 3, index, "{address}");
                assert!(owner.insert(address, index).is_none(), "a target in two shards");
            }
        }
        assert_eq!(owner.len(), 600, "every target in one shard");
        // One shard of one is the whole fleet.
        let mut jobs = jobs_from_yaml(&yaml).unwrap();
        Shard { index: 0, count: 1 }.apply(&mut jobs);
        assert_eq!(targets_for_job(&jobs[0]).0.len(), 600);
    }
}
