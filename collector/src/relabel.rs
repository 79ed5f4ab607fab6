//! Relabeling with Prometheus semantics (`relabel_configs`, `metric_relabel_configs`).
//!
//! Follows Prometheus's `model/relabel` package and the configuration reference: the values
//! of `source_labels` are joined with `separator`, matched against `regex` anchored at both
//! ends (`^(?:regex)$`), and `replacement` is expanded with `$1`, `${1}`, `$name` (a name is
//! as long as possible, so `$1x` is the group named `1x`, as in Go). Actions: `replace`,
//! `keep`, `drop`, `keepequal`, `dropequal`, `hashmod` (MD5 of the value, its last 8 bytes
//! as a big-endian integer, modulo `modulus`), `labelmap`, `labeldrop`, `labelkeep`,
//! `lowercase`, `uppercase`. A label set that ends empty is dropped.

use epicenter_config::is_label_name;
use epicenter_store::rows::Labels;
use md5::{Digest, Md5};
use regex::Regex;
use serde::Deserialize;

/// A relabeling step as written in YAML. Defaults are Prometheus's: `separator: ";"`,
/// `regex: "(.*)"`, `replacement: "$1"`, `action: replace`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelabelConfig {
    /// Labels whose values are joined to form the value matched against `regex`.
    #[serde(default)]
    pub source_labels: Vec<String>,
    /// Joins the source label values. Default `;`.
    #[serde(default = "default_separator")]
    pub separator: String,
    /// RE2-style regular expression, anchored at both ends. Default `(.*)`.
    #[serde(default = "default_regex")]
    pub regex: String,
    /// Modulus for `hashmod`.
    #[serde(default)]
    pub modulus: u64,
    /// Label written by `replace`, `hashmod`, `lowercase`, `uppercase`, or compared by
    /// `keepequal`/`dropequal`. May use `$1` references with `replace`.
    #[serde(default)]
    pub target_label: String,
    /// Value written by `replace` (or name by `labelmap`), with `$1`-style references.
    /// Default `$1`.
    #[serde(default = "default_replacement")]
    pub replacement: String,
    /// What to do. Default `replace`.
    #[serde(default)]
    pub action: Action,
}

/// Relabeling actions (Prometheus configuration reference, `<relabel_config>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Set `target_label` to the expanded `replacement` when `regex` matches.
    #[default]
    Replace,
    /// Drop the series/target unless `regex` matches.
    Keep,
    /// Drop the series/target when `regex` matches.
    Drop,
    /// Keep only when the joined source value equals `target_label`'s value.
    KeepEqual,
    /// Drop when the joined source value equals `target_label`'s value.
    DropEqual,
    /// Set `target_label` to the MD5 of the joined value modulo `modulus`.
    HashMod,
    /// Copy every label whose name matches `regex` to the name given by `replacement`.
    LabelMap,
    /// Remove labels whose names match `regex`.
    LabelDrop,
    /// Remove labels whose names do not match `regex`.
    LabelKeep,
    /// Set `target_label` to the joined value in lower case.
    Lowercase,
    /// Set `target_label` to the joined value in upper case.
    Uppercase,
}

fn default_separator() -> String {
    ";".to_string()
}

fn default_regex() -> String {
    "(.*)".to_string()
}

fn default_replacement() -> String {
    "$1".to_string()
}

/// A validated relabeling step with its regex compiled.
#[derive(Debug, Clone)]
pub struct Relabel {
    config: RelabelConfig,
    regex: Regex,
}

