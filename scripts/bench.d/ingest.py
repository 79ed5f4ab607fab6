#!/usr/bin/env python3
"""One ingest run of the comparison in scripts/bench: epicenter or Prometheus scraping the
node_exporter-shaped targets of targets.py, measured the same way for both.

    ingest.py --system epicenter|prometheus --targets N --base-port P --workdir DIR
              [--warmup-s 15] [--window-s 60] [--series 1000] [--interval-s 1] [--no-disk]
              [--epicenter BIN] [--prometheus BIN]

Starts the collector with a configuration scraping every target every --interval-s seconds
(timeout the interval, at most 5 s; the targets serve --series series each, as targets.py
was started with),
waits for it to be ready and for --warmup-s seconds, then measures over --window-s seconds:

- cpu_seconds: user + system time of the collector process (all its threads: epicenter's
  embedded ClickHouse engine included), from /proc/<pid>/stat;
- scrapes: scrapes that ran and were up (epicenter: `epicenter_scrapes_total`; Prometheus:
  `count_over_time(up[window])` and `sum_over_time(up[window])` through its query API),
  skipped ones it recorded (epicenter: `epicenter_scrapes_skipped_total`; Prometheus records
  none), and the scrapes the schedule asked for (targets × window ÷ 1 s);
- samples: samples read from the targets' bodies (scrapes × series per target), and those the
  store appended (epicenter: `epicenter_sink_rows_written_total{table="samples"}`;
  Prometheus: `prometheus_tsdb_head_samples_appended_total` less its five synthetic series per
  scrape);
- peak_rss_bytes: VmHWM of the process at the end of the window, and active_series (targets ×
  series per target) to divide it by.

Then, unless --no-disk, the on-disk cost of everything stored since start, in bytes per sample: epicenter's
`sample_values` and `series` tables as the run leaves them and after `OPTIMIZE … FINAL` (all tables
too), read with `epicenter sql`; Prometheus's WAL, and the block a TSDB snapshot (admin API)
writes from its head, each divided by the samples appended.

Prints one JSON object on stdout. Exits 1 naming what failed.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def fail(message):
    print(f"ingest.py: {message}", file=sys.stderr)
    sys.exit(1)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of proc(5); fields[0] here is field 3.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_bytes(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def metric_sum(text, name, label_filter=""):
    """Sum of the samples of `name` whose label text contains `label_filter`."""
    total = 0.0
    pattern = re.compile(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)", re.MULTILINE)
    for match in pattern.finditer(text):
        if label_filter in (match.group(1) or ""):
            total += float(match.group(2))
    return total


def fetch(url, data=None, timeout=10):
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode()


def wait_ready(process, url, log_path, deadline_s=120):
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        if process.poll() is not None:
            with open(log_path, encoding="utf-8", errors="replace") as handle:
                tail = "".join(handle.readlines()[-5:])
            fail(f"the collector exited with status {process.returncode} before it was ready; "
                 f"the end of {log_path}:\n{tail}")
        try:
            fetch(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    fail(f"{url} did not answer within {deadline_s} s")


def counters(system, text):
    if system == "epicenter":
        ran = metric_sum(text, "epicenter_scrapes_total")
        return {
            "scrapes_ran": ran,
            "scrapes_up": metric_sum(text, "epicenter_scrapes_total", 'result="up"'),
            "scrapes_recorded_skipped": metric_sum(text, "epicenter_scrapes_skipped_total"),
            "samples_stored": metric_sum(text, "epicenter_sink_rows_written_total", 'table="samples"'),
        }
    return {"samples_appended": metric_sum(text, "prometheus_tsdb_head_samples_appended_total")}


def prometheus_scrapes(listen, window_s):
    """Scrapes Prometheus ran in the last `window_s` seconds, and those that were up: from its
    own `up` series through the query API (one `up` sample per scrape, as epicenter's
    `scrapes` rows)."""
    def value(expression):
        query = urllib.parse.urlencode({"query": expression})
        answer = json.loads(fetch(f"http://{listen}/api/v1/query?{query}"))
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else 0.0
    window = f"{int(round(window_s * 1000))}ms"
    return value(f"sum(count_over_time(up[{window}]))"), value(f"sum(sum_over_time(up[{window}]))")


def directory_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def epicenter_sql(binary, store, query, write=False):
    command = [binary, "sql", "--data", store, "--format", "TabSeparated"]
    if write:
        command.append("--write")
    done = subprocess.run(command + [query], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        fail(f"epicenter sql {query!r}: {done.stderr.strip()}")
    return done.stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=["epicenter", "prometheus"], required=True)
    parser.add_argument("--targets", type=int, required=True)
    parser.add_argument("--base-port", type=int, required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--warmup-s", type=float, default=15)
    parser.add_argument("--window-s", type=float, default=60)
    parser.add_argument("--epicenter", default="target/release/epicenter")
    parser.add_argument("--prometheus", default="prometheus")
    parser.add_argument("--listen-port", type=int, default=29464)
    parser.add_argument("--series", type=int, default=1000, help="series per target (targets.py's SERIES)")
    parser.add_argument("--interval-s", type=int, default=1, help="scrape interval, whole seconds")
    parser.add_argument("--no-disk", action="store_true", help="skip the bytes-on-disk measurement")
    parser.add_argument("--round", type=int, default=1, help="which round of an alternating series this run is (kept in the result)")
    args = parser.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    targets = ", ".join(f"'127.0.0.1:{args.base_port + i}'" for i in range(args.targets))
    scrape = (
        f"global: {{scrape_interval: {args.interval_s}s, scrape_timeout: {min(args.interval_s, 5)}s}}\n"
        "scrape_configs:\n"
        f"  - job_name: node\n    static_configs:\n      - targets: [{targets}]\n"
    )
    listen = f"127.0.0.1:{args.listen_port}"
    store = os.path.join(args.workdir, "store")
    config = os.path.join(args.workdir, f"{args.system}.yml")
    log_path = os.path.join(args.workdir, f"{args.system}.log")
    log = open(log_path, "w", encoding="utf-8")
    if args.system == "epicenter":
        with open(config, "w", encoding="utf-8") as handle:
            handle.write(scrape + f"storage:\n  embedded: {{path: '{store}'}}\n  http: {{listen_address: ''}}\n"
                         f"server: {{listen_address: '{listen}'}}\n")
        command = [args.epicenter, "run", "--config", config]
        ready_url = f"http://{listen}/readyz"
        stop_signal = signal.SIGINT
    else:
        with open(config, "w", encoding="utf-8") as handle:
            handle.write(scrape)
        command = [args.prometheus, f"--config.file={config}", f"--storage.tsdb.path={store}",
                   f"--web.listen-address={listen}", "--web.enable-admin-api"]
        ready_url = f"http://{listen}/-/ready"
        stop_signal = signal.SIGTERM
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=args.workdir)
    try:
        wait_ready(process, ready_url, log_path)
        time.sleep(args.warmup_s)
        metrics_url = f"http://{listen}/metrics"
        before = counters(args.system, fetch(metrics_url))
        cpu_before = cpu_seconds(process.pid)
        started = time.time()
        time.sleep(args.window_s)
        cpu_after = cpu_seconds(process.pid)
        window = time.time() - started
        after = counters(args.system, fetch(metrics_url))
        peak = peak_rss_bytes(process.pid)
        result = {key: after[key] - before[key] for key in before}
        if args.system == "epicenter":
            # The store's samples rows include the five synthetic series of every scrape
            # (`up`, `scrape_duration_seconds`, …), as Prometheus's appended samples do.
            result["samples_stored"] -= 5 * result["scrapes_ran"]
        else:
            ran, up = prometheus_scrapes(listen, window)
            result.update({"scrapes_ran": ran, "scrapes_up": up, "scrapes_recorded_skipped": 0.0,
                           "samples_stored": result.pop("samples_appended") - 5 * ran})
        result.update({
            "system": args.system,
            "round": args.round,
            "targets": args.targets,
            "window_s": round(window, 2),
            "cpu_seconds": round(cpu_after - cpu_before, 3),
            "scrapes_scheduled": args.targets * window / args.interval_s,
            "samples_scraped": result["scrapes_up"] * args.series,
            "peak_rss_bytes": peak,
            "series_per_target": args.series,
            "interval_s": args.interval_s,
            "active_series": args.targets * args.series,
        })
        if args.system == "prometheus" and not args.no_disk:
            total = metric_sum(fetch(metrics_url), "prometheus_tsdb_head_samples_appended_total")
            result["wal_bytes"] = directory_bytes(os.path.join(store, "wal"))
            snapshot = json.loads(fetch(f"http://{listen}/api/v1/admin/tsdb/snapshot", data=b"", timeout=300))
            name = snapshot["data"]["name"]
            result["block_bytes"] = directory_bytes(os.path.join(store, "snapshots", name))
            result["samples_total"] = total
            result["wal_bytes_per_sample"] = result["wal_bytes"] / total
            result["block_bytes_per_sample"] = result["block_bytes"] / total
    finally:
        process.send_signal(stop_signal)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if args.system == "epicenter" and not args.no_disk:
        # A sample is stored as a `sample_values` row plus its share of its `series` row
        # (schema 3); the rows counted are `sample_values`'.
        parts = ("SELECT sumIf(rows, table = 'sample_values'), sum(bytes_on_disk) FROM system.parts "
                 "WHERE active AND database = currentDatabase() AND table IN ('sample_values', 'series')")
        everything = ("SELECT sum(bytes_on_disk) FROM system.parts "
                      "WHERE active AND database = currentDatabase()")
        rows, as_left = map(int, epicenter_sql(args.epicenter, store, parts).split())
        all_left = int(epicenter_sql(args.epicenter, store, everything))
        for table in ("sample_values", "series"):
            epicenter_sql(args.epicenter, store, f"OPTIMIZE TABLE {table} FINAL", write=True)
        _, merged = map(int, epicenter_sql(args.epicenter, store, parts).split())
        all_merged = int(epicenter_sql(args.epicenter, store, everything))
        result.update({
            "samples_total": rows,
            "samples_bytes_per_sample": as_left / rows,
            "samples_bytes_per_sample_merged": merged / rows,
            "all_tables_bytes_per_sample": all_left / rows,
            "all_tables_bytes_per_sample_merged": all_merged / rows,
        })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
