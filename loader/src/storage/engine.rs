//! The embedded ClickHouse engine: `libchdb.so` (chDB, ClickHouse's
//! in-process build) loaded at run time through its C API.
//!
//! Opening an engine prepares the data directory so the engine registers
//! the flamehouse functions: `DIR/user_scripts/flamehouse-udf` links to the
//! UDF executable, `DIR/udf/flamehouse_function.xml` is written from the
//! catalog, and the SQL wrapper functions are (re)created; each only when
//! it is missing or differs, so opening writes nothing of flamehouse's own
//! into a directory already prepared. (The engine itself still writes its
//! status file and its tables' logs on open: a read-only directory cannot
//! be opened, and the error says so.) chDB allows one
//! open database path per process, so an `Engine` is opened once and shared.

use crate::error::{file_err, Error, Result};
use flamehouse_udf::catalog;
use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The copy of the SQL wrappers last created, in `DIR/udf/`.
const FUNCTIONS_APPLIED: &str = "flamehouse_functions_applied.sql";

/// The pinned chDB release; `scripts/setup-engine.sh` fetches the same.
pub const CHDB_VERSION: &str = "26.5.3";

/// Where and how to open the engine.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Database directory; tables persist there. Default:
    /// [`default_data_dir`].
    pub data_dir: Option<PathBuf>,
    /// Path of `libchdb.so`. Default: `$FLAMEHOUSE_LIBCHDB`, else
    /// [`default_library_path`].
    pub library: Option<PathBuf>,
    /// Path of the `flamehouse-udf` executable. Default: `$FLAMEHOUSE_UDF`,
    /// else next to the running executable (or its parent directory, for
    /// test binaries under `target/*/deps`), else the first on `PATH`
    /// (see [`find_udf_binary`]).
    pub udf_binary: Option<PathBuf>,
    /// A ClickHouse configuration file the engine reads at start
    /// (`--config-file`), for settings the command line cannot give: a
    /// `remote_servers` cluster whose one shard is this process (the
    /// cluster tests run the sharded layout so). Default: none.
    pub config_file: Option<PathBuf>,
}

/// `$FLAMEHOUSE_CACHE`, else `$XDG_CACHE_HOME/flamehouse`, else
/// `~/.cache/flamehouse`: where the setup scripts cache downloads.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("FLAMEHOUSE_CACHE") {
        return PathBuf::from(p);
    }
    dirs::cache_dir()
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("flamehouse")
}

/// The library path `scripts/setup-engine.sh` installs to.
pub fn default_library_path() -> PathBuf {
    cache_dir()
        .join("chdb")
        .join(CHDB_VERSION)
        .join("libchdb.so")
}

/// `$XDG_DATA_HOME/flamehouse` (usually `~/.local/share/flamehouse`).
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("flamehouse")
}

/// The file `name` next to the running executable or in its parent
/// directory (test and bench binaries run from `target/*/deps`, the
/// workspace's binaries are in `target/*`); `Err` lists the places tried.
pub fn beside_executable(name: &str) -> std::result::Result<PathBuf, Vec<String>> {
    let exe =
        std::env::current_exe().map_err(|e| vec![format!("next to this executable ({e})")])?;
    let mut tried = Vec::new();
    for dir in exe.ancestors().skip(1).take(2) {
        let cand = dir.join(name);
        if cand.is_file() {
            return Ok(cand);
        }
        tried.push(cand.display().to_string());
    }
    Err(tried)
}

/// Finds the `flamehouse-udf` executable, in this order: `explicit`, then
/// `$FLAMEHOUSE_UDF` (an override, so it must name a file), then next to the
/// running executable (or in its parent directory, for test binaries under
/// `target/*/deps`), then on `PATH` (where `cargo install` puts both
/// binaries, or wherever a packager put them). The error lists every place
/// tried.
pub fn find_udf_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("FLAMEHOUSE_UDF") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(Error::UdfBinary(format!(
                "FLAMEHOUSE_UDF={} is not a file",
                p.display()
            )));
        }
        return Ok(p);
    }
    let mut tried = match beside_executable(catalog::BINARY) {
        Ok(p) => return Ok(p),
        Err(tried) => tried,
    };
    if let Some(cand) = find_on_path(catalog::BINARY) {
        return Ok(cand);
    }
    tried.push("PATH".into());
    Err(Error::UdfBinary(format!(
        "tried {} (install it beside flamehouse with `cargo install --locked --path udf`, \
         build it with `cargo build --release`, or set FLAMEHOUSE_UDF)",
        tried.join(", ")
    )))
}

