//! Past incidents from an existing Prometheus (issue 18): the raw samples of the series the
//! signal rules name, read through Prometheus's HTTP API, placed with epicenter's placement
//! rules, one batch per instance and sample time, for [`crate::replay::replay_batches`] (the
//! same detector as live and as `replay` on epicenter's own store).
//!
//! Each window of the period is one instant query of a range selector,
//! `{__name__=~"<every rule metric>"}[<window>ms]` at the window's end (Prometheus HTTP API,
//! `POST /api/v1/query`, result type `matrix`): a range selector returns the samples as
//! scraped, at their own timestamps, where `/api/v1/query_range` would resample every series
//! onto a step grid (a counter read at grid points moves its increases between rounds). A
//! sample on a window's edge, which both windows return, is kept once. Staleness markers are
//! not returned by the API and need no handling.
//!
//! A gap in a server's series says nothing certain about its target (a backfill's missing
//! cells, a series with nothing to report, a server that was down), so the replay does not
//! judge silence ([`replay_settings`]); the server's own `up` series, when it has them, say
//! which targets stopped answering: Prometheus writes `up` at every scrape, stamped with the
//! scrape's time on its own clock, which is the clock of everything it stored, and the shipped
//! `up` rule (availability) judges them. (`replay` on epicenter's store leaves its synthetic
//! `up` out and judges silence instead: there a simulated target's samples may carry another
//! clock than the scrape's, and every scrape is recorded.)

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use epicenter_collector::auth::{AuthSettings, Authorization, BasicAuth, OAuth2, ScrapeAuth};
use epicenter_config::{Problems, TlsConfig};
use epicenter_detector::engine::{InstanceInfo, Settings};
use epicenter_detector::live::Batch;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{Placement, Series};
use serde::Deserialize;

/// The detector's settings for a replay of a Prometheus server's samples: the defaults, but
/// an instance whose samples stop is not judged lost (`judge_silence: false`); the server's
/// `up` series say that instead (module doc).
pub fn replay_settings() -> Settings {
    Settings {
        judge_silence: false,
        ..Settings::default()
    }
}

/// How to reach the Prometheus server (`epicenter replay --prometheus-config FILE`): the HTTP
/// keys of a `<scrape_config>`, with the same meaning and checks (one authentication at
/// most; secrets inline or in files; files re-read when they change).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// HTTP Basic authentication.
    #[serde(default)]
    pub basic_auth: Option<BasicAuth>,
    /// An `Authorization: <type> <credentials>` header.
    #[serde(default)]
    pub authorization: Option<Authorization>,
    /// A file holding a bearer token.
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// OAuth 2.0 client credentials.
    #[serde(default)]
    pub oauth2: Option<OAuth2>,
    /// TLS towards an `https://` server.
    #[serde(default)]
    pub tls_config: Option<TlsConfig>,
}

impl HttpSettings {
    /// Parses `text` (YAML; empty is no setting). Errors name the key path, line and
    /// column, and never repeat a value (it may be a secret).
    pub fn from_yaml(text: &str) -> Result<HttpSettings, String> {
        epicenter_config::from_yaml(text).map_err(|error| error.to_string())
    }

    /// Makes every relative file path (`password_file`, `credentials_file`,
    /// `bearer_token_file`, `client_secret_file`, the `tls_config` files) relative to
    /// `directory`, the folder of the settings file, as a scrape_config's are.
    pub fn set_directory(&mut self, directory: &std::path::Path) {
        if let Some(basic) = &mut self.basic_auth {
            basic.set_directory(directory);
        }
        if let Some(authorization) = &mut self.authorization {
            authorization.set_directory(directory);
        }
        if let Some(path) = &mut self.bearer_token_file {
            epicenter_config::resolve_relative(directory, path);
        }
        if let Some(oauth2) = &mut self.oauth2 {
            oauth2.set_directory(directory);
        }
        if let Some(tls) = &mut self.tls_config {
            tls.set_directory(directory);
        }
    }
}

