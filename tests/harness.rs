//! Shared harness of the end-to-end tests: one embedded engine per test
//! process (chDB allows one database path per process), SQL helpers, and the
//! independent reference implementation the functions are checked against.

use flamehouse::storage::engine::{Engine, EngineOptions};
use flamehouse_fixtures::testing;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static ENGINE: OnceLock<Engine> = OnceLock::new();

extern "C" {
    fn on_exit(
        cb: extern "C" fn(std::ffi::c_int, *mut std::ffi::c_void),
        arg: *mut std::ffi::c_void,
    ) -> std::ffi::c_int;
    fn _exit(status: std::ffi::c_int) -> !;
}

/// Runs at exit before the engine's own static destructors (registered
/// earlier, so run later): remove the data directory and leave with the
/// harness's status without running those destructors, which crash once
/// queries have run on other threads (closing the connection first does not
/// prevent it).
extern "C" fn close_engine(status: std::ffi::c_int, _: *mut std::ffi::c_void) {
    let _ = std::fs::remove_dir_all(data_dir());
    let _ = std::fs::remove_file(config_file());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: ends the process immediately with the status exit() was given.
    unsafe { _exit(status) }
}

fn data_dir() -> PathBuf {
    std::env::temp_dir().join(format!("flamehouse-it-{}", std::process::id()))
}

fn config_file() -> PathBuf {
    std::env::temp_dir().join(format!("flamehouse-it-{}.xml", std::process::id()))
}

/// The cluster the engine knows ([`engine`]'s configuration): one shard,
/// this process. The engine runs a `Distributed` table over it for real (a
/// shard at this process's own address is queried and written in process);
/// `ON CLUSTER` DDL and Replicated engines need a keeper it does not have.
pub const CLUSTER: &str = "fh_one";

/// The engine's configuration: [`CLUSTER`]. A shard is this process when
/// its address is a local one with the port the engine would listen on
/// (`tcp_port`; it listens on none) and it names no default database.
const CONFIG: &str = "<clickhouse>
  <tcp_port>9000</tcp_port>
  <remote_servers>
    <fh_one>
      <shard><replica><host>127.0.0.1</host><port>9000</port></replica></shard>
    </fh_one>
  </remote_servers>
</clickhouse>
";

/// The process-wide engine on a fresh temporary data directory, knowing
/// the one-shard [`CLUSTER`]. It is closed at exit: the engine's own
/// teardown crashes on an open connection.
pub fn engine() -> &'static Engine {
    let e = ENGINE.get_or_init(|| {
        let dir = data_dir();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::write(config_file(), CONFIG).expect("writing the engine's configuration");
        let e = Engine::open(&EngineOptions {
            data_dir: Some(dir),
            config_file: Some(config_file()),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("opening the embedded engine: {e}"));
        e
    });
    exit_first();
    e
}

/// Registers [`close_engine`] with the C runtime again, at most once a
/// second. exit() runs its handlers newest first, and the engine registers
/// the destructors of its function-local statics when a query first uses
/// them, after any earlier registration of ours: those ran first and, with
/// the engine's background threads still going, sometimes tripped a libc++
/// assertion ("vector[] index out of bounds") on the way out. Registered
/// again as the tests go, the hook runs before nearly all of them.
fn exit_first() {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if LAST.swap(now, Ordering::Relaxed) != now {
        // SAFETY: registering a plain function with the C runtime; the
        // first of its registrations to run ends the process.
        unsafe { on_exit(close_engine, std::ptr::null_mut()) };
    }
}

/// Runs `sql`, returning TabSeparated text; panics with the engine's error.
pub fn q(sql: &str) -> String {
    engine()
        .query_tsv(sql)
        .unwrap_or_else(|e| panic!("query failed: {e}\nSQL: {sql}"))
}

/// Runs `sql`, which must fail; returns the error message.
pub fn q_err(sql: &str) -> String {
    match engine().query_tsv(sql) {
        Ok(out) => panic!("query unexpectedly succeeded with {out:?}\nSQL: {sql}"),
        Err(e) => e.to_string(),
    }
}

/// Path of the built `flamehouse-udf` executable.
pub fn udf_binary() -> PathBuf {
    flamehouse::storage::engine::find_udf_binary(None).expect("flamehouse-udf is built")
}

/// Path of the built `flamehouse` CLI, next to `flamehouse-udf`;
/// `FLAMEHOUSE_TEST_CLI` runs the CLI tests on another build (an older
/// one, to see a test fail before its fix).
pub fn cli_binary() -> PathBuf {
    std::env::var_os("FLAMEHOUSE_TEST_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| udf_binary().with_file_name("flamehouse"))
}

/// A sample: frames root first and a value.
pub type Sample = (Vec<String>, i64);

/// A ClickHouse string literal for `s` (SQL quoting, byte-exact).
pub fn lit(s: &str) -> String {
    flamehouse::storage::sql_string(s)
}

/// A SQL literal of `Array(Tuple(Array(String), Int64))`.
pub fn samples_lit(samples: &[Sample]) -> String {
    let items: Vec<String> = samples
        .iter()
        .map(|(st, v)| {
            let frames: Vec<String> = st.iter().map(|f| lit(f)).collect();
            format!("([{}]::Array(String), toInt64({v}))", frames.join(","))
        })
        .collect();
    if items.is_empty() {
        "[]::Array(Tuple(Array(String), Int64))".into()
    } else {
        format!("[{}]", items.join(","))
    }
}

pub use flamehouse::flame::unescape_tsv;

/// One flame-graph row as returned by the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Depth.
    pub level: u32,
    /// Label.
    pub label: String,
    /// Value and self, then valueRight and selfRight for diffs.
    pub vals: Vec<i64>,
}