/// The first executable file named `name` in a `PATH` directory.
fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        // An empty PATH entry means the current directory to a shell; a
        // relative one would too. Only absolute directories are searched.
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|c| {
            std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

type ConnectFn = unsafe extern "C" fn(c_int, *mut *mut c_char) -> *mut *mut c_void;
type CloseFn = unsafe extern "C" fn(*mut *mut c_void);
type QueryNFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize) -> *mut c_void;
type BufferFn = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type LengthFn = unsafe extern "C" fn(*mut c_void) -> usize;
type ErrorFn = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type DestroyFn = unsafe extern "C" fn(*mut c_void);

struct Api {
    /// The loaded library, for the symbols of [`Session`].
    lib: &'static Library,
    connect: ConnectFn,
    close: CloseFn,
    query_n: QueryNFn,
    buffer: BufferFn,
    length: LengthFn,
    error: ErrorFn,
    destroy: DestroyFn,
}

impl Api {
    fn load(path: &Path) -> Result<Api> {
        let lib_err = |reason: String| Error::Library {
            path: path.to_path_buf(),
            reason,
        };
        if !path.is_file() {
            return Err(lib_err(
                "not found (run scripts/setup-engine.sh, or set FLAMEHOUSE_LIBCHDB)".into(),
            ));
        }
        // SAFETY: loading chDB runs its static initialisers, which is what
        // the library is built for. It is never unloaded (leaked below):
        // unloading a ClickHouse build mid-process is not supported.
        let lib = unsafe { Library::new(path) }.map_err(|e| lib_err(e.to_string()))?;
        let lib: &'static Library = Box::leak(Box::new(lib));
        // SAFETY: the symbol types match chdb.h of the pinned release.
        unsafe {
            let sym = |name: &[u8]| -> Result<*const c_void> {
                lib.get::<*const c_void>(name)
                    .map(|s| *s)
                    .map_err(|e| lib_err(e.to_string()))
            };
            Ok(Api {
                lib,
                connect: std::mem::transmute::<*const c_void, ConnectFn>(sym(b"chdb_connect\0")?),
                close: std::mem::transmute::<*const c_void, CloseFn>(sym(b"chdb_close_conn\0")?),
                query_n: std::mem::transmute::<*const c_void, QueryNFn>(sym(b"chdb_query_n\0")?),
                buffer: std::mem::transmute::<*const c_void, BufferFn>(sym(
                    b"chdb_result_buffer\0",
                )?),
                length: std::mem::transmute::<*const c_void, LengthFn>(sym(
                    b"chdb_result_length\0",
                )?),
                error: std::mem::transmute::<*const c_void, ErrorFn>(sym(b"chdb_result_error\0")?),
                destroy: std::mem::transmute::<*const c_void, DestroyFn>(sym(
                    b"chdb_destroy_query_result\0",
                )?),
            })
        }
    }
}

/// An open embedded engine on one data directory.
pub struct Engine {
    api: Api,
    conn: Mutex<*mut *mut c_void>,
    data_dir: PathBuf,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("data_dir", &self.data_dir)
            .finish()
    }
}

// SAFETY: chDB documents its connection as thread-safe; we additionally
// serialize every call through the mutex.
unsafe impl Send for Engine {}
// SAFETY: see above.
unsafe impl Sync for Engine {}

