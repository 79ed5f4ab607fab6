//! The ClickHouse HTTP interface served over the embedded engine.
//!
//! Enough of the interface for the `clickhouse` crate and for people with curl
//! (`../shared/CLICKHOUSE_HTTP.md`, section 5): `POST /` (or `GET /?query=`) where the
//! statement is the `query` URL parameter followed by the body; `INSERT … FORMAT F` takes the
//! body as data, LZ4-compressed in ClickHouse's native blocks when `decompress=1`; results use
//! the statement's own FORMAT, else `default_format`, else TabSeparated; a failure is HTTP 500
//! with the message as the body and `X-ClickHouse-Exception-Code`. It lets tests run the
//! ClickHouse server sink against the real engine, and lets other processes (Grafana's
//! ClickHouse data source, `curl`) read the embedded store while `epicenter run` holds it.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;

use epicenter_config::Secret;

use crate::embedded::EmbeddedStore;

/// Largest request body accepted: one insert batch (the writer's `max_bytes` is 256 MiB by
/// default; compressed it is smaller).
pub const MAX_BODY_BYTES: usize = 1 << 30;

/// Questions the live endpoint answers at once; more wait their turn. Each holds a
/// connection of its own and may use [`crate::embedded::QUERY_LIMITS`]' memory.
pub const LIVE_QUERIES: usize = 4;

/// Largest request body of the live endpoint: a query, not data (inserts are refused).
pub const LIVE_MAX_BODY_BYTES: usize = 16 << 20;

