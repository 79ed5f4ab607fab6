//! What the embedded engine lets any connection do: the first wall of the live SQL endpoint.
//!
//! chDB runs ClickHouse's local mode, where every connection is the user `default`
//! (chdb-core's `ChdbClient` authenticates each session as `default` with no password) and
//! that user, by default, holds every grant. [`prepare`] writes a ClickHouse configuration
//! into the store (`<store>/engine/config.xml` and `users.xml`, following ClickHouse's
//! "Settings → Users and roles" documentation: `<users><default><grants><query>GRANT …`)
//! that `crate::chdb::Chdb::open` passes to the engine (`--config-file`), so `default`
//! holds only [`GRANTS`]: reading, writing and changing epicenter's tables, and nothing
//! that reaches outside the store. The engine then refuses, for the writer and every
//! reader alike, with `Code: 497 … (ACCESS_DENIED)`: the `file`, `url`, `remote`,
//! `remoteSecure`, `s3`, `hdfs`, `azureBlobStorage`, `mysql`, `postgresql`, `jdbc`, `odbc`,
//! `sqlite`, `redis`, `mongodb` table functions and a file path used as a table name (`READ
//! ON FILE`, `READ ON URL`, …), `CREATE DICTIONARY`, introspection functions
//! (`addressToSymbol`), `system.users` and `system.grants` (`SHOW USERS`), and access
//! management (`CREATE USER`). The readers' limits and `readonly` are set per connection
//! ([`crate::embedded::EmbeddedStore::open_read_only`]).
//!
//! What the engine does **not** guard in local mode, measured against chDB 26.7.3 (the
//! library `scripts/setup` fetches), is refused by [`crate::guard`] instead: the scalar
//! `file()` function reads any file with no grant and whatever `user_files_path` says
//! (chdb-core's `LocalServer::tryInitPath` sets the user files path to "", "user's files
//! are everywhere"); `KILL QUERY` and `SYSTEM …` run with neither the grant nor
//! `readonly = 0`; `INTO OUTFILE` writes under `readonly = 1`; `REVOKE SELECT ON system.*`
//! leaves `system.processes`, `system.stack_trace`, `system.settings` readable; and one
//! engine user means a settings profile cannot hold `readonly` (the writer shares it).
//!
//! The configuration is read once per process, by the first connection (chDB's embedded
//! server is a process-wide singleton), so every connection passes it.

use std::path::{Path, PathBuf};

/// Folder inside the store holding the engine's configuration (`config.xml`, `users.xml`)
/// and an empty `user_scripts/` (where `executable()` would look for programs).
pub const ENGINE_DIRECTORY: &str = "engine";

/// The grants of the engine's one user, `default`, on every database: what epicenter's
/// writer, migrations and `epicenter sql --write` need (SELECT, INSERT, ALTER, CREATE and
/// DROP of databases, tables, views and SQL functions, TRUNCATE, OPTIMIZE, SHOW), and no
/// source (`READ ON FILE`, `URL`, `REMOTE`, `S3`, …), no dictionary, no `KILL QUERY`, no
/// `SYSTEM`, no introspection, no access management.
pub const GRANTS: &str = "GRANT SELECT, INSERT, ALTER, CREATE DATABASE, CREATE TABLE, CREATE VIEW, CREATE FUNCTION, DROP DATABASE, DROP TABLE, DROP VIEW, DROP FUNCTION, TRUNCATE, OPTIMIZE, SHOW TABLES, SHOW DATABASES, SHOW COLUMNS ON *.*";

/// Writes the engine's configuration for the store at `data_path` (created if missing) and
/// returns the path of its `config.xml`, absolute: `users_config` naming the `users.xml`
/// beside it (the user `default` with [`GRANTS`], no password, its default profile and
/// quota; `networks` `::/0` as in chDB's own default, since the engine listens on no
/// network and authenticates its sessions with no address) and `user_scripts_path` an
/// empty folder of the store's.
///
/// # Errors
/// The folder or a file cannot be written (the caller names the store).
pub fn prepare(data_path: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(data_path)?;
    let directory = std::path::absolute(data_path)?.join(ENGINE_DIRECTORY);
    let scripts = directory.join("user_scripts");
    std::fs::create_dir_all(&scripts)?;
    let users = directory.join("users.xml");
    write_if_changed(&users, &users_xml())?;
    let config = directory.join("config.xml");
    write_if_changed(&config, &config_xml(&users, &scripts))?;
    Ok(config)
}

/// `config.xml`: where the users are and the scripts folder.
fn config_xml(users: &Path, scripts: &Path) -> String {
    format!(
        "<!-- Written by epicenter (store/src/access.rs) at every start: edits are overwritten. -->\n<clickhouse>\n    <users_config>{}</users_config>\n    <user_scripts_path>{}/</user_scripts_path>\n</clickhouse>\n",
        escape(&users.display().to_string()),
        escape(&scripts.display().to_string())
    )
}

/// `users.xml`: the one user, `default`, with [`GRANTS`].
fn users_xml() -> String {
    format!(
        "<!-- Written by epicenter (store/src/access.rs) at every start: edits are overwritten. -->\n<clickhouse>\n    <profiles><default></default></profiles>\n    <users>\n        <default>\n            <password></password>\n            <networks><ip>::/0</ip></networks>\n            <profile>default</profile>\n            <quota>default</quota>\n            <grants><query>{GRANTS}</query></grants>\n        </default>\n    </users>\n    <quotas><default></default></quotas>\n</clickhouse>\n"
    )
}

fn write_if_changed(path: &Path, text: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|existing| existing == text) {
        return Ok(());
    }
    std::fs::write(path, text)
}

/// XML text escaping of a path.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_names_its_users_and_an_empty_scripts_folder() {
        let config = config_xml(
            Path::new("/a&b/engine/users.xml"),
            Path::new("/a&b/engine/user_scripts"),
        );
        assert!(
            config.contains("<users_config>/a&amp;b/engine/users.xml</users_config>"),
            "{config}"
        );
        assert!(config.contains("<user_scripts_path>/a&amp;b/engine/user_scripts/</user_scripts_path>"));
        let users = users_xml();
        assert!(users.contains(GRANTS));
        for source in [
            "FILE",
            "URL",
            "REMOTE",
            "S3",
            "SOURCES",
            "KILL",
            "SYSTEM",
            "DICTIONARY",
            "dictGet",
            "ALL",
        ] {
            assert!(!GRANTS.split([' ', ',']).any(|word| word == source), "{source} granted");
        }
    }
}