impl RelabelConfig {
    /// Checks the step as Prometheus's `relabel.Config.Validate` does and compiles its regex.
    ///
    /// Errors are sentences naming the field, e.g. `action hashmod requires a non-zero
    /// modulus`; the caller prefixes the key path.
    pub fn compile(&self) -> Result<Relabel, String> {
        let anchored = format!("^(?:{})$", self.regex);
        let regex = Regex::new(&anchored).map_err(|error| {
            // The regex crate's message spans several lines (pattern, caret, reason): keep the
            // reason, after the pattern as written.
            let text = error.to_string();
            let reason = text
                .lines()
                .last()
                .unwrap_or("")
                .trim_start_matches("error: ")
                .to_string();
            format!("regex: invalid regular expression '{}': {reason}", self.regex)
        })?;
        let needs_target = matches!(
            self.action,
            Action::Replace
                | Action::HashMod
                | Action::Lowercase
                | Action::Uppercase
                | Action::KeepEqual
                | Action::DropEqual
        );
        let action = action_name(self.action);
        if needs_target && self.target_label.is_empty() {
            return Err(format!("target_label: action {action} requires a target_label"));
        }
        if self.action == Action::HashMod && self.modulus == 0 {
            return Err("modulus: action hashmod requires a non-zero modulus".to_string());
        }
        if matches!(self.action, Action::LabelDrop | Action::LabelKeep) {
            if !self.source_labels.is_empty() {
                return Err(format!(
                    "source_labels: action {action} works on label names; it takes no source_labels"
                ));
            }
            if !self.target_label.is_empty() {
                return Err(format!("target_label: action {action} takes no target_label"));
            }
            if self.replacement != default_replacement() {
                return Err(format!("replacement: action {action} takes no replacement"));
            }
            if self.modulus != 0 {
                return Err(format!("modulus: action {action} takes no modulus"));
            }
            if self.separator != default_separator() {
                return Err(format!(
                    "separator: action {action} works on label names; it takes no separator"
                ));
            }
        }
        if matches!(self.action, Action::Lowercase | Action::Uppercase) && self.replacement != default_replacement() {
            return Err(format!(
                "replacement: action {action} writes the source value changed in case; it takes no replacement"
            ));
        }
        if self.action == Action::LabelMap && !is_label_name_template(&self.replacement) {
            return Err(format!(
                "replacement: '{}' is not a valid label name for action labelmap (letters, digits, '_', and $1 references)",
                self.replacement
            ));
        }
        if matches!(self.action, Action::KeepEqual | Action::DropEqual) && self.regex != default_regex() {
            return Err(format!("regex: action {action} compares values; it takes no regex"));
        }
        if needs_target && self.action != Action::Replace && !is_label_name(&self.target_label) {
            return Err(format!(
                "target_label: '{}' is not a valid label name",
                self.target_label
            ));
        }
        if self.action == Action::Replace && !is_label_name_template(&self.target_label) {
            return Err(format!(
                "target_label: '{}' is not a valid label name (letters, digits, '_', and $1 references)",
                self.target_label
            ));
        }
        Ok(Relabel {
            config: self.clone(),
            regex,
        })
    }
}

fn action_name(action: Action) -> &'static str {
    match action {
        Action::Replace => "replace",
        Action::Keep => "keep",
        Action::Drop => "drop",
        Action::KeepEqual => "keepequal",
        Action::DropEqual => "dropequal",
        Action::HashMod => "hashmod",
        Action::LabelMap => "labelmap",
        Action::LabelDrop => "labeldrop",
        Action::LabelKeep => "labelkeep",
        Action::Lowercase => "lowercase",
        Action::Uppercase => "uppercase",
    }
}

/// A label name that may contain `$1`, `${1}` or `$name` references.
fn is_label_name_template(name: &str) -> bool {
    !name.is_empty()
        && !name.as_bytes()[0].is_ascii_digit()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'$' | b'{' | b'}'))
}

/// MD5 of `value`, its last 8 bytes read big-endian (Prometheus's `sum64`).
fn hash64(value: &str) -> u64 {
    let digest = Md5::digest(value.as_bytes());
    let mut last8 = [0u8; 8];
    last8.copy_from_slice(&digest[8..16]);
    u64::from_be_bytes(last8)
}

impl Relabel {
    /// The step as configured.
    pub fn config(&self) -> &RelabelConfig {
        &self.config
    }