/// Gives the fatal signals back their default action once the engine has
/// started: its handlers hand a crash to a listener thread that only the
/// server runs, so in this process a failed allocation (Rust aborts) or a
/// fault slept for ever holding its memory (a 14 KB file that ran a load
/// out of memory left it asleep at 9.6 GB). With the default, the
/// process ends at once (SIGABRT: exit 134).
fn default_fatal_signals() {
    for sig in [
        libc::SIGABRT,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
    ] {
        // SAFETY: setting a signal's disposition to its default has no
        // precondition.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}

impl Engine {
    /// Opens the engine on `opts.data_dir` with the flamehouse functions
    /// registered.
    pub fn open(opts: &EngineOptions) -> Result<Engine> {
        let data_dir = opts.data_dir.clone().unwrap_or_else(default_data_dir);
        let library = opts
            .library
            .clone()
            .or_else(|| std::env::var_os("FLAMEHOUSE_LIBCHDB").map(PathBuf::from))
            .unwrap_or_else(default_library_path);
        let udf = find_udf_binary(opts.udf_binary.as_deref())?;
        let udf = std::fs::canonicalize(&udf).map_err(file_err(&udf))?;

        let (data_dir, scripts, configs) = prepare_data_dir(&data_dir, &udf)?;
        // Asked first, so that the engine's own two lines (its lock error
        // on stderr) do not come before this one.
        if let Some(reason) = held_by_another(&data_dir) {
            return Err(Error::Connect {
                reason,
                path: data_dir,
            });
        }
        // So is a directory the engine cannot write (its own `Code: 76`
        // line came before ours).
        if !writable(&data_dir) {
            return Err(Error::Connect {
                reason: NOT_WRITABLE.into(),
                path: data_dir,
            });
        }

        detach_stdin();
        let api = Api::load(&library)?;
        let mut args = vec![
            "clickhouse".to_string(),
            format!("--path={}", data_dir.display()),
            // Loader batches carry their rows inline after `FORMAT RowBinary`,
            // which counts against the query size.
            "--max_query_size=4294967296".to_string(),
            format!("--user_scripts_path={}", scripts.display()),
            format!(
                "--user_defined_executable_functions_config={}/*_function.xml",
                configs.display()
            ),
        ];
        if let Some(config) = &opts.config_file {
            let config = std::fs::canonicalize(config).map_err(file_err(config))?;
            args.push(format!("--config-file={}", config.display()));
        }
        let cargs: Vec<CString> = args
            .iter()
            .map(|a| CString::new(a.as_str()).expect("no NUL in paths"))
            .collect();
        let mut argv: Vec<*mut c_char> = cargs.iter().map(|a| a.as_ptr() as *mut c_char).collect();
        // SAFETY: argv points at NUL-terminated strings that outlive the call.
        let conn = unsafe { (api.connect)(argv.len() as c_int, argv.as_mut_ptr()) };
        // SAFETY: a non-null result points at the connection handle.
        if conn.is_null() || unsafe { (*conn).is_null() } {
            return Err(Error::Connect {
                reason: connect_failure(&data_dir),
                path: data_dir,
            });
        }
        default_fatal_signals();
        let engine = Engine {
            api,
            conn: Mutex::new(conn),
            data_dir,
        };
        // The wrappers are stored in the directory: (re)create them only
        // when the copy of their SQL kept beside them differs or one is
        // missing, so a read-only directory that has them opens.
        let sql = catalog::functions_sql();
        let applied = configs.join(FUNCTIONS_APPLIED);
        let existing = engine
            .query_tsv("SELECT name FROM system.functions WHERE origin = 'SQLUserDefined'")?;
        let stmts = catalog::statements(&sql);
        let current = std::fs::read(&applied).ok().as_deref() == Some(sql.as_bytes())
            && stmts.iter().all(|s| {
                s.split_whitespace()
                    .nth(4)
                    .is_some_and(|name| existing.lines().any(|l| l == name))
            });
        if !current {
            for stmt in &stmts {
                engine.execute(stmt)?;
            }
            std::fs::write(&applied, &sql).map_err(|e| write_err(&applied, e))?;
        }
        Ok(engine)
    }

    /// The database directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Closes the connection (and, as it is the process's last, shuts the
    /// engine down). Later queries fail. Idempotent; `Drop` calls it. A
    /// process that keeps an engine in a static must call this before exit,
    /// because the engine's own teardown at exit crashes otherwise.
    pub fn close(&self) {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if !conn.is_null() {
            // SAFETY: the connection was opened by chdb_connect and is
            // closed once: the pointer is nulled under the lock.
            unsafe { (self.api.close)(*conn) };
            *conn = std::ptr::null_mut();
        }
    }

    /// Runs one statement and returns its output in `format`.
    pub fn query(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if conn.is_null() {
            return Err(Error::Query {
                message: "the engine is closed".into(),
            });
        }
        // SAFETY: the connection is open (closed only in Drop); the query and
        // format buffers are valid for their lengths; the result is
        // destroyed exactly once after its buffer is copied.
        unsafe {
            let res = (self.api.query_n)(
                **conn,
                sql.as_ptr() as *const c_char,
                sql.len(),
                format.as_ptr() as *const c_char,
                format.len(),
            );
            if res.is_null() {
                return Err(Error::Query {
                    message: "the engine returned no result".into(),
                });
            }
            let err = (self.api.error)(res);
            let out = if !err.is_null() {
                let msg = CStr::from_ptr(err).to_string_lossy();
                Err(Error::Query {
                    message: clean_error(&msg),
                })
            } else {
                let ptr = (self.api.buffer)(res);
                let len = (self.api.length)(res);
                Ok(if ptr.is_null() || len == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(ptr as *const u8, len).to_vec()
                })
            };
            (self.api.destroy)(res);
            out
        }
    }

    /// Runs a statement, discarding output.
    pub fn execute(&self, sql: &str) -> Result<()> {
        self.query(sql, "TabSeparated").map(|_| ())
    }

    /// Runs a query and returns its TabSeparated output as text.
    pub fn query_tsv(&self, sql: &str) -> Result<String> {
        let out = self.query(sql, "TabSeparated")?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.close();
    }
}

/// Prepares `dir` so the engine registers the flamehouse functions: the
/// `user_scripts/flamehouse-udf` link to `udf` and the functions' XML in
/// `udf/`. Returns the canonical directory, the scripts and the configs
/// directories. Nothing already in place is rewritten, so a read-only
/// directory prepared before opens; a write that is needed and fails says
/// which file and why.
pub fn prepare_data_dir(dir: &Path, udf: &Path) -> Result<(PathBuf, PathBuf, PathBuf)> {
    // `create_dir_all` on a file says only "File exists".
    if dir.exists() && !dir.is_dir() {
        return Err(crate::error::Error::Usage(format!(
            "{}: is not a directory (a data directory is the engine's; give --data a \
             directory, new or made by flamehouse)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|cause| {
        // A file on the way (`--data some.file/sub`): "Not a directory".
        if cause.raw_os_error() == Some(libc::ENOTDIR) {
            crate::error::Error::Usage(format!(
                "{}: a part of this path is a file, not a directory (give --data a directory, \
                 new or made by flamehouse)",
                dir.display()
            ))
        } else {
            file_err(dir)(cause)
        }
    })?;
    let dir = std::fs::canonicalize(dir).map_err(file_err(dir))?;
    let scripts = dir.join("user_scripts");
    let configs = dir.join("udf");
    for d in [&scripts, &configs] {
        std::fs::create_dir_all(d).map_err(file_err(d))?;
    }
    // Each made under a name of this process's and renamed into place:
    // two processes opening a new directory at once both succeed (the
    // second's `symlink` failed with "File exists"), and none reads a
    // half-written file.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let aside = |path: &Path| {
        let mut name = std::ffi::OsString::from(".");
        name.push(path.file_name().unwrap_or_default());
        name.push(format!(
            ".{}.{}",
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        path.with_file_name(name)
    };
    let link = scripts.join(catalog::BINARY);
    if std::fs::read_link(&link).ok().as_deref() != Some(udf) {
        let tmp = aside(&link);
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(udf, &tmp).map_err(|e| write_err(&link, e))?;
        std::fs::rename(&tmp, &link).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            write_err(&link, e)
        })?;
    }
    let xml = configs.join("flamehouse_function.xml");
    let text = catalog::functions_xml();
    if std::fs::read(&xml).ok().as_deref() != Some(text.as_bytes()) {
        let tmp = aside(&xml);
        std::fs::write(&tmp, text).map_err(|e| write_err(&xml, e))?;
        std::fs::rename(&tmp, &xml).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            write_err(&xml, e)
        })?;
    }
    Ok((dir, scripts, configs))
}