/// Longest a question waits for one of [`LIVE_QUERIES`] before it is refused with
/// `Code: 202 … (TOO_MANY_SIMULTANEOUS_QUERIES)`: a reader is never kept waiting behind
/// slow questions past this, on top of its own query's limits.
pub const LIVE_SLOT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Which `Host` headers the live endpoint answers (against DNS rebinding: a web page in an
/// on-call engineer's browser whose name resolves to 127.0.0.1 sends its own name).
#[derive(Debug, Clone, PartialEq)]
pub enum HostCheck {
    /// Only these `host:port` values, lowercase (the listen address, and `localhost`,
    /// `127.0.0.1`, `[::1]` with its port; without the port as well when it is 80).
    Only(Vec<String>),
    /// Any host: the endpoint listens on every interface (`0.0.0.0`, `[::]`), where
    /// clients name it as they reach it and a password is required
    /// (`storage.http.users`).
    Any,
}

impl HostCheck {
    /// The hosts that name `address`, the address the endpoint is bound to.
    pub fn for_address(address: std::net::SocketAddr) -> HostCheck {
        if address.ip().is_unspecified() {
            return HostCheck::Any;
        }
        let port = address.port();
        let mut hosts = vec![
            address.to_string().to_ascii_lowercase(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        if port == 80 {
            let bare: Vec<String> = hosts
                .iter()
                .filter_map(|host| host.rsplit_once(':').map(|(name, _)| name.to_string()))
                .collect();
            hosts.extend(bare);
        }
        hosts.sort();
        hosts.dedup();
        HostCheck::Only(hosts)
    }

    /// Whether a request with this `Host` header (None: none sent) is answered.
    fn allows(&self, host: Option<&str>) -> bool {
        match self {
            HostCheck::Any => true,
            HostCheck::Only(hosts) => {
                host.is_some_and(|host| hosts.iter().any(|allowed| allowed.eq_ignore_ascii_case(host.trim())))
            }
        }
    }
}

/// Where a request's statement runs.
enum Engine {
    /// One shared connection (the test interface, which also takes inserts).
    Shared(Arc<EmbeddedStore>),
    /// A read-only connection of its own per request
    /// ([`EmbeddedStore::open_read_only`]): no request sees another's session (query
    /// parameters, `USE`, output left by a failed query), and a long question holds one
    /// slot of [`LIVE_QUERIES`], not the whole endpoint.
    PerRequest {
        data_path: std::path::PathBuf,
        database: String,
        slots: tokio::sync::Semaphore,
    },
}

/// Who may ask what of one served store.
struct Access {
    engine: Engine,
    /// Users and passwords (`None`: no password); `None` for the test interface, which
    /// asks no one.
    users: Option<Vec<(String, Option<Secret>)>>,
    /// Which `Host` headers are answered.
    hosts: HostCheck,
}

/// Router answering ClickHouse HTTP requests on `/` from `store`, without authentication
/// and with inserts: what the server-sink tests and the fault tests write through. Never
/// exposed by `epicenter run` (see [`live_router`]).
pub fn router(store: Arc<EmbeddedStore>) -> Router {
    Router::new()
        .route("/", any(handle))
        .route("/ping", any(|| async { "Ok.\n" }))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::new(Access {
            engine: Engine::Shared(store),
            users: None,
            hosts: HostCheck::Any,
        }))
}

/// Router of the live endpoint (`crate::endpoint`) over the embedded store at `data_path`:
/// every request but `/ping` must name one of `users` with its password
/// (`X-ClickHouse-User`/`X-ClickHouse-Key`, HTTP basic auth, or the `user`/`password`
/// parameters, as ClickHouse takes them), checked before the body is read, else HTTP 401
/// with code 516 (`AUTHENTICATION_FAILED`). Each request runs on a read-only connection of
/// its own ([`EmbeddedStore::open_read_only`]: the engine's `readonly = 1` refuses writes,
/// DDL, settings and table functions such as `file`, `url`, `remote`), after
/// [`crate::guard::read_only_refusal`] (inserts, `INTO OUTFILE`, `KILL`, `SYSTEM`,
/// multi-statements: code 164 or 62); bodies up to [`LIVE_MAX_BODY_BYTES`]. A request whose
/// `Host` header `hosts` does not allow gets HTTP 403 before anything else (`/ping`
/// included); URL parameters that would lift a limit or `readonly` are refused
/// ([`url_setting_refusal`]); a question waits at most [`LIVE_SLOT_WAIT`] for its turn.
pub fn live_router(
    data_path: std::path::PathBuf,
    database: String,
    users: Vec<(String, Option<Secret>)>,
    hosts: HostCheck,
) -> Router {
    let access = Arc::new(Access {
        engine: Engine::PerRequest {
            data_path,
            database,
            slots: tokio::sync::Semaphore::new(LIVE_QUERIES),
        },
        users: Some(users),
        hosts,
    });
    Router::new()
        .route("/", any(handle))
        .layer(axum::middleware::from_fn_with_state(access.clone(), authenticate))
        .route("/ping", any(|| async { "Ok.\n" }))
        .layer(axum::middleware::from_fn_with_state(access.clone(), check_host))
        .layer(axum::extract::DefaultBodyLimit::max(LIVE_MAX_BODY_BYTES))
        .with_state(access)
}

/// Refuses a request whose `Host` header is not one [`Access::hosts`] allows, with HTTP 403
/// and code 516 (the header's value is not echoed).
async fn check_host(
    State(access): State<Arc<Access>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let host = request
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|authority| authority.to_string()));
    if access.hosts.allows(host.as_deref()) {
        return next.run(request).await;
    }
    tracing::info!("live SQL endpoint: a request for another host was refused (DNS rebinding?)");
    let mut response = failure(
        "Code: 516. DB::Exception: epicenter's live endpoint answers requests addressed to its listen address, localhost or 127.0.0.1 only (the Host header names another host). (AUTHENTICATION_FAILED)",
    );
    *response.status_mut() = StatusCode::FORBIDDEN;
    response
}

