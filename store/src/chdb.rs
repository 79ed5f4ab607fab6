//! The embedded ClickHouse engine, chDB, loaded at run time from `libchdb.so`.
//!
//! The C API is chdb-core's `programs/local/chdb.h` (chDB 26.7): `chdb_connect` with
//! `--path=<dir>`, `chdb_query_n` for statements, `chdb_result_*` to read results, and the
//! streaming insert calls (`chdb_stream_insert_n`, `chdb_stream_append`, `chdb_stream_done`,
//! `chdb_destroy_insert_stream`) for binary rows, which must never be inlined in a query text
//! (the text is split like a script and a newline byte inside the data ends it). One data path
//! per process. This is the only module of the workspace that uses `unsafe`.

#![allow(unsafe_code, reason = "FFI to libchdb.so: the one place the workspace calls C")]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

use libloading::Library;

/// chDB version `scripts/setup` fetches and the C API this module is written against.
pub const CHDB_VERSION: &str = "26.7.3-stable.1";

/// Why the embedded engine failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ChdbError {
    /// `libchdb.so` could not be found or loaded.
    #[error(
        "embedded store: cannot load {path}: {reason}. Run scripts/setup (downloads chDB {CHDB_VERSION} from the npm registry, about 180 MB) or set EPICENTER_CHDB_LIB to a libchdb.so"
    )]
    Library {
        /// Where we looked.
        path: String,
        /// The loader's message.
        reason: String,
    },
    /// Another process holds the store: the engine locks `<path>/status` while a
    /// connection is open, one process at a time.
    #[error("embedded store {path} is held by {holder}: the embedded store serves one process at a time; stop that process, or use another store")]
    Held {
        /// The data path.
        path: String,
        /// Who holds it, from the engine's status file: `` `epicenter run --config x.yml` (pid
        /// 4242) `` when its command line can be read, `process 4242` when not, `another
        /// process` without a PID.
        holder: String,
    },
    /// `chdb_connect` refused the data path (not a writable directory, or a damaged store).
    #[error("embedded store: cannot open {0}: not a writable directory, or not a store this engine can read")]
    Connect(String),
    /// A statement failed; the engine's message.
    #[error("{0}")]
    Query(String),
}

/// Where `libchdb.so` is: `EPICENTER_CHDB_LIB`, else the cache `scripts/setup` fills
/// (`$EPICENTER_CACHE`, else `$XDG_CACHE_HOME/epicenter`, else `~/.cache/epicenter`, then
/// `chdb/<version>/libchdb.so`).
pub fn library_path() -> PathBuf {
    if let Some(path) = std::env::var_os("EPICENTER_CHDB_LIB") {
        return PathBuf::from(path);
    }
    let cache = std::env::var_os("EPICENTER_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
            base.join("epicenter")
        });
    cache.join("chdb").join(CHDB_VERSION).join("libchdb.so")
}

extern "C" {
    /// POSIX `_exit(2)`: ends the process at once, without `atexit` handlers or static
    /// destructors.
    fn _exit(status: c_int) -> !;
}

/// Ends the process now with `code`, skipping `atexit` handlers and C++ static destructors.
///
/// `std::process::exit` runs them, and `libchdb.so`'s destructors tear down the engine's
/// global state while its background threads still use it: the process then dies of SIGSEGV
/// (exit status 139) instead of exiting with `code`. Use this for an exit that must not wait
/// (a second Ctrl-C during a flush); data the engine has not committed is lost, as the caller
/// warned. Standard error is unbuffered, so messages written before still appear.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` takes any int and never returns; it touches no Rust state.
    unsafe { _exit(code) }
}

type ConnectFn = unsafe extern "C" fn(c_int, *mut *mut c_char) -> *mut *mut c_void;
type CloseFn = unsafe extern "C" fn(*mut *mut c_void);
type QueryFn = unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize) -> *mut c_void;
type ResultBufferFn = unsafe extern "C" fn(*mut c_void) -> *mut c_char;
type ResultLengthFn = unsafe extern "C" fn(*mut c_void) -> usize;
type ResultErrorFn = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type ResultRowsFn = unsafe extern "C" fn(*mut c_void) -> u64;
type DestroyResultFn = unsafe extern "C" fn(*mut c_void);
type StreamInsertFn = unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize) -> *mut c_void;
type StreamAppendFn = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> c_int;
type StreamDoneFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type StreamErrorFn = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type DestroyStreamFn = unsafe extern "C" fn(*mut c_void);
type SignalHandlersFn = unsafe extern "C" fn(c_int);

