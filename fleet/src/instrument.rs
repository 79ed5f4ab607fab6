//! Request metrics under the names other instrumentation prints (issue 18; the scenario's
//! `fleet.instrumentation`, [`crate::scenario::Instrumentation`]): OpenTelemetry's HTTP server
//! histogram, a gRPC server's go-grpc-middleware families, and the inbound metrics of an Istio
//! or Linkerd sidecar. Each takes the same requests (by status code: how many, how many
//! seconds in total, the cumulative counts over the bucket bounds in seconds) and prints them
//! as that library does; names and labels as in rules/signals/examples/ (its README gives each
//! family's source).

use crate::text::Out;

/// Requests answered with one HTTP status code: (code, requests, seconds in total,
/// cumulative request counts at each bound of the histogram's bounds, borrowed from the
/// model where it keeps them). All three grow only.
pub(crate) type ByStatus<'a> = (&'static str, f64, f64, std::borrow::Cow<'a, [f64]>);

/// OpenTelemetry's `http.server.request.duration` (semantic conventions 1.26, "HTTP
/// metrics"), seconds, as the OpenTelemetry Prometheus exporter names it: the histogram
/// `http_server_request_duration_seconds`, one series per status code, labelled with
/// `http_request_method`, `http_response_status_code` and `http_route`.
pub(crate) fn otel_http(out: &mut Out, route: &str, bounds: &[f64], by_status: &[ByStatus]) {
    out.family(
        "http_server_request_duration_seconds",
        "histogram",
        "Duration of HTTP server requests.",
    );
    for (code, count, sum, buckets) in by_status {
        out.histogram(
            "http_server_request_duration_seconds",
            &[
                ("http_request_method", "GET"),
                ("http_response_status_code", code),
                ("http_route", route),
            ],
            bounds,
            buckets,
            *count,
            *sum,
        );
    }
}

/// A unary gRPC method instrumented by go-grpc-middleware's Prometheus provider (formerly
/// go-grpc-prometheus), handling time histogram on: `grpc_server_started_total`,
/// `grpc_server_handled_total` by `grpc_code` (a 2xx is `OK`, anything else `Unavailable`, what
/// a server answers when its own dependencies fail), and `grpc_server_handling_seconds` over
/// every call.
pub(crate) fn grpc(out: &mut Out, service: &str, method: &str, bounds: &[f64], by_status: &[ByStatus]) {
    let labels = [
        ("grpc_method", method),
        ("grpc_service", service),
        ("grpc_type", "unary"),
    ];
    let calls: f64 = by_status.iter().map(|(_, count, _, _)| count).sum();
    out.family(
        "grpc_server_started_total",
        "counter",
        "Total number of RPCs started on the server.",
    );
    out.sample("grpc_server_started_total", &labels, calls.floor());
    out.family(
        "grpc_server_handled_total",
        "counter",
        "Total number of RPCs completed on the server, regardless of success or failure.",
    );
    for (grpc_code, succeeded) in [("OK", true), ("Unavailable", false)] {
        let count: f64 = by_status
            .iter()
            .filter(|(code, ..)| code.starts_with('2') == succeeded)
            .map(|(_, count, _, _)| count)
            .sum();
        let mut with_code = vec![("grpc_code", grpc_code)];
        with_code.extend(labels);
        out.sample("grpc_server_handled_total", &with_code, count.floor());
    }
    let sum: f64 = by_status.iter().map(|(_, _, sum, _)| sum).sum();
    let buckets: Vec<f64> = (0..bounds.len())
        .map(|bound| by_status.iter().map(|(_, _, _, buckets)| buckets[bound]).sum())
        .collect();
    out.family(
        "grpc_server_handling_seconds",
        "histogram",
        "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
    );
    out.histogram("grpc_server_handling_seconds", &labels, bounds, &buckets, calls, sum);
}

/// Where a sidecar's requests come from and go to: the calling workload (an Istio
/// `source_workload`), the instance's own workload, and the Kubernetes namespace of both.
pub(crate) struct Peers<'a> {
    /// The workload that calls this instance (`istio-ingressgateway` for the API tier).
    pub(crate) source: &'a str,
    /// This instance's workload (its service).
    pub(crate) destination: &'a str,
    /// The namespace both run in.
    pub(crate) namespace: &'a str,
    /// Whether the instance serves gRPC (answered HTTP 200, the outcome in a gRPC status
    /// label) rather than plain HTTP.
    pub(crate) grpc: bool,
}