/// Why the URL parameter `name` = `value` may not come with a live question, or None: a
/// setting that would lift one of [`crate::embedded::QUERY_LIMITS`] (`max_execution_time`,
/// `max_memory_usage`, `max_result_bytes` of 0 or above the endpoint's, `max_threads` above
/// 2), `readonly` other than 1 or 2, an `allow_*` other than 0, an `*_overflow_mode` other
/// than `throw`, or a `profile`. Other settings are not applied (the endpoint passes none to
/// the engine) and are accepted, as clients send their own defaults.
pub fn url_setting_refusal(name: &str, value: &str) -> Option<String> {
    let (seconds, memory, result) = crate::embedded::QUERY_LIMIT_FIGURES;
    let lowered = name.to_ascii_lowercase();
    let limit = match lowered.as_str() {
        "max_execution_time" => Some(seconds),
        "max_memory_usage" => Some(memory),
        "max_result_bytes" => Some(result),
        "max_threads" => Some(2),
        _ => None,
    };
    let lifts = match (lowered.as_str(), limit) {
        (_, Some(limit)) => value
            .trim()
            .parse::<u64>()
            .map_or(true, |asked| asked == 0 || asked > limit),
        ("readonly", None) => !matches!(value.trim(), "1" | "2"),
        ("profile", None) => true,
        (other, None) if other.starts_with("allow_") => value.trim() != "0",
        (other, None) if other.ends_with("_overflow_mode") => !value.trim().eq_ignore_ascii_case("throw"),
        _ => false,
    };
    lifts.then(|| {
        format!(
            "Code: 164. DB::Exception: epicenter's read-only endpoint refuses the setting {name} in the URL: its limits and readonly are fixed (docs/investigation.md, The live endpoint). (READONLY)"
        )
    })
}

/// Refuses a request whose credentials match no user, before its body is read (so a
/// client without a password cannot make the endpoint buffer a large body). Failed logins
/// are logged with the user name (never the password) at info level.
async fn authenticate(
    State(access): State<Arc<Access>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(users) = &access.users else {
        return next.run(request).await;
    };
    let params = Query::<HashMap<String, String>>::try_from_uri(request.uri())
        .map(|Query(params)| params)
        .unwrap_or_default();
    let (user, password) = credentials(request.headers(), &params);
    if authenticated(users, &user, &password) {
        return next.run(request).await;
    }
    tracing::info!(user = %user, "live SQL endpoint: authentication failed");
    let mut response = failure(&format!(
        "Code: 516. DB::Exception: {user}: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)"
    ));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
}

/// The user and password a request names, ClickHouse's three ways (headers first).
fn credentials(headers: &HeaderMap, params: &HashMap<String, String>) -> (String, String) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
    };
    if let Some(user) = header("X-ClickHouse-User") {
        return (user, header("X-ClickHouse-Key").unwrap_or_default());
    }
    let basic = header("Authorization")
        .and_then(|value| {
            let (scheme, encoded) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then(|| encoded.trim().to_string())
        })
        .and_then(|encoded| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(encoded).ok()
        })
        .and_then(|decoded| String::from_utf8(decoded).ok());
    if let Some((user, password)) = basic.as_deref().and_then(|text| text.split_once(':')) {
        return (user.to_string(), password.to_string());
    }
    (
        params.get("user").cloned().unwrap_or_else(|| "default".to_string()),
        params.get("password").cloned().unwrap_or_default(),
    )
}

/// Whether `user` with `password` is one of `users` (a user without a password takes only
/// the empty one). Compares every entry's password in constant time.
fn authenticated(users: &[(String, Option<Secret>)], user: &str, password: &str) -> bool {
    users.iter().any(|(name, expected)| {
        name == user
            && match expected {
                Some(secret) => secret.matches(password),
                None => password.is_empty(),
            }
    })
}

/// The statements that bind the request's `param_<name>` values as ClickHouse query
/// parameters on the connection (`SET param_<name> = '<value>'`, the value a quoted
/// string literal, so it is data to the engine, never query text), or an error for a name
/// that is not an identifier. The engine parses each value by the type the query gives it
/// (`{name:UInt32}`).
fn parameter_statements(params: &HashMap<String, String>) -> Result<Vec<String>, String> {
    let mut statements = Vec::new();
    for (key, value) in params {
        let Some(name) = key.strip_prefix("param_") else {
            continue;
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!(
                "Code: 456. bad query parameter name '{name}': letters, digits and '_' only (BAD_QUERY_PARAMETER)"
            ));
        }
        statements.push(format!("SET param_{name} = {}", crate::schema::quote(value)));
    }
    Ok(statements)
}

