//! Labelled real incidents (`epicenter eval --dataset sockshop|nezha DIR`, `--cases FILE`):
//! each a [`Case`] with its period, the faulty pod's service, pod and host, the fault type as
//! the dataset names it and the verdict kinds that count as right for it ([`kinds_for`]).
//!
//! Three adapters, each reading its files as written (errors name the file, line and column):
//! - Sock Shop container chaos (github.com/OpenNetAI/Sock-Shop-Dataset,
//!   `new-version/test/container-chaos/container-chaos-info.csv`): one row per fault,
//!   `timestamp` ("YYYY-MM-DD HH:MM:SS", read as UTC), `duration` ("5m"), `fault-type`,
//!   `target` (the pod); the service is the pod name minus its last two dash parts (ReplicaSet
//!   hash, pod suffix); the host is `derived/container_chaos_inferred_placement.csv`'s
//!   `inferred_vm` (`vm1`, `vm2`: the `host` label tools/sockshop_to_openmetrics.py writes on
//!   those pods' series) where it is filled, else unknown ([`sockshop`]).
//! - Nezha (FSE'23, github.com/IntelligentDDS/Nezha), `derived/cases.csv`: one row per
//!   fault, `start_utc`/`end_utc` (RFC 3339), `inject_pod`, `service`, `fault_type`, `host`,
//!   `system` (OnlineBoutique or TrainTicket, selectable) ([`nezha`]).
//! - A user's own past incidents ([`from_csv`], format documented there).

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

/// One labelled fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Case {
    /// Identifier (the dataset's when it has one, else the set's name and the row's number).
    pub id: String,
    /// Which set it belongs to (`sockshop`, `nezha-ob`, `nezha-tt`, or a cases file's name):
    /// a set is replayed and summarised on its own.
    pub set: String,
    /// Fault start, ms since the epoch (UTC).
    pub start_ms: i64,
    /// Fault end, ms since the epoch (UTC).
    pub end_ms: i64,
    /// The faulty pod's service.
    pub service: String,
    /// The faulty instance (pod).
    pub instance: String,
    /// The faulty pod's host, when known (Sock Shop places only 8 of its pods).
    pub host: Option<String>,
    /// The fault type as the dataset names it (`cpu-stress`, `network_delay`, `return`, …).
    pub fault_type: String,
    /// The verdict kinds that count as right for it.
    pub kinds: BTreeSet<String>,
}

/// The verdict kinds right for a fault type as the datasets name it: CPU stress, contention
/// or consumption → `cpu_saturation`, `cpu_throttling`; memory stress → `memory_pressure`;
/// network delay → `network_delay`; a code defect (Nezha's `return`, `exception`) →
/// `code_defect`. `None` for a type not in this list.
pub fn kinds_for(fault_type: &str) -> Option<BTreeSet<String>> {
    let kinds: &[&str] = match fault_type {
        "cpu-stress" | "cpu_stress" | "cpu_contention" | "cpu_consumed" => &["cpu_saturation", "cpu_throttling"],
        "memory-stress" | "memory_stress" => &["memory_pressure"],
        "network-delay" | "network_delay" => &["network_delay"],
        "return" | "exception" => &["code_defect"],
        _ => return None,
    };
    Some(kinds.iter().map(|kind| kind.to_string()).collect())
}

/// A pod's service: its name minus the last two dash-separated parts
/// (`carts-5ff676694b-fzj9z` → `carts`, `carts-db-d765fd64d-67pr6` → `carts-db`); a name with
/// fewer parts is its own service.
pub fn service_of_pod(pod: &str) -> String {
    let parts: Vec<&str> = pod.split('-').collect();
    if parts.len() <= 2 {
        return pod.to_string();
    }
    parts[..parts.len() - 2].join("-")
}

