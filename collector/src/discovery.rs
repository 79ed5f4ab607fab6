//! File-based service discovery (Prometheus `<file_sd_config>`), and HTTP SD
//! (`<http_sd_config>`, [`fetch_http_targets`]).
//!
//! A target file is JSON or YAML (by extension) holding a list of groups:
//! `[{"targets": ["host:port", …], "labels": {"name": "value", …}}]`. Each group's targets
//! get the group's labels plus `__meta_filepath` (the file they came from), then go through
//! the job's `relabel_configs` like static targets. Patterns may use `*` and `?` in the file
//! name (`targets/redis-*.json`). [`FileDiscovery::poll`] re-reads the files whose
//! modification time or size changed, and is what the runner calls every few seconds and at
//! each `refresh_interval`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::auth::ScrapeAuth;
use crate::client::describe_request_error;
use crate::config::StaticConfig;

/// One group of a target file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGroup {
    targets: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// Largest target list [`fetch_http_targets`] reads, in bytes: a file's limit,
/// [`epicenter_config::MAX_DOCUMENT_BYTES`].
pub const MAX_HTTP_SD_BYTES: usize = epicenter_config::MAX_DOCUMENT_BYTES;

/// Fetches one HTTP SD target list (Prometheus's HTTP SD protocol): `GET url` with
/// `Accept: application/json` and `X-Prometheus-Refresh-Interval-Seconds`, within
/// `timeout`; the answer must be `200` with `Content-Type: application/json` and a JSON list
/// of `{"targets": [...], "labels": {...}}` (an empty list means no targets). Each group gets
/// `__meta_url` (the URL, user information removed).
///
/// # Errors
/// Sentences naming the URL (without user information) and what went wrong: the request,
/// the status, the content type, a body over [`MAX_HTTP_SD_BYTES`], or the JSON (with its
/// line and column).
pub async fn fetch_http_targets(
    client: &reqwest::Client,
    url: &str,
    auth: Option<&ScrapeAuth>,
    refresh_interval: Duration,
    timeout: Duration,
) -> Result<Vec<StaticConfig>, String> {
    let shown = epicenter_config::redacted_url(url);
    let fetch = async {
        let mut request = client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .header(
                "X-Prometheus-Refresh-Interval-Seconds",
                refresh_interval.as_secs().to_string(),
            );
        if let Some(auth) = auth {
            request = auth.apply(client, request).await?;
        }
        let mut response = request
            .send()
            .await
            .map_err(|error| format!("request failed: {}", describe_request_error(&error)))?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(format!("HTTP status {}", response.status()));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !content_type
            .split(';')
            .next()
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
        {
            return Err(format!(
                "Content-Type '{content_type}': the HTTP SD protocol answers application/json"
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| format!("request failed: {}", describe_request_error(&error)))?
        {
            if body.len() + chunk.len() > MAX_HTTP_SD_BYTES {
                return Err(format!("the target list is larger than {MAX_HTTP_SD_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        let groups: Vec<FileGroup> = serde_json::from_slice(&body).map_err(|error| format!("{error}"))?;
        Ok(groups)
    };
    let groups = match tokio::time::timeout(timeout, fetch).await {
        Ok(Ok(groups)) => groups,
        Ok(Err(reason)) => return Err(format!("{shown}: {reason}")),
        Err(_) => return Err(format!("{shown}: no answer within {timeout:?}")),
    };
    Ok(groups
        .into_iter()
        .map(|group| {
            let mut labels = group.labels;
            labels.insert("__meta_url".to_string(), shown.clone());
            StaticConfig {
                targets: group.targets,
                labels,
            }
        })
        .collect())
}

/// Reads one target file. Errors name the file and, for YAML/JSON problems, where (YAML:
/// `line:column: key path: reason`). A file over [`epicenter_config::MAX_DOCUMENT_BYTES`] is
/// refused unread; YAML nested deeper than [`epicenter_config::MAX_NESTING`] before it is
/// parsed (JSON: serde_json's own limit of 128).
pub fn read_target_file(path: &Path) -> Result<Vec<StaticConfig>, String> {
    let size = std::fs::metadata(path)
        .map_err(|error| format!("{}: {error}", path.display()))?
        .len();
    if size > epicenter_config::MAX_DOCUMENT_BYTES as u64 {
        return Err(format!(
            "{}: {size} bytes is larger than the {} bytes a target file may have",
            path.display(),
            epicenter_config::MAX_DOCUMENT_BYTES
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let groups: Vec<FileGroup> = if path.extension().is_some_and(|extension| extension == "json") {
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?
    } else {
        epicenter_config::from_yaml(&text).map_err(|error| format!("{}:{error}", path.display()))?
    };
    Ok(groups
        .into_iter()
        .map(|group| {
            let mut labels = group.labels;
            labels.insert("__meta_filepath".to_string(), path.display().to_string());
            StaticConfig {
                targets: group.targets,
                labels,
            }
        })
        .collect())
}

/// Files matching `pattern` (wildcards `*` and `?` in the last path component), sorted.
pub fn expand_pattern(pattern: &str) -> Vec<PathBuf> {
    let path = Path::new(pattern);
    let Some(file_pattern) = path.file_name().and_then(|name| name.to_str()) else {
        return Vec::new();
    };
    if !file_pattern.contains(['*', '?']) {
        return if path.is_file() {
            vec![path.to_path_buf()]
        } else {
            Vec::new()
        };
    }
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&directory) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| wildcard_match(file_pattern, name))
        })
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// `*` matches any run of characters, `?` one character.
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    let (mut star, mut star_n) = (None, 0);
    while n < name.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some(p);
            star_n = n;
            p += 1;
        } else if let Some(star_position) = star {
            p = star_position + 1;
            star_n += 1;
            n = star_n;
        } else {
            return false;
        }
    }
    while p < pattern.len() && pattern[p] == '*' {
        p += 1;
    }
    p == pattern.len()
}

/// The files of one job's `file_sd_configs`, with what was last read from each.
#[derive(Debug, Default)]
pub struct FileDiscovery {
    patterns: Vec<String>,
    files: BTreeMap<PathBuf, (Option<SystemTime>, u64, Vec<StaticConfig>)>,
}

impl FileDiscovery {
    /// Discovery over `patterns` (paths or globs).
    pub fn new(patterns: Vec<String>) -> FileDiscovery {
        FileDiscovery {
            patterns,
            files: BTreeMap::new(),
        }
    }

    /// Re-reads files that appeared, changed (modification time or size) or vanished.
    /// Returns the current groups of all files when anything changed, `None` otherwise, plus
    /// the errors met (a file that fails to read keeps its previous groups, and is not read
    /// again until it changes). Blocking file I/O and parsing: call it off the async runtime
    /// (`spawn_blocking`), as the job runner does.
    pub fn poll(&mut self) -> (Option<Vec<StaticConfig>>, Vec<String>) {
        let mut errors = Vec::new();
        let mut changed = false;
        let mut seen = Vec::new();
        for pattern in &self.patterns {
            for path in expand_pattern(pattern) {
                let metadata = std::fs::metadata(&path).ok();
                let modified = metadata.as_ref().and_then(|metadata| metadata.modified().ok());
                let size = metadata.as_ref().map_or(0, std::fs::Metadata::len);
                seen.push(path.clone());
                let unchanged = self
                    .files
                    .get(&path)
                    .is_some_and(|(last_modified, last_size, _)| *last_modified == modified && *last_size == size);
                if unchanged {
                    continue;
                }
                match read_target_file(&path) {
                    Ok(groups) => {
                        self.files.insert(path, (modified, size, groups));
                        changed = true;
                    }
                    Err(error) => {
                        // Keep its previous groups, and read it again only once it changes:
                        // a bad file costs one read and one warning per change, not per poll.
                        let groups = self
                            .files
                            .remove(&path)
                            .map(|(_, _, groups)| groups)
                            .unwrap_or_default();
                        self.files.insert(path, (modified, size, groups));
                        errors.push(error);
                    }
                }
            }
        }
        let before = self.files.len();
        self.files.retain(|path, _| seen.contains(path));
        changed |= self.files.len() != before;
        let groups = changed.then(|| self.files.values().flat_map(|(_, _, groups)| groups.clone()).collect());
        (groups, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard_match("redis-*.json", "redis-dc1.json"));
        assert!(wildcard_match("*.yml", "a.yml"));
        assert!(wildcard_match("node-?.json", "node-7.json"));
        assert!(!wildcard_match("redis-*.json", "redis-dc1.yml"));
        assert!(!wildcard_match("node-?.json", "node-17.json"));
    }

    #[test]
    fn files_are_read_and_changes_picked_up() {
        let dir = std::env::temp_dir().join(format!("epicenter-file-sd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("redis-a.json");
        std::fs::write(&json, r#"[{"targets": ["10.0.0.1:9121"], "labels": {"dc": "dc-1"}}]"#).unwrap();
        let yaml = dir.join("redis-b.yml");
        std::fs::write(
            &yaml,
            "- targets: ['10.0.0.2:9121', '10.0.0.3:9121']\n  labels: {dc: dc-2}\n",
        )
        .unwrap();
        let mut discovery = FileDiscovery::new(vec![
            format!("{}/redis-*.json", dir.display()),
            yaml.display().to_string(),
        ]);
        let (groups, errors) = discovery.poll();
        assert!(errors.is_empty(), "{errors:?}");
        let groups = groups.unwrap();
        let targets: usize = groups.iter().map(|group| group.targets.len()).sum();
        assert_eq!(targets, 3);
        assert_eq!(
            groups[0].labels.get("__meta_filepath").map(String::as_str),
            Some(json.to_str().unwrap())
        );
        // Nothing changed: nothing to do.
        assert_eq!(discovery.poll().0, None);
        // A changed file (different size) is read again; a bad one keeps its last groups.
        std::fs::write(&json, r#"[{"targets": ["10.0.0.1:9121", "10.0.0.9:9121"]}]"#).unwrap();
        let groups = discovery.poll().0.unwrap();
        assert_eq!(groups.iter().map(|group| group.targets.len()).sum::<usize>(), 4);
        std::fs::write(&yaml, "- targets: [unterminated\n").unwrap();
        let (groups, errors) = discovery.poll();
        assert_eq!(groups, None);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("redis-b.yml"), "{errors:?}");
        // The bad file is not read again (nor warned about) until it changes.
        assert_eq!(discovery.poll(), (None, Vec::new()));
        // Nesting that would take the YAML library minutes is refused at once, with where.
        let started = std::time::Instant::now();
        std::fs::write(&yaml, format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000))).unwrap();
        let (groups, errors) = discovery.poll();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(groups, None);
        assert!(
            errors[0].contains("redis-b.yml:1:4097: nested deeper than 4096 levels"),
            "{errors:?}"
        );
        // A removed file's targets go away.
        std::fs::remove_file(&json).unwrap();
        let groups = discovery.poll().0.unwrap();
        assert_eq!(groups.iter().map(|group| group.targets.len()).sum::<usize>(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A file named by `scrape_config_files` (Prometheus 2.43 and later): a `scrape_configs`
/// list and nothing else.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrapeConfigsFile {
    /// The file's jobs, added after those of the main file.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub scrape_configs: Vec<crate::config::ScrapeConfig>,
}

/// Largest file `scrape_config_files` reads (a file of a thousand jobs is far smaller).
const MAX_SCRAPE_CONFIG_FILE_BYTES: u64 = 16 << 20;

/// Reads the jobs of every file `patterns` match (`scrape_config_files`: paths or globs with
/// `*`/`?` in the file name, relative to `base`, the main file's folder, as Prometheus
/// resolves them), in pattern order and sorted within a pattern. A pattern matching no file
/// adds nothing, as in Prometheus. Errors: per file (its path as given to the reader), every
/// problem found — unreadable, too large, not YAML, an unknown key — with line and column.
pub fn read_scrape_config_files(
    patterns: &[String],
    base: &Path,
) -> Result<Vec<crate::config::ScrapeConfig>, Vec<(String, Vec<epicenter_config::ConfigError>)>> {
    let (mut jobs, mut failed) = (Vec::new(), Vec::new());
    for pattern in patterns {
        let joined = base.join(pattern);
        for path in expand_pattern(&joined.to_string_lossy()) {
            let source = path.display().to_string();
            let problem = |message: String| {
                vec![epicenter_config::ConfigError {
                    path: String::new(),
                    location: None,
                    message,
                }]
            };
            let text = match std::fs::metadata(&path) {
                Ok(metadata) if metadata.len() > MAX_SCRAPE_CONFIG_FILE_BYTES => {
                    failed.push((
                        source,
                        problem("larger than 16 MiB; not a scrape config file".to_string()),
                    ));
                    continue;
                }
                _ => match std::fs::read_to_string(&path) {
                    Ok(text) => text,
                    Err(error) => {
                        failed.push((source, problem(format!("cannot read: {error}"))));
                        continue;
                    }
                },
            };
            match epicenter_config::from_yaml_all::<ScrapeConfigsFile>(&text) {
                Ok(file) => {
                    // Paths in the file are relative to its own folder, as in Prometheus.
                    let folder = path.parent().unwrap_or(Path::new("."));
                    jobs.extend(file.scrape_configs.into_iter().map(|mut job| {
                        job.set_directory(folder);
                        job
                    }));
                }
                Err(errors) => failed.push((source, errors)),
            }
        }
    }
    if failed.is_empty() {
        Ok(jobs)
    } else {
        Err(failed)
    }
}
