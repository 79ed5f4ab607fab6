//! The `server` section of the configuration file: where epicenter's own HTTP endpoints
//! listen.

use epicenter_config::Problems;
use serde::Deserialize;

/// `server`: where epicenter's own HTTP endpoints listen.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `host:port` to listen on. Default `127.0.0.1:9464` (loopback only; set `0.0.0.0:9464`
    /// to expose it).
    #[serde(default = "default_listen_address")]
    pub listen_address: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen_address: default_listen_address(),
        }
    }
}

fn default_listen_address() -> String {
    "127.0.0.1:9464".to_string()
}

impl ServerConfig {
    /// Records a `listen_address` that is not `ip:port`.
    pub fn problems(&self, problems: &mut Problems) {
        if self.listen_address.parse::<std::net::SocketAddr>().is_err() {
            problems.push(
                "server.listen_address",
                format!(
                    "'{}' is not an address to listen on (ip:port, e.g. 127.0.0.1:9464)",
                    self.listen_address
                ),
            );
        }
    }
}