/// Parses TabSeparated rows `level, label, numbers...`.
pub fn parse_rows(tsv: &str) -> Vec<Row> {
    tsv.lines()
        .map(|l| {
            let mut f = l.split('\t');
            let level = f.next().unwrap().parse().unwrap();
            let label = unescape_tsv(f.next().unwrap());
            let vals = f.map(|x| x.parse().unwrap()).collect();
            Row { level, label, vals }
        })
        .collect()
}

/// The reference ([`testing::reference_tree`]): for every stack prefix,
/// `[value, self]` per side (one or two), computed by enumerating prefixes
/// directly (no tree).
pub fn reference(sides: &[&[Sample]]) -> BTreeMap<Vec<String>, Vec<i64>> {
    let bytes: Vec<Vec<(testing::Stack, i64)>> = sides
        .iter()
        .map(|side| {
            side.iter()
                .map(|(st, v)| (st.iter().map(|f| f.as_bytes().to_vec()).collect(), *v))
                .collect()
        })
        .collect();
    let bytes: Vec<&[(testing::Stack, i64)]> = bytes.iter().map(Vec::as_slice).collect();
    testing::reference_tree(&bytes)
        .into_iter()
        .map(|(path, n)| {
            let vals = (0..sides.len())
                .flat_map(|s| [n.value[s], n.self_[s]])
                .collect();
            (strings(&path), vals)
        })
        .collect()
}

fn strings(path: &testing::Stack) -> Vec<String> {
    path.iter()
        .map(|f| String::from_utf8(f.clone()).expect("UTF-8 labels"))
        .collect()
}

/// Checks the Grafana nested-set rules ([`testing::check_tree_rows`]) and
/// returns the path -> values map (`[value, self]`, then `[valueRight,
/// selfRight]` for diffs).
pub fn check_tree(rows: &[Row]) -> BTreeMap<Vec<String>, Vec<i64>> {
    assert!(!rows.is_empty(), "empty tree");
    let diff = rows[0].vals.len() == 4;
    let shared: Vec<testing::TreeRow> = rows
        .iter()
        .map(|r| {
            assert_eq!(r.vals.len(), rows[0].vals.len(), "{r:?}");
            let side = |i: usize| r.vals.get(i).copied().unwrap_or(0);
            testing::TreeRow {
                level: r.level,
                label: r.label.as_bytes().to_vec(),
                value: [side(0), side(2)],
                self_: [side(1), side(3)],
            }
        })
        .collect();
    testing::check_tree_rows(&shared, diff).unwrap_or_else(|e| panic!("{e}"));
    testing::path_values(&shared)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(path, (v, s))| {
            let vals = if diff {
                vec![v[0], s[0], v[1], s[1]]
            } else {
                vec![v[0], s[0]]
            };
            (strings(&path), vals)
        })
        .collect()
}

/// Random samples over a small vocabulary (so prefixes are shared).
pub use flamehouse_fixtures::testing::random_samples;

/// The shared engine as a backend that records what it is sent (every
/// query and the table of every insert) and, when made by
/// [`Spy::failing`], fails the inserts into one table once a number of them
/// went through (an engine gone mid-load).
#[derive(Debug, Default)]
pub struct Spy {
    fail: Option<(&'static str, std::sync::atomic::AtomicUsize)>,
    /// Made by [`Spy::on_each_node`].
    node: bool,
    /// The queries (`query_tsv`), in order.
    pub queries: std::sync::Mutex<Vec<String>>,
    /// The tables inserted into, in order.
    pub inserts: std::sync::Mutex<Vec<String>>,
}

impl Spy {
    /// Fails every insert into `table` after the first `after`.
    pub fn failing(table: &'static str, after: usize) -> Spy {
        Spy {
            fail: Some((table, after.into())),
            ..Spy::default()
        }
    }
}

impl Spy {
    /// Runs every statement as each node of [`CLUSTER`] runs it from the
    /// DDL queue: `ON CLUSTER` removed and `Replicated*MergeTree(path,
    /// name, ...)` as `*MergeTree(...)` (no keeper here); queries and
    /// inserts unchanged.
    pub fn on_each_node() -> Spy {
        Spy {
            node: true,
            ..Spy::default()
        }
    }
}

impl flamehouse::storage::Backend for Spy {
    fn execute(&self, sql: &str) -> flamehouse::Result<()> {
        if !self.node {
            return engine().execute(sql);
        }
        let path = flamehouse::storage::schema::WHOLE_REPLICA_PATH;
        engine().execute(
            &sql.replace(&format!(" ON CLUSTER {CLUSTER}"), "")
                .replace("ENGINE = Replicated", "ENGINE = ")
                .replace(&format!("({path}, "), "(")
                .replace(&format!("({path})"), ""),
        )
    }
    fn query_tsv(&self, sql: &str) -> flamehouse::Result<String> {
        self.queries.lock().unwrap().push(sql.to_string());
        engine().query_tsv(sql)
    }
    fn insert_rowbinary(
        &self,
        db: &flamehouse::Ident,
        table: &str,
        structure: &str,
        rows: &[u8],
        token: &str,
    ) -> flamehouse::Result<()> {
        use std::sync::atomic::Ordering;
        if let Some((t, after)) = &self.fail {
            if *t == table {
                if after.load(Ordering::Relaxed) == 0 {
                    return Err(flamehouse::Error::Query {
                        message: format!("insert into {table} failed (test)"),
                    });
                }
                after.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.inserts.lock().unwrap().push(table.to_string());
        flamehouse::storage::Backend::insert_rowbinary(engine(), db, table, structure, rows, token)
    }
}