    /// Applies this step to `labels` in place. Returns `false` when the series or target is
    /// dropped.
    pub fn apply(&self, labels: &mut Labels) -> bool {
        let config = &self.config;
        let value = config
            .source_labels
            .iter()
            .map(|name| labels.get(name).map_or("", String::as_str))
            .collect::<Vec<_>>()
            .join(&config.separator);
        match config.action {
            Action::Replace => {
                let Some(captures) = self.regex.captures(&value) else {
                    return true;
                };
                let mut target = String::new();
                captures.expand(&config.target_label, &mut target);
                if !is_label_name(&target) {
                    return true;
                }
                let mut replaced = String::new();
                captures.expand(&config.replacement, &mut replaced);
                if replaced.is_empty() {
                    labels.remove(&target);
                } else {
                    labels.insert(target, replaced);
                }
                true
            }
            Action::Keep => self.regex.is_match(&value),
            Action::Drop => !self.regex.is_match(&value),
            Action::KeepEqual => labels.get(&config.target_label).map_or("", String::as_str) == value,
            Action::DropEqual => labels.get(&config.target_label).map_or("", String::as_str) != value,
            Action::HashMod => {
                let modulo = hash64(&value) % config.modulus.max(1);
                labels.insert(config.target_label.clone(), modulo.to_string());
                true
            }
            Action::Lowercase => {
                labels.insert(config.target_label.clone(), value.to_lowercase());
                true
            }
            Action::Uppercase => {
                labels.insert(config.target_label.clone(), value.to_uppercase());
                true
            }
            Action::LabelMap => {
                let mapped: Vec<(String, String)> = labels
                    .iter()
                    .filter(|(name, _)| self.regex.is_match(name))
                    .map(|(name, label_value)| {
                        (
                            self.regex.replace_all(name, config.replacement.as_str()).into_owned(),
                            label_value.clone(),
                        )
                    })
                    .collect();
                for (name, label_value) in mapped {
                    labels.insert(name, label_value);
                }
                true
            }
            Action::LabelDrop => {
                labels.retain(|name, _| !self.regex.is_match(name));
                true
            }
            Action::LabelKeep => {
                labels.retain(|name, _| self.regex.is_match(name));
                true
            }
        }
    }
}

