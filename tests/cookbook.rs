//! Every query of docs/investigation.md and every panel and annotation query of the
//! dashboards in dashboards/, run on the stores of real `epicenter demo` runs
//! (redis-node-loss; zone-session-loss for the mailboxes, backend-cold-start for the
//! warm-up), with the answers checked: the verdict names the node, its evidence and the
//! callers point at it, the connection storm ranks the surviving Redis nodes first, the
//! backends' pools have waiters, the dead node's `redis_up` is among what changed before the
//! verdict, the clients' latency peaks towards the dead node, the runaway mailbox
//! (voice_state_sup on voice-1-1) is named first, and the restarted backends are named and
//! slower than the warm ones. The dashboards are linted
//! too (a description on every panel, the data source only through the `datasource`
//! variable). Grafana itself does not run here: the plugin's macros are expanded as its
//! documentation defines them.
//!
//! These run against the wall clock, so they assert only what holds on a busy machine (the
//! demo's own test, tests/cli_demo.rs, says why). Needs `libchdb.so` (`scripts/setup`);
//! skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::path::Path;
use std::process::Command;

use common::cookbook_questions as questions;

/// Rows of `query` on the store at `data`, as `epicenter sql -f` prints them in
/// TabSeparated, split into fields.
fn rows(data: &Path, title: &str, query: &str) -> Vec<Vec<String>> {
    // One file per query: the tests of this file run at once.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = data.with_file_name(format!("query-{number}.sql"));
    std::fs::write(&file, query).unwrap();
    // The embedded store serves one process at a time: the tests of this file take turns.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--format", "TabSeparated", "--data"])
        .arg(data)
        .arg("-f")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{title}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<Vec<String>> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| line.split('\t').map(str::to_string).collect())
        .collect();
    assert!(!rows.is_empty(), "{title}: no rows");
    rows
}