/// The Sock Shop container-chaos faults under `dir` (the dataset's `sock-shop` folder, holding
/// `new-version/test/container-chaos/` and `derived/`), in file order, ids `sockshop-01`….
///
/// # Errors
/// A file cannot be read, a header lacks a column, or a cell is not what it should be (the
/// file, line and column named).
pub fn sockshop(dir: &Path) -> Result<Vec<Case>, String> {
    let faults = dir.join("new-version/test/container-chaos/container-chaos-info.csv");
    let placement = dir.join("derived/container_chaos_inferred_placement.csv");
    let placed = Table::read(&placement)?;
    let (pod_at, vm_at) = (placed.column("pod")?, placed.column("inferred_vm")?);
    let mut hosts = std::collections::BTreeMap::new();
    for row in &placed.rows {
        let vm = row.cell(vm_at).text.trim();
        if !vm.is_empty() {
            hosts.insert(row.cell(pod_at).text.trim().to_string(), vm.to_string());
        }
    }
    let table = Table::read(&faults)?;
    let at = |name| table.column(name);
    let (time_at, duration_at, type_at, target_at) =
        (at("timestamp")?, at("duration")?, at("fault-type")?, at("target")?);
    let mut cases = Vec::new();
    for (index, row) in table.rows.iter().enumerate() {
        let start_ms = table.time(row, time_at)?;
        let duration = row.cell(duration_at);
        let length = humantime::parse_duration(duration.text.trim())
            .map_err(|error| table.error(row, duration, &format!("duration '{}': {error}", duration.text)))?;
        let pod = row.cell(target_at).text.trim().to_string();
        if pod.is_empty() {
            return Err(table.error(row, row.cell(target_at), "target: no pod"));
        }
        let fault_type = row.cell(type_at).text.trim().to_string();
        let kinds = kinds_for(&fault_type).ok_or_else(|| {
            table.error(
                row,
                row.cell(type_at),
                &format!("fault-type '{fault_type}' is not one this adapter knows"),
            )
        })?;
        cases.push(Case {
            id: format!("sockshop-{:02}", index + 1),
            set: "sockshop".to_string(),
            start_ms,
            end_ms: start_ms + length.as_millis() as i64,
            service: service_of_pod(&pod),
            host: hosts.get(&pod).cloned(),
            instance: pod,
            fault_type,
            kinds,
        });
    }
    Ok(cases)
}

/// Which Nezha system to read: OnlineBoutique (`ob`), TrainTicket (`tt`) or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NezhaSystem {
    /// OnlineBoutique (set `nezha-ob`).
    OnlineBoutique,
    /// TrainTicket (set `nezha-tt`).
    TrainTicket,
}

impl NezhaSystem {
    /// `ob` or `tt`.
    pub fn parse(text: &str) -> Result<NezhaSystem, String> {
        match text {
            "ob" => Ok(NezhaSystem::OnlineBoutique),
            "tt" => Ok(NezhaSystem::TrainTicket),
            other => Err(format!(
                "--system {other}: expected ob (OnlineBoutique) or tt (TrainTicket)"
            )),
        }
    }

    /// The `system` column's value.
    fn column_value(self) -> &'static str {
        match self {
            NezhaSystem::OnlineBoutique => "OnlineBoutique",
            NezhaSystem::TrainTicket => "TrainTicket",
        }
    }

    /// The set's name.
    fn set(self) -> &'static str {
        match self {
            NezhaSystem::OnlineBoutique => "nezha-ob",
            NezhaSystem::TrainTicket => "nezha-tt",
        }
    }
}