/// A failed write in the data directory, with the cause the OS gave (a
/// read-only directory says so).
fn write_err(path: &Path, cause: std::io::Error) -> Error {
    let hint = match cause.raw_os_error() {
        Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM) => {
            " (the data directory is not writable; it needs this file)"
        }
        _ => "",
    };
    Error::File {
        path: path.to_path_buf(),
        cause: std::io::Error::new(cause.kind(), format!("{cause}{hint}")),
    }
}

/// Why a directory the engine cannot write is not opened.
const NOT_WRITABLE: &str = "the directory is not writable: the engine writes its status file \
                            and its tables' logs there even to read (copy it somewhere writable)";

/// Why the engine would not open `dir`, as far as can be told from outside
/// (the engine prints its own message to stderr): another process took
/// the lock on `DIR/status` (ClickHouse's one-server-per-directory lock)
/// since it was asked, or the directory stopped being writable (both are
/// asked before the engine opens: [`NOT_WRITABLE`]).
fn connect_failure(dir: &Path) -> String {
    if let Some(reason) = held_by_another(dir) {
        return reason;
    }
    if !writable(dir) {
        return NOT_WRITABLE.into();
    }
    "chdb_connect failed (the engine's message is above)".into()
}

/// Points standard input at `/dev/null` for the rest of the process. The
/// embedded engine takes a standard input that is not a terminal as the
/// data of an INSERT (as `clickhouse-local` does): with the input of a
/// shell loop (`while read f; do flamehouse load "$f"; done < list`) or any
/// non-empty pipe, every INSERT with inline values failed ("Processing
/// async inserts with both inlined and external data (from stdin or
/// infile) is not supported") and the engine ate the loop's input. No
/// flamehouse query reads standard input (inserts go through pipes of
/// their own); `load -` copies it to a file before the engine opens.
fn detach_stdin() {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return;
    }
    if let Ok(null) = std::fs::File::open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto fd 0 of an fd this function owns; the File
        // closes its own fd afterwards, fd 0 stays open on /dev/null.
        unsafe {
            libc::dup2(null.as_raw_fd(), 0);
        }
    }
}