/// The C functions we call, resolved once.
struct Functions {
    close: CloseFn,
    query: QueryFn,
    result_buffer: ResultBufferFn,
    result_length: ResultLengthFn,
    result_error: ResultErrorFn,
    result_rows_written: ResultRowsFn,
    destroy_result: DestroyResultFn,
    stream_insert: StreamInsertFn,
    stream_append: StreamAppendFn,
    stream_done: StreamDoneFn,
    stream_error: StreamErrorFn,
    destroy_stream: DestroyStreamFn,
}

/// An open chDB connection. Not `Sync`: a connection runs one statement at a time, so callers
/// share it behind a mutex.
pub struct Chdb {
    functions: Functions,
    /// `chdb_connection *` as returned by `chdb_connect`.
    connection: *mut *mut c_void,
}

// SAFETY: the connection handle is only used through `&mut self` or `&self` behind the
// caller's mutex; chDB allows a connection to be used from any thread, one statement at a time.
unsafe impl Send for Chdb {}

impl std::fmt::Debug for Chdb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Chdb { .. }")
    }
}

/// Owns a `chdb_result *` and destroys it on drop.
struct QueryResult<'c> {
    chdb: &'c Chdb,
    raw: *mut c_void,
}

impl Drop for QueryResult<'_> {
    fn drop(&mut self) {
        // SAFETY: `raw` came from chdb_query_n / chdb_stream_done and is destroyed once.
        unsafe { (self.chdb.functions.destroy_result)(self.raw) }
    }
}

impl QueryResult<'_> {
    fn error(&self) -> Option<String> {
        // SAFETY: `raw` is a live result; the returned string is owned by it.
        let message = unsafe { (self.chdb.functions.result_error)(self.raw) };
        if message.is_null() {
            return None;
        }
        // SAFETY: chDB returns a NUL-terminated string that lives as long as the result.
        let text = unsafe { CStr::from_ptr(message) }.to_string_lossy().trim().to_string();
        (!text.is_empty()).then_some(text)
    }

    fn bytes(&self) -> Vec<u8> {
        // SAFETY: buffer and length describe memory owned by the live result.
        unsafe {
            let buffer = (self.chdb.functions.result_buffer)(self.raw);
            let length = (self.chdb.functions.result_length)(self.raw);
            if buffer.is_null() || length == 0 {
                return Vec::new();
            }
            std::slice::from_raw_parts(buffer.cast::<u8>(), length).to_vec()
        }
    }
}

