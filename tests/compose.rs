//! docker-compose.yml and the Dockerfile, checked for what can be checked without a
//! container engine (there is none on the machine the suite runs on): the file parses, every
//! image is pinned to a version, every published port is bound to 127.0.0.1, every file or
//! folder it mounts from the repository exists, every long-running service has a
//! healthcheck, and the configuration it gives epicenter passes `epicenter check config`.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Whether `image` (`name:tag` or `name@sha256:…`) names a fixed version: a digest, or a tag
/// that is not `latest` and holds a digit.
fn pinned(image: &str) -> bool {
    if image.contains("@sha256:") {
        return true;
    }
    let tag = image.rsplit_once(':').map(|(_, tag)| tag).unwrap_or("");
    !tag.is_empty() && tag != "latest" && !tag.contains('/') && tag.chars().any(|c| c.is_ascii_digit())
}

#[test]
fn the_compose_file_pins_its_images_binds_loopback_and_mounts_what_exists() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("docker-compose.yml")).unwrap();
    let compose: serde_json::Value = serde_norway::from_str(&text).unwrap();
    let services = compose["services"].as_object().unwrap();
    for wanted in ["clickhouse", "grafana", "alertmanager", "epicenter", "fleet"] {
        assert!(services.contains_key(wanted), "no service {wanted}");
    }
    let volumes = compose["volumes"].as_object().cloned().unwrap_or_default();
    for (name, service) in services {
        let image = service["image"].as_str().unwrap_or_else(|| panic!("{name}: no image"));
        assert!(pinned(image), "{name}: image {image} is not pinned to a version");
        for port in service["ports"].as_array().into_iter().flatten() {
            let port = port.as_str().unwrap();
            assert!(
                port.starts_with("127.0.0.1:"),
                "{name}: port {port} is not bound to 127.0.0.1"
            );
        }
        for mount in service["volumes"].as_array().into_iter().flatten() {
            let source = mount.as_str().unwrap().split(':').next().unwrap();
            if source.starts_with('.') {
                assert!(
                    Path::new(ROOT).join(source).exists(),
                    "{name}: mounts {source}, which is missing"
                );
            } else {
                assert!(volumes.contains_key(source), "{name}: volume {source} is not declared");
            }
        }
        assert!(service["healthcheck"]["test"].is_array(), "{name}: no healthcheck");
    }
    assert!(
        services["epicenter"]["build"].is_string(),
        "epicenter is built from this repository"
    );
    // The Dockerfile's base images are pinned too.
    let dockerfile = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).unwrap();
    let bases: Vec<&str> = dockerfile
        .lines()
        .filter_map(|line| line.strip_prefix("FROM "))
        .map(|rest| rest.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(bases.len(), 2, "{bases:?}");
    for base in bases {
        assert!(pinned(base), "Dockerfile: FROM {base} is not pinned");
    }
    // The mounted configuration is one epicenter accepts.
    let check = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["check", "config"])
        .arg(Path::new(ROOT).join("docker/epicenter.yml"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
}

#[test]
fn pinning_is_judged_by_the_tag() {
    assert!(pinned("grafana/grafana:11.2.0"));
    assert!(pinned("clickhouse/clickhouse-server@sha256:0123abcd"));
    assert!(!pinned("grafana/grafana"));
    assert!(!pinned("grafana/grafana:latest"));
    assert!(!pinned("localhost:5000/grafana"));
}