/// The store of one demo of `scenario`, made once for the tests of this file; None
/// (skipped) without chDB outside CI.
fn demo_store(scenario: &'static str) -> Option<&'static Path> {
    static STORES: std::sync::Mutex<std::collections::BTreeMap<&str, Option<&'static Path>>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut stores = STORES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    *stores.entry(scenario).or_insert_with(|| {
        common::require(&[])?;
        let dir = std::env::temp_dir().join(format!("epicenter-cookbook-{}-{scenario}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("data");
        let demo = Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(["demo", "--scenario", scenario, "--data"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            demo.status.success(),
            "{scenario}: {}",
            String::from_utf8_lossy(&demo.stderr)
        );
        std::fs::write(dir.join("finished_ms"), wall_ms().to_string()).unwrap();
        Some(&*Box::leak(data.into_boxed_path()))
    })
}

#[test]
fn every_cookbook_query_answers_its_demo_as_the_page_says() {
    let Some(data) = demo_store("redis-node-loss") else {
        return;
    };
    let questions = questions();
    assert_eq!(questions.len(), 8, "docs/investigation.md has eight questions");

    let answers: Vec<Vec<Vec<String>>> = questions
        .iter()
        .map(|(title, query, store)| match store.as_str() {
            "redis-node-loss" => rows(data, title, query),
            other => rows(demo_store(leak(other)).unwrap(), title, query),
        })
        .collect();
    for ((title, _, _), answer) in questions.iter().zip(&answers) {
        eprintln!("{title}: {} rows, first {:?}", answer.len(), answer[0]);
    }
    let column = |question: usize, row: &[String], name: usize| {
        row.get(name)
            .cloned()
            .unwrap_or_else(|| panic!("{}: {row:?}", questions[question].0))
    };

    // 1. The verdict: node loss of the node on dc-2-host-3.
    assert!(
        answers[0]
            .iter()
            .any(|row| row[2] == "node_loss" && row[3] == "dc-2" && row[4] == "['dc-2-host-3']"),
        "{:?}",
        answers[0]
    );
    // 2. Its evidence: anomalies of the dead node itself or of clients whose peer it is,
    //    most of them (which ones the detector keeps varies from run to run).
    let naming = answers[1]
        .iter()
        .filter(|row| row[0] == "redis-2-1" || column(1, row, 3) == "redis-2-1")
        .count();
    assert!(naming * 2 > answers[1].len(), "{:?}", answers[1]);
    // 3. The callers pointing at it are backends only.
    assert!(answers[2].iter().all(|row| row[0] == "backend"), "{:?}", answers[2]);
    // 4. The storm: every surviving node took more new connections than the dead one,
    //    which comes last.
    let storm = &answers[3];
    assert_eq!(storm.len(), 6, "{storm:?}");
    assert_eq!(column(3, storm.last().unwrap(), 0), "redis-2-1", "{storm:?}");
    let dead: f64 = column(3, storm.last().unwrap(), 1).parse().unwrap();
    for row in &storm[..5] {
        assert!(column(3, row, 1).parse::<f64>().unwrap() > dead, "{storm:?}");
    }
    // 5. Waiters: backends, with threads waiting.
    assert!(column(4, &answers[4][0], 0).starts_with("backend-"), "{:?}", answers[4]);
    assert!(
        column(4, &answers[4][0], 3).parse::<f64>().unwrap() > 0.0,
        "{:?}",
        answers[4]
    );
    // 6. What changed before the verdict includes the dead node's redis_up.
    assert!(
        answers[5]
            .iter()
            .any(|row| row[0] == "redis-2-1" && column(5, row, 3).contains("'redis_up'")),
        "{:?}",
        answers[5]
    );
    // 7. On the cold-start demo: the two restarted backends, and their p99 over three times
    //    the slowest of the ten that kept running.
    let mut started: Vec<&str> = answers[6]
        .iter()
        .filter(|row| column(6, row, 1) == "started")
        .map(|row| row[0].as_str())
        .collect();
    started.sort_unstable();
    assert_eq!(started, ["backend-1-1", "backend-1-2"], "{:?}", answers[6]);
    assert_eq!(answers[6].len(), 12, "{:?}", answers[6]);
    let p99 = |age: &str, pick: fn(f64, f64) -> f64, from: f64| {
        answers[6]
            .iter()
            .filter(|row| row[1] == age)
            .map(|row| column(6, row, 2).parse::<f64>().unwrap())
            .fold(from, pick)
    };
    let (new_fastest, old_slowest) = (
        p99("started", f64::min, f64::INFINITY),
        p99("running before", f64::max, 0.0),
    );
    assert!(
        old_slowest > 0.0 && new_fastest > 3.0 * old_slowest,
        "new {new_fastest} vs old {old_slowest}"
    );
    // 8. On the zone-session-loss demo: the flooded supervisor first, growing, every other
    //    mailbox far behind.
    assert_eq!(answers[7][0][..2], ["voice-1-1", "voice_state_sup"], "{:?}", answers[7]);
    let growth: Vec<f64> = answers[7]
        .iter()
        .map(|row| column(7, row, 2).parse().unwrap())
        .collect();
    assert!(
        growth[0] > 10.0 && growth[1..].iter().all(|other| *other < growth[0] / 10.0),
        "{:?}",
        answers[7]
    );
}

/// A `'static` scenario name for [`demo_store`].
fn leak(name: &str) -> &'static str {
    Box::leak(name.to_string().into_boxed_str())
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// One clock per store: a demo's samples, `up`, scrapes, verdicts and ground truth lie on
/// one time line that ends at the wall clock, so `now() - INTERVAL …` means what it says.
#[test]
fn a_demo_store_has_one_clock_that_ends_at_the_wall_clock() {
    let Some(data) = demo_store("redis-node-loss") else {
        return;
    };
    let spans = rows(
        data,
        "the tables' spans",
        "SELECT 'samples', toUnixTimestamp64Milli(min(time)), toUnixTimestamp64Milli(max(time)) FROM samples WHERE metric != 'up' \
         UNION ALL SELECT 'up', toUnixTimestamp64Milli(min(time)), toUnixTimestamp64Milli(max(time)) FROM samples WHERE metric = 'up' \
         UNION ALL SELECT 'scrapes', toUnixTimestamp64Milli(min(time)), toUnixTimestamp64Milli(max(time)) FROM scrapes \
         UNION ALL SELECT 'verdicts', toUnixTimestamp64Milli(min(time)), toUnixTimestamp64Milli(max(time)) FROM verdicts \
         UNION ALL SELECT 'onset', toUnixTimestamp64Milli(min(onset)), toUnixTimestamp64Milli(max(onset)) FROM ground_truth \
         UNION ALL SELECT 'now', toUnixTimestamp64Milli(now64(3)), toUnixTimestamp64Milli(now64(3))",
    );
    let span = |table: &str| -> (i64, i64) {
        let row = spans.iter().find(|row| row[0] == table).unwrap();
        (row[1].parse().unwrap(), row[2].parse().unwrap())
    };
    let (samples, up, scrapes, verdicts, onset, now) = (
        span("samples"),
        span("up"),
        span("scrapes"),
        span("verdicts"),
        span("onset"),
        span("now"),
    );
    eprintln!("samples {samples:?} up {up:?} scrapes {scrapes:?} verdicts {verdicts:?} onset {onset:?} now {now:?}");
    // The scenario is 10 simulated minutes at 20x: the first scrape within 30 s of its
    // start (the fault is at +3 min), the last within 30 s of the demo's end on the wall
    // clock, and nothing after it.
    let finished: i64 = std::fs::read_to_string(data.with_file_name("finished_ms"))
        .unwrap()
        .parse()
        .unwrap();
    let start = onset.0 - 180_000;
    for (name, (first, last)) in [("samples", samples), ("up", up), ("scrapes", scrapes)] {
        assert!(
            first >= start && first - start < 30_000,
            "{name} starts at {first}, the scenario at {start}"
        );
        assert!(
            last <= finished && last <= now.0,
            "{name} ends at {last}, after the demo ended at {finished}"
        );
        assert!(
            finished - last < 30_000,
            "{name} ends at {last}, the demo at {finished}"
        );
    }
    // The verdict lies between the fault's onset and the last sample.
    assert!(
        verdicts.0 >= onset.0 && verdicts.1 <= samples.1,
        "{verdicts:?} {onset:?} {samples:?}"
    );
    let recent = rows(
        data,
        "the last 10 minutes",
        &format!(
            "SELECT count() > 0, countIf(time > fromUnixTimestamp64Milli({finished}) - INTERVAL 10 MINUTE) / count() FROM scrapes"
        ),
    );
    assert_eq!(recent[0][0], "1");
    assert!(recent[0][1].parse::<f64>().unwrap() > 0.9, "{recent:?}");
}

/// The dashboards' JSON documents, by file name.
fn dashboards() -> Vec<(String, serde_json::Value)> {
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards");
    let mut found: Vec<(String, serde_json::Value)> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let document = serde_json::from_str(&text).unwrap_or_else(|error| panic!("{name}: {error}"));
            (name, document)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Every (where, rawSql) of a dashboard: each panel's targets and each annotation's.
fn queries(name: &str, dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let targets = panel["targets"].as_array().unwrap();
        for target in targets {
            // A panel of several queries (the Node Graph's nodes and edges) keys each by refId.
            let place = match targets.len() {
                1 => format!("{name} / {}", panel["title"]),
                _ => format!("{name} / {} / {}", panel["title"], target["refId"]),
            };
            found.push((place, target["rawSql"].as_str().unwrap().to_string()));
        }
    }
    for annotation in dashboard["annotations"]["list"].as_array().unwrap() {
        found.push((
            format!("{name} / annotation {}", annotation["name"]),
            annotation["target"]["rawSql"].as_str().unwrap().to_string(),
        ));
    }
    found
}

/// `sql` with the ClickHouse data source plugin's macros expanded as its documentation
/// defines them (`$__timeFilter_ms(c)`: `c >= fromUnixTimestamp64Milli(from) AND c <=
/// fromUnixTimestamp64Milli(to)`; `$__timeInterval(c)`: `toStartOfInterval(toDateTime(c),
/// INTERVAL $__interval_s second)`; `$__fromTime`, `$__toTime`: `toDateTime(seconds)`), for
/// the range `from_ms..to_ms`, a 30 s interval and the variables at "All".
fn expand(sql: &str, from_ms: i64, to_ms: i64) -> String {
    let mut text = sql.to_string();
    for (macro_name, expansion) in [
        (
            "$__timeFilter_ms(",
            format!("{{c}} >= fromUnixTimestamp64Milli({from_ms}) AND {{c}} <= fromUnixTimestamp64Milli({to_ms})"),
        ),
        (
            "$__timeInterval(",
            "toStartOfInterval(toDateTime({c}), INTERVAL 30 second)".to_string(),
        ),
    ] {
        while let Some(start) = text.find(macro_name) {
            let open = start + macro_name.len();
            let close = open + text[open..].find(')').unwrap();
            let column = text[open..close].trim().to_string();
            text.replace_range(start..=close, &expansion.replace("{c}", &column));
        }
    }
    text = text
        .replace("$__interval_s", "30")
        .replace("$__fromTime", &format!("toDateTime({})", from_ms / 1000))
        .replace("$__toTime", &format!("toDateTime({})", to_ms / 1000));
    for variable in ["dc", "service", "host"] {
        text = text.replace(&format!("${{{variable}}}"), "__all");
    }
    assert!(!text.contains('$'), "an unexpanded macro or variable: {text}");
    text
}

#[test]
fn the_dashboards_are_linted_and_every_panel_query_answers_on_its_demo() {
    let boards = dashboards();
    assert!(boards.len() >= 4, "{boards:?}");
    for (name, board) in &boards {
        assert!(
            board["description"].as_str().is_some_and(|text| !text.is_empty()),
            "{name}: no description"
        );
        let variables = board["templating"]["list"].as_array().unwrap();
        assert!(
            variables.iter().any(|variable| variable["name"] == "datasource"
                && variable["type"] == "datasource"
                && variable["query"] == "grafana-clickhouse-datasource"),
            "{name}: no datasource variable"
        );
        for panel in board["panels"].as_array().unwrap() {
            let title = &panel["title"];
            assert!(
                panel["description"].as_str().is_some_and(|text| text.len() > 20),
                "{name} / {title}: a panel without a description"
            );
            assert_eq!(panel["datasource"]["uid"], "${datasource}", "{name} / {title}");
            for target in panel["targets"].as_array().unwrap() {
                assert_eq!(
                    target["datasource"]["uid"], "${datasource}",
                    "{name} / {title}: a hard-coded data source"
                );
                assert_eq!(
                    target["datasource"]["type"], "grafana-clickhouse-datasource",
                    "{name} / {title}"
                );
            }
        }
        // No data source uid other than the variable anywhere in the document.
        let text = board.to_string();
        assert_eq!(
            text.matches("\"uid\":").count(),
            text.matches("\"uid\":\"${datasource}\"").count() + 1,
            "{name}: a uid other than the dashboard's own and ${{datasource}}"
        );
    }
    // Each dashboard is run on the demo whose incident it is for.
    let mut answers = std::collections::HashMap::new();
    for (name, board) in &boards {
        let scenario = match name.as_str() {
            "beam-mailboxes.json" => "zone-session-loss",
            "deploys-and-warm-up.json" => "backend-cold-start",
            "pools-and-threads.json" => "db-pool-exhaustion",
            _ => "redis-node-loss",
        };
        let Some(data) = demo_store(scenario) else { return };
        let range = rows(
            data,
            "the demo's range",
            "SELECT toUnixTimestamp64Milli(min(time)), toUnixTimestamp64Milli(max(time)) FROM samples",
        );
        // The warm-up dashboard's range opens 30 s after the first sample, as a range a
        // person chooses does (after the fleet came up), so what started with the fleet is
        // before it. The others take the whole span.
        let opening = if scenario == "backend-cold-start" { 30_000 } else { 0 };
        let (from_ms, to_ms): (i64, i64) = (
            range[0][0].parse::<i64>().unwrap() + opening,
            range[0][1].parse().unwrap(),
        );
        for (place, sql) in queries(name, board) {
            let answer = rows(data, &place, &expand(&sql, from_ms, to_ms));
            eprintln!("{place} on {scenario}: {} rows", answer.len());
            answers.insert(place, answer);
        }
    }
    // The mailbox that ran away is named first: voice_state_sup on voice-1-1.
    let mailboxes = &answers["beam-mailboxes.json / \"Longest mailboxes\""];
    assert_eq!(mailboxes[0][..2], ["voice-1-1", "voice_state_sup"], "{mailboxes:?}");
    // The two restarted backends, and their latency far above the warm ones'.
    let started = &answers["deploys-and-warm-up.json / \"Instances started in the range\""];
    let names: Vec<&str> = started.iter().map(|row| row[0].as_str()).collect();
    assert_eq!(names, ["backend-1-1", "backend-1-2"], "{started:?}");
    let warm_up = &answers["deploys-and-warm-up.json / \"Request latency: started in the range vs running before\""];
    let peak = |age: &str| {
        warm_up
            .iter()
            .filter(|row| row[1] == age)
            .map(|row| row[2].parse::<f64>().unwrap())
            .fold(0.0, f64::max)
    };
    assert!(
        peak("started in range") > 3.0 * peak("running before"),
        "new {} vs old {}",
        peak("started in range"),
        peak("running before")
    );
    // The exhausted pools first: dc-2's four backends waiting on db-2-1, and no other pool
    //    with more than a tenth of their waiters.
    let waiting = &answers["pools-and-threads.json / \"Pools with the most waiters in the range\""];
    let top: Vec<(&str, &str)> = waiting[..4]
        .iter()
        .map(|row| (row[0].as_str(), row[2].as_str()))
        .collect();
    for (instance, pool) in &top {
        assert!(instance.starts_with("backend-2-") && *pool == "db-2-1", "{waiting:?}");
    }
    let most: f64 = waiting[3][3].parse().unwrap();
    assert!(most > 0.0, "{waiting:?}");
    assert!(
        waiting[4..]
            .iter()
            .all(|row| row[3].parse::<f64>().unwrap() <= most / 10.0),
        "{waiting:?}"
    );
    // Collector health on the node-loss demo: all 42 targets listed, each scraped many
    //    times, most failed first (on a busy machine a scrape may time out; the dead node's
    //    exporter itself goes on answering `redis_up 0`).
    let failing = &answers["collector-health.json / \"Failing targets and their last error\""];
    assert_eq!(failing.len(), 42, "{failing:?}");
    let counts: Vec<(u64, u64)> = failing
        .iter()
        .map(|row| (row[2].parse().unwrap(), row[3].parse().unwrap()))
        .collect();
    assert!(
        counts.iter().all(|&(failed, scrapes)| scrapes > 10 && failed < scrapes),
        "{failing:?}"
    );
    assert!(counts.windows(2).all(|pair| pair[0].0 >= pair[1].0), "{failing:?}");
    // The storm panel, summed over the range: every survivor above the dead node.
    let storm = &answers["redis-clients-and-pools.json / \"New connections per Redis node (the storm)\""];
    let mut per_node: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for row in storm {
        *per_node.entry(row[1].clone()).or_default() += row[2].parse::<f64>().unwrap();
    }
    assert_eq!(per_node.len(), 6, "{per_node:?}");
    let dead = per_node["redis-2-1"];
    assert!(
        per_node.iter().all(|(node, new)| node == "redis-2-1" || *new > dead),
        "{per_node:?}"
    );
    // The clients' latency peaks towards the dead node.
    let latency = &answers["redis-clients-and-pools.json / \"Redis command latency by node, as clients see it\""];
    let worst = latency
        .iter()
        .max_by(|a, b| a[2].parse::<f64>().unwrap().total_cmp(&b[2].parse::<f64>().unwrap()))
        .unwrap();
    assert!(worst[1].contains("redis-2-1"), "{worst:?}");
    // The verdicts panel and the annotations show the node loss.
    let verdicts = &answers["incident-overview.json / \"Verdicts\""];
    assert!(
        verdicts
            .iter()
            .any(|row| row[2] == "node_loss" && row[4] == "dc-2-host-3"),
        "{verdicts:?}"
    );
    // The Node Graph: the dead node first, red and highlighted, every backend's edge into it
    //    highlighted, and every edge between two drawn nodes.
    let nodes = &answers["incident-overview.json / \"Dependency graph of the incident\" / \"nodes\""];
    let edges = &answers["incident-overview.json / \"Dependency graph of the incident\" / \"edges\""];
    assert_eq!(
        (nodes[0][0].as_str(), nodes[0][5].as_str(), nodes[0][6].as_str()),
        ("redis-2-1", "red", "true"),
        "{nodes:?}"
    );
    assert!(
        nodes[1..].iter().all(|row| row[5] != "red" && row[6] == "false"),
        "{nodes:?}"
    );
    let drawn: std::collections::BTreeSet<&str> = nodes.iter().map(|row| row[0].as_str()).collect();
    assert!(
        edges
            .iter()
            .all(|row| drawn.contains(row[1].as_str()) && drawn.contains(row[2].as_str())),
        "{edges:?}"
    );
    let into_dead: std::collections::BTreeSet<&str> = edges
        .iter()
        .filter(|row| row[2] == "redis-2-1" && row[7] == "true")
        .map(|row| row[1].as_str())
        .collect();
    assert_eq!(into_dead.len(), 12, "{edges:?}");
    assert!(
        into_dead.iter().all(|caller| caller.starts_with("backend-")),
        "{edges:?}"
    );
    assert!(
        edges.iter().all(|row| (row[2] == "redis-2-1") == (row[7] == "true")),
        "{edges:?}"
    );
    let annotations = &answers["incident-overview.json / annotation \"Verdicts\""];
    assert!(
        annotations
            .iter()
            .any(|row| row[1].starts_with("opened: node_loss of redis-2-1")),
        "{annotations:?}"
    );
}
