//! `flamehouse serve`, the real binary on a free port with its own data
//! directory, driven by clients nobody here wrote: the loader's server sink
//! (the Rust `clickhouse` crate), `curl`, Python `clickhouse-connect` and
//! JavaScript `@clickhouse/client` (both installed by
//! scripts/setup-clients.sh). Every answer is compared with the same load
//! on the embedded engine queried directly; every bad request must get a
//! ClickHouse-style error and leave the server serving and the data whole.

use flamehouse::ingest::{load_file, LoadOptions};
use flamehouse::storage::server::{ServerBackend, ServerOptions};
use flamehouse::storage::Backend;
use flamehouse_fixtures::testing::temp_path;
use flamehouse_fixtures::workload::{compile_workload, generate, FixtureOptions};
use flamehouse_tests::*;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The reader's password (a space in it: basic auth and URL encoding).
const RPASS: &str = "dash board";
/// The writer's password.
const WPASS: &str = "l0ad-er";

fn bin(name: &str) -> PathBuf {
    udf_binary().with_file_name(name)
}

/// A running `flamehouse serve`; SIGKILLed on drop if not stopped.
struct Serve {
    child: Child,
    url: String,
    port: u16,
    dir: PathBuf,
}

impl Serve {
    /// A server on a fresh directory with users `writer` (file, plain
    /// password) and `reader` (file, sha256 by `sha256sum`).
    fn start(tag: &str, extra: &[&str]) -> Serve {
        let dir = temp_path(&format!("serve-{tag}"));
        let mut sha = Command::new("sha256sum")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        sha.stdin
            .take()
            .unwrap()
            .write_all(RPASS.as_bytes())
            .unwrap();
        let hex = String::from_utf8(sha.wait_with_output().unwrap().stdout).unwrap();
        let hex = hex.split_whitespace().next().unwrap().to_string();
        std::fs::write(
            dir.join("users.txt"),
            format!("# test users\nwriter writer {WPASS}\nreader  reader  sha256:{hex}\n"),
        )
        .unwrap();
        Serve::start_on(&dir, extra)
    }