/// One series as Prometheus returned it: its labels (`__name__` included) and its samples
/// (ms since the epoch, value), in time order, each time once.
#[derive(Debug, Clone, PartialEq)]
pub struct RawSeries {
    /// Labels, `__name__` included.
    pub labels: BTreeMap<String, String>,
    /// (ms since the epoch, value), ascending.
    pub samples: Vec<(i64, f64)>,
}

/// How far a read has come: windows read of all, series and samples so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Windows read.
    pub windows_read: usize,
    /// Windows in the period.
    pub windows: usize,
    /// Distinct series so far.
    pub series: usize,
    /// Samples so far (after removing the edges two windows share).
    pub samples: usize,
}

/// A Prometheus server to read from.
pub struct Source {
    base: String,
    client: reqwest::Client,
    auth: Option<ScrapeAuth>,
}

impl Source {
    /// A source at `url` (`http://host:9090`, a path prefix allowed) with `settings`.
    ///
    /// # Errors
    /// The URL is not `http://` or `https://`, or a setting is wrong (the key path and why:
    /// two authentications, a TLS file that cannot be read).
    pub fn new(url: &str, settings: &HttpSettings) -> Result<Source, String> {
        let parsed = reqwest::Url::parse(url).map_err(|error| format!("--prometheus {url}: {error}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("--prometheus {url}: must be an http:// or https:// URL"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(
                "--prometheus: put credentials in --prometheus-config (basic_auth), not in the URL".to_string(),
            );
        }
        // The API's path goes after the URL's; a query (a token, say) would go before it and
        // be printed with every progress line.
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(
                "--prometheus: the URL takes no query or fragment (a token belongs in --prometheus-config: authorization or bearer_token_file)"
                    .to_string(),
            );
        }
        let mut problems = Problems::default();
        let at = |key: &str| format!("--prometheus-config {key}");
        let auth = ScrapeAuth::from_settings(
            AuthSettings {
                basic_auth: settings.basic_auth.as_ref(),
                authorization: settings.authorization.as_ref(),
                bearer_token: None,
                bearer_token_file: settings.bearer_token_file.as_deref(),
                oauth2: settings.oauth2.as_ref(),
            },
            &at,
            &mut problems,
        );
        if let Some(problem) = problems.into_errors().into_iter().next() {
            return Err(problem.to_string());
        }
        let client = epicenter_collector::client::http_client(settings.tls_config.as_ref())
            .map_err(|error| format!("--prometheus-config tls_config: {error}"))?;
        Ok(Source {
            base: url.trim_end_matches('/').to_string(),
            client,
            auth,
        })
    }

    /// The samples of every series named in `metrics` between `from_ms` and `to_ms` (ms since
    /// the epoch, both included), read `window_ms` at a time: `each` gets every window's
    /// series (each sample in one window only: a window holds `(start, end]`, the first one
    /// its start too) and the progress so far, so a long period is never held whole.
    ///
    /// # Errors
    /// The server cannot be reached, answers with an error (its `error`, the HTTP status) or
    /// with something that is not the API's JSON; a secret file cannot be read.
    pub async fn read(
        &self,
        metrics: &[String],
        (from_ms, to_ms): (i64, i64),
        window_ms: i64,
        each: &mut dyn FnMut(Vec<RawSeries>, Progress),
    ) -> Result<(), String> {
        let window_ms = window_ms.max(1000);
        // `up` included: the server's own record of each scrape, stamped with its own clock
        // (the module doc).
        let mut names: Vec<&str> = metrics
            .iter()
            .map(String::as_str)
            .filter(|name| !name.is_empty())
            .collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() || to_ms < from_ms {
            return Ok(());
        }
        let selector = format!("{{__name__=~\"{}\"}}", names.join("|"));
        let windows = ((to_ms - from_ms).max(1) + window_ms - 1) as usize / window_ms as usize;
        let mut seen: std::collections::HashSet<u64> = std::collections::HashSet::new();
        let mut samples = 0;
        for index in 0..windows {
            let start = from_ms + index as i64 * window_ms;
            let end = (start + window_ms).min(to_ms);
            // The selector reaches back from `end` to `start`, both included (Prometheus 2);
            // a sample on `start` belongs to the window before, except in the first.
            // One millisecond more: Prometheus 3 leaves the range's start out.
            let query = format!("{selector}[{}ms]", (end - start).max(1) + 1);
            let mut found = self.query(&query, end).await?;
            for series in &mut found {
                series
                    .samples
                    .retain(|(time_ms, _)| *time_ms <= end && (*time_ms > start || (index == 0 && *time_ms >= start)));
            }
            found.retain(|series| !series.samples.is_empty());
            for series in &found {
                let mut hash = std::hash::DefaultHasher::new();
                std::hash::Hash::hash(&series.labels, &mut hash);
                seen.insert(std::hash::Hasher::finish(&hash));
                samples += series.samples.len();
            }
            let progress = Progress {
                windows_read: index + 1,
                windows,
                series: seen.len(),
                samples,
            };
            each(found, progress);
            if end >= to_ms {
                break;
            }
        }
        Ok(())
    }

    /// The metric names holding samples between `from_ms` and `to_ms` (ms, `GET
    /// /api/v1/label/__name__/values` with `start` and `end`), sorted.
    ///
    /// # Errors
    /// As [`Source::read`].
    pub async fn metric_names(&self, (from_ms, to_ms): (i64, i64)) -> Result<Vec<String>, String> {
        let (start, end) = (seconds(from_ms), seconds(to_ms));
        let body = self
            .send(
                false,
                "/api/v1/label/__name__/values",
                &[("start", start.as_str()), ("end", end.as_str())],
            )
            .await?;
        let mut names: Vec<String> =
            parse_data(&body.1).map_err(|error| format!("{} (HTTP {}): {error}", body.0, body.2))?;
        names.sort();
        Ok(names)
    }

    /// The metric families the server's metadata types `counter` (`GET /api/v1/metadata`).
    /// Prometheus keeps metadata from its scrapes only: backfilled blocks have none, and then
    /// this is empty.
    ///
    /// # Errors
    /// As [`Source::read`].
    pub async fn counter_families(&self) -> Result<std::collections::HashSet<String>, String> {
        Ok(self
            .family_types()
            .await?
            .into_iter()
            .filter(|(_, types)| types.iter().any(|kind| kind == "counter"))
            .map(|(family, _)| family)
            .collect())
    }

    /// Every metric family in the server's metadata (`GET /api/v1/metadata`: family name as
    /// its targets exposed it) with the types its targets gave it (`counter`, `gauge`,
    /// `summary`, `histogram`, `unknown`, …; several when targets disagree). Empty for
    /// backfilled data, which has no metadata.
    ///
    /// # Errors
    /// As [`Source::read`].
    pub async fn family_types(&self) -> Result<BTreeMap<String, Vec<String>>, String> {
        #[derive(Deserialize)]
        struct Entry {
            #[serde(rename = "type")]
            kind: String,
        }
        let body = self.send(false, "/api/v1/metadata", &[]).await?;
        let families: BTreeMap<String, Vec<Entry>> =
            parse_data(&body.1).map_err(|error| format!("{} (HTTP {}): {error}", body.0, body.2))?;
        Ok(families
            .into_iter()
            .map(|(family, entries)| (family, entries.into_iter().map(|entry| entry.kind).collect()))
            .collect())
    }

    /// The label names of the series named `metric` with samples between `from_ms` and
    /// `to_ms` (`GET /api/v1/labels` with `match[]={__name__="<metric>"}`, Prometheus 2.24 and
    /// later), sorted; `__name__` left out.
    ///
    /// # Errors
    /// As [`Source::read`].
    pub async fn label_names(&self, metric: &str, (from_ms, to_ms): (i64, i64)) -> Result<Vec<String>, String> {
        let (start, end) = (seconds(from_ms), seconds(to_ms));
        let selector = format!("{{__name__=\"{}\"}}", metric.replace('\\', "\\\\").replace('"', "\\\""));
        let body = self
            .send(
                false,
                "/api/v1/labels",
                &[
                    ("match[]", selector.as_str()),
                    ("start", start.as_str()),
                    ("end", end.as_str()),
                ],
            )
            .await?;
        let mut names: Vec<String> =
            parse_data(&body.1).map_err(|error| format!("{} (HTTP {}): {error}", body.0, body.2))?;
        names.retain(|name| name != "__name__");
        names.sort();
        Ok(names)
    }

    /// The warnings [`epicenter_detector::rules::data_warnings`] gives for `rules` against what
    /// the server holds between `from_ms` and `to_ms` ([`Source::holdings`]): rules whose kind
    /// does not fit the family the server has.
    ///
    /// # Errors
    /// As [`Source::holdings`].
    pub async fn rule_warnings(
        &self,
        rules: &[epicenter_detector::rules::Rule],
        span: (i64, i64),
    ) -> Result<Vec<epicenter_detector::rules::RuleWarning>, String> {
        let holdings = self.holdings(rules, span).await?;
        Ok(epicenter_detector::rules::data_warnings(rules, &holdings))
    }

    /// What the server holds, between `from_ms` and `to_ms`, of the families `rules` read, for
    /// [`epicenter_detector::rules::data_warnings`]: the metric names with samples, the label
    /// names of each name the rules read ([`epicenter_detector::rules::names_to_check`]) that
    /// it has (one request each), and the metadata's types (one type per family: `gauge` when
    /// any target says so, else the first; none when the metadata cannot be read).
    ///
    /// # Errors
    /// The names or the labels cannot be read (as [`Source::read`]).
    pub async fn holdings(
        &self,
        rules: &[epicenter_detector::rules::Rule],
        period: (i64, i64),
    ) -> Result<epicenter_detector::rules::Holdings, String> {
        let names: std::collections::BTreeSet<String> = self.metric_names(period).await?.into_iter().collect();
        let mut labels = BTreeMap::new();
        for name in epicenter_detector::rules::names_to_check(rules) {
            if names.contains(&name) {
                let found = self.label_names(&name, period).await?;
                labels.insert(name, found.into_iter().collect());
            }
        }
        let types = self
            .family_types()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(family, types)| {
                let kind = types
                    .iter()
                    .find(|kind| *kind == "gauge")
                    .or_else(|| types.first())?
                    .clone();
                Some((family, kind))
            })
            .collect();
        Ok(epicenter_detector::rules::Holdings { names, labels, types })
    }

    /// Sends `fields` to `path` of the API, as a POSTed form or (`post` false: the endpoints
    /// that take only GET) as the URL's query: (the URL, the body, the HTTP status).
    async fn send(
        &self,
        post: bool,
        path: &str,
        fields: &[(&str, &str)],
    ) -> Result<(String, Vec<u8>, reqwest::StatusCode), String> {
        let url = format!("{}{path}", self.base);
        let mut request = if post {
            self.client.post(&url).form(fields)
        } else {
            self.client.get(&url).query(fields)
        };
        if let Some(auth) = &self.auth {
            request = auth.apply(&self.client, request).await?;
        }
        let response = request
            .send()
            .await
            .map_err(|error| format!("{url}: {}", epicenter_collector::client::describe_request_error(&error)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|error| format!("{url}: reading the answer: {error}"))?;
        Ok((url, body.to_vec(), status))
    }

    /// One instant query at `time_ms`, whose result must be a matrix.
    async fn query(&self, query: &str, time_ms: i64) -> Result<Vec<RawSeries>, String> {
        // POSTed as a form (the API takes both): the selector names every rule metric, several
        // KB that a proxy's URL limit could refuse.
        let time = seconds(time_ms);
        let (url, body, status) = self
            .send(true, "/api/v1/query", &[("query", query), ("time", time.as_str())])
            .await?;
        parse_matrix(&body).map_err(|error| format!("{url} (HTTP {status}): {error}"))
    }
}