/// Why `dir` cannot be opened when another process holds its engine's
/// lock on `DIR/status` (ClickHouse's one-server-per-directory lock):
/// its pid, as the status file says.
fn held_by_another(dir: &Path) -> Option<String> {
    use std::os::unix::io::AsRawFd;
    let status = dir.join("status");
    let f = std::fs::File::open(&status).ok()?;
    // SAFETY: flock on a descriptor this function owns; released when `f`
    // is dropped.
    let busy = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK);
    if !busy {
        return None;
    }
    let pid = std::fs::read_to_string(&status)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PID: ").map(|p| p.trim().to_string()))
        })
        .map(|p| format!(" (pid {p})"))
        .unwrap_or_default();
    Some(format!(
        "another process{pid} has this directory open; chDB allows one process per directory"
    ))
}

/// Whether this process may write in `dir`.
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Drops the engine's stack-trace block from an error message: users need
/// the reason and the scope, not 30 raw addresses.
pub fn clean_error(msg: &str) -> String {
    let mut one_line = msg.trim().replace('\n', " ");
    // chDB nests the server's text in its own (`Code: 73. DB::Exception:
    // Code: 73. DB::Exception: ...`) and repeats its trailer (`(NAME)
    // (version V). (NAME) (version V). (NAME)`): one of each, as a
    // server says it.
    if let Some(code) = one_line
        .strip_prefix("Code: ")
        .and_then(|r| r.split_once('.'))
        .map(|(n, _)| n.to_string())
    {
        let prefix = format!("Code: {code}. DB::Exception: ");
        while one_line.starts_with(&prefix) && one_line[prefix.len()..].starts_with(&prefix) {
            one_line.drain(..prefix.len());
        }
        let trailer =
            regex::Regex::new(r"\([A-Z][A-Z0-9_]*\) \(version [^)]*\)").expect("a valid regex");
        if let Some(m) = trailer.find(&one_line) {
            one_line.truncate(m.end());
        }
    }
    // The expression dump of a failed function (`: while executing
    // 'FUNCTION or(or(match(...` , a kilobyte for a view's selector)
    // says nothing the message before it does not.
    if let Some(a) = one_line.find(": while executing '") {
        if let Some(b) = one_line[a..].rfind("'. (").map(|b| a + b) {
            one_line = format!("{}{}", &one_line[..a], &one_line[b + 1..]);
        }
    }
    // A view's throwIf message is the point; the expression dump after it
    // repeats it three times.
    if let (Some(a), Some(b)) = (
        one_line.find(": while executing 'FUNCTION throwIf("),
        one_line.find("'. (FUNCTION_THROW_IF_VALUE_IS_NON_ZERO)"),
    ) {
        if a < b {
            one_line = format!("{}{}", &one_line[..a], &one_line[b + 1..]);
        }
    }
    match (one_line.find(", Stack trace"), one_line.find(" (version ")) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &one_line[..a], &one_line[b..]),
        _ => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// chDB's nested and repeated error text, and a function's expression
    /// dump, come out as a server's one message.
    #[test]
    fn engine_errors_are_said_once() {
        assert_eq!(
            clean_error(
                "Code: 73. DB::Exception: Code: 73. DB::Exception: Code: 73. DB::Exception: \
                 Unknown format Bogus. Maybe you meant: []. (UNKNOWN_FORMAT) (version 26.5.1.1). \
                 (UNKNOWN_FORMAT) (version 26.5.1.1). (UNKNOWN_FORMAT)"
            ),
            "Code: 73. DB::Exception: Unknown format Bogus. Maybe you meant: []. \
             (UNKNOWN_FORMAT) (version 26.5.1.1)"
        );
        assert_eq!(
            clean_error(
                "Code: 427. DB::Exception: OptimizedRegularExpression: cannot compile re2: (, \
                 error: missing ): (: while executing 'FUNCTION or(or(match(labels['a'], '('))) \
                 :: 1) -> or(...) UInt8 : 3'. (CANNOT_COMPILE_REGEXP) (version 26.5.1.1)"
            ),
            "Code: 427. DB::Exception: OptimizedRegularExpression: cannot compile re2: (, \
             error: missing ): (. (CANNOT_COMPILE_REGEXP) (version 26.5.1.1)"
        );
    }

    /// Preparing a directory twice rewrites nothing (the link and the XML
    /// keep their inodes, so a directory prepared before and then made
    /// read-only is not written to); a stale link is replaced; a link that
    /// cannot be replaced is an error with the true cause (it used to be
    /// "File exists").
    #[test]
    fn prepared_directory_is_not_rewritten() {
        let dir = std::env::temp_dir().join(format!("flamehouse-prep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let udf = std::env::current_exe().unwrap();
        let (d, scripts, configs) = prepare_data_dir(&dir, &udf).unwrap();
        let link = scripts.join(catalog::BINARY);
        let xml = configs.join("flamehouse_function.xml");
        assert_eq!(std::fs::read_link(&link).unwrap(), udf);
        let ino = |p: &Path| std::fs::symlink_metadata(p).unwrap().ino();
        let (l0, x0) = (ino(&link), ino(&xml));
        assert_eq!(prepare_data_dir(&dir, &udf).unwrap().0, d);
        assert_eq!((ino(&link), ino(&xml)), (l0, x0));

        // A link to another build is replaced.
        let other = dir.join("other-udf");
        std::fs::write(&other, b"").unwrap();
        prepare_data_dir(&dir, &other).unwrap();
        assert_eq!(std::fs::read_link(&link).unwrap(), other);

        // Something that cannot be removed in its place: the OS's reason.
        std::fs::remove_file(&link).unwrap();
        std::fs::create_dir_all(link.join("x")).unwrap();
        let e = prepare_data_dir(&dir, &udf).unwrap_err().to_string();
        assert!(e.starts_with(&link.display().to_string()), "{e}");
        assert!(e.contains("Is a directory"), "{e}");
        assert!(!e.contains("File exists"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Several openers of a new directory at once all prepare it (two
    /// loads started together on a new directory: one failed with
    /// "File exists"), and nothing of theirs is left beside the files.
    #[test]
    fn a_new_directory_prepared_at_once_by_several() {
        let dir = std::env::temp_dir().join(format!("flamehouse-prep-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let udf = std::env::current_exe().unwrap();
        for _ in 0..20 {
            let _ = std::fs::remove_dir_all(&dir);
            let barrier = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                for _ in 0..8 {
                    s.spawn(|| {
                        barrier.wait();
                        prepare_data_dir(&dir, &udf).unwrap();
                    });
                }
            });
            let scripts = dir.join("user_scripts");
            assert_eq!(
                std::fs::read_link(scripts.join(catalog::BINARY)).unwrap(),
                udf
            );
            for d in [scripts, dir.join("udf")] {
                let names: Vec<String> = std::fs::read_dir(&d)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect();
                assert_eq!(names.len(), 1, "{names:?}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

// ---------------------------------------------------------------------------
// Sessions: more connections to the open engine (`flamehouse serve`).

type QueryParamsNFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    usize,
    *const c_char,
    usize,
    *const *const c_char,
    *const usize,
    *const *const c_char,
    *const usize,
    usize,
) -> *mut c_void;
type StatFn = unsafe extern "C" fn(*mut c_void) -> u64;
type ElapsedFn = unsafe extern "C" fn(*mut c_void) -> f64;

/// A query's output and the engine's statistics about it.
#[derive(Debug, Default, Clone)]
pub struct QueryOutput {
    /// The result in the requested format.
    pub data: Vec<u8>,
    /// Rows in the result.
    pub result_rows: u64,
    /// Rows read from storage.
    pub read_rows: u64,
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Rows written (materialized views' rows included, as ClickHouse's
    /// `X-ClickHouse-Summary` counts them).
    pub written_rows: u64,
    /// Bytes written.
    pub written_bytes: u64,
    /// Seconds the engine took.
    pub elapsed: f64,
}

/// One more connection to the open engine: its own settings (`SET`), its
/// own current database, and queries that run in parallel with those of
/// other sessions (the engine's own connection serializes its callers).
/// Closed on drop; it must not outlive the [`Engine`].
pub struct Session<'e> {
    engine: &'e Engine,
    conn: *mut *mut c_void,
    with_params: QueryParamsNFn,
    storage_rows: StatFn,
    storage_bytes: StatFn,
    result_rows: StatFn,
    rows_written: StatFn,
    bytes_written: StatFn,
    elapsed: ElapsedFn,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("data_dir", &self.engine.data_dir)
            .finish()
    }
}

// SAFETY: a chDB connection may be used from any thread; a session is used
// by one thread at a time (`&mut self` is not needed because the engine
// serializes calls on one connection itself).
unsafe impl Send for Session<'_> {}

impl Engine {
    /// Opens a [`Session`]: a new connection to this engine's database.
    /// Settings `SET` in it stay in it.
    pub fn session(&self) -> Result<Session<'_>> {
        if self
            .conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_null()
        {
            return Err(Error::Query {
                message: "the engine is closed".into(),
            });
        }
        let lib_err = |reason: String| Error::Library {
            path: PathBuf::from("libchdb.so"),
            reason,
        };
        // SAFETY: the symbol types match chdb.h of the pinned release.
        let sym = |name: &[u8]| -> Result<*const c_void> {
            unsafe { self.api.lib.get::<*const c_void>(name) }
                .map(|s| *s)
                .map_err(|e| lib_err(e.to_string()))
        };
        // SAFETY: each pointer is the named function of chdb.h.
        let (with_params, storage_rows, storage_bytes, result_rows) = unsafe {
            (
                std::mem::transmute::<*const c_void, QueryParamsNFn>(sym(
                    b"chdb_query_with_params_n\0",
                )?),
                std::mem::transmute::<*const c_void, StatFn>(sym(
                    b"chdb_result_storage_rows_read\0",
                )?),
                std::mem::transmute::<*const c_void, StatFn>(sym(
                    b"chdb_result_storage_bytes_read\0",
                )?),
                std::mem::transmute::<*const c_void, StatFn>(sym(b"chdb_result_rows_read\0")?),
            )
        };
        // SAFETY: as above.
        let (rows_written, bytes_written, elapsed) = unsafe {
            (
                std::mem::transmute::<*const c_void, StatFn>(sym(b"chdb_result_rows_written\0")?),
                std::mem::transmute::<*const c_void, StatFn>(sym(b"chdb_result_bytes_written\0")?),
                std::mem::transmute::<*const c_void, ElapsedFn>(sym(b"chdb_result_elapsed\0")?),
            )
        };
        // The engine is booted: only the path matters (it must be the same).
        let args = [
            CString::new("clickhouse").expect("no NUL"),
            CString::new(format!("--path={}", self.data_dir.display())).expect("no NUL in paths"),
        ];
        let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
        // SAFETY: argv points at NUL-terminated strings that outlive the call.
        let conn = unsafe { (self.api.connect)(argv.len() as c_int, argv.as_mut_ptr()) };
        // SAFETY: a non-null result points at the connection handle.
        if conn.is_null() || unsafe { (*conn).is_null() } {
            return Err(Error::Query {
                message: "the engine refused another connection".into(),
            });
        }
        Ok(Session {
            engine: self,
            conn,
            with_params,
            storage_rows,
            storage_bytes,
            result_rows,
            rows_written,
            bytes_written,
            elapsed,
        })
    }
}

impl Session<'_> {
    /// Runs one statement with `{name:Type}` placeholders bound to `params`
    /// by the engine (values in ClickHouse's escaped text form, as in
    /// `param_name=` URL parameters; nothing is spliced into the SQL).
    pub fn query(&self, sql: &str, format: &str, params: &[(&str, &str)]) -> Result<QueryOutput> {
        let names: Vec<*const c_char> = params.iter().map(|p| p.0.as_ptr().cast()).collect();
        let name_lens: Vec<usize> = params.iter().map(|p| p.0.len()).collect();
        let values: Vec<*const c_char> = params.iter().map(|p| p.1.as_ptr().cast()).collect();
        let value_lens: Vec<usize> = params.iter().map(|p| p.1.len()).collect();
        // SAFETY: the connection is open until drop; every buffer is valid
        // for its length during the call; the result is destroyed once after
        // it is copied.
        unsafe {
            let res = (self.with_params)(
                *self.conn,
                sql.as_ptr().cast(),
                sql.len(),
                format.as_ptr().cast(),
                format.len(),
                names.as_ptr(),
                name_lens.as_ptr(),
                values.as_ptr(),
                value_lens.as_ptr(),
                params.len(),
            );
            if res.is_null() {
                return Err(Error::Query {
                    message: "the engine returned no result".into(),
                });
            }
            let api = &self.engine.api;
            let err = (api.error)(res);
            let out = if !err.is_null() {
                let msg = CStr::from_ptr(err).to_string_lossy();
                Err(Error::Query {
                    message: clean_error(&msg),
                })
            } else {
                let ptr = (api.buffer)(res);
                let len = (api.length)(res);
                Ok(QueryOutput {
                    data: if ptr.is_null() || len == 0 {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(ptr as *const u8, len).to_vec()
                    },
                    result_rows: (self.result_rows)(res),
                    read_rows: (self.storage_rows)(res),
                    read_bytes: (self.storage_bytes)(res),
                    written_rows: (self.rows_written)(res),
                    written_bytes: (self.bytes_written)(res),
                    elapsed: (self.elapsed)(res),
                })
            };
            (api.destroy)(res);
            out
        }
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // SAFETY: opened by chdb_connect, closed once here.
        unsafe { (self.engine.api.close)(self.conn) };
    }
}