/// Istio's standard metrics as the server-side sidecar reports them (istio.io, "Istio
/// Standard Metrics"; `reporter="destination"`): `istio_requests_total` by `response_code`
/// (by `grpc_response_status` for gRPC) and the histogram `istio_request_duration_milliseconds`
/// (bounds and sums in milliseconds), with the source and destination workloads.
pub(crate) fn istio(out: &mut Out, peers: &Peers, bounds: &[f64], by_status: &[ByStatus]) {
    let service = format!("{}.{}.svc.cluster.local", peers.destination, peers.namespace);
    // A gRPC call is answered HTTP 200 whatever its outcome; its gRPC status says how it
    // ended (0 OK, 14 Unavailable). The application's own 5xx carries no response flag
    // (Envoy sets flags for what it did itself: a reset, a timeout, an exhausted retry).
    let labels = |code: &'static str| {
        let mut labels = vec![
            ("connection_security_policy", "mutual_tls"),
            ("destination_service", service.as_str()),
            ("destination_workload", peers.destination),
            ("destination_workload_namespace", peers.namespace),
        ];
        if peers.grpc {
            labels.push(("grpc_response_status", if code.starts_with('2') { "0" } else { "14" }));
        }
        labels.extend([
            ("reporter", "destination"),
            ("request_protocol", if peers.grpc { "grpc" } else { "http" }),
            ("response_code", if peers.grpc { "200" } else { code }),
            ("response_flags", "-"),
            ("source_workload", peers.source),
            ("source_workload_namespace", peers.namespace),
        ]);
        labels
    };
    mesh_families(
        out,
        ("istio_requests_total", "Total requests.", &labels),
        (
            "istio_request_duration_milliseconds",
            "Request duration in milliseconds.",
            &labels,
        ),
        bounds,
        by_status,
    );
}

/// Linkerd's proxy metrics, inbound (linkerd.io, "Proxy Metrics"): `response_total` by
/// `status_code` (and `grpc_status` for gRPC) and `classification` (`failure` for a 5xx or a
/// gRPC status other than 0), and the histogram `response_latency_ms` (bounds and sums in
/// milliseconds), each with the caller's mTLS identity in `client_id`.
pub(crate) fn linkerd(out: &mut Out, peers: &Peers, bounds: &[f64], by_status: &[ByStatus]) {
    let authority = format!("{}.{}.svc.cluster.local:8080", peers.destination, peers.namespace);
    // The caller's mTLS identity: its service account (here its workload's name) in its
    // namespace, under the default trust domain.
    let client_id = format!(
        "{}.{}.serviceaccount.identity.linkerd.cluster.local",
        peers.source, peers.namespace
    );
    // As for Istio: a gRPC call is HTTP 200 and its `grpc_status` says how it ended.
    let labels = |code: &'static str, with_classification: bool| {
        let failed = !code.starts_with('2');
        let mut labels = vec![("authority", authority.as_str())];
        if with_classification {
            labels.push(("classification", if failed { "failure" } else { "success" }));
        }
        labels.push(("direction", "inbound"));
        if peers.grpc {
            labels.push(("grpc_status", if failed { "14" } else { "0" }));
        }
        labels.push(("status_code", if peers.grpc { "200" } else { code }));
        labels.push(("tls", "true"));
        labels.push(("client_id", client_id.as_str()));
        labels
    };
    mesh_families(
        out,
        ("response_total", "Total count of HTTP responses.", &|code| {
            labels(code, true)
        }),
        (
            "response_latency_ms",
            "Elapsed times between a request's headers being received and its response stream completing",
            &|code| labels(code, false),
        ),
        bounds,
        by_status,
    );
}