/// Runs `steps` in order. Returns `None` when a step drops the set or it ends empty
/// (Prometheus `relabel.Process`).
pub fn process(steps: &[Relabel], mut labels: Labels) -> Option<Labels> {
    for step in steps {
        if !step.apply(&mut labels) {
            return None;
        }
    }
    (!labels.is_empty()).then_some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(yaml: &str) -> Relabel {
        let config: RelabelConfig = serde_norway::from_str(yaml).unwrap();
        config.compile().unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn replace_with_groups_and_anchoring() {
        let relabel =
            step("source_labels: [__address__]\nregex: '(.*):\\d+'\ntarget_label: host\nreplacement: '${1}'\n");
        let out = process(
            std::slice::from_ref(&relabel),
            labels(&[("__address__", "redis-7.dc-2:9121")]),
        )
        .unwrap();
        assert_eq!(out.get("host").map(String::as_str), Some("redis-7.dc-2"));
        // Anchored: a partial match does not count.
        let partial = step("source_labels: [a]\nregex: 'b'\ntarget_label: x\nreplacement: y\n");
        assert_eq!(process(&[partial], labels(&[("a", "abc")])).unwrap().get("x"), None);
        // An empty replacement removes the target label.
        let remove = step("source_labels: [a]\ntarget_label: b\nreplacement: ''\n");
        assert_eq!(
            process(&[remove], labels(&[("a", "1"), ("b", "2")])),
            Some(labels(&[("a", "1")]))
        );
    }

    #[test]
    fn joined_sources_and_missing_labels() {
        let relabel = step("source_labels: [dc, host, missing]\nseparator: '/'\ntarget_label: placement\n");
        let out = process(&[relabel], labels(&[("dc", "dc-1"), ("host", "h7")])).unwrap();
        assert_eq!(out.get("placement").map(String::as_str), Some("dc-1/h7/"));
    }

    #[test]
    fn keep_drop_and_equal() {
        let keep = step("source_labels: [job]\nregex: 'redis|jvm'\naction: keep\n");
        assert!(process(std::slice::from_ref(&keep), labels(&[("job", "redis")])).is_some());
        assert!(process(&[keep], labels(&[("job", "redisx")])).is_none());
        let drop = step("source_labels: [__name__]\nregex: 'go_.*'\naction: drop\n");
        assert!(process(std::slice::from_ref(&drop), labels(&[("__name__", "go_goroutines")])).is_none());
        assert!(process(&[drop], labels(&[("__name__", "up")])).is_some());
        let keep_equal = step("source_labels: [a]\ntarget_label: b\naction: keepequal\n");
        assert!(process(std::slice::from_ref(&keep_equal), labels(&[("a", "1"), ("b", "1")])).is_some());
        assert!(process(&[keep_equal], labels(&[("a", "1"), ("b", "2")])).is_none());
    }

    #[test]
    fn hashmod_matches_prometheus() {
        // md5("127.0.0.1:9121") last 8 bytes, computed independently with
        // python3 -c "import hashlib;print(int.from_bytes(hashlib.md5(b'127.0.0.1:9121').digest()[8:],'big'))"
        let expected_hash: u64 = 4_146_818_314_536_273_908;
        assert_eq!(hash64("127.0.0.1:9121"), expected_hash);
        let relabel = step("source_labels: [__address__]\nmodulus: 8\ntarget_label: shard\naction: hashmod\n");
        let out = process(&[relabel], labels(&[("__address__", "127.0.0.1:9121")])).unwrap();
        assert_eq!(out.get("shard").cloned(), Some((expected_hash % 8).to_string()));
    }

    #[test]
    fn labelmap_labeldrop_labelkeep_and_case() {
        let map = step("regex: '__meta_kubernetes_pod_label_(.+)'\naction: labelmap\n");
        let out = process(
            &[map],
            labels(&[("__meta_kubernetes_pod_label_app", "api"), ("a", "1")]),
        )
        .unwrap();
        assert_eq!(out.get("app").map(String::as_str), Some("api"));
        assert!(
            out.contains_key("__meta_kubernetes_pod_label_app"),
            "labelmap copies, it does not move"
        );
        let drop = step("regex: '__meta_.*'\naction: labeldrop\n");
        assert_eq!(process(&[drop], out.clone()).unwrap().len(), 2);
        let keep = step("regex: 'app'\naction: labelkeep\n");
        assert_eq!(process(&[keep], out), Some(labels(&[("app", "api")])));
        let lower = step("source_labels: [dc]\ntarget_label: dc\naction: lowercase\n");
        assert_eq!(
            process(&[lower], labels(&[("dc", "DC-1")])),
            Some(labels(&[("dc", "dc-1")]))
        );
        let everything = step("regex: '.*'\naction: labeldrop\n");
        assert_eq!(
            process(&[everything], labels(&[("a", "1")])),
            None,
            "an empty set is dropped"
        );
    }

    #[test]
    fn invalid_steps_say_which_field() {
        let cases = [
            ("action: hashmod\ntarget_label: x\n", "modulus"),
            ("action: replace\n", "target_label"),
            ("regex: '('\ntarget_label: x\n", "regex"),
            ("action: labeldrop\nsource_labels: [a]\n", "source_labels"),
            ("action: lowercase\ntarget_label: '1x'\n", "target_label"),
        ];
        for (yaml, field) in cases {
            let config: RelabelConfig = serde_norway::from_str(yaml).unwrap();
            let error = config.compile().unwrap_err();
            assert!(error.starts_with(field), "{yaml}: {error}");
        }
        assert!(serde_norway::from_str::<RelabelConfig>("action: rplace\n").is_err());
        assert!(serde_norway::from_str::<RelabelConfig>("sorce_labels: [a]\n").is_err());
    }
}