fn failure(message: &str) -> Response {
    let code = message
        .split("Code: ")
        .nth(1)
        .and_then(|rest| rest.split(|character: char| !character.is_ascii_digit()).next())
        .filter(|digits| !digits.is_empty())
        .unwrap_or("1000")
        .to_string();
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&code) {
        headers.insert("X-ClickHouse-Exception-Code", value);
    }
    (StatusCode::INTERNAL_SERVER_ERROR, headers, format!("{message}\n")).into_response()
}

/// Decodes ClickHouse's compressed native blocks: 16-byte checksum, method byte (0x82 LZ4,
/// 0x02 none), compressed size (u32 LE, header included), uncompressed size (u32 LE), payload.
/// The checksum is not verified (loopback test traffic).
fn decompress_blocks(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while !data.is_empty() {
        if data.len() < 25 {
            return Err("truncated compressed block header".to_string());
        }
        let method = data[16];
        let compressed_size = u32::from_le_bytes([data[17], data[18], data[19], data[20]]) as usize;
        let uncompressed_size = u32::from_le_bytes([data[21], data[22], data[23], data[24]]) as usize;
        if compressed_size < 9 || data.len() < 16 + compressed_size {
            return Err("truncated compressed block".to_string());
        }
        let payload = &data[25..16 + compressed_size];
        match method {
            0x82 => out.extend_from_slice(
                &lz4_flex::block::decompress(payload, uncompressed_size).map_err(|error| format!("lz4: {error}"))?,
            ),
            0x02 => out.extend_from_slice(payload),
            other => return Err(format!("unsupported compression method 0x{other:02x}")),
        }
        data = &data[16 + compressed_size..];
    }
    Ok(out)
}

/// Splits `INSERT INTO t (cols) FORMAT F` into the statement without FORMAT and `F`.
fn split_insert(statement: &str) -> Option<(String, String)> {
    let trimmed = statement.trim();
    if !trimmed.get(..6).is_some_and(|head| head.eq_ignore_ascii_case("insert")) {
        return None;
    }
    let upper = trimmed.to_ascii_uppercase();
    let at = upper.rfind(" FORMAT ")?;
    let format = trimmed[at + 8..].trim().to_string();
    Some((trimmed[..at].to_string(), format))
}

