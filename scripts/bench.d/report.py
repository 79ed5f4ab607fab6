#!/usr/bin/env python3
"""Writes BENCHMARKS.md (to stdout) from the results scripts/bench left in RESULTS_DIR.

    report.py RESULTS_DIR COMMAND QUICK [PREVIOUS]

Reads machine.json, parse.txt (RESULT lines), ingest.jsonl and memory.jsonl (one JSON object per run),
fleet-embedded.txt, fleet-null.txt, queries.jsonl, tick-<series>.txt and realdev.json, whichever exist;
each section names when its file was written (a run with --only keeps the other phases' older
files). A section whose file is missing is taken from PREVIOUS (the BENCHMARKS.md this run
replaces) when it holds one, marked as kept from there; else it says it was not run.
"""

import json
import os
import re
import sys
import time

results, command, quick = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
previous = sys.argv[4] if len(sys.argv) > 4 else None


def path(name):
    return os.path.join(results, name)


def written(name):
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(os.path.getmtime(path(name))))


def ratio_text(value):
    return f"{value:.2f}×"


lines = []
emit = lines.append
machine = json.load(open(path("machine.json")))
emit("# Benchmarks")
emit("")
emit(f"Written by `{command}` (scripts/bench; what each phase does is in its `--help`).")
if quick:
    emit("")
    emit("**Quick run (`--quick`): short windows, one load. These figures check the script, not "
         "epicenter; do not compare them.**")
emit("")
emit("| | |")
emit("| --- | --- |")
emit(f"| machine | {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, "
     f"{machine['os']} (kernel {machine['kernel']}) |")
emit(f"| date | {machine['date']} (load average {machine['load_at_start']:.2f} at start) |")
emit(f"| commit | {machine['commit']}{' with uncommitted changes' if machine['dirty'] else ''} |")
emit(f"| toolchains | {machine['rustc']}; {machine['go']}; {machine['prometheus']} |")
emit("")

acceptance = []

# ---------------------------------------------------------------------------------------------
emit("## Parser: nanoseconds per sample, one core")
emit("")
if os.path.exists(path("parse.txt")):
    figures = {}
    samples = {}
    for line in open(path("parse.txt")):
        match = re.match(r"RESULT parser=(\S+) body=(\S+) samples=(\d+) ns_per_sample=([\d.]+)", line)
        if match:
            parser, body, count, ns = match.groups()
            # Several rounds (scripts/bench alternates the parsers): each parser's best.
            figures[(parser, body)] = min(float(ns), figures.get((parser, body), float("inf")))
            samples.setdefault(body, set()).add(int(count))
    emit(f"Written {written('parse.txt')}. Three rounds, epicenter's and the Go parsers' "
         "alternating (a busy spell of a shared machine then hits both); in each, the best of 10 "
         "runs, each parsing the body as many times as fit in 100 ms; the best round is shown. Bodies from scripts/bench.d/bodies.py. `textparse` is Prometheus "
         "2.42's scrape loop for a series in its scrape cache (`Next` + `Series`, no labels "
         "built); `textparse+labels` also calls `Metric` (a new series). `epicenter-scrape` is "
         "how epicenter's scrape parses (`parse_deferring_labels`: every byte checked, label "
         "sets kept unread until the scrape cache meets a new series), the counterpart of "
         "`textparse`; `epicenter` builds every label (`parse`), the counterpart of "
         "`textparse+labels`.")
    emit("")
    parsers = ["epicenter-scrape", "textparse", "epicenter", "textparse+labels", "expfmt", "prometheus-parse"]
    emit("| body | samples | " + " | ".join(parsers) + " | textparse ÷ epicenter-scrape | textparse+labels ÷ epicenter |")
    emit("| --- | --- |" + " --- |" * (len(parsers) + 2))
    for body in ["node.prom", "histogram.prom", "cadvisor.prom"]:
        if ("epicenter", body) not in figures:
            continue
        counts = samples[body]
        count_text = str(counts.pop()) if len(counts) == 1 else "DISAGREE: " + ", ".join(map(str, sorted(counts)))
        cells = [f"{figures[(p, body)]:.0f}" if (p, body) in figures else "—" for p in parsers]
        scrape = figures.get(("epicenter-scrape", body), figures[("epicenter", body)])
        lead = figures.get(("textparse", body), 0) / scrape
        eager_lead = figures.get(("textparse+labels", body), 0) / figures[("epicenter", body)]
        emit(f"| {body} | {count_text} | " + " | ".join(cells) + f" | {ratio_text(lead)} | {ratio_text(eager_lead)} |")
        acceptance.append((f"parser ≥ 2× textparse on {body}", lead >= 2.0, ratio_text(lead)))
