//! Issue 18: the request metrics of fleets instrumented otherwise than the shipped scenarios
//! (the simulator's `fleet.instrumentation`: OpenTelemetry's HTTP server histogram, a gRPC
//! server's go-grpc-middleware families, Istio's and Linkerd's sidecar metrics) each detect a
//! fault in a simulated scenario, and change no shipped verdict.
//!
//! A family detects its fault on its own: the shipped cold deploy (two backend instances
//! restarted cold), judged with nothing but `up`, the restart rule and that family's rules
//! from the shipped rules file, is named on the restarted instances' hosts as `cold_start`.
//! The control: with `up` and the restart rule alone it is not named at all, so what names it
//! is the family's latency. The rules are read from rules/signals/signals.yml by metric name,
//! so a family's rule that stops matching its exposition fails here.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;
use common::{eval_json as eval, judged_one_fault as judged, repository, shipped_rules_of as rules_of};

/// Shipped scenario `name` under another name, its fleet printing `instrumentation`.
fn instrumented(name: &str, renamed: &str, instrumentation: &str) -> String {
    let text = std::fs::read_to_string(repository(&format!("scenarios/{name}.yml"))).unwrap();
    let text = text.replace(&format!("\nname: {name}\n"), &format!("\nname: {renamed}\n"));
    assert!(text.contains(&format!("\nname: {renamed}\n")), "{name}: no name line");
    if text.contains("\nfleet:\n") {
        text.replace(
            "\nfleet:\n",
            &format!("\nfleet:\n  instrumentation: {instrumentation}\n"),
        )
    } else {
        format!("{text}fleet: {{instrumentation: {instrumentation}}}\n")
    }
}

#[test]
fn each_request_family_names_a_cold_deploy_from_its_own_latency() {
    let dir = std::env::temp_dir().join(format!("epicenter-request-families-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let baseline = ["up", "process_start_time_seconds"];
    let families: [(&str, &str, &[&str]); 4] = [
        (
            "otel",
            "{api: otel, backend: otel}",
            &[
                "http_server_request_duration_seconds",
                "http_server_request_duration_seconds_count",
            ],
        ),
        (
            "grpc",
            "{backend: grpc}",
            &["grpc_server_handled_total", "grpc_server_handling_seconds"],
        ),
        (
            "istio",
            "{mesh: istio}",
            &["istio_requests_total", "istio_request_duration_milliseconds"],
        ),
        ("linkerd", "{mesh: linkerd}", &["response_total", "response_latency_ms"]),
    ];
    for (family, instrumentation, metrics) in families {
        let scenario = write(
            &format!("cold-{family}.yml"),
            &instrumented("backend-cold-start", &format!("cold-{family}"), instrumentation),
        );
        let rules = write(
            &format!("rules-{family}.yml"),
            &rules_of(&[baseline.as_slice(), metrics].concat()),
        );
        let report = eval(&["--rules", &rules, &scenario]);
        let [(_, kind_right, host_ac1, false_verdicts, _)] = judged(&report)[..] else {
            panic!("{family}: {report}");
        };
        eprintln!(
            "{family}: kind right {kind_right}, host AC@1 {host_ac1}, time to detect {} intervals",
            report["scenarios"][0]["incidents"][0]["intervals_to_detect"]
        );
        assert!(
            kind_right && host_ac1 == 1.0 && false_verdicts == 0,
            "{family}: {report}"
        );

        // The control: the restart alone names nothing.
        let control = write("rules-restart.yml", &rules_of(&baseline));
        let report = eval(&["--rules", &control, &scenario]);
        let [(_, kind_right, host_ac1, _, _)] = judged(&report)[..] else {
            panic!("{family} control: {report}");
        };
        assert!(!kind_right && host_ac1 == 0.0, "{family} control: {report}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_shipped_faults_keep_their_roots_and_kinds_whatever_the_instrumentation() {
    let dir = std::env::temp_dir().join(format!("epicenter-instrumented-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(repository("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.extension().is_none_or(|extension| extension != "yml") || name == "healthy" {
            continue;
        }
        for (combination, instrumentation) in [
            ("otel-istio", "{api: otel, backend: otel, mesh: istio}"),
            ("grpc-linkerd", "{backend: grpc, mesh: linkerd}"),
        ] {
            let renamed = format!("{name}-{combination}");
            let file = dir.join(format!("{renamed}.yml"));
            std::fs::write(&file, instrumented(&name, &renamed, instrumentation)).unwrap();
            files.push(file.to_str().unwrap().to_string());
        }
    }
    assert_eq!(files.len(), 14, "{files:?}");
    let arguments: Vec<&str> = files.iter().map(String::as_str).collect();
    let report = eval(&arguments);
    std::fs::remove_dir_all(&dir).unwrap();
    for (name, kind_right, host_ac1, false_verdicts, _) in judged(&report) {
        assert!(
            kind_right && host_ac1 == 1.0 && false_verdicts == 0,
            "{name}: kind right {kind_right}, host AC@1 {host_ac1}, {false_verdicts} false: {report}"
        );
    }
}