/// Labels of one status code's series.
type LabelsOf<'a> = &'a dyn Fn(&'static str) -> Vec<(&'a str, &'a str)>;

/// A sidecar's two families: a counter of requests per status code, and a histogram of their
/// durations in milliseconds (`bounds` and sums given in seconds), each (name, help, labels).
fn mesh_families(
    out: &mut Out,
    (counter, counter_help, counter_labels): (&str, &str, LabelsOf),
    (histogram, histogram_help, histogram_labels): (&str, &str, LabelsOf),
    bounds: &[f64],
    by_status: &[ByStatus],
) {
    out.family(counter, "counter", counter_help);
    for (code, count, _, _) in by_status {
        out.sample(counter, &counter_labels(code), count.floor());
    }
    let milliseconds: Vec<f64> = bounds.iter().map(|bound| bound * 1000.0).collect();
    out.family(histogram, "histogram", histogram_help);
    for (code, count, sum, buckets) in by_status {
        out.histogram(
            histogram,
            &histogram_labels(code),
            &milliseconds,
            buckets,
            *count,
            sum * 1000.0,
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

    use super::*;

    fn out() -> Out {
        Out {
            text: String::new(),
            timestamp_ms: 1_000,
        }
    }

    /// 90 answers 200 taking 9 s in all, 10 answers 500 taking 2 s, bounds 0.1 s and 1 s.
    fn requests() -> Vec<ByStatus<'static>> {
        vec![
            ("200", 90.0, 9.0, vec![80.0, 90.0].into()),
            ("500", 10.0, 2.0, vec![5.0, 10.0].into()),
        ]
    }

    fn value(text: &str, line_start: &str) -> f64 {
        let line = text
            .lines()
            .find(|line| line.starts_with(line_start))
            .unwrap_or_else(|| panic!("no line starting {line_start} in\n{text}"));
        line.split(' ').nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn grpc_counts_every_call_once_and_the_failures_as_unavailable() {
        let mut out = out();
        grpc(&mut out, "shop.Cart", "Get", &[0.1, 1.0], &requests());
        let text = out.text;
        assert_eq!(value(&text, "grpc_server_started_total{"), 100.0);
        assert_eq!(value(&text, "grpc_server_handled_total{grpc_code=\"OK\""), 90.0);
        assert_eq!(
            value(&text, "grpc_server_handled_total{grpc_code=\"Unavailable\""),
            10.0
        );
        assert_eq!(value(&text, "grpc_server_handling_seconds_sum{"), 11.0);
        assert_eq!(value(&text, "grpc_server_handling_seconds_count{"), 100.0);
        assert!(
            text.contains(&format!("le=\"{}\"}} 85 1000", crate::text::number(0.1))),
            "{text}"
        );
    }

    #[test]
    fn the_mesh_prints_milliseconds_and_classifies_5xx_as_failures() {
        let peers = Peers {
            source: "api",
            destination: "backend",
            namespace: "prod",
            grpc: false,
        };
        let mut out = out();
        istio(&mut out, &peers, &[0.1, 1.0], &requests());
        let text = out.text;
        assert!(
            text.contains("response_code=\"500\",response_flags=\"-\",source_workload=\"api\""),
            "{text}"
        );
        assert!(text.contains("le=\"100\"} 80 1000"), "{text}");
        assert_eq!(
            value(&text, "istio_request_duration_milliseconds_sum{connection_security_policy=\"mutual_tls\",destination_service=\"backend.prod.svc.cluster.local\",destination_workload=\"backend\",destination_workload_namespace=\"prod\",reporter=\"destination\",request_protocol=\"http\",response_code=\"200\""),
            9000.0
        );
        let mut out = crate::instrument::tests::out();
        linkerd(&mut out, &peers, &[0.1, 1.0], &requests());
        let text = out.text;
        assert_eq!(
            value(
                &text,
                "response_total{authority=\"backend.prod.svc.cluster.local:8080\",classification=\"failure\""
            ),
            10.0
        );
        assert_eq!(value(&text, "response_latency_ms_sum{authority=\"backend.prod.svc.cluster.local:8080\",direction=\"inbound\",status_code=\"500\""), 2000.0);
        assert!(
            text.contains("tls=\"true\",client_id=\"api.prod.serviceaccount.identity.linkerd.cluster.local\"}"),
            "{text}"
        );
    }
}