async fn handle(
    State(access): State<Arc<Access>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = params.get("query").cloned().unwrap_or_default();
    let decompress = params.get("decompress").is_some_and(|value| value == "1");
    let read_only = matches!(access.engine, Engine::PerRequest { .. });
    if read_only && headers.contains_key("content-encoding") {
        return failure("Code: 48. DB::Exception: compressed request bodies are not supported by epicenter's live endpoint: send the query uncompressed. (NOT_IMPLEMENTED)");
    }
    if let Some((insert, format)) = split_insert(&query) {
        let Engine::Shared(store) = &access.engine else {
            return failure(
                "Code: 164. DB::Exception: epicenter's live endpoint only reads: cannot insert. (READONLY)",
            );
        };
        let store = store.clone();
        let data = if decompress {
            decompress_blocks(&body)
        } else {
            Ok(body.to_vec())
        };
        let result = match data {
            Ok(data) => {
                tokio::task::spawn_blocking(move || store.insert_raw(&insert, &format, &data).map(|_| Vec::new()))
                    .await
                    .map_err(|error| error.to_string())
                    .and_then(|result| result.map_err(|error| error.to_string()))
            }
            Err(error) => Err(format!("Code: 271. cannot decompress the request body: {error}")),
        };
        return answer(result);
    }
    let mut statement = query;
    if !body.is_empty() {
        if !statement.is_empty() {
            statement.push('\n');
        }
        statement.push_str(&String::from_utf8_lossy(&body));
    }
    if statement
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .is_empty()
    {
        return failure("Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR)");
    }
    let format = params
        .get("default_format")
        .cloned()
        .unwrap_or_else(|| "TabSeparated".to_string());
    let database = params.get("database").cloned();
    if let Some(database) = &database {
        if database.is_empty() || !database.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return failure("Code: 81. DB::Exception: the database parameter must be a database name: letters, digits and '_'. (UNKNOWN_DATABASE)");
        }
        // Unqualified names would read any system table past the guard's list.
        if read_only
            && ["system", "information_schema"]
                .iter()
                .any(|name| database.eq_ignore_ascii_case(name))
        {
            return failure("Code: 164. DB::Exception: epicenter's read-only endpoint refuses database=system: name system tables as system.<table> (docs/investigation.md, The live endpoint). (READONLY)");
        }
    }
    if read_only {
        if let Some(refusal) = params.iter().find_map(|(name, value)| url_setting_refusal(name, value)) {
            return failure(&refusal);
        }
    }
    let bindings = match parameter_statements(&params) {
        Ok(bindings) => bindings,
        Err(message) => return failure(&message),
    };
    match &access.engine {
        Engine::Shared(store) => {
            let store = store.clone();
            answer(
                tokio::task::spawn_blocking(move || {
                    store.query_in(database.as_deref(), &bindings, &statement, &format)
                })
                .await
                .map_err(|error| error.to_string())
                .and_then(|result| result.map_err(|error| error.to_string())),
            )
        }
        Engine::PerRequest {
            data_path,
            database: home,
            slots,
        } => {
            if let Some(refusal) = crate::guard::read_only_refusal(&statement) {
                return failure(&refusal);
            }
            let _slot = match tokio::time::timeout(LIVE_SLOT_WAIT, slots.acquire()).await {
                Ok(Ok(slot)) => slot,
                Ok(Err(_)) => return failure("Code: 1000. DB::Exception: the endpoint is shutting down."),
                Err(_) => {
                    return failure(&format!(
                        "Code: 202. DB::Exception: Too many simultaneous queries: {LIVE_QUERIES} questions are running and none ended within {} s; ask again. (TOO_MANY_SIMULTANEOUS_QUERIES)",
                        LIVE_SLOT_WAIT.as_secs()
                    ))
                }
            };
            let (data_path, home) = (data_path.clone(), home.clone());
            answer(
                tokio::task::spawn_blocking(move || {
                    let reader = EmbeddedStore::open_read_only(&data_path, &home)?;
                    reader.query_in(database.as_deref(), &bindings, &statement, &format)
                })
                .await
                .map_err(|error| error.to_string())
                .and_then(|result| result.map_err(|error| error.to_string())),
            )
        }
    }
}