impl Chdb {
    /// Loads `library` and opens the engine on `data_path` (created if missing).
    pub fn open(library: &Path, data_path: &Path) -> Result<Chdb, ChdbError> {
        let library_error = |reason: String| ChdbError::Library {
            path: library.display().to_string(),
            reason,
        };
        if !library.exists() {
            return Err(library_error("no such file".to_string()));
        }
        // SAFETY: loading chDB runs its static initialisers; it is a trusted, pinned library.
        let loaded = unsafe { Library::new(library) }.map_err(|error| library_error(error.to_string()))?;
        // Never unloaded: chDB's threads keep thread-local destructors inside the library, so
        // unmapping it while any thread that called into it is alive crashes at thread exit.
        let loaded: &'static Library = Box::leak(Box::new(loaded));
        // SAFETY: each symbol is looked up with the signature chdb.h declares for it.
        let (functions, connect, signal_handlers) = unsafe {
            macro_rules! symbol {
                ($name:literal, $type:ty) => {
                    *loaded
                        .get::<$type>(concat!($name, "\0").as_bytes())
                        .map_err(|error| library_error(format!("missing symbol {}: {error}", $name)))?
                };
            }
            let functions = Functions {
                close: symbol!("chdb_close_conn", CloseFn),
                query: symbol!("chdb_query_n", QueryFn),
                result_buffer: symbol!("chdb_result_buffer", ResultBufferFn),
                result_length: symbol!("chdb_result_length", ResultLengthFn),
                result_error: symbol!("chdb_result_error", ResultErrorFn),
                result_rows_written: symbol!("chdb_result_rows_written", ResultRowsFn),
                destroy_result: symbol!("chdb_destroy_query_result", DestroyResultFn),
                stream_insert: symbol!("chdb_stream_insert_n", StreamInsertFn),
                stream_append: symbol!("chdb_stream_append", StreamAppendFn),
                stream_done: symbol!("chdb_stream_done", StreamDoneFn),
                stream_error: symbol!("chdb_stream_insert_error", StreamErrorFn),
                destroy_stream: symbol!("chdb_destroy_insert_stream", DestroyStreamFn),
            };
            (
                functions,
                symbol!("chdb_connect", ConnectFn),
                symbol!("chdb_set_signal_handlers_enabled", SignalHandlersFn),
            )
        };
        std::fs::create_dir_all(data_path)
            .map_err(|error| ChdbError::Connect(format!("{}: {error}", data_path.display())))?;
        let _connecting = connecting();
        // The engine prints its own `Cannot lock file …/status` to stderr when the store is
        // held; ask first, and say who holds it.
        if let Some(holder) = holder(data_path) {
            return Err(ChdbError::Held {
                path: data_path.display().to_string(),
                holder,
            });
        }
        let program = CString::new("epicenter").map_err(|_| ChdbError::Connect("argument".into()))?;
        let path_argument = CString::new(format!("--path={}", data_path.display()))
            .map_err(|_| ChdbError::Connect(format!("{}: path contains a NUL byte", data_path.display())))?;
        // The engine's logger writes to the terminal only, and only when stderr is one; what
        // it says there is not for the user (chDB 26.7 logs `<Fatal> ThreadStatus: current_thread
        // contains invalid address` after every streaming insert into a table with a
        // materialized view: its view chain's thread status is destroyed while another is
        // current, which it only reports). Errors reach epicenter through each result instead.
        let console_off = CString::new("--logger.console=0").map_err(|_| ChdbError::Connect("argument".into()))?;
        // What every connection may do (crate::access): read by the first connection of
        // the process, so every connection passes it.
        let config = crate::access::prepare(data_path).map_err(|error| {
            ChdbError::Connect(format!(
                "{}: writing the engine's configuration: {error}",
                data_path.display()
            ))
        })?;
        let config_argument = CString::new(format!("--config-file={}", config.display()))
            .map_err(|_| ChdbError::Connect(format!("{}: path contains a NUL byte", data_path.display())))?;
        let mut argv = [
            program.as_ptr().cast_mut(),
            path_argument.as_ptr().cast_mut(),
            console_off.as_ptr().cast_mut(),
            config_argument.as_ptr().cast_mut(),
        ];
        // SAFETY: argv holds valid C strings that outlive the call; signal handlers stay
        // with the host process (tokio handles Ctrl-C).
        let connection = unsafe {
            signal_handlers(0);
            connect(argv.len() as c_int, argv.as_mut_ptr())
        };
        if connection.is_null() {
            if let Some(holder) = holder(data_path) {
                return Err(ChdbError::Held {
                    path: data_path.display().to_string(),
                    holder,
                });
            }
            return Err(ChdbError::Connect(data_path.display().to_string()));
        }
        Ok(Chdb { functions, connection })
    }

    fn handle(&self) -> *mut c_void {
        // SAFETY: `connection` is the non-null pointer chdb_connect returned, open until drop.
        unsafe { *self.connection }
    }

    /// Runs one statement and returns its output in `format` (e.g. `TabSeparated`,
    /// `RowBinaryWithNamesAndTypes`, `PrettyCompact`).
    pub fn query(&self, sql: &str, format: &str) -> Result<Vec<u8>, ChdbError> {
        // SAFETY: pointers and lengths describe live Rust strings; the result is owned below.
        let raw = unsafe {
            (self.functions.query)(
                self.handle(),
                sql.as_ptr().cast(),
                sql.len(),
                format.as_ptr().cast(),
                format.len(),
            )
        };
        if raw.is_null() {
            return Err(ChdbError::Query("chDB returned no result".to_string()));
        }
        let result = QueryResult { chdb: self, raw };
        match result.error() {
            Some(message) => Err(ChdbError::Query(message)),
            None => Ok(result.bytes()),
        }
    }