/// The Nezha faults of `dir/derived/cases.csv` (`dir` is the dataset's `nezha` folder), of
/// `system` only when given, in file order.
///
/// # Errors
/// As [`sockshop`]; a system other than OnlineBoutique or TrainTicket is an error too.
pub fn nezha(dir: &Path, system: Option<NezhaSystem>) -> Result<Vec<Case>, String> {
    let table = Table::read(&dir.join("derived/cases.csv"))?;
    let at = |name| table.column(name);
    let (id_at, system_at, start_at, end_at) = (at("case_id")?, at("system")?, at("start_utc")?, at("end_utc")?);
    let (pod_at, service_at, type_at, host_at) = (at("inject_pod")?, at("service")?, at("fault_type")?, at("host")?);
    let mut cases = Vec::new();
    for row in &table.rows {
        let name = row.cell(system_at).text.trim();
        let of = [NezhaSystem::OnlineBoutique, NezhaSystem::TrainTicket]
            .into_iter()
            .find(|known| known.column_value() == name)
            .ok_or_else(|| {
                table.error(
                    row,
                    row.cell(system_at),
                    &format!("system '{name}': expected OnlineBoutique or TrainTicket"),
                )
            })?;
        if system.is_some_and(|wanted| wanted != of) {
            continue;
        }
        let fault_type = row.cell(type_at).text.trim().to_string();
        let kinds = kinds_for(&fault_type).ok_or_else(|| {
            table.error(
                row,
                row.cell(type_at),
                &format!("fault_type '{fault_type}' is not one this adapter knows"),
            )
        })?;
        let host = row.cell(host_at).text.trim();
        cases.push(Case {
            id: row.cell(id_at).text.trim().to_string(),
            set: of.set().to_string(),
            start_ms: table.time(row, start_at)?,
            end_ms: table.end_after_start(row, start_at, end_at)?,
            service: row.cell(service_at).text.trim().to_string(),
            instance: row.cell(pod_at).text.trim().to_string(),
            host: (!host.is_empty()).then(|| host.to_string()),
            fault_type,
            kinds,
        });
    }
    Ok(cases)
}

/// The cases of a user's CSV file (`epicenter eval --cases FILE`): a header row naming the
/// columns (any order; RFC 4180 quoting), then one row per incident:
/// - `start`, `end`: RFC 3339 times (`2026-12-01T14:03:00Z`; without a zone, UTC);
/// - `service`: the faulty service, as the `service` placement names it;
/// - `host`: its host, empty when unknown (host AC@1 then leaves the case out);
/// - `instance`: the faulty instance, may be empty;
/// - `fault_type`: free text;
/// - `kinds`: the verdict kinds that count as right, separated by `;` (`cpu_saturation;cpu_throttling`);
///   empty: those of `fault_type` when it is one [`kinds_for`] knows;
/// - `id` (optional column): the case's name, else `<file stem>-<row number>`.
///
/// The set is named after the file's stem.
///
/// # Errors
/// The file cannot be read, a column is missing, a time does not parse or an end is not after
/// its start, no kind is given for an unknown fault type (file, line and column named).
pub fn from_csv(path: &Path) -> Result<Vec<Case>, String> {
    let table = Table::read(path)?;
    let set = path
        .file_stem()
        .map_or("cases".to_string(), |stem| stem.to_string_lossy().to_string());
    let at = |name| table.column(name);
    let (start_at, end_at, service_at, host_at) = (at("start")?, at("end")?, at("service")?, at("host")?);
    let (instance_at, type_at, kinds_at) = (at("instance")?, at("fault_type")?, at("kinds")?);
    let id_at = table.column("id").ok();
    let mut cases = Vec::new();
    for (index, row) in table.rows.iter().enumerate() {
        let service = row.cell(service_at);
        if service.text.trim().is_empty() {
            return Err(table.error(row, service, "service: empty"));
        }
        let fault_type = row.cell(type_at).text.trim().to_string();
        let listed: BTreeSet<String> = row
            .cell(kinds_at)
            .text
            .split(';')
            .map(str::trim)
            .filter(|kind| !kind.is_empty())
            .map(str::to_string)
            .collect();
        let kinds = if listed.is_empty() {
            kinds_for(&fault_type).ok_or_else(|| {
                table.error(
                    row,
                    row.cell(kinds_at),
                    &format!("kinds: empty, and fault_type '{fault_type}' has no known kinds"),
                )
            })?
        } else {
            listed
        };
        let host = row.cell(host_at).text.trim();
        let id = id_at
            .map(|at| row.cell(at).text.trim().to_string())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("{set}-{}", index + 1));
        cases.push(Case {
            id,
            set: set.clone(),
            start_ms: table.time(row, start_at)?,
            end_ms: table.end_after_start(row, start_at, end_at)?,
            service: service.text.trim().to_string(),
            instance: row.cell(instance_at).text.trim().to_string(),
            host: (!host.is_empty()).then(|| host.to_string()),
            fault_type,
            kinds,
        });
    }
    Ok(cases)
}

// === impl Table ===