/// The HTTP answer to an outcome: 200 with the output, or [`failure`].
fn answer(result: Result<Vec<u8>, String>) -> Response {
    match result {
        Ok(output) => (StatusCode::OK, output).into_response(),
        Err(message) => failure(&message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_headers_basic_auth_or_parameters_in_that_order() {
        use base64::Engine;
        let params: HashMap<String, String> = [("user", "p"), ("password", "pp")]
            .into_iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let mut headers = HeaderMap::new();
        assert_eq!(
            credentials(&headers, &HashMap::new()),
            ("default".to_string(), String::new())
        );
        assert_eq!(credentials(&headers, &params), ("p".to_string(), "pp".to_string()));
        let basic = base64::engine::general_purpose::STANDARD.encode("b:b:colon");
        headers.insert(
            "authorization",
            HeaderValue::from_str(&format!("Basic {basic}")).unwrap(),
        );
        assert_eq!(credentials(&headers, &params), ("b".to_string(), "b:colon".to_string()));
        headers.insert("x-clickhouse-user", HeaderValue::from_static("h"));
        headers.insert("x-clickhouse-key", HeaderValue::from_static("hh"));
        assert_eq!(credentials(&headers, &params), ("h".to_string(), "hh".to_string()));
    }

    #[test]
    fn a_user_without_a_password_takes_only_the_empty_one() {
        let users = vec![
            ("default".to_string(), None),
            ("grafana".to_string(), Some(Secret::new("pw".to_string()))),
        ];
        assert!(authenticated(&users, "default", ""));
        assert!(!authenticated(&users, "default", "pw"));
        assert!(authenticated(&users, "grafana", "pw"));
        assert!(!authenticated(&users, "grafana", "p"));
        assert!(!authenticated(&users, "grafana", ""));
        assert!(!authenticated(&users, "admin", "pw"));
    }

    #[test]
    fn query_parameters_become_quoted_bindings_and_bad_names_are_refused() {
        let params = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect()
        };
        assert_eq!(
            parameter_statements(&params(&[("param_job", r"it's \ x"), ("query", "SELECT 1")])).unwrap(),
            vec![r"SET param_job = 'it\'s \\ x'".to_string()]
        );
        assert!(parameter_statements(&params(&[("param_a;DROP", "1")]))
            .unwrap_err()
            .contains("Code: 456"));
        assert!(parameter_statements(&params(&[("param_", "1")])).is_err());
    }

    #[test]
    fn only_the_listen_address_and_loopback_names_are_answered() {
        let hosts = HostCheck::for_address("127.0.0.1:9465".parse().unwrap());
        for host in ["127.0.0.1:9465", "localhost:9465", "LOCALHOST:9465", "[::1]:9465"] {
            assert!(hosts.allows(Some(host)), "{host}");
        }
        for host in [
            None,
            Some("evil.example:9465"),
            Some("127.0.0.1"),
            Some("127.0.0.1:80"),
            Some("localhost"),
        ] {
            assert!(!hosts.allows(host), "{host:?}");
        }
        let on_80 = HostCheck::for_address("127.0.0.1:80".parse().unwrap());
        assert!(on_80.allows(Some("localhost")));
        assert!(!on_80.allows(Some("10.0.0.1:80")));
        let lan = HostCheck::for_address("10.1.2.3:9465".parse().unwrap());
        assert!(lan.allows(Some("10.1.2.3:9465")));
        assert!(!lan.allows(Some("rebind.example:9465")));
        assert_eq!(HostCheck::for_address("0.0.0.0:9465".parse().unwrap()), HostCheck::Any);
    }

    #[test]
    fn url_settings_that_lift_a_limit_are_refused_and_others_pass() {
        for (name, value) in [
            ("readonly", "0"),
            ("max_execution_time", "0"),
            ("max_execution_time", "3600"),
            ("max_memory_usage", "0"),
            ("max_memory_usage", "20000000000"),
            ("max_result_bytes", "x"),
            ("max_threads", "64"),
            ("allow_ddl", "1"),
            ("allow_introspection_functions", "1"),
            ("timeout_overflow_mode", "break"),
            ("result_overflow_mode", "break"),
            ("profile", "default"),
        ] {
            let refusal = url_setting_refusal(name, value).unwrap_or_else(|| panic!("{name}={value}"));
            assert!(refusal.starts_with("Code: 164.") && refusal.contains(name), "{refusal}");
        }
        for (name, value) in [
            ("readonly", "1"),
            ("max_execution_time", "10"),
            ("max_memory_usage", "1000000"),
            ("allow_experimental_analyzer", "0"),
            ("timeout_overflow_mode", "throw"),
            ("default_format", "JSON"),
            ("database", "epicenter"),
            ("output_format_json_quote_64bit_integers", "1"),
            ("param_job", "self"),
        ] {
            assert_eq!(url_setting_refusal(name, value), None, "{name}={value}");
        }
    }

    #[test]
    fn inserts_are_split_from_their_format() {
        assert_eq!(
            split_insert("INSERT INTO db.samples (a, b) FORMAT RowBinary"),
            Some(("INSERT INTO db.samples (a, b)".to_string(), "RowBinary".to_string()))
        );
        assert_eq!(split_insert("SELECT 1 FORMAT TabSeparated"), None);
    }

    #[test]
    fn uncompressed_blocks_pass_through_and_lz4_blocks_decode() {
        let payload = b"hello hello hello hello";
        let compressed = lz4_flex::block::compress(payload);
        let mut block = vec![0u8; 16];
        block.push(0x82);
        block.extend_from_slice(&((compressed.len() + 9) as u32).to_le_bytes());
        block.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        block.extend_from_slice(&compressed);
        let twice = [block.clone(), block].concat();
        assert_eq!(
            decompress_blocks(&twice).unwrap(),
            [payload.as_slice(), payload].concat()
        );
        assert!(decompress_blocks(&twice[..30]).is_err());
    }
}