    /// A server on `dir` (again, after a stop).
    fn start_on(dir: &Path, extra: &[&str]) -> Serve {
        let err = std::fs::File::create(dir.join("serve.err")).unwrap();
        let mut child = Command::new(bin("flamehouse"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(dir.join("data"))
            .arg("--users")
            .arg(dir.join("users.txt"))
            .args(extra)
            .env_remove("FLAMEHOUSE_WRITER_PASSWORD")
            .env_remove("FLAMEHOUSE_READER_PASSWORD")
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("flamehouse serve starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let url = line
            .trim()
            .strip_prefix("flamehouse serve: listening on ")
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!(
                    "serve did not start: {line:?} {}",
                    std::fs::read_to_string(dir.join("serve.err")).unwrap_or_default()
                )
            })
            .to_string();
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        Serve {
            child,
            url,
            port,
            dir: dir.to_path_buf(),
        }
    }

    /// SIGTERM, then the exit status (within 60 s).
    fn stop(&mut self) -> std::process::ExitStatus {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "serve did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn backend(&self, user: &str, password: &str) -> ServerBackend {
        ServerBackend::new(&ServerOptions {
            url: self.url.clone(),
            user: user.into(),
            password: password.into(),
            ..Default::default()
        })
        .unwrap()
    }

    fn reader(&self) -> ServerBackend {
        self.backend("reader", RPASS)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// An HTTP response as curl saw it.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Resp {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }

    /// Asserts a ClickHouse-style error of `code` with HTTP `status`.
    fn assert_error(&self, status: u16, code: i32) {
        let text = self.text();
        assert_eq!(
            (self.status, self.header("x-clickhouse-exception-code")),
            (status, code.to_string().as_str()),
            "{text}"
        );
        assert!(
            text.starts_with(&format!("Code: {code}. DB::Exception: ")) && text.ends_with(")\n"),
            "{text}"
        );
    }
}

/// Runs `curl -sS -i ARGS URL`; `body` goes to its stdin.
fn curl(url: &str, args: &[&str], body: Option<&[u8]>) -> Resp {
    let mut c = Command::new("curl");
    c.args(["-sS", "-i", "--max-time", "120"])
        .args(args)
        .arg(url);
    c.stdin(if body.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().expect("curl runs");
    if let Some(b) = body {
        let mut stdin = child.stdin.take().unwrap();
        let b = b.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&b);
        });
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "curl {args:?} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut raw = out.stdout;
    // `100 Continue` (curl sends `Expect` with large bodies) comes first.
    while raw.starts_with(b"HTTP/1.1 100") {
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        raw.drain(..end + 4);
    }
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("headers end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

/// `curl` as the reader (basic auth) POSTing `sql`.
fn read_sql(s: &Serve, sql: &str) -> Resp {
    curl(
        &format!("{}/", s.url),
        &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
        Some(sql.as_bytes()),
    )
}

/// `curl` as the writer (X-ClickHouse headers) with URL `query` and `body`.
fn write_url(s: &Serve, query: &str, extra: &[&str], body: &[u8]) -> Resp {
    let mut args = vec![
        "-H".to_string(),
        "X-ClickHouse-User: writer".to_string(),
        "-H".to_string(),
        format!("X-ClickHouse-Key: {WPASS}"),
        "--data-binary".to_string(),
        "@-".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    curl(
        &format!("{}/?query={}", s.url, percent(query)),
        &args,
        Some(body),
    )
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A fixture `name.binpb` in its own directory.
fn fixture(tag: &str, name: &str, pid: u32, snapshots: usize) -> PathBuf {
    let dir = temp_path(&format!("servefx-{tag}"));
    let bin = compile_workload(&dir).unwrap();
    let mut o = FixtureOptions::new(&bin, dir.join(format!("{name}.binpb")));
    o.snapshots = snapshots;
    o.stacks = 800;
    o.name = name.into();
    o.pid = pid;
    o.seed = u64::from(pid);
    generate(&o).unwrap();
    o.output
}

/// The same fixture loaded into `db` on the embedded engine directly.
fn reference(path: &Path, db: &str) {
    q(&format!("DROP DATABASE IF EXISTS {db}"));
    flamehouse::storage::schema::migrate(
        engine(),
        &flamehouse::storage::schema::SchemaOptions {
            database: db.parse().unwrap(),
            cluster: None,
        },
    )
    .unwrap();
    let o = LoadOptions {
        database: db.parse().unwrap(),
        ..Default::default()
    };
    load_file(engine(), path, &o, &mut |_| {}).unwrap();
}

/// Every stored row, hashed per table.
fn digest_sql(db: &str) -> String {
    format!(
        "SELECT (SELECT groupBitXor(cityHash64(process_id, ts, stack_id, size, active, total_bytes, size_delta)) FROM {db}.samples), \
                (SELECT count() FROM {db}.samples), \
                (SELECT groupBitXor(cityHash64(ts, size, active)) FROM {db}.totals), \
                (SELECT count() FROM {db}.totals), \
                (SELECT count() FROM {db}.stacks), \
                (SELECT groupBitXor(cityHash64(function, stack_id)) FROM (SELECT DISTINCT function, stack_id FROM {db}.stack_functions))"
    )
}

/// `flamehouse load --url` as the writer.
fn load_url(s: &Serve, args: &[&str]) -> std::process::Output {
    Command::new(bin("flamehouse"))
        .arg("load")
        .args(["--url", &s.url, "--user", "writer"])
        .env("CLICKHOUSE_PASSWORD", WPASS)
        .args(args)
        .output()
        .unwrap()
}

fn clients_dir() -> (PathBuf, PathBuf) {
    let cache = flamehouse::storage::engine::cache_dir().join("clients");
    let find = |prefix: &str| {
        std::fs::read_dir(&cache)
            .ok()
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                    && p.join(".complete").exists()
            })
            .unwrap_or_else(|| {
                panic!(
                    "no {prefix}* client install under {}: run scripts/setup-clients.sh",
                    cache.display()
                )
            })
    };
    (find("py-"), find("node-"))
}

/// The loader (`load --url --watch`), the Rust crate, curl, Python and
/// JavaScript clients against serve: the same stored rows, the same answer
/// to every Grafana panel and view, as the embedded engine directly.
#[test]
fn clients_through_serve_agree_with_the_engine() {
    let file = fixture("agree", "agree", 5151, 40);
    reference(&file, "fh_serve_ref");
    let mut s = Serve::start("agree", &[]);

    // The loader's server sink, unchanged, following the file.
    let out = load_url(&s, &["--watch", "--idle-exit", "1", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reader = s.reader();
    assert_eq!(
        reader.query_tsv(&digest_sql("flamehouse")).unwrap(),
        q(&digest_sql("fh_serve_ref"))
    );
    // Loading again stores nothing (deduplication tokens as URL settings).
    let out = load_url(&s, &[file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        reader.query_tsv(&digest_sql("flamehouse")).unwrap(),
        q(&digest_sql("fh_serve_ref"))
    );

    // Every Grafana panel's SQL as the plugin expands it, POSTed by curl
    // as the reader, equals the engine's answer.
    let pid = reader
        .query_tsv("SELECT process_id FROM flamehouse.process_list")
        .unwrap();
    let pid = pid.trim();
    let range = q("SELECT toUnixTimestamp64Milli(min(ts)), toUnixTimestamp64Milli(max(ts)) FROM fh_serve_ref.samples");
    let (from_ms, to_ms) = range.trim().split_once('\t').unwrap();
    let (from_ms, to_ms): (i64, i64) = (from_ms.parse().unwrap(), to_ms.parse().unwrap());
    let functions = q(
        "SELECT hex(function) FROM (SELECT DISTINCT function FROM fh_serve_ref.stack_functions) ORDER BY function LIMIT 3",
    );
    let mut vars: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    vars.insert("process", vec![pid.to_string()]);
    vars.insert("max_nodes", vec!["2000".into()]);
    vars.insert("function", functions.lines().map(String::from).collect());
    let d = flamehouse::grafana::memory_dashboard(&flamehouse::storage::schema::default_database());
    let mut panels = 0;
    for metric in ["bytes", "count"] {
        vars.insert("metric", vec![metric.into()]);
        let mut sqls: Vec<String> = d["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["type"] == "query")
            .map(|v| v["query"].as_str().unwrap().to_string())
            .collect();
        sqls.extend(
            d["panels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["targets"][0]["rawSql"].as_str().unwrap().to_string()),
        );
        for raw in sqls {
            let sql = crate::grafana_pack::expand(&raw, &vars, from_ms + 5_000, to_ms, 5);
            let r = read_sql(&s, &sql);
            assert_eq!(r.status, 200, "{}\n{sql}", r.text());
            let want = q(&sql.replace("flamehouse.", "fh_serve_ref."));
            assert!(!want.trim().is_empty(), "{sql}");
            assert_eq!(r.text(), want, "{sql}");
            panels += 1;
        }
    }
    assert!(panels >= 20, "{panels} panel queries");

    // The one view no panel names, with every parameter bound by the
    // engine from `param_*` (an array among them), as curl's GET sends it.
    let names = q("SELECT DISTINCT function FROM fh_serve_ref.stack_functions WHERE match(function, '^[A-Za-z_0-9]+$') ORDER BY function LIMIT 3");
    let names: Vec<&str> = names.lines().collect();
    assert_eq!(names.len(), 3);
    let array = format!(
        "[{}]",
        names
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let (t1, t2) = (from_ms + 5_000, to_ms);
    let view = "SELECT * FROM flamehouse.function_series(process_id = {p:UInt64}, functions = {f:Array(String)}, \
                t1 = fromUnixTimestamp64Milli({t1:Int64}), t2 = fromUnixTimestamp64Milli({t2:Int64}), step = 5) ORDER BY ALL";
    let r = curl(
        &format!("{}/?user=reader&password={}", s.url, percent(RPASS)),
        &[
            "-G",
            "--data-urlencode",
            &format!("query={view}"),
            "--data-urlencode",
            &format!("param_p={pid}"),
            "--data-urlencode",
            &format!("param_f={array}"),
            "--data-urlencode",
            &format!("param_t1={t1}"),
            "--data-urlencode",
            &format!("param_t2={t2}"),
        ],
        None,
    );
    let want = q(&format!(
        "SELECT * FROM fh_serve_ref.function_series(process_id = {pid}, functions = {array}, \
         t1 = fromUnixTimestamp64Milli({t1}), t2 = fromUnixTimestamp64Milli({t2}), step = 5) ORDER BY ALL"
    ));
    assert!(want.lines().count() > 3, "{want}");
    assert_eq!((r.status, r.text()), (200, want));

    // The Rust crate through the loader's backend: a view with a FORMAT.
    let view = format!(
        "SELECT level, label, value, self FROM {{db}}.flame_at(process_id = {pid}, t = fromUnixTimestamp64Milli({}), max_nodes = 100, metric = 'count')",
        from_ms + 10_000
    );
    assert_eq!(
        String::from_utf8(
            reader
                .query(&view.replace("{db}", "flamehouse"), "JSONCompactEachRow")
                .unwrap()
        )
        .unwrap(),
        String::from_utf8(
            engine()
                .query(&view.replace("{db}", "fh_serve_ref"), "JSONCompactEachRow")
                .unwrap()
        )
        .unwrap()
    );

    // Python and JavaScript: queries, bound parameters, a view, an insert,
    // and the reader's refusals.
    let (py, node) = clients_dir();
    let repo = crate::render::repo();
    let out = Command::new(py.join("bin/python"))
        .arg(repo.join("tests/clients/py_client.py"))
        .args(["127.0.0.1", &s.port.to_string(), RPASS, WPASS, "flamehouse"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py_out: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    std::fs::copy(
        repo.join("tests/clients/js_client.mjs"),
        node.join("js_client.mjs"),
    )
    .unwrap();
    let out = Command::new("node")
        .arg(node.join("js_client.mjs"))
        .args([s.url.as_str(), RPASS, WPASS, "flamehouse"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let js_out: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let want_count: u64 = q("SELECT count() FROM fh_serve_ref.samples")
        .trim()
        .parse()
        .unwrap();
    let want_param = q(&format!(
        "SELECT count(), sum(size_delta) FROM fh_serve_ref.samples WHERE process_id = {pid} AND size_delta > 0"
    ));
    let want_flame = parse_rows(&q(&format!(
        "SELECT level, label, value, self FROM fh_serve_ref.flame_peak(process_id = {pid}, max_nodes = 500, metric = 'bytes')"
    )));
    for (who, got) in [("python", &py_out), ("javascript", &js_out)] {
        assert_eq!(got["count"].as_u64(), Some(want_count), "{who}");
        assert_eq!(
            got["process_id"].to_string().trim_matches('"'),
            pid,
            "{who}"
        );
        let param: Vec<String> = got["param"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(param.join("\t"), want_param.trim(), "{who}");
        let flame: Vec<Row> = got["flame_peak"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| Row {
                level: r[0].as_u64().unwrap() as u32,
                label: r[1].as_str().unwrap().to_string(),
                vals: vec![r[2].as_i64().unwrap(), r[3].as_i64().unwrap()],
            })
            .collect();
        assert!(flame.len() > 5, "{who}");
        assert_eq!(flame, want_flame, "{who}");
        // 1000 rows: ids 0..999, v = id / 4.
        assert_eq!(got["insert_written"].as_u64(), Some(1000), "{who}");
        assert_eq!(got["inserted"][0].as_u64(), Some(1000), "{who}");
        assert_eq!(got["inserted"][1].as_u64(), Some(499_500), "{who}");
        assert_eq!(got["inserted"][2].as_f64(), Some(124_875.0), "{who}");
        assert_eq!(
            got["inserted"][3].as_str(),
            Some("row 999 \t'quoted'"),
            "{who}"
        );
        let errs = &got["reader_errors"];
        for k in ["insert", "drop"] {
            let e = errs[k]
                .as_str()
                .unwrap_or_else(|| panic!("{who}: reader {k} succeeded"));
            assert!(
                e.contains("Cannot execute query in readonly mode"),
                "{who} {k}: {e}"
            );
        }
        let e = errs["settings"]
            .as_str()
            .unwrap_or_else(|| panic!("{who}: reader lifted max_execution_time"));
        assert!(e.contains("max_execution_time"), "{who}: {e}");
    }
    // Both inserts are stored once, and nothing the reader tried changed
    // anything.
    assert_eq!(
        reader
            .query_tsv("SELECT (SELECT count() FROM default.py_insert), (SELECT count() FROM default.js_insert)")
            .unwrap(),
        "1000\t1000\n"
    );
    assert!(s.stop().success());
}

/// ClickHouse's HTTP interface as curl speaks it: query in the URL or the
/// body, formats, parameters, inserts in several formats and encodings,
/// compressed blocks both ways, the three ways to authenticate; and every
/// bad request a ClickHouse-style error after which the server still serves
/// and the data is whole.
#[test]
fn curl_speaks_clickhouse_http_and_bad_requests_change_nothing() {
    let mut s = Serve::start("curl", &["--max-body-bytes", "1000000"]);
    let root = format!("{}/", s.url);
    let ping = curl(&format!("{}/ping", s.url), &[], None);
    assert_eq!((ping.status, ping.text().as_str()), (200, "Ok.\n"));
    // ClickHouse's request headers for the default format and the
    // database (they were ignored: TabSeparated of `default`); a URL
    // parameter given too wins.
    let with_headers = |url: &str| {
        curl(
            url,
            &[
                "-u",
                &format!("reader:{RPASS}"),
                "-H",
                "X-ClickHouse-Format: JSONEachRow",
                "-H",
                "X-ClickHouse-Database: system",
                "--data-binary",
                "@-",
            ],
            Some(b"SELECT currentDatabase() AS db"),
        )
    };
    let r = with_headers(&root);
    assert_eq!(
        (r.status, r.text().trim(), r.header("x-clickhouse-format")),
        (200, r#"{"db":"system"}"#, "JSONEachRow")
    );
    let r = with_headers(&format!("{root}?default_format=CSV&database=default"));
    assert_eq!((r.status, r.text().trim()), (200, r#""default""#));

    // DDL and inserts as the writer.
    let r = write_url(
        &s,
        "CREATE TABLE default.t (id UInt32, s String, f Float64) ENGINE = MergeTree ORDER BY id",
        &[],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // TabSeparated with the data in the body.
    let r = write_url(
        &s,
        "INSERT INTO default.t FORMAT TabSeparated",
        &[],
        b"1\ta\\tb\t0.5\n2\tsemi;colon\t1.5\n",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let summary: serde_json::Value =
        serde_json::from_str(r.header("x-clickhouse-summary")).unwrap();
    assert_eq!(summary["written_rows"], "2");
    // RowBinary whose bytes hold newlines, semicolons and NULs, long
    // enough to be cut if it went inline.
    let mut rb = Vec::new();
    let mut want_sum = 0u64;
    for id in 10..20_010u32 {
        rb.extend_from_slice(&id.to_le_bytes());
        let text = format!("\n;\0 {id}");
        rb.push(text.len() as u8);
        rb.extend_from_slice(text.as_bytes());
        rb.extend_from_slice(&(f64::from(id) * 2.0).to_le_bytes());
        want_sum += u64::from(id);
    }
    let r = write_url(&s, "INSERT INTO default.t FORMAT RowBinary", &[], &rb);
    assert_eq!(r.status, 200, "{}", r.text());
    // Values in the body alone, zstd-encoded.
    let values = b"INSERT INTO default.t VALUES (3, 'it''s', 2.5), (4, 'x', 3.5)";
    let r = curl(
        &root,
        &[
            "-u",
            &format!("writer:{WPASS}"),
            "-H",
            "Content-Encoding: zstd",
            "--data-binary",
            "@-",
        ],
        Some(&zstd::encode_all(&values[..], 3).unwrap()),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // JSONEachRow in ClickHouse's compressed blocks (decompress=1), framed
    // here by hand: LZ4 block, CityHash128 v1.0.2 of the framed block.
    let json = b"{\"id\":5,\"s\":\"j\",\"f\":4.5}\n{\"id\":6,\"s\":\"k\",\"f\":5.5}\n";
    let packed = lz4_flex::block::compress(json);
    let mut framed = vec![0x82u8];
    framed.extend_from_slice(&((9 + packed.len()) as u32).to_le_bytes());
    framed.extend_from_slice(&(json.len() as u32).to_le_bytes());
    framed.extend_from_slice(&packed);
    let mut block = cityhash_rs::cityhash_102_128(&framed)
        .rotate_right(64)
        .to_le_bytes()
        .to_vec();
    block.extend_from_slice(&framed);
    let url = format!(
        "{}/?decompress=1&query={}",
        s.url,
        percent("INSERT INTO default.t FORMAT JSONEachRow")
    );
    let r = curl(
        &url,
        &["-u", &format!("writer:{WPASS}"), "--data-binary", "@-"],
        Some(&block),
    );
    assert_eq!(r.status, 200, "{}", r.text());

    let count_sql = "SELECT count(), sum(id) FROM default.t";
    let want = format!("20006\t{}\n", want_sum + 1 + 2 + 3 + 4 + 5 + 6);
    let check = |s: &Serve| {
        let r = read_sql(s, count_sql);
        assert_eq!((r.status, r.text()), (200, want.clone()));
    };
    check(&s);

    // Reads: FORMAT clause vs default_format, headers, parameters.
    let r = curl(
        &format!(
            "{}/?query={}&default_format=JSONCompact&user=reader&password={}",
            s.url,
            percent("SELECT s FROM default.t WHERE id = {i:UInt32} AND s = {x:String}"),
            percent(RPASS)
        ),
        &[
            "--data-urlencode",
            "param_i=2",
            "--data-urlencode",
            "param_x=semi;colon",
            "-G",
        ],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-clickhouse-format"), "JSONCompact");
    let j: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(j["data"], serde_json::json!([["semi;colon"]]));
    for h in [
        "x-clickhouse-query-id",
        "x-clickhouse-timezone",
        "x-clickhouse-server-display-name",
        "x-clickhouse-summary",
    ] {
        assert!(!r.header(h).is_empty(), "{h}");
    }
    let r = read_sql(
        &s,
        "SELECT id, s FROM default.t WHERE id IN (1, 3) ORDER BY id FORMAT CSV",
    );
    assert_eq!(r.header("x-clickhouse-format"), "CSV");
    assert_eq!(r.text(), "1,\"a\tb\"\n3,\"it's\"\n");
    // `database` is the session's current database.
    let r = curl(
        &format!(
            "{}/?database=default&user=reader&password={}",
            s.url,
            percent(RPASS)
        ),
        &["--data-binary", "@-"],
        Some(b"SELECT count() FROM t"),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "20006\n"));
    let r = curl(
        &format!(
            "{}/?database=nowhere&user=reader&password={}",
            s.url,
            percent(RPASS)
        ),
        &["--data-binary", "@-"],
        Some(b"SELECT 1"),
    );
    r.assert_error(404, 81);
    // A query id given is echoed.
    let r = curl(
        &format!(
            "{}/?query=SELECT+1&query_id=my-id&user=reader&password={}",
            s.url,
            percent(RPASS)
        ),
        &[],
        None,
    );
    assert_eq!(
        (r.header("x-clickhouse-query-id"), r.text().as_str()),
        ("my-id", "1\n")
    );
    // Responses compressed: gzip (curl decodes it) and ClickHouse blocks
    // (decoded by the server-sink test's own decoder).
    let big = "SELECT id, s FROM default.t ORDER BY id";
    let plain = read_sql(&s, big).body;
    let r = curl(
        &format!("{}/?enable_http_compression=1", s.url),
        &[
            "-u",
            &format!("reader:{RPASS}"),
            "-H",
            "Accept-Encoding: gzip",
            "--data-binary",
            "@-",
        ],
        Some(big.as_bytes()),
    );
    assert_eq!(r.header("content-encoding"), "gzip");
    let mut unzipped = Vec::new();
    std::io::Read::read_to_end(&mut flate2_free_gunzip(&r.body), &mut unzipped).unwrap();
    assert_eq!(unzipped, plain);
    let r = curl(
        &format!("{}/?compress=1", s.url),
        &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
        Some(big.as_bytes()),
    );
    let (decoded, blocks) = crate::server::decode_blocks(&r.body);
    assert_eq!(decoded, plain);
    assert!(blocks >= 1);

    // Bad requests: each a ClickHouse error; the server keeps serving and
    // nothing changed.
    let garbage: Vec<u8> = (0..4000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let r = curl(
        &root,
        &["-u", &format!("writer:{WPASS}"), "--data-binary", "@-"],
        Some(&garbage),
    );
    assert!(r.status == 400 || r.status == 500, "{}", r.text());
    assert!(r.text().starts_with("Code: "), "{}", r.text());
    check(&s);
    // A truncated compressed block.
    let url = format!(
        "{}/?decompress=1&query={}",
        s.url,
        percent("INSERT INTO default.t FORMAT JSONEachRow")
    );
    let r = curl(
        &url,
        &["-u", &format!("writer:{WPASS}"), "--data-binary", "@-"],
        Some(&block[..block.len() - 3]),
    );
    r.assert_error(500, 33);
    // A damaged one.
    let mut bad = block.clone();
    let n = bad.len();
    bad[n - 2] ^= 0x40;
    let r = curl(
        &url,
        &["-u", &format!("writer:{WPASS}"), "--data-binary", "@-"],
        Some(&bad),
    );
    r.assert_error(500, 40);
    // Garbage gzip.
    let r = curl(
        &url.replace("decompress=1&", ""),
        &[
            "-u",
            &format!("writer:{WPASS}"),
            "-H",
            "Content-Encoding: gzip",
            "--data-binary",
            "@-",
        ],
        Some(b"not gzip"),
    );
    r.assert_error(500, 271);
    // A RowBinary row cut in half: the engine refuses the whole block.
    let r = write_url(
        &s,
        "INSERT INTO default.t FORMAT RowBinary",
        &[],
        &rb[..rb.len() - 5],
    );
    assert!(
        r.status >= 400 && r.text().starts_with("Code: "),
        "{}",
        r.text()
    );
    check(&s);
    // Wrong passwords, in all three places.
    read_sql_as(&s, "reader", "nope").assert_error(403, 516);
    let r = curl(
        &format!("{}/?query=SELECT+1&user=writer&password=nope", s.url),
        &[],
        None,
    );
    r.assert_error(403, 516);
    let r = curl(
        &format!("{}/?query=SELECT+1", s.url),
        &[
            "-H",
            "X-ClickHouse-User: nobody",
            "-H",
            "X-ClickHouse-Key: x",
        ],
        None,
    );
    r.assert_error(403, 516);
    // Without credentials: user `default`, which is not configured here.
    curl(&format!("{}/?query=SELECT+1", s.url), &[], None).assert_error(403, 516);
    // Basic credentials that are not base64, or another scheme: each said
    // as it is (both were "only the 'Basic' scheme is supported").
    for (auth, says) in [
        ("Basic !!!", "not base64"),
        ("Bearer abc", "only the 'Basic'"),
    ] {
        let r = curl(
            &format!("{}/?query=SELECT+1", s.url),
            &["-H", &format!("Authorization: {auth}")],
            None,
        );
        r.assert_error(403, 516);
        assert!(r.text().contains(says), "{auth}: {}", r.text());
    }
    // Two ways at once.
    let r = curl(
        &format!("{}/?query=SELECT+1&user=reader", s.url),
        &["-u", &format!("reader:{RPASS}")],
        None,
    );
    r.assert_error(403, 516);
    // An oversized body.
    let huge = vec![b'1'; 1_500_000];
    let r = write_url(&s, "INSERT INTO default.t (id) FORMAT TSV", &[], &huge);
    r.assert_error(413, 36);
    // Writes by GET.
    let r = curl(
        &format!(
            "{}/?query={}&user=writer&password={}",
            s.url,
            percent("DROP TABLE default.t"),
            percent(WPASS)
        ),
        &[],
        None,
    );
    r.assert_error(500, 164);
    check(&s);

    // The reader: no writes, no DDL, no files or URLs, no way to lift its
    // limits or its read-only mode.
    let marker = s.dir.join("outfile.txt");
    for (sql, code) in [
        ("INSERT INTO default.t VALUES (99, 'x', 0)", 164),
        ("DROP TABLE default.t", 164),
        ("CREATE TABLE default.u (a UInt8) ENGINE = Memory", 164),
        ("SET readonly = 0", 164),
        ("SET max_execution_time = 0", 164),
        ("SYSTEM STOP MERGES", 164),
        ("OPTIMIZE TABLE default.t FINAL", 164),
        ("SELECT 1 SETTINGS readonly = 0", 164),
        ("SELECT 1 SETTINGS max_execution_time = 0", 164),
        ("SELECT 1 SETTINGS max_memory_usage = 0", 164),
        ("SELECT * FROM file('/etc/hostname', LineAsString)", 164),
        (
            "SELECT * FROM url('http://127.0.0.1:1/', LineAsString)",
            164,
        ),
        (
            "INSERT INTO FUNCTION file('/tmp/fh-serve-x.tsv', TSV, 'a UInt8') VALUES (1)",
            164,
        ),
        // The file() function reads any path on this engine, readonly or
        // not; DESCRIBE of a table function reads the file to infer it.
        ("SELECT file('/etc/hostname')", 164),
        ("SELECT `file` ('/etc/hostname')", 164),
        ("DESCRIBE file('/etc/hostname', LineAsString)", 164),
        ("/* c */ desc file('/etc/hostname', LineAsString)", 164),
        ("SELECT 1; DROP TABLE default.t", 62),
    ] {
        let r = read_sql(&s, sql);
        r.assert_error(if code == 62 { 400 } else { 500 }, code);
        // The refusal names the HTTP user, not the engine's `default`
        // (url() said "default: Cannot execute query in readonly mode").
        assert!(!r.text().contains("default:"), "{sql}: {}", r.text());
    }
    let r = read_sql(&s, &format!("SELECT 1 INTO OUTFILE '{}'", marker.display()));
    r.assert_error(500, 164);
    assert!(!marker.exists());
    // The same behind the engine's heredoc strings and `//` comments, in
    // which a quote opens nothing (the reader's checks read them as code:
    // the quote hid the rest, and the file was written, or appended to).
    for sql in [
        format!(
            "SELECT $$'$$ AS a, 'x' AS b INTO OUTFILE '{}' FORMAT TSVRaw -- '",
            marker.display()
        ),
        format!(
            "SELECT $q$'$q$ AS a INTO OUTFILE '{}' APPEND -- '",
            marker.display()
        ),
        format!("SELECT 1 // '\nINTO OUTFILE '{}' -- '", marker.display()),
    ] {
        read_sql(&s, &sql).assert_error(500, 164);
        assert!(!marker.exists(), "{sql}");
    }
    read_sql(&s, "SELECT $$'$$; SELECT 2 -- '").assert_error(400, 62);
    // A `;` inside a heredoc ends nothing.
    let r = read_sql(&s, "SELECT $$a;b$$");
    assert_eq!(r.text().trim(), "a;b", "{}", r.text());
    for (param, code, status) in [
        ("readonly=0", 164, 500),
        ("max_execution_time=0", 452, 500),
        ("max_execution_time=100000", 452, 500),
        ("max_memory_usage=0", 452, 500),
        ("max_result_bytes=99999999999999", 452, 500),
    ] {
        let r = curl(
            &format!("{}/?query=SELECT+1&{param}", s.url),
            &["-u", &format!("reader:{RPASS}")],
            None,
        );
        r.assert_error(status, code);
    }
    // Lowering a limit is fine, and it holds.
    let r = curl(
        &format!("{}/?max_execution_time=1", s.url),
        &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
        Some(b"SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) % 7 = 1"),
    );
    r.assert_error(408, 159);
    let r = curl(
        &format!("{}/?max_result_bytes=10000", s.url),
        &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
        Some(b"SELECT number FROM numbers(1000000)"),
    );
    r.assert_error(500, 396);
    let r = curl(
        &format!("{}/?max_memory_usage=20000000", s.url),
        &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
        Some(b"SELECT length(groupArray(number)) FROM numbers(50000000)"),
    );
    r.assert_error(500, 241);
    let r = curl(
        &format!(
            "{}/?max_result_rows=3&result_overflow_mode=break&max_block_size=1",
            s.url
        ),
        &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
        Some(b"SELECT number FROM numbers(10)"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().lines().count() < 10, "{}", r.text());
    check(&s);
    let ping = curl(&format!("{}/ping", s.url), &[], None);
    assert_eq!(ping.text(), "Ok.\n");
    assert!(s.stop().success());
}

fn read_sql_as(s: &Serve, user: &str, password: &str) -> Resp {
    curl(
        &format!("{}/", s.url),
        &["-u", &format!("{user}:{password}"), "--data-binary", "@-"],
        Some(b"SELECT 1"),
    )
}

/// gzip decoding by the system's `gzip -dc` (independent of the server's
/// encoder).
fn flate2_free_gunzip(data: &[u8]) -> std::io::Cursor<Vec<u8>> {
    let mut c = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let d = data.to_vec();
    std::thread::spawn(move || stdin.write_all(&d));
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success());
    std::io::Cursor::new(out.stdout)
}

/// N readers query all the while a `load --url --watch` follows a growing
/// file: every query answers, counts never go back, and the end equals one
/// embedded load of the whole file. Then a SIGTERM during a slow query:
/// the query still answers, the server exits cleanly, and a new server on
/// the directory has every row.
#[test]
fn readers_during_a_watch_load_then_graceful_shutdown() {
    let full = fixture("live", "live", 6161, 60);
    reference(&full, "fh_serve_live_ref");
    let mut s = Serve::start("live", &["--max-concurrent-queries", "4"]);
    let data = std::fs::read(&full).unwrap();
    let live = s.dir.join("live.binpb");
    std::fs::write(&live, &data[..data.len() / 4]).unwrap();
    let loader = Command::new(bin("flamehouse"))
        .arg("load")
        .args([
            "--url",
            &s.url,
            "--user",
            "writer",
            "--watch",
            "--idle-exit",
            "3",
        ])
        .arg(&live)
        .env("CLICKHOUSE_PASSWORD", WPASS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let (url, stop) = (s.url.clone(), stop.clone());
            std::thread::spawn(move || {
                let b = ServerBackend::new(&ServerOptions {
                    url,
                    user: "reader".into(),
                    password: RPASS.into(),
                    ..Default::default()
                })
                .unwrap();
                let (mut last, mut n) = (0u64, 0usize);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let sql = if i % 2 == 0 {
                        "SELECT count() FROM flamehouse.samples"
                    } else {
                        "SELECT count() FROM flamehouse.totals"
                    };
                    // Before the first batch the schema may not exist yet.
                    match b.query_tsv(sql) {
                        Ok(t) => {
                            let c: u64 = t.trim().parse().unwrap();
                            assert!(c >= last, "count went back from {last} to {c}");
                            last = c;
                            n += 1;
                        }
                        Err(e) => assert!(
                            last == 0 && e.to_string().contains("UNKNOWN_"),
                            "reader {i}: {e}"
                        ),
                    }
                }
                n
            })
        })
        .collect();
    // The file grows in three more steps.
    for part in [2, 3, 4] {
        std::thread::sleep(Duration::from_millis(700));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&live)
            .unwrap();
        let len = f.metadata().unwrap().len() as usize;
        f.write_all(&data[len..data.len() * part / 4]).unwrap();
    }
    let out = loader.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0, "a reader never got an answer");
    }
    let reader = s.reader();
    let want = q(&digest_sql("fh_serve_live_ref"));
    assert_eq!(reader.query_tsv(&digest_sql("flamehouse")).unwrap(), want);

    // SIGTERM while a slow query runs: it still gets its answer.
    let slow = slow_read(&s, 4);
    std::thread::sleep(Duration::from_millis(500));
    let status = s.stop();
    let r = slow.join().unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "4\n"));
    assert!(status.success(), "{status:?}");
    let err = std::fs::read_to_string(s.dir.join("serve.err")).unwrap();
    assert!(err.contains("shutting down"), "{err}");

    // A new server on the same directory has every row.
    let mut s2 = Serve::start_on(&s.dir, &[]);
    assert_eq!(
        s2.reader().query_tsv(&digest_sql("flamehouse")).unwrap(),
        want
    );
    assert!(s2.stop().success());
}

/// The light compose file's `flamehouse` service, run here as written (the
/// container paths mapped to this build and a temporary directory, port 0):
/// users from the environment, the schema there before the first load,
/// Grafana's user reads it and cannot write; SIGTERM stops it cleanly.
#[test]
fn light_compose_entrypoint_serves_the_dashboards_user() {
    let text =
        std::fs::read_to_string(crate::render::repo().join("grafana/docker-compose.serve.yaml"))
            .unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("entrypoint:") && l.contains("flamehouse serve"))
        .expect("the flamehouse service's entrypoint");
    let args: Vec<String> =
        serde_json::from_str(line.trim_start().trim_start_matches("entrypoint:").trim()).unwrap();
    assert_eq!(&args[..2], ["/bin/sh", "-c"]);
    let dir = temp_path("serve-compose");
    let bin_dir = bin("flamehouse").parent().unwrap().to_path_buf();
    let script = args[2]
        .replace("/opt/flamehouse", bin_dir.to_str().unwrap())
        .replace("/data", dir.join("data").to_str().unwrap())
        .replace("0.0.0.0:8123", "127.0.0.1:0");
    let mut child = Command::new("/bin/sh")
        .args(["-c", &script])
        .env("FLAMEHOUSE_READER_PASSWORD", RPASS)
        .env("FLAMEHOUSE_WRITER_PASSWORD", WPASS)
        .env_remove("FLAMEHOUSE_USERS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    // `init` prints first, then serve its address.
    while !url.contains("listening on") {
        url.clear();
        assert!(out.read_line(&mut url).unwrap() > 0, "no address printed");
    }
    let mut s = Serve {
        child,
        url: url.trim().rsplit(' ').next().unwrap().to_string(),
        port: 0,
        dir,
    };
    assert_eq!(
        s.reader()
            .query_tsv("SELECT count() FROM flamehouse.process_list")
            .unwrap(),
        "0\n"
    );
    read_sql(&s, "TRUNCATE TABLE flamehouse.samples").assert_error(500, 164);
    // A typo is a syntax error for the reader too, not a refused write.
    read_sql(&s, "SELEC 1").assert_error(400, 62);
    let r = curl(
        &format!("{}/?query=SELECT+1", s.url),
        &[
            "-H",
            "X-ClickHouse-User: writer",
            "-H",
            &format!("X-ClickHouse-Key: {WPASS}"),
        ],
        None,
    );
    assert_eq!((r.status, r.text().as_str()), (200, "1\n"));
    // No password-less `default` once users are configured.
    curl(&format!("{}/?query=SELECT+1", s.url), &[], None).assert_error(403, 516);
    assert!(s.stop().success());
}

/// A reader's query that holds its slot for `rows` half-seconds, on a
/// thread of its own.
fn slow_read(s: &Serve, rows: u32) -> std::thread::JoinHandle<Resp> {
    let url = s.url.clone();
    std::thread::spawn(move || {
        curl(
            &format!("{url}/?max_block_size=1"),
            &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
            Some(format!("SELECT sum(sleepEachRow(0.5) + 1) FROM numbers({rows})").as_bytes()),
        )
    })
}

/// Without configured users (only the password-less `default`), serve
/// listens on loopback only.
#[test]
fn serve_without_users_refuses_a_public_address() {
    let dir = temp_path("serve-public").join("data");
    // `serve` on every interface, without the users of the environment.
    let public = || {
        let mut cmd = Command::new(bin("flamehouse"));
        cmd.args(["serve", "--listen", "0.0.0.0:0", "--data"])
            .arg(&dir)
            .env_remove("FLAMEHOUSE_READER_PASSWORD")
            .env_remove("FLAMEHOUSE_WRITER_PASSWORD")
            .env_remove("FLAMEHOUSE_USERS");
        cmd
    };
    let out = public().output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("0.0.0.0:0") && err.contains("--users"),
        "{err}"
    );
    // Users with an empty password are as open: an empty environment
    // password, a `--users` line without one (it listened on 0.0.0.0).
    let users = dir.parent().unwrap().join("users.txt");
    std::fs::write(&users, "grafana reader s3cret\nloader writer\n").unwrap();
    for (env, file, open) in [(Some(""), None, "writer"), (None, Some(&users), "loader")] {
        let mut cmd = public();
        if let Some(p) = env {
            cmd.env("FLAMEHOUSE_WRITER_PASSWORD", p);
        }
        if let Some(f) = file {
            cmd.arg("--users").arg(f);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("0.0.0.0:0") && err.contains(&format!("empty password ({open})")),
            "{err}"
        );
    }
}

/// `--tls-cert`/`--tls-key`: HTTPS that the loader's client (with the CA
/// file) and curl (`--cacert`) accept; plain HTTP on that port gets no
/// answer; a key that does not fit the certificate is refused at start.
#[test]
fn serve_speaks_https_with_a_given_certificate() {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let dir = temp_path("serve-tlsfiles");
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let mut s = Serve::start(
        "tls",
        &[
            "--tls-cert",
            cert_path.to_str().unwrap(),
            "--tls-key",
            key_path.to_str().unwrap(),
        ],
    );
    assert!(s.url.starts_with("https://127.0.0.1:"), "{}", s.url);
    let url = format!("https://localhost:{}", s.port);
    let b = ServerBackend::new(&ServerOptions {
        url: url.clone(),
        user: "reader".into(),
        password: RPASS.into(),
        ca_cert: Some(cert_path.clone()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(b.query_tsv("SELECT 6 * 7").unwrap(), "42\n");
    let r = curl(
        &format!("{url}/?query=SELECT+1"),
        &[
            "--cacert",
            cert_path.to_str().unwrap(),
            "-u",
            &format!("reader:{RPASS}"),
        ],
        None,
    );
    assert_eq!((r.status, r.text().as_str()), (200, "1\n"));
    let plain = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "5",
            &format!("http://127.0.0.1:{}/ping", s.port),
        ])
        .output()
        .unwrap();
    assert!(!plain.status.success() || plain.stdout != b"Ok.\n");
    assert!(s.stop().success());

    // A key of another certificate.
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(&key_path, other.serialize_pem()).unwrap();
    let out = Command::new(bin("flamehouse"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.join("data"))
        .arg("--tls-cert")
        .arg(&cert_path)
        .arg("--tls-key")
        .arg(&key_path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(key_path.to_str().unwrap()), "{err}");
}

/// At most `--max-concurrent-queries` run; the others wait for a slot up to
/// `--max-execution-time`, then get TOO_MANY_SIMULTANEOUS_QUERIES; the
/// server serves on.
#[test]
fn a_full_server_queues_then_refuses() {
    let mut s = Serve::start(
        "full",
        &["--max-concurrent-queries", "1", "--max-execution-time", "3"],
    );
    let started = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let url = s.url.clone();
            std::thread::spawn(move || {
                let r = curl(
                    &format!("{url}/?max_block_size=1"),
                    &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
                    Some(b"SELECT sum(sleepEachRow(0.5) + 1) FROM numbers(4)"),
                );
                (
                    r.status,
                    r.header("x-clickhouse-exception-code").to_string(),
                    r.text(),
                )
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let ok = results
        .iter()
        .filter(|r| r.0 == 200 && r.2 == "4\n")
        .count();
    let refused = results
        .iter()
        .filter(|r| r.0 == 503 && r.1 == "202" && r.2.contains("TOO_MANY_SIMULTANEOUS_QUERIES"))
        .count();
    // One runs at once (2 s each, a second of margin to every limit): the
    // first and the one that waits 2 s answer; the others would wait 4 s
    // or more.
    assert_eq!((ok, refused), (2, 2), "{results:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(2900),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(read_sql(&s, "SELECT 1").text(), "1\n");
    // A request waits for a slot as long as its own time limit, not the
    // server's (`max_execution_time=1` waited the server's 3 s).
    let slow = slow_read(&s, 5);
    std::thread::sleep(Duration::from_millis(400));
    let t = Instant::now();
    let r = curl(
        &format!("{}/?max_execution_time=1", s.url),
        &["-u", &format!("reader:{RPASS}"), "--data-binary", "@-"],
        Some(b"SELECT 1"),
    );
    let waited = t.elapsed();
    r.assert_error(503, 202);
    assert!(waited < Duration::from_millis(2000), "{waited:?}");
    assert_eq!(slow.join().unwrap().status, 200);
    assert!(s.stop().success());
}

/// Continuous profiles loaded with `flamehouse load --url` in small batches
/// (each batch's four dictionary blocks sent at once, as concurrent
/// requests: `insert_rowbinary_all`) hold the same rows as the embedded
/// engine's load of the same files, and a second load stores nothing.
#[test]
fn continuous_loads_through_serve_equal_the_engines() {
    use flamehouse::ingest::continuous::ContinuousOptions;
    use flamehouse::ingest::cp_batch::{load_files, BatchOptions};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/continuous/pprof");
    let files: Vec<PathBuf> = [
        "cpu.pb.gz",
        "cpu2.pb.gz",
        "heap.pb.gz",
        "block.pb.gz",
        "spans.pb.gz",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect();
    let digest = |db: &str| {
        format!(
            "SELECT (SELECT count() FROM {db}.cp_samples), (SELECT sum(value) FROM {db}.cp_samples), \
                    (SELECT groupBitXor(cityHash64(profile_id, profile_type, series_id, stack_id, ts, value)) FROM {db}.cp_samples), \
                    (SELECT count() FROM {db}.cp_profiles), (SELECT count() FROM {db}.cp_series), \
                    (SELECT count() FROM {db}.cp_stacks), (SELECT count() FROM {db}.cp_label_values), \
                    (SELECT count() FROM {db}.frames), (SELECT count() FROM {db}.stacks), \
                    (SELECT groupBitXor(cityHash64(stack_id, frame_ids)) FROM {db}.stacks), \
                    (SELECT count() FROM {db}.stack_functions)"
        )
    };
    let reference = "fh_serve_cref";
    q(&format!("DROP DATABASE IF EXISTS {reference}"));
    flamehouse::storage::schema::migrate(
        engine(),
        &flamehouse::storage::schema::SchemaOptions {
            database: reference.parse().unwrap(),
            cluster: None,
        },
    )
    .unwrap();
    let opts = ContinuousOptions {
        database: reference.parse().unwrap(),
        service: Some("api".into()),
        ..Default::default()
    };
    // One batch for all: the reference shares none of the batching below.
    let s = load_files(
        engine(),
        &files,
        &opts,
        &BatchOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(s.failed, 0, "{s:?}");
    let want = q(&digest(reference));

    let s = Serve::start("cload", &[]);
    let paths: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    for round in 0..2 {
        let mut args = vec!["--service", "api", "--batch-rows", "64"];
        args.extend(&paths);
        let out = load_url(&s, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{err}");
        let reader = s.reader();
        assert_eq!(
            reader.query_tsv(&digest("flamehouse")).unwrap(),
            want,
            "round {round}: {err}"
        );
        if round == 0 {
            // Several batches, so several rounds of dictionary blocks.
            let batches = said
                .lines()
                .find_map(|l| {
                    l.split(" in ")
                        .nth(1)?
                        .strip_suffix(" batches")?
                        .parse::<usize>()
                        .ok()
                })
                .unwrap_or_else(|| panic!("no batch count in {said}"));
            assert!(batches > 2, "{said}");
        }
    }
}