    /// Streams `data` (encoded in `format`) into `insert` (`INSERT INTO t (cols)` without a
    /// FORMAT clause). Returns the rows written (materialized views included, as chDB counts).
    pub fn insert(&self, insert: &str, format: &str, data: &[u8]) -> Result<u64, ChdbError> {
        // SAFETY: as in `query`; the stream handle is destroyed on every path below.
        unsafe {
            let stream = (self.functions.stream_insert)(
                self.handle(),
                insert.as_ptr().cast(),
                insert.len(),
                format.as_ptr().cast(),
                format.len(),
            );
            if stream.is_null() {
                return Err(ChdbError::Query("chDB returned no insert stream".to_string()));
            }
            let stream_error = |stream: *mut c_void| -> Option<String> {
                let message = (self.functions.stream_error)(stream);
                (!message.is_null()).then(|| CStr::from_ptr(message).to_string_lossy().trim().to_string())
            };
            if let Some(message) = stream_error(stream) {
                (self.functions.destroy_stream)(stream);
                return Err(ChdbError::Query(message));
            }
            // Append in pieces of at most 4 MiB so the engine's backpressure can act.
            for chunk in data.chunks(4 << 20) {
                if (self.functions.stream_append)(stream, chunk.as_ptr().cast(), chunk.len()) != 0 {
                    let message = stream_error(stream).unwrap_or_else(|| "insert stream failed".to_string());
                    (self.functions.destroy_stream)(stream);
                    return Err(ChdbError::Query(message));
                }
            }
            let done = (self.functions.stream_done)(stream);
            let outcome = if done.is_null() {
                Err(ChdbError::Query(
                    stream_error(stream).unwrap_or_else(|| "insert did not finish".to_string()),
                ))
            } else {
                let result = QueryResult { chdb: self, raw: done };
                match result.error() {
                    Some(message) => Err(ChdbError::Query(message)),
                    None => Ok((self.functions.result_rows_written)(done)),
                }
            };
            (self.functions.destroy_stream)(stream);
            outcome
        }
    }
}

/// Who holds the store at `data_path`, if anyone: the engine keeps an exclusive `flock` on
/// `<data_path>/status` while a connection is open and writes `PID: <pid>` into it (ClickHouse's
/// status file). A free store is left unlocked; there is a moment between this check and the
/// engine's own lock in which another process may take it (the engine then refuses, and
/// [`ChdbError::Connect`] says so).
fn holder(data_path: &Path) -> Option<String> {
    use nix::fcntl::{Flock, FlockArg};
    let status = data_path.join("status");
    let file = std::fs::OpenOptions::new().read(true).open(&status).ok()?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => {
            drop(lock);
            None
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            // The engine locks the file first and writes its `PID:` line just after; give a
            // holder that is starting up a moment (up to 1 s) to say who it is.
            let mut text = std::fs::read_to_string(&status).unwrap_or_default();
            for _ in 0..20 {
                if status_pid(&text).is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
                text = std::fs::read_to_string(&status).unwrap_or_default();
            }
            // This process's own connection: chDB opens a second connection on the same
            // path (with its own session settings), so it is not held against us.
            if status_pid(&text) == Some(std::process::id()) {
                return None;
            }
            Some(describe_holder(&text, |pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).ok()
            }))
        }
        Err(_) => None,
    }
}

/// The `PID: <pid>` line of the engine's status file.
fn status_pid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("PID:"))
        .and_then(|pid| pid.trim().parse::<u32>().ok())
}

/// Names the holder from the status file's text (`PID: 4242` on a line) and the process's
/// `/proc/<pid>/cmdline` (NUL-separated arguments) as `cmdline` returns it.
fn describe_holder(status: &str, cmdline: impl Fn(u32) -> Option<Vec<u8>>) -> String {
    let Some(pid) = status_pid(status) else {
        return "another process".to_string();
    };
    let Some(arguments) = cmdline(pid).filter(|arguments| !arguments.is_empty()) else {
        return format!("process {pid}");
    };
    let mut words: Vec<String> = arguments
        .split(|byte| *byte == 0)
        .filter(|word| !word.is_empty())
        .map(|word| String::from_utf8_lossy(word).into_owned())
        .collect();
    if let Some(program) = words.first_mut() {
        if let Some(name) = Path::new(program.as_str()).file_name() {
            *program = name.to_string_lossy().into_owned();
        }
    }
    format!("`{}` (pid {pid})", words.join(" "))
}

/// Connections of this process open and close one at a time: the holder probe takes the
/// status file's lock for a moment, which must not meet this process's own engine taking or
/// releasing it, and a second connection must find the first one's `PID:` line written.
fn connecting() -> std::sync::MutexGuard<'static, ()> {
    static CONNECTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CONNECTING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Drop for Chdb {
    fn drop(&mut self) {
        let _connecting = connecting();
        // SAFETY: closes the connection chdb_connect returned, exactly once; the library is
        // never unloaded.
        unsafe { (self.functions.close)(self.connection) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_named_by_its_command_line() {
        let status = "PID: 4242\nStarted at: 2026-12-02 00:12:11\nRevision: 54513\n";
        let cmdline = |pid: u32| (pid == 4242).then(|| b"/opt/bin/epicenter\0run\0--config\0x.yml\0".to_vec());
        assert_eq!(
            describe_holder(status, cmdline),
            "`epicenter run --config x.yml` (pid 4242)"
        );
        assert_eq!(describe_holder("PID: 7\n", cmdline), "process 7");
        assert_eq!(describe_holder("garbage", cmdline), "another process");
    }
}