/// A cell: its text (unquoted) and the 1-based column where it starts.
#[derive(Debug, Clone, PartialEq)]
struct Cell {
    text: String,
    column: usize,
}

/// A data row: its 1-based line and cells.
#[derive(Debug, Clone)]
struct Row {
    line: usize,
    cells: Vec<Cell>,
    /// Column just past the row's end (for a missing cell).
    end_column: usize,
}

/// A cell of a row as read: its text and column.
#[derive(Debug, Clone, Copy)]
struct At<'a> {
    text: &'a str,
    column: usize,
}

impl Row {
    /// The cell at `at`; an empty one at the row's end when the row is short.
    fn cell(&self, at: usize) -> At<'_> {
        self.cells.get(at).map_or(
            At {
                text: "",
                column: self.end_column,
            },
            |cell| At {
                text: &cell.text,
                column: cell.column,
            },
        )
    }
}

/// A CSV file: header and rows.
struct Table {
    path: String,
    header: Vec<String>,
    rows: Vec<Row>,
}

impl Table {
    fn read(path: &Path) -> Result<Table, String> {
        let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
        let name = path.display().to_string();
        let mut lines = text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty());
        let Some((header_at, header)) = lines.next() else {
            return Err(format!("{name}: empty (expected a header row)"));
        };
        let header =
            split_csv_line(header).map_err(|column| format!("{name}:{}:{column}: unclosed quote", header_at + 1))?;
        let header = header.into_iter().map(|cell| cell.text.trim().to_string()).collect();
        let mut rows = Vec::new();
        for (at, line) in lines {
            let cells = split_csv_line(line).map_err(|column| format!("{name}:{}:{column}: unclosed quote", at + 1))?;
            rows.push(Row {
                line: at + 1,
                cells,
                end_column: line.chars().count() + 1,
            });
        }
        Ok(Table {
            path: name,
            header,
            rows,
        })
    }

    /// The index of the column named `name` in the header.
    fn column(&self, name: &str) -> Result<usize, String> {
        self.header.iter().position(|column| column == name).ok_or_else(|| {
            format!(
                "{}:1: no column '{name}' in the header ({})",
                self.path,
                self.header.join(",")
            )
        })
    }

    fn error(&self, row: &Row, cell: At<'_>, message: &str) -> String {
        format!("{}:{}:{}: {message}", self.path, row.line, cell.column)
    }

    /// The time in column `at`, ms since the epoch: RFC 3339, or `YYYY-MM-DD HH:MM:SS`; UTC
    /// without a zone.
    fn time(&self, row: &Row, at: usize) -> Result<i64, String> {
        let cell = row.cell(at);
        parse_time(cell.text.trim()).map_err(|why| {
            let column = self.header.get(at).cloned().unwrap_or_default();
            self.error(row, cell, &format!("{column} '{}': {why}", cell.text))
        })
    }

    /// The end in column `end_at`, after the start in `start_at`.
    fn end_after_start(&self, row: &Row, start_at: usize, end_at: usize) -> Result<i64, String> {
        let (start, end) = (self.time(row, start_at)?, self.time(row, end_at)?);
        if end <= start {
            let column = self.header.get(end_at).cloned().unwrap_or_default();
            return Err(self.error(row, row.cell(end_at), &format!("{column} is not after the start")));
        }
        Ok(end)
    }
}

/// An RFC 3339 time (or `YYYY-MM-DD HH:MM:SS`, UTC) as ms since the epoch.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let time = humantime::parse_rfc3339_weak(text)
        .map_err(|error| format!("{error} (expected e.g. 2026-12-01T14:03:00Z or 2026-12-01 14:03:00)"))?;
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "before 1970".to_string())?;
    Ok(since.as_millis() as i64)
}