/// `time_ms` as the API's seconds, to the millisecond.
fn seconds(time_ms: i64) -> String {
    format!("{}.{:03}", time_ms.div_euclid(1000), time_ms.rem_euclid(1000))
}

/// The `data` of a successful API answer (`{"status": "success", "data": …}`).
fn parse_data<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    #[derive(Deserialize)]
    struct Answer<T> {
        status: String,
        data: Option<T>,
        #[serde(default, rename = "errorType")]
        error_type: Option<String>,
        #[serde(default)]
        error: Option<String>,
    }
    let answer: Answer<T> = serde_json::from_slice(body).map_err(|error| {
        let start = String::from_utf8_lossy(&body[..body.len().min(200)]).to_string();
        format!("not the Prometheus API's JSON ({error}): {start}")
    })?;
    if answer.status != "success" {
        return Err(format!(
            "{}: {}",
            answer.error_type.unwrap_or_else(|| answer.status.clone()),
            answer.error.unwrap_or_default()
        ));
    }
    answer.data.ok_or_else(|| "a success without `data`".to_string())
}

/// The series of a `/api/v1/query` answer whose result is a matrix (Prometheus HTTP API,
/// "Range vectors": `{"status": "success", "data": {"resultType": "matrix", "result":
/// [{"metric": {…}, "values": [[<seconds>, "<value>"], …]}]}}`; values are strings, `NaN` and
/// `±Inf` included).
///
/// # Errors
/// `status: error` (the server's `errorType` and `error`), another result type, or JSON that
/// is not this shape.
pub fn parse_matrix(body: &[u8]) -> Result<Vec<RawSeries>, String> {
    #[derive(Deserialize)]
    struct Answer {
        status: String,
        #[serde(default)]
        data: Option<Data>,
        #[serde(default, rename = "errorType")]
        error_type: Option<String>,
        #[serde(default)]
        error: Option<String>,
    }
    #[derive(Deserialize)]
    struct Data {
        #[serde(rename = "resultType")]
        result_type: String,
        result: Vec<Item>,
    }
    #[derive(Deserialize)]
    struct Item {
        metric: BTreeMap<String, String>,
        #[serde(default)]
        values: Vec<(f64, String)>,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|error| {
        let start = String::from_utf8_lossy(&body[..body.len().min(200)]).to_string();
        format!("not the Prometheus API's JSON ({error}): {start}")
    })?;
    if answer.status != "success" {
        return Err(format!(
            "{}: {}",
            answer.error_type.unwrap_or_else(|| answer.status.clone()),
            answer.error.unwrap_or_default()
        ));
    }
    let data = answer.data.ok_or("a success without `data`")?;
    if data.result_type != "matrix" {
        return Err(format!("expected a matrix, got a {}", data.result_type));
    }
    data.result
        .into_iter()
        .map(|item| {
            let samples = item
                .values
                .into_iter()
                .map(|(seconds, value)| {
                    let value = value
                        .parse::<f64>()
                        .map_err(|_| format!("value {value:?} of {:?} is not a number", item.metric))?;
                    Ok(((seconds * 1000.0).round() as i64, value))
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(RawSeries {
                labels: item.metric,
                samples,
            })
        })
        .collect()
}

/// `series` as the detector takes them: one [`Batch`] per instance, source (the scraped
/// `instance` label: a kubelet's series about a pod are the kubelet's scrape, not the pod's)
/// and sample time, in time order, each sample's instance, datacenter, host and service from
/// its labels by `placement` (as the collector places what it scrapes), its metric the
/// `__name__`. A series without a name or an instance is left out.
pub fn batches(series: Vec<RawSeries>, placement: &PlacementConfig) -> Vec<Batch> {
    let mut scrapes: BTreeMap<(i64, String, String), Batch> = BTreeMap::new();
    for RawSeries { mut labels, samples } in series {
        let Some(metric) = labels.remove("__name__") else {
            continue;
        };
        let placed = Placement::of(&labels, placement);
        if placed.instance.is_empty() {
            continue;
        }
        let source = labels
            .get("instance")
            .cloned()
            .unwrap_or_else(|| placed.instance.clone());
        let shared = Arc::new(Series::new(metric, labels, placement));
        for (time_ms, value) in samples {
            scrapes
                .entry((time_ms, placed.instance.clone(), source.clone()))
                .or_insert_with(|| Batch {
                    time_ms,
                    instance: InstanceInfo {
                        name: placed.instance.clone(),
                        dc: placed.dc.clone(),
                        host: placed.host.clone(),
                        service: placed.service.clone(),
                    },
                    samples: Vec::new(),
                    late: false,
                    reported: false,
                })
                .samples
                .push((Arc::clone(&shared), value));
        }
    }
    scrapes.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_gives_its_series_and_an_error_names_the_server_s_reason() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"redis_up","pod":"redis-2-1","dc":"dc-2"},"values":[[1780000000.25,"1"],[1780000010.25,"0"]]},
            {"metric":{"__name__":"q","pod":"a"},"values":[[1780000000,"NaN"],[1780000001,"+Inf"]]}]}}"#;
        let series = parse_matrix(body).unwrap();
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].samples, [(1_780_000_000_250, 1.0), (1_780_000_010_250, 0.0)]);
        assert!(series[1].samples[0].1.is_nan());
        assert_eq!(series[1].samples[1].1, f64::INFINITY);
        let error =
            parse_matrix(br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#).unwrap_err();
        assert_eq!(error, "bad_data: parse error at char 3");
        let vector = parse_matrix(br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#).unwrap_err();
        assert_eq!(vector, "expected a matrix, got a vector");
        assert!(parse_matrix(b"<html>502</html>")
            .unwrap_err()
            .starts_with("not the Prometheus API's JSON"));
    }

    #[test]
    fn a_url_with_credentials_a_query_or_another_scheme_is_refused() {
        let settings = HttpSettings::default();
        let refused = |url: &str| Source::new(url, &settings).err().unwrap_or_default();
        assert!(Source::new("http://127.0.0.1:9090/prom", &settings).is_ok());
        assert!(refused("ftp://127.0.0.1:9090").contains("http:// or https://"));
        let query = refused("http://127.0.0.1:9090/?token=s3cret");
        assert!(
            query.contains("no query or fragment") && !query.contains("s3cret"),
            "{query}"
        );
        let user = refused("http://admin:s3cret@127.0.0.1:9090");
        assert!(user.contains("basic_auth") && !user.contains("s3cret"), "{user}");
        let two = HttpSettings::from_yaml("basic_auth: {username: a, password: b}\nbearer_token_file: /t\n").unwrap();
        assert!(Source::new("http://127.0.0.1:9090", &two)
            .err()
            .unwrap_or_default()
            .contains("basic_auth"));
    }

    #[test]
    fn samples_are_placed_and_grouped_by_instance_and_time() {
        let placement = PlacementConfig {
            instance_label: "pod".into(),
            ..PlacementConfig::default()
        };
        let labels = |name: &str, pod: &str| -> BTreeMap<String, String> {
            [
                ("__name__", name),
                ("pod", pod),
                ("dc", "dc-2"),
                ("host", "dc-2-host-3"),
                ("service", "redis"),
                ("instance", "127.0.0.1:9121"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };
        let series = vec![
            RawSeries {
                labels: labels("redis_up", "redis-2-1"),
                samples: vec![(10_000, 1.0), (20_000, 0.0)],
            },
            RawSeries {
                labels: labels("redis_connected_clients", "redis-2-1"),
                samples: vec![(10_000, 64.0)],
            },
            RawSeries {
                labels: labels("redis_up", "redis-2-2"),
                samples: vec![(10_000, 1.0)],
            },
        ];
        let batches = batches(series, &placement);
        let keys: Vec<(i64, &str, usize)> = batches
            .iter()
            .map(|batch| (batch.time_ms, batch.instance.name.as_str(), batch.samples.len()))
            .collect();
        assert_eq!(
            keys,
            [
                (10_000, "redis-2-1", 2),
                (10_000, "redis-2-2", 1),
                (20_000, "redis-2-1", 1)
            ]
        );
        assert_eq!(batches[0].instance.host, "dc-2-host-3");
        assert_eq!(batches[0].instance.service, "redis");
        // The name is the metric, not a label.
        assert!(batches[0]
            .samples
            .iter()
            .all(|(series, _)| !series.labels.contains_key("__name__")));
    }
}
