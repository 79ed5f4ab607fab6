//! Scrape authentication against a test server on 127.0.0.1 that checks the
//! `Authorization` header (issue 16): basic auth with the right and a wrong password, a
//! password file, a bearer token file rotated while scraping, `authorization` with its own
//! type, and configurations that set two mechanisms. Secrets never appear in an error or in
//! `Debug`.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use epicenter_collector::config::{jobs_from_yaml, Job};
use epicenter_collector::scrape::{ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{Labels, ScrapeOutcome};

/// The header value the server accepts now; anything else gets 401.
type Accepted = Arc<Mutex<String>>;

async fn server(accepted: Accepted) -> String {
    let app = Router::new()
        .route(
            "/metrics",
            get(|State(accepted): State<Accepted>, headers: HeaderMap| async move {
                let sent = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or("");
                if sent == *accepted.lock().unwrap() {
                    (StatusCode::OK, "protected_metric 42\n")
                } else {
                    (StatusCode::UNAUTHORIZED, "who are you?\n")
                }
            }),
        )
        .with_state(accepted);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

fn job(address: &str, auth: &str) -> Job {
    let yaml =
        format!("scrape_configs:\n  - job_name: secure\n    static_configs: [{{targets: ['{address}']}}]\n{auth}");
    jobs_from_yaml(&yaml)
        .unwrap_or_else(|errors| panic!("{errors:?}"))
        .remove(0)
}

async fn scrape(job: &Job) -> ScrapeOutcome {
    let (targets, _) = targets_for_job(job);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Labels::new(),
        ..Default::default()
    };
    Scraper::new()
        .unwrap()
        .scrape(&targets[0], job, &context, &mut TargetState::default())
        .await
}

fn value(outcome: &ScrapeOutcome) -> Option<f64> {
    outcome
        .rows
        .iter()
        .find(|row| row.series.name == "protected_metric")
        .map(|row| row.value)
}

/// `Basic base64(user:password)`, computed here from RFC 7617 rather than by the client.
fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = format!("{user}:{password}").into_bytes();
    let mut encoded = String::new();
    for chunk in bytes.chunks(3) {
        let word = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for index in 0..4 {
            if index <= chunk.len() {
                encoded.push(ALPHABET[((word >> (18 - 6 * index)) & 63) as usize] as char);
            } else {
                encoded.push('=');
            }
        }
    }
    format!("Basic {encoded}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_with_the_right_password_scrapes_and_a_wrong_one_is_down_with_401() {
    let accepted = Arc::new(Mutex::new(basic("scraper", "s3cret-basic")));
    let address = server(accepted).await;
    let right = scrape(&job(
        &address,
        "    basic_auth: {username: scraper, password: s3cret-basic}\n",
    ))
    .await;
    assert!(right.report.up, "{:?}", right.report.error);
    assert_eq!(value(&right), Some(42.0));
    let wrong_job = job(&address, "    basic_auth: {username: scraper, password: wrong-pass}\n");
    let wrong = scrape(&wrong_job).await;
    assert!(!wrong.report.up);
    let error = wrong.report.error.unwrap();
    assert!(error.contains("401"), "{error}");
    assert!(!error.contains("wrong-pass"), "{error}");
    // Debug output of the job (logged at debug level) never holds the password.
    assert!(!format!("{wrong_job:?}").contains("wrong-pass"));
    // password_file: the password with a trailing newline, as `echo` writes it.
    let file = std::env::temp_dir().join(format!("epicenter-basic-{}", std::process::id()));
    std::fs::write(&file, "s3cret-basic\n").unwrap();
    let from_file = scrape(&job(
        &address,
        &format!(
            "    basic_auth: {{username: scraper, password_file: '{}'}}\n",
            file.display()
        ),
    ))
    .await;
    assert!(from_file.report.up, "{:?}", from_file.report.error);
    std::fs::remove_file(&file).unwrap();
    let missing = scrape(&job(
        &address,
        &format!(
            "    basic_auth: {{username: scraper, password_file: '{}'}}\n",
            file.display()
        ),
    ))
    .await;
    let error = missing.report.error.unwrap();
    assert!(
        error.starts_with("cannot authenticate: scrape_configs[0].basic_auth.password_file: cannot read"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_file_rotated_while_scraping_is_used_from_the_next_scrape() {
    let accepted = Arc::new(Mutex::new("Bearer token-one".to_string()));
    let address = server(accepted.clone()).await;
    let file = std::env::temp_dir().join(format!("epicenter-token-{}", std::process::id()));
    std::fs::write(&file, "token-one").unwrap();
    let job = job(&address, &format!("    bearer_token_file: '{}'\n", file.display()));
    let (targets, _) = targets_for_job(&job);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Labels::new(),
        ..Default::default()
    };
    let scraper = Scraper::new().unwrap();
    let mut state = TargetState::default();
    let first = scraper.scrape(&targets[0], &job, &context, &mut state).await;
    assert!(first.report.up, "{:?}", first.report.error);
    // The server moves to a new token before the file does: the scrape fails.
    *accepted.lock().unwrap() = "Bearer token-two-longer".to_string();
    let stale = scraper.scrape(&targets[0], &job, &context, &mut state).await;
    assert!(!stale.report.up);
    assert!(stale.report.error.as_deref().unwrap_or("").contains("401"));
    // The file is rotated: the same job (no restart) sends the new token.
    std::fs::write(&file, "token-two-longer\n").unwrap();
    let rotated = scraper.scrape(&targets[0], &job, &context, &mut state).await;
    assert!(rotated.report.up, "{:?}", rotated.report.error);
    assert_eq!(value(&rotated), Some(42.0));
    std::fs::remove_file(&file).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_sends_its_type_and_credentials() {
    let accepted = Arc::new(Mutex::new("Token abc-123".to_string()));
    let address = server(accepted.clone()).await;
    let custom = scrape(&job(
        &address,
        "    authorization: {type: Token, credentials: abc-123}\n",
    ))
    .await;
    assert!(custom.report.up, "{:?}", custom.report.error);
    *accepted.lock().unwrap() = "Bearer inline-token".to_string();
    let default_type = scrape(&job(&address, "    authorization: {credentials: inline-token}\n")).await;
    assert!(default_type.report.up, "{:?}", default_type.report.error);
    let older_form = scrape(&job(&address, "    bearer_token: inline-token\n")).await;
    assert!(older_form.report.up, "{:?}", older_form.report.error);
}

#[test]
fn two_mechanisms_or_a_secret_twice_are_refused_naming_the_keys() {
    let cases = [
        (
            "    basic_auth: {username: u, password: p}\n    bearer_token: t\n",
            "scrape_configs[0].bearer_token",
            "basic_auth and bearer_token are set",
        ),
        (
            "    basic_auth: {username: u, password: p, password_file: /x}\n",
            "scrape_configs[0].basic_auth.password_file",
            "both set",
        ),
        (
            "    authorization: {type: Basic, credentials: x}\n",
            "scrape_configs[0].authorization.type",
            "basic_auth",
        ),
        // Something that never ends or never opens is not a secret file.
        (
            "    bearer_token_file: /dev/zero\n",
            "scrape_configs[0].bearer_token_file",
            "/dev/zero is not a regular file",
        ),
        (
            "    basic_auth: {username: u, password_file: /tmp}\n",
            "scrape_configs[0].basic_auth.password_file",
            "/tmp is not a regular file",
        ),
    ];
    for (auth, path, message) in cases {
        let yaml =
            format!("scrape_configs:\n  - job_name: j\n    static_configs: [{{targets: ['127.0.0.1:1']}}]\n{auth}");
        let errors = jobs_from_yaml(&yaml).unwrap_err();
        assert_eq!(errors.len(), 1, "{auth}: {errors:?}");
        assert_eq!(errors[0].path, path, "{auth}");
        assert!(errors[0].message.contains(message), "{auth}: {}", errors[0].message);
        assert!(!errors[0].message.contains("p,") && !errors[0].message.contains(": p"));
    }
}

/// The OAuth 2.0 token endpoint of the test: checks the client's credentials and form, and
/// issues `tok-<n>` valid for `lifetime` seconds; the target accepts the last token issued.
#[derive(Default)]
struct TokenServer {
    issued: u32,
    lifetime: u64,
    forms: Vec<String>,
}

async fn oauth2_servers(tokens: Arc<Mutex<TokenServer>>) -> (String, String) {
    let token_app = Router::new()
        .route(
            "/token",
            axum::routing::post(
                |State(tokens): State<Arc<Mutex<TokenServer>>>, headers: HeaderMap, form: String| async move {
                    if headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
                        != Some(basic("epicenter", "client-s3cret").as_str())
                    {
                        return (StatusCode::UNAUTHORIZED, String::new());
                    }
                    let mut tokens = tokens.lock().unwrap();
                    tokens.issued += 1;
                    tokens.forms.push(form);
                    let answer = format!(
                        r#"{{"access_token": "tok-{}", "token_type": "bearer", "expires_in": {}}}"#,
                        tokens.issued, tokens.lifetime
                    );
                    (StatusCode::OK, answer)
                },
            ),
        )
        .with_state(tokens.clone());
    let target_app = Router::new()
        .route(
            "/metrics",
            get(
                |State(tokens): State<Arc<Mutex<TokenServer>>>, headers: HeaderMap| async move {
                    let expected = format!("Bearer tok-{}", tokens.lock().unwrap().issued);
                    if headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) == Some(expected.as_str()) {
                        (StatusCode::OK, "protected_metric 42\n")
                    } else {
                        (StatusCode::UNAUTHORIZED, "")
                    }
                },
            ),
        )
        .with_state(tokens);
    let mut addresses = Vec::new();
    for app in [token_app, target_app] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addresses.push(listener.local_addr().unwrap().to_string());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
    (addresses.remove(0), addresses.remove(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth2_client_credentials_get_a_token_keep_it_until_it_expires_and_fail_clearly() {
    let tokens = Arc::new(Mutex::new(TokenServer {
        lifetime: 3600,
        ..TokenServer::default()
    }));
    let (token_server, target) = oauth2_servers(tokens.clone()).await;
    let oauth2 = |secret: &str| {
        format!(
            "    oauth2:\n      client_id: epicenter\n      client_secret: {secret}\n      token_url: 'http://{token_server}/token'\n      scopes: [metrics, read]\n      endpoint_params: {{audience: fleet}}\n"
        )
    };
    let long = job(&target, &oauth2("client-s3cret"));
    let (targets, _) = targets_for_job(&long);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Labels::new(),
        ..Default::default()
    };
    let scraper = Scraper::new().unwrap();
    let mut state = TargetState::default();
    for round in 0..3 {
        let outcome = scraper.scrape(&targets[0], &long, &context, &mut state).await;
        assert!(outcome.report.up, "round {round}: {:?}", outcome.report.error);
        assert_eq!(value(&outcome), Some(42.0));
    }
    // One token for three scrapes, asked for with the grant, the scopes and the parameters.
    {
        let tokens = tokens.lock().unwrap();
        assert_eq!(tokens.issued, 1);
        let mut fields: Vec<&str> = tokens.forms[0].split('&').collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            vec!["audience=fleet", "grant_type=client_credentials", "scope=metrics+read"]
        );
    }
    // A token that expires within the early-refresh margin is asked for again each time (a
    // new job: its own token cache).
    tokens.lock().unwrap().lifetime = 5;
    let short = job(&target, &oauth2("client-s3cret"));
    let mut short_state = TargetState::default();
    for _ in 0..2 {
        let outcome = scraper.scrape(&targets[0], &short, &context, &mut short_state).await;
        assert!(outcome.report.up, "{:?}", outcome.report.error);
    }
    assert_eq!(tokens.lock().unwrap().issued, 3);
    // A wrong client secret: the target is down, the token endpoint named, the secret not.
    let wrong = scrape(&job(&target, &oauth2("not-the-secret"))).await;
    assert!(!wrong.report.up);
    let error = wrong.report.error.unwrap();
    assert!(
        error.contains(&format!(
            "oauth2: token endpoint http://{token_server}/token answered HTTP status 401"
        )),
        "{error}"
    );
    assert!(!error.contains("not-the-secret"), "{error}");
}

/// A secret file that turns into something else after the check (a device, a huge file)
/// fails that scrape quickly and names the file; nothing is read past 64 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_file_that_is_not_a_small_regular_file_fails_the_scrape_not_the_process() {
    let accepted = Arc::new(Mutex::new("Bearer small".to_string()));
    let address = server(accepted).await;
    let file = std::env::temp_dir().join(format!("epicenter-huge-token-{}", std::process::id()));
    std::fs::write(&file, "small").unwrap();
    let job = job(&address, &format!("    bearer_token_file: '{}'\n", file.display()));
    assert!(scrape(&job).await.report.up);
    std::fs::write(&file, "x".repeat(100 * 1024)).unwrap();
    let started = std::time::Instant::now();
    let huge = scrape(&job).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let error = huge.report.error.unwrap();
    assert!(error.contains("holds 102400 bytes"), "{error}");
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
    let device = scrape(&job).await;
    let error = device.report.error.unwrap();
    assert!(error.contains("is not a regular file"), "{error}");
    std::fs::remove_file(&file).unwrap();
}
