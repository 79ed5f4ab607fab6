//! What the store's test binaries share: the chDB library check and a server-sink client.
//! (Each test binary is its own process, and one process holds one chDB engine.)

#![allow(dead_code, reason = "each test binary uses part of this module")]

use std::sync::Arc;

use epicenter_store::clickhouse::ClickHouseStore;
use epicenter_store::config::ClickHouseConfig;
use epicenter_store::library_path;

/// Whether `libchdb.so` is installed; without it a test is skipped, except in CI, where it
/// fails.
pub(crate) fn library_available() -> bool {
    if library_path().exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} missing: CI runs scripts/setup first",
        library_path().display()
    );
    eprintln!(
        "SKIPPED: chDB library not found at {} (run scripts/setup)",
        library_path().display()
    );
    false
}

/// The server sink for `url`, database `database`, user `default` without a password.
pub(crate) fn server(url: &str, database: &str) -> Arc<ClickHouseStore> {
    let config = ClickHouseConfig {
        url: url.to_string(),
        database: database.into(),
        user: "default".into(),
        password_env: None,
        password_file: None,
        tls: None,
        cluster: None,
    };
    Arc::new(ClickHouseStore::new(&config, None).expect("a plain http:// server sink needs no TLS files"))
}