/// One CSV line's cells (RFC 4180: a quoted cell may hold commas and doubled quotes; no line
/// breaks inside a cell). Err: the column of a quote left open.
fn split_csv_line(line: &str) -> Result<Vec<Cell>, usize> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let chars: Vec<char> = line.chars().collect();
    let mut cells = Vec::new();
    let mut at = 0;
    loop {
        let column = at + 1;
        let mut text = String::new();
        if chars.get(at) == Some(&'"') {
            at += 1;
            loop {
                match chars.get(at) {
                    None => return Err(column),
                    Some('"') if chars.get(at + 1) == Some(&'"') => {
                        text.push('"');
                        at += 2;
                    }
                    Some('"') => {
                        at += 1;
                        break;
                    }
                    Some(&other) => {
                        text.push(other);
                        at += 1;
                    }
                }
            }
            // Anything between the closing quote and the comma is kept, as most readers do.
            while let Some(&other) = chars.get(at).filter(|c| **c != ',') {
                text.push(other);
                at += 1;
            }
        } else {
            while let Some(&other) = chars.get(at).filter(|c| **c != ',') {
                text.push(other);
                at += 1;
            }
        }
        cells.push(Cell { text, column });
        if chars.get(at) == Some(&',') {
            at += 1;
        } else {
            return Ok(cells);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("epicenter-cases-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn csv_lines_split_with_quotes_and_columns() {
        let cells = split_csv_line(r#""a,b",c,"say ""hi""",,x"#).unwrap();
        let texts: Vec<&str> = cells.iter().map(|cell| cell.text.as_str()).collect();
        assert_eq!(texts, ["a,b", "c", "say \"hi\"", "", "x"]);
        let columns: Vec<usize> = cells.iter().map(|cell| cell.column).collect();
        assert_eq!(columns, [1, 7, 9, 22, 23]);
        assert_eq!(split_csv_line(r#"a,"open"#), Err(3));
    }

    #[test]
    fn a_pod_s_service_drops_the_replica_set_and_pod_suffix() {
        assert_eq!(service_of_pod("carts-5ff676694b-fzj9z"), "carts");
        assert_eq!(service_of_pod("carts-db-d765fd64d-67pr6"), "carts-db");
        assert_eq!(service_of_pod("ts-auth-service-7f8d7d756d-k7b9j"), "ts-auth-service");
        assert_eq!(service_of_pod("redis-1"), "redis-1");
    }

    #[test]
    fn sockshop_rows_become_cases_with_utc_times_and_inferred_hosts() {
        let dir = scratch("sockshop");
        std::fs::create_dir_all(dir.join("new-version/test/container-chaos")).unwrap();
        std::fs::create_dir_all(dir.join("derived")).unwrap();
        std::fs::write(
            dir.join("new-version/test/container-chaos/container-chaos-info.csv"),
            "\"timestamp\",\"duration\",\"fault-type\",\"kind\",\"target\"\n\
             \"2023-08-16 06:44:10\",\"5m\",\"memory-stress\",\"StressChaos\",\"rabbitmq-6f9b85756-mg7gx\"\n\
             \"2023-08-16 07:14:17\",\"5m\",\"network-delay\",\"NetworkChaos\",\"payment-cfd6b84cb-mhzxg\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("derived/container_chaos_inferred_placement.csv"),
            "pod,inferred_vm,inferred_ip\nrabbitmq-6f9b85756-mg7gx,vm1,192.168.31.237\npayment-cfd6b84cb-mhzxg,,\n",
        )
        .unwrap();
        let cases = sockshop(&dir).unwrap();
        assert_eq!(cases.len(), 2);
        // 2023-08-16T06:44:10Z.
        assert_eq!(cases[0].start_ms, 1_692_168_250_000);
        assert_eq!(cases[0].end_ms - cases[0].start_ms, 300_000);
        assert_eq!(cases[0].service, "rabbitmq");
        assert_eq!(cases[0].host.as_deref(), Some("vm1"));
        assert_eq!(cases[0].kinds, BTreeSet::from(["memory_pressure".to_string()]));
        assert_eq!(cases[0].id, "sockshop-01");
        assert_eq!(cases[1].host, None);
        assert_eq!(cases[1].kinds, BTreeSet::from(["network_delay".to_string()]));
        std::fs::write(
            dir.join("new-version/test/container-chaos/container-chaos-info.csv"),
            "\"timestamp\",\"duration\",\"fault-type\",\"kind\",\"target\"\n\"2023-08-16 06:44:10\",\"five\",\"cpu-stress\",\"StressChaos\",\"a-b-c\"\n",
        )
        .unwrap();
        let error = sockshop(&dir).unwrap_err();
        assert!(
            error.ends_with("container-chaos-info.csv:2:23: duration 'five': expected number at 0"),
            "{error}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn nezha_rows_are_filtered_by_system() {
        let dir = scratch("nezha");
        std::fs::create_dir_all(dir.join("derived")).unwrap();
        std::fs::write(
            dir.join("derived/cases.csv"),
            "case_id,system,date,start_utc,end_utc,inject_pod,service,fault_type,fault_class,host,host_source,co_located_services,note\n\
             nz-1,OnlineBoutique,2022-08-22,2022-08-22T03:53:54Z,2022-08-22T03:56:54Z,frontend-579b9bff58-t2dbm,frontend,cpu_contention,resource,33.33.33.167,dependency.csv,,\n\
             nz-2,TrainTicket,2023-01-29,2023-01-29T08:43:04Z,2023-01-29T08:46:04Z,ts-contacts-service-866bd68c97-xcqfx,ts-contacts-service,return,code,2023-01-29/node-G,inferred,a;b,\"x, y\"\n",
        )
        .unwrap();
        let all = nezha(&dir, None).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].set, "nezha-ob");
        assert_eq!(all[0].end_ms - all[0].start_ms, 180_000);
        assert_eq!(
            all[0].kinds,
            BTreeSet::from(["cpu_saturation".to_string(), "cpu_throttling".to_string()])
        );
        let tt = nezha(&dir, Some(NezhaSystem::TrainTicket)).unwrap();
        assert_eq!(tt.len(), 1);
        assert_eq!(tt[0].host.as_deref(), Some("2023-01-29/node-G"));
        assert_eq!(tt[0].kinds, BTreeSet::from(["code_defect".to_string()]));
        assert_eq!(tt[0].instance, "ts-contacts-service-866bd68c97-xcqfx");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_cases_file_is_read_by_its_header_and_errors_name_line_and_column() {
        let dir = scratch("file");
        let path = dir.join("mine.csv");
        std::fs::write(
            &path,
            "kinds,start,end,service,host,instance,fault_type\n\
             ,2026-12-01T14:00:00Z,2026-12-01T14:10:00Z,redis,dc-1-host-3,redis-1,network_delay\n\
             pool_exhaustion;unknown,2026-12-02 09:00:00,2026-12-02 09:05:00,db,,,slow disk\n",
        )
        .unwrap();
        let cases = from_csv(&path).unwrap();
        assert_eq!(cases[0].id, "mine-1");
        assert_eq!(cases[0].set, "mine");
        assert_eq!(cases[0].kinds, BTreeSet::from(["network_delay".to_string()]));
        assert_eq!(cases[1].kinds.len(), 2);
        assert_eq!(cases[1].host, None);
        assert_eq!(cases[1].end_ms - cases[1].start_ms, 300_000);
        std::fs::write(
            &path,
            "start,end,service,host,instance,fault_type,kinds\n2026-12-01T14:00:00Z,2026-12-01T13:00:00Z,a,,,x,k\n",
        )
        .unwrap();
        let error = from_csv(&path).unwrap_err();
        assert!(error.ends_with("mine.csv:2:22: end is not after the start"), "{error}");
        std::fs::write(
            &path,
            "start,end,service,host,instance,fault_type,kinds\n2026-12-01T14:00:00Z,yesterday,a,,,x,k\n",
        )
        .unwrap();
        let error = from_csv(&path).unwrap_err();
        assert!(error.contains("mine.csv:2:22: end 'yesterday'"), "{error}");
        std::fs::write(
            &path,
            "start,end,service,host,instance,fault_type,kinds\n2026-12-01T14:00:00Z,2026-12-01T15:00:00Z,a,,,odd,\n",
        )
        .unwrap();
        let error = from_csv(&path).unwrap_err();
        assert!(error.contains("mine.csv:2:51: kinds: empty"), "{error}");
        std::fs::write(&path, "start,end,service\n").unwrap();
        assert!(from_csv(&path).unwrap_err().contains("mine.csv:1: no column 'host'"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