else:
    emit("Not run.")
emit("")

# ---------------------------------------------------------------------------------------------
emit("## Ingest: epicenter run against Prometheus 2.42 on the same targets")
emit("")
if os.path.exists(path("ingest.jsonl")):
    runs = [json.loads(line) for line in open(path("ingest.jsonl")) if line.strip()]
    emit(f"Written {written('ingest.jsonl')}. 1,000-series node_exporter-shaped targets "
         "(scripts/bench.d/targets.py) scraped every second, timeout 1 s; one system at a time, "
         "in rounds ordered epicenter, Prometheus, Prometheus, epicenter (a slow spell of the shared "
         "machine weighs on both systems alike); epicenter with its defaults (embedded store, "
         "detector on, spool on). "
         "CPU is user + system time of the collector's process over the window "
         "(epicenter's embedded ClickHouse engine is in that process; Prometheus's TSDB too). "
         "Samples are those read from targets (scrapes that were up × 1,000); epicenter's "
         "\"samples stored\" counts rows as its 5 s batches are flushed, so it can exceed them. Active series: targets × "
         "1,000 (a fixed baseline is in each process's RSS, so the per-series figure falls as "
         "the load grows). The ratios below add up each system's rounds: CPU over samples, the "
         "highest peak RSS.")
    emit("")
    emit("| targets | system | round | window s | samples/s | cores | CPU-s per 1M samples | "
         "scrapes ran / recorded skipped / scheduled | samples stored | peak RSS MiB | "
         "peak RSS GiB per 1M active series |")
    emit("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    def cpu_per_million_samples(rounds):
        """CPU-s per million samples over `rounds` of one system at one load."""
        samples = sum(run["samples_scraped"] for run in rounds)
        return sum(run["cpu_seconds"] for run in rounds) / samples * 1e6 if samples else float("nan")

    by_load = {}
    for run in runs:  # in the order they ran
        per_second = run["samples_scraped"] / run["window_s"]
        per_million = cpu_per_million_samples([run])
        by_load.setdefault(run["targets"], {}).setdefault(run["system"], []).append(run)
        emit(f"| {run['targets']} | {run['system']} | {run.get('round', 1)} | {run['window_s']:.0f} | {per_second:,.0f} | "
             f"{run['cpu_seconds'] / run['window_s']:.2f} | {per_million:.2f} | "
             f"{run['scrapes_ran']:.0f} / {run['scrapes_recorded_skipped']:.0f} / "
             f"{run['scrapes_scheduled']:.0f} | {run['samples_stored']:,.0f} | "
             f"{run['peak_rss_bytes'] / 1048576:.0f} | "
             f"{run['peak_rss_bytes'] / 1073741824 / (run['targets'] * 1000 / 1e6):.1f} |")
    emit("")

    for load, pair in sorted(by_load.items()):
        if "epicenter" in pair and "prometheus" in pair:
            mine, theirs = pair["epicenter"], pair["prometheus"]
            cost = cpu_per_million_samples(mine) / cpu_per_million_samples(theirs)
            rss = max(run["peak_rss_bytes"] for run in mine) / max(max(run["peak_rss_bytes"] for run in theirs), 1)
            rounds = sorted({run.get("round", 1) for run in mine} & {run.get("round", 1) for run in theirs})
            each = ", ".join(
                ratio_text(cpu_per_million_samples([run for run in mine if run.get("round", 1) == number])
                           / cpu_per_million_samples([run for run in theirs if run.get("round", 1) == number]))
                for number in rounds)
            emit(f"- {load} targets: epicenter spends **{ratio_text(cost)}** Prometheus's CPU per "
                 f"sample ({len(mine)} and {len(theirs)} rounds; round by round {each}) and holds {ratio_text(rss)} "
                 "its peak RSS.")
            acceptance.append((f"ingest CPU per sample ≤ 1.0× Prometheus at {load}k samples/s",
                               cost <= 1.0, ratio_text(cost)))
            accounted = sum(run["scrapes_up"] + run["scrapes_recorded_skipped"] for run in mine)
            scheduled = sum(run["scrapes_scheduled"] for run in mine)
            # ±1 slot per target and round: a window's edges cut through scrapes in flight.
            complete = accounted >= scheduled - load * len(mine)
            acceptance.append((f"every scheduled scrape stored or recorded at {load}k samples/s",
                               complete, f"{accounted:.0f} of {scheduled:.0f}"))
    emit("")
    emit("### Bytes per sample on disk (everything stored since start, in the first round: warm-up and one window)")
    emit("")
    emit("| targets | epicenter `samples` as left | after `OPTIMIZE … FINAL` | all tables as left | "
         "all tables merged | Prometheus WAL | Prometheus block (snapshot of the head) |")
    emit("| --- | --- | --- | --- | --- | --- | --- |")
    for load, pair in sorted(by_load.items()):
        # The round that measured the disk (the first).
        def measured(system):
            return next((run for run in pair.get(system, []) if "samples_total" in run), {})
        e, p = measured("epicenter"), measured("prometheus")
        def cell(run, key):
            return f"{run[key]:.2f}" if key in run else "—"
        emit(f"| {load} | {cell(e, 'samples_bytes_per_sample')} | {cell(e, 'samples_bytes_per_sample_merged')} | "
             f"{cell(e, 'all_tables_bytes_per_sample')} | {cell(e, 'all_tables_bytes_per_sample_merged')} | "
             f"{cell(p, 'wal_bytes_per_sample')} | {cell(p, 'block_bytes_per_sample')} |")
        if "samples_bytes_per_sample_merged" in e and "block_bytes_per_sample" in p:
            acceptance.append((f"bytes per sample after merges ≤ Prometheus's block ({load} targets)",
                               e["samples_bytes_per_sample_merged"] <= p["block_bytes_per_sample"],
                               f"{e['samples_bytes_per_sample_merged']:.2f} vs {p['block_bytes_per_sample']:.2f}"))
    emit("")
    emit("Not a settled comparison: after a run this short Prometheus's snapshot block carries "
         "its index for only a minute or so of samples per series (in a real two-hour block the "
         "index is negligible), and epicenter's parts have had few merges; the verdict below "
         "flips with the run's length. Compare the columns of one row, not rows of different runs.")
else:
    emit("Not run.")
emit("")

# ---------------------------------------------------------------------------------------------
emit("## Memory at a million active series")
emit("")
if os.path.exists(path("memory.jsonl")):
    runs = [json.loads(line) for line in open(path("memory.jsonl")) if line.strip()]
    emit(f"Written {written('memory.jsonl')}. The same node_exporter-shaped targets with 10,000 "
         "series each, scraped every 10 s (timeout 5 s): the sample rate of the 100-target ingest "
         "run, ten times the series. Each system warmed up, then measured over the window; peak "
         "RSS is VmHWM at its end, all of it divided by the active series (the fixed baseline "
         "included, so this is an upper bound per series).")
    emit("")
    emit("| system | active series | window s | cores | scrapes up / scheduled | peak RSS MiB | "
         "peak RSS GiB per 1M active series |")
    emit("| --- | --- | --- | --- | --- | --- | --- |")
    by_system = {}
    for run in runs:
        by_system[run["system"]] = run
        per_million = run["peak_rss_bytes"] / 1073741824 / (run["active_series"] / 1e6)
        emit(f"| {run['system']} | {run['active_series']:,} | {run['window_s']:.0f} | "
             f"{run['cpu_seconds'] / run['window_s']:.2f} | {run['scrapes_up']:.0f} / "
             f"{run['scrapes_scheduled']:.0f} | {run['peak_rss_bytes'] / 1048576:.0f} | {per_million:.2f} |")
    if "epicenter" in by_system and "prometheus" in by_system:
        rss = by_system["epicenter"]["peak_rss_bytes"] / max(by_system["prometheus"]["peak_rss_bytes"], 1)
        emit("")
        emit(f"- epicenter holds {ratio_text(rss)} Prometheus's peak RSS at "
             f"{by_system['epicenter']['active_series']:,} active series.")
else:
    emit("Not run.")
emit("")

# ---------------------------------------------------------------------------------------------
emit("## Fleet bench (collector/benches/fleet.rs): 200 targets × 500 series every second")
emit("")
for sink in ["embedded", "null"]:
    name = f"fleet-{sink}.txt"
    if not os.path.exists(path(name)):
        emit(f"- {sink} sink: not run.")
        continue
    text = open(path(name)).read()
    cores = re.search(r"= ([\d.]+) cores", text)
    rate = re.search(r"throughput:\s+(\d+) samples/s", text)
    emit(f"- {sink} sink ({written(name)}): "
         f"{cores.group(1) if cores else '?'} cores at {rate.group(1) if rate else '?'} samples/s")
emit("")
emit("The null sink is epicenter's own work (scrape, parse, relabel, encode); the difference is "
     "the embedded engine's inserts and merges.")
emit("")

# ---------------------------------------------------------------------------------------------
emit("## Cookbook queries: schema 3 (thin) against schema 2 (wide), same data")
emit("")
if os.path.exists(path("queries.jsonl")):
    rows = [json.loads(line) for line in open(path("queries.jsonl")) if line.strip()]
    emit(f"Written {written('queries.jsonl')} (scripts/bench.d/queries.py). Each question of "
         "docs/investigation.md on a fresh `epicenter demo` store of its incident: as the page asks it "
         "now, on `sample_values`/`series`/the `samples` view, and as the page asked it on schema 2 "
         "(commit 2555e5f), on a copy of the samples in schema 2's wide table; all tables merged. "
         "Engine time (`statistics.elapsed`), median of the runs, milliseconds.")
    emit("")
    emit("| question | demo | samples in store | schema 3 ms | schema 2 ms | rows read 3 / 2 | 3 ÷ 2 |")
    emit("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        emit(f"| {row['title']} | {row['store']} | {row['samples']:,} | {row['thin_ms']:.1f} | "
             f"{row['wide_ms']:.1f} | {row['thin_rows_read']:,} / {row['wide_rows_read']:,} | "
             f"{row['thin_ms'] / row['wide_ms']:.2f} |")
    total_thin = sum(row["thin_ms"] for row in rows)
    total_wide = sum(row["wide_ms"] for row in rows)
    slowest = max(rows, key=lambda row: row["thin_ms"] / row["wide_ms"])
    emit("")
    emit(f"All eight: {total_thin:.1f} ms on schema 3, {total_wide:.1f} ms on schema 2. A few "
         "milliseconds are the engine's noise on this machine; the demo stores are small "
         "(about 150,000 samples), so these measure per-query overhead as much as reading.")
    acceptance.append(("cookbook queries no slower than schema 2's (sum of the eight)",
                       total_thin <= total_wide, f"{total_thin:.1f} vs {total_wide:.1f} ms"))
    acceptance.append(("cookbook: the slowest question against schema 2",
                       slowest["thin_ms"] <= slowest["wide_ms"] * 1.1,
                       f"{slowest['title'][:40]}…: {slowest['thin_ms'] / slowest['wide_ms']:.2f}×"))
else:
    emit("Not run.")
emit("")

# ---------------------------------------------------------------------------------------------
emit("## Detector tick (detector/benches/tick.rs): one round, observe and assess")
emit("")
ticks = sorted((name for name in os.listdir(results) if re.fullmatch(r"tick-\d+\.txt", name)),
               key=lambda name: int(name[5:-4]))
if ticks:
    emit("The fleet of the simulated services scaled to each size (detector/benches/tick.rs, "
         "`EPICENTER_TICK_SERIES`), 20 series per instance, warmed with 70 rounds; `healthy` is "
         "a quiet round, `fault` one with a host's series and its callers' spiking. The detector's "
         "budget is 250 ms per round at 100,000 series.")
    emit("")
    emit("```")
    for name in ticks:
        for line in open(path(name)):
            if re.match(r"tick/(healthy|fault): \d+ series", line):
                emit(line.rstrip())
    emit("```")
    emit("")
    emit("Written " + ", ".join(written(name) for name in ticks) + ".")
else:
    emit("Not run.")
emit("")

# ---------------------------------------------------------------------------------------------
emit("## Detector on real incidents (issue 38): epicenter eval over Prometheus 2.42")
emit("")
if os.path.exists(path("realdev.json")):
    def share(value):
        return "-" if value is None else f"{value:.2f}"

    def minutes(value):
        return "-" if value is None else f"{value:.1f}"

    emit("../shared/datasets/realdev converted by its own tools, backfilled with promtool and served by "
         "Prometheus 2.42; `epicenter eval --dataset sockshop|nezha … --prometheus URL --json` with the "
         "shipped rules and a `placement` section only (docs/detector.md, \"Real incidents\"). One "
         "incident per case at most (one to one); svc@1: the case's incident names the faulty pod's "
         "service; host@1 over the cases with a known host; kind: one of the fault type's kinds; TTD: "
         "minutes from the fault's start to the incident's opening (median, slowest); false: incidents "
         "matched to no case; quiet gaps clean: the gaps between cases (10 minutes' settling after "
         "each) in which no false verdict opened. naive: the largest robust z of any series of a "
         "service (host) in the fault window against the hour before, and whether any series passes 5 "
         "in a quiet gap (eval/src/naive.rs).")
    emit("")
    emit("| set | fault type | cases | matched | svc@1 | host@1 (of) | kind | TTD min, median (max) | false | quiet gaps clean | naive svc@1 | naive host@1 | naive quiet clean |")
    emit("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for report in json.load(open(path("realdev.json"))):
        for result in report["sets"]:
            rows = result["by_fault_type"] + [dict(result["summary"], fault_type="**all**")]
            for row in rows:
                naive = row.get("naive") or {}
                emit(f"| {result['set']} | {row['fault_type']} | {row['cases']} | {row['matched']} | "
                     f"{share(row['service_top1'])} | {share(row['host_ac1'])} ({row['cases_with_host']}) | "
                     f"{share(row['kind_accuracy'])} | {minutes(row['median_minutes_to_detect'])} "
                     f"({minutes(row['max_minutes_to_detect'])}) | "
                     f"{'-' if row['false_verdicts'] is None else row['false_verdicts']} | "
                     f"{share(row['quiet_gap_share_clean'])} | {share(naive.get('service_top1'))} | "
                     f"{share(naive.get('host_ac1'))} | {share(naive.get('quiet_gap_share_clean'))} |")
    emit("")
    emit("Written " + written("realdev.json") + ".")
else:
    emit("Not run.")
emit("")

# ---------------------------------------------------------------------------------------------
emit("## Issue 19's acceptance lines, as this run measured them")
emit("")
emit("| line | measured | met |")
emit("| --- | --- | --- |")
for line, met, figure in acceptance:
    emit(f"| {line} | {figure} | {'yes' if met else '**no**'} |")
emit("")
emit("Not measured by scripts/bench yet: the dashboards' panel queries' time.")
# Sections this run did not measure keep the previous file's text, marked so.
def sections(text_lines):
    found, name = {}, None
    for line in text_lines:
        if line.startswith("## "):
            name = line
            found[name] = []
        elif name is not None:
            found[name].append(line)
    return found


if previous and os.path.exists(previous):
    kept = sections(open(previous).read().splitlines())
    merged, name, body = [], None, []

    def flush():
        if name is None:
            return
        if [line for line in body if line.strip()] == ["Not run."] and name in kept:
            old = [line for line in kept[name] if not line.startswith("(Kept from the previous")]
            while old and not old[-1].strip():
                old.pop()
            merged.extend(["", "(Kept from the previous BENCHMARKS.md: this run did not measure it.)"] + old + [""])
        else:
            merged.extend(body)

    for line in lines:
        if line.startswith("## "):
            flush()
            name, body = line, []
            merged.append(line)
        elif name is None:
            merged.append(line)
        else:
            body.append(line)
    flush()
    lines = merged
print("\n".join(lines))
