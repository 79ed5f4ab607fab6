#!/usr/bin/env python3
"""The three scrape bodies of the parser comparison (scripts/bench), written to DIR.

- node.prom: one node_exporter-shaped target (targets.py: 1,000 series, the ingest
  comparison's body);
- histogram.prom: a client_golang-instrumented HTTP server, `promhttp` style: the
  `http_request_duration_seconds` and `http_response_size_bytes` histograms by
  code/handler/method (the default 11 buckets of `prometheus.DefBuckets` and 8 size
  buckets), plus their request counters: about 5,000 samples, most of them `_bucket` lines;
- cadvisor.prom: cAdvisor's `/metrics` for 120 containers on a kubelet: the `container_*`
  families with cAdvisor's label set (container, id, image, name, namespace, pod, and cpu,
  device, interface where the family has them), long cgroup ids and image references, and a
  millisecond timestamp on every sample, as cAdvisor prints them: about 5,500 samples.

Deterministic (fixed seeds), so every run parses the same bytes. Usage: bodies.py DIR
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import targets  # noqa: E402  (the node_exporter-shaped body lives there)


def histogram_body():
    rng = random.Random(7)
    handlers = [f"/api/v1/{noun}{suffix}" for noun in
                ["users", "orders", "carts", "payments", "sessions", "search", "items",
                 "stock", "reviews", "invoices"]
                for suffix in ["", "/{id}", "/{id}/history"]]
    codes = ["200", "201", "204", "304", "400", "404", "409", "500", "503"]
    methods = ["get", "post", "put", "delete"]
    combos = [(c, h, m) for h in handlers for m in methods for c in codes if rng.random() < 0.16]
    out = []
    duration_le = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10"]
    size_le = ["100", "1000", "10000", "100000", "1e+06", "1e+07", "1e+08", "1e+09"]
    for name, bounds, help_text in [
        ("http_request_duration_seconds", duration_le, "A histogram of latencies for requests."),
        ("http_response_size_bytes", size_le, "A histogram of response sizes for requests."),
    ]:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} histogram\n")
        for code, handler, method in combos:
            base = f'code="{code}",handler="{handler}",method="{method}"'
            total = rng.randint(10, 5_000_000)
            running = 0
            for le in bounds:
                running += int((total - running) * rng.uniform(0.1, 0.6))
                out.append(f'{name}_bucket{{{base},le="{le}"}} {running}\n')
            out.append(f'{name}_bucket{{{base},le="+Inf"}} {total}\n')
            out.append(f"{name}_sum{{{base}}} {total * rng.uniform(0.01, 0.3)!r}\n")
            out.append(f"{name}_count{{{base}}} {total}\n")
    out.append("# HELP http_requests_total Total number of HTTP requests by status code.\n"
               "# TYPE http_requests_total counter\n")
    for code, handler, method in combos:
        out.append(f'http_requests_total{{code="{code}",handler="{handler}",method="{method}"}} '
                   f"{rng.randint(10, 5_000_000)}\n")
    return "".join(out)


CADVISOR_COUNTERS = [
    "container_cpu_system_seconds_total", "container_cpu_user_seconds_total",
    "container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total",
    "container_cpu_cfs_throttled_seconds_total", "container_memory_failcnt",
    "container_memory_failures_total", "container_fs_reads_total", "container_fs_writes_total",
    "container_fs_reads_bytes_total", "container_fs_writes_bytes_total",
    "container_network_receive_bytes_total", "container_network_transmit_bytes_total",
    "container_network_receive_packets_total", "container_network_transmit_packets_total",
    "container_network_receive_errors_total", "container_network_transmit_errors_total",
    "container_network_receive_packets_dropped_total",
    "container_network_transmit_packets_dropped_total",
]
CADVISOR_GAUGES = [
    "container_memory_cache", "container_memory_rss", "container_memory_swap",
    "container_memory_usage_bytes", "container_memory_working_set_bytes",
    "container_memory_mapped_file", "container_spec_cpu_period", "container_spec_cpu_quota",
    "container_spec_cpu_shares", "container_spec_memory_limit_bytes",
    "container_fs_usage_bytes", "container_fs_limit_bytes", "container_processes",
    "container_threads", "container_sockets", "container_file_descriptors",
    "container_last_seen", "container_start_time_seconds",
]


def cadvisor_body():
    rng = random.Random(11)
    containers = []
    for index in range(120):
        namespace = ["default", "kube-system", "payments", "search", "monitoring"][index % 5]
        app = f"svc-{index // 3:02d}"
        pod = f"{app}-{rng.getrandbits(40):010x}"[:len(app) + 11] + f"-{rng.getrandbits(20):05x}"
        pod_uid = "-".join(f"{rng.getrandbits(bits):0{bits // 4}x}" for bits in (32, 16, 16, 16, 48))
        container_id = f"{rng.getrandbits(256):064x}"
        containers.append({
            "container": app,
            "id": f"/kubepods/burstable/pod{pod_uid}/{container_id}",
            "image": f"registry.example.com/{namespace}/{app}:1.{index % 7}.{index % 13}",
            "name": f"k8s_{app}_{pod}_{namespace}_{pod_uid}_0",
            "namespace": namespace,
            "pod": pod,
        })
    timestamp_ms = 1_764_806_400_000
    out = []

    def label_text(container, extra):
        pairs = dict(container)
        pairs.update(extra)
        return ",".join(f'{key}="{pairs[key]}"' for key in sorted(pairs))

    def family(name, kind, extras_for):
        out.append(f"# HELP {name} cAdvisor metric {name}.\n# TYPE {name} {kind}\n")
        for container in containers:
            for extra in extras_for:
                value = rng.uniform(0, 1e9) if kind == "counter" else float(rng.randint(0, 1 << 32))
                stamp = timestamp_ms + rng.randint(0, 999)
                out.append(f"{name}{{{label_text(container, extra)}}} {value!r} {stamp}\n")

    family("container_cpu_usage_seconds_total", "counter", [{"cpu": "total"}])
    for name in CADVISOR_COUNTERS:
        if "network" in name:
            extras = [{"interface": "eth0"}, {"interface": "eth1"}]
        elif "_fs_" in name:
            extras = [{"device": "/dev/nvme0n1"}]
        else:
            extras = [{}]
        family(name, "counter", extras)
    for name in CADVISOR_GAUGES:
        family(name, "gauge", [{"device": "/dev/nvme0n1"}] if "_fs_" in name else [{}])
    return "".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    directory = sys.argv[1]
    os.makedirs(directory, exist_ok=True)
    node = targets.body(targets.families(1000, seed=19), phase=0.0, now=1_000_000.0)
    with open(os.path.join(directory, "node.prom"), "wb") as handle:
        handle.write(node)
    for name, text in [("histogram.prom", histogram_body()), ("cadvisor.prom", cadvisor_body())]:
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(text)
