#!/usr/bin/env python3
"""The cookbook's queries (docs/investigation.md) on schema 3's thin layout against the same
questions as the cookbook asked them on schema 2's wide `samples` table, on the same data, in
the same run (scripts/bench, phase `queries`).

For each demo store the cookbook names (`<!-- store: NAME -->` before a question; the
redis-node-loss demo otherwise), this runs `epicenter demo --scenario NAME` into a fresh
directory, then copies the `samples` view into `samples_wide`: schema 2's table, with its
columns, sorting key (metric, dc, host, series_id, time) and codecs. `OPTIMIZE … FINAL` merges
`sample_values`, `series` and `samples_wide` alike. Each question then runs `--repeat` times
on each layout, alternating: as docs/investigation.md asks it now (the thin layout), and as
the page asked it at `--before` (a commit of schema 2; default 2555e5f, the last one) with
`samples` read from `samples_wide` (as it ran then). Questions are paired by title. The time is
the engine's own (`statistics.elapsed` of ClickHouse's JSON output format, so the
`epicenter sql` process start is not in it); the figure is the median.

Usage: queries.py --epicenter BIN --workdir DIR [--repeat N] [--before REV]
Prints one JSON object per question on stdout. Exits 1 naming what failed.
"""

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

WIDE = """CREATE TABLE samples_wide (
    time DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
    metric LowCardinality(String),
    job LowCardinality(String),
    instance LowCardinality(String),
    dc LowCardinality(String),
    host LowCardinality(String),
    service LowCardinality(String),
    labels Map(LowCardinality(String), String),
    value Float64 CODEC(Gorilla, ZSTD(1)),
    series_id UInt64 CODEC(ZSTD(1))
) ENGINE = MergeTree PARTITION BY toDate(time) ORDER BY (metric, dc, host, series_id, time)
AS SELECT time, metric, job, instance, dc, host, service, labels, value, series_id FROM samples"""


def questions(page):
    """(title, sql, store) of each question, as tests/common's cookbook_questions reads them."""
    found, heading, store, sql = [], None, "redis-node-loss", None
    for line in page.splitlines():
        if line.startswith("## "):
            heading, store = line[3:], "redis-node-loss"
        elif line.startswith("<!-- store: ") and line.endswith(" -->"):
            store = line[len("<!-- store: "):-len(" -->")]
        elif line == "```sql":
            sql = ""
        elif line == "```":
            if heading is not None and sql is not None:
                found.append((heading, sql, store))
            heading, sql = None, None
        elif sql is not None:
            sql += line + "\n"
    return found


def fail(message):
    print(f"queries.py: {message}", file=sys.stderr)
    sys.exit(1)


def sql(binary, store, query, write=False, fmt="TabSeparated"):
    command = [binary, "sql", "--data", str(store), "--format", fmt]
    if write:
        command.append("--write")
    done = subprocess.run(command + [query], capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"epicenter sql on {store} failed: {done.stderr.strip()}\n{query}")
    return done.stdout


def elapsed(binary, store, query):
    """The engine's time for `query`, seconds, and the rows it read."""
    answer = json.loads(sql(binary, store, query, fmt="JSON"))
    return answer["statistics"]["elapsed"], answer["statistics"]["rows_read"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epicenter", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--before", default="2555e5f")
    args = parser.parse_args()
    found = questions(Path("docs/investigation.md").read_text())
    shown = subprocess.run(["git", "show", f"{args.before}:docs/investigation.md"], capture_output=True, text=True)
    if shown.returncode != 0:
        fail(f"cannot read docs/investigation.md at {args.before}: {shown.stderr.strip()}")
    before = {title: query for title, query, _ in questions(shown.stdout)}
    if not found or set(before) != {title for title, _, _ in found}:
        fail(f"the questions of docs/investigation.md and of {args.before} differ")
    stores = {}
    for store in sorted({store for _, _, store in found}):
        data = args.workdir / store
        shutil.rmtree(data, ignore_errors=True)
        args.workdir.mkdir(parents=True, exist_ok=True)
        print(f"queries.py: epicenter demo --scenario {store}", file=sys.stderr)
        demo = subprocess.run([args.epicenter, "demo", "--scenario", store, "--data", str(data)],
                              capture_output=True, text=True)
        if demo.returncode != 0:
            fail(f"epicenter demo --scenario {store} failed: {demo.stderr.strip()[-2000:]}")
        sql(args.epicenter, data, WIDE, write=True)
        for table in ("sample_values", "series", "samples_wide"):
            sql(args.epicenter, data, f"OPTIMIZE TABLE {table} FINAL", write=True)
        stores[store] = data
    for title, query, store in found:
        wide = re.sub(r"\bsamples\b", "samples_wide", before[title])
        thin_times, wide_times = [], []
        for _ in range(args.repeat):
            seconds, thin_rows = elapsed(args.epicenter, stores[store], query)
            thin_times.append(seconds)
            seconds, wide_rows = elapsed(args.epicenter, stores[store], wide)
            wide_times.append(seconds)
        print(json.dumps({
            "title": title, "store": store,
            "thin_ms": statistics.median(thin_times) * 1000, "wide_ms": statistics.median(wide_times) * 1000,
            "thin_rows_read": thin_rows, "wide_rows_read": wide_rows,
            "samples": int(sql(args.epicenter, stores[store], "SELECT count() FROM sample_values").strip()),
        }), flush=True)
    for data in stores.values():
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
