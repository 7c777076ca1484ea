//! The server backend's wire bytes, proven on the real engine.
//!
//! No ClickHouse server runs here, so a tiny HTTP/1.1 server on 127.0.0.1
//! answers the way ClickHouse's HTTP interface does (200 and an empty or
//! TabSeparated body) and records every request the `clickhouse` crate sends.
//! For the wire test it is backed by the real embedded engine
//! ([`engine_backed`]): each statement runs there as it arrives, each
//! INSERT's LZ4 blocks are decompressed and written there, and SELECTs (the
//! loader's resume query) are answered from what was really stored. A
//! fixture is loaded through the embedded backend into one database and
//! through `ServerBackend` -> capture server into another; both databases
//! must hold the same rows, the inserts must be byte for byte the same, and
//! loading again through the server must store nothing.

use flamehouse::error::Result;
use flamehouse::ingest::{load_file, LoadOptions};
use flamehouse::storage::engine::Engine;
use flamehouse::storage::rows::{
    FrameRow, IntentRow, ProcessRow, ProcessStackRow, ProgressRow, RollupRow, RowBinary, SampleRow,
    StackRow, TotalRow,
};
use flamehouse::storage::schema::{migrate, SchemaOptions};
use flamehouse::storage::server::{ServerBackend, ServerOptions};
use flamehouse::storage::{column_names, Backend};
use flamehouse_fixtures::testing::temp_path;
use flamehouse_fixtures::workload::{compile_workload, generate, FixtureOptions};
use flamehouse_tests::{engine, q, udf_binary};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One HTTP request as received.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    /// Query-string parameters, decoded, in order.
    params: Vec<(String, String)>,
    /// Header names lower-cased.
    headers: Vec<(String, String)>,
    /// The body (chunked transfer decoded).
    body: Vec<u8>,
}

impl Request {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The SQL: the `query` parameter (inserts: the data is the body) or
    /// the body.
    fn sql(&self) -> String {
        match self.param("query") {
            Some(q) => q.to_string(),
            None => String::from_utf8(self.body.clone()).expect("utf-8 query"),
        }
    }
}

type Responder = dyn Fn(&Request) -> (u16, Vec<u8>) + Send + Sync;

/// A bounded HTTP/1.1 server on a random loopback port: one connection at a
/// time, one request per connection (`Connection: close`), at most
/// `MAX_REQUESTS`, and it stops by itself after `LIFETIME`.
struct CaptureServer {
    url: String,
    stop: Arc<AtomicBool>,
    requests: Arc<Mutex<Vec<Request>>>,
    thread: Option<JoinHandle<()>>,
}

const LIFETIME: Duration = Duration::from_secs(300);
const MAX_REQUESTS: usize = 20_000;

impl CaptureServer {
    fn start(respond: Box<Responder>) -> CaptureServer {
        Self::start_with(respond, None)
    }

    /// The same server behind TLS with `tls` (an https:// URL on
    /// `localhost`).
    fn start_with(
        respond: Box<Responder>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> CaptureServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = match tls {
            Some(_) => format!("https://localhost:{port}"),
            None => format!("http://127.0.0.1:{port}"),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (stop2, requests2) = (stop.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut served = 0usize;
            while !stop2.load(Ordering::Relaxed)
                && started.elapsed() < LIFETIME
                && served < MAX_REQUESTS
            {
                match listener.accept() {
                    Ok((stream, _)) => {
                        served += 1;
                        let ok = stream.set_nonblocking(false).is_ok()
                            && stream
                                .set_read_timeout(Some(Duration::from_secs(30)))
                                .is_ok();
                        let req = match (&tls, ok) {
                            (_, false) => None,
                            (None, true) => serve(stream, &*respond),
                            (Some(cfg), true) => rustls::ServerConnection::new(cfg.clone())
                                .ok()
                                .and_then(|conn| {
                                    serve(rustls::StreamOwned::new(conn, stream), &*respond)
                                }),
                        };
                        if let Some(req) = req {
                            requests2.lock().unwrap().push(req);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(_) => break,
                }
            }
        });
        CaptureServer {
            url,
            stop,
            requests,
            thread: Some(thread),
        }
    }

    /// Stops the server and returns what it received, in order.
    fn finish(mut self) -> Vec<Request> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("capture server thread");
        }
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

impl Drop for CaptureServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request, answers it, closes the connection.
fn serve<S: Read + Write>(stream: S, respond: &Responder) -> Option<Request> {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            if size == 0 {
                // Trailers, then the final CRLF.
                loop {
                    let mut t = String::new();
                    r.read_line(&mut t).ok()?;
                    if t.trim_end().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..]).ok()?;
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf).ok()?;
        }
    } else if let Some(n) = get("content-length") {
        body.resize(n.parse().ok()?, 0);
        r.read_exact(&mut body).ok()?;
    }
    let params = match target.split_once('?') {
        Some((_, qs)) => qs
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (form_decode(k), form_decode(v))
            })
            .collect(),
        None => Vec::new(),
    };
    let req = Request {
        method,
        params,
        headers,
        body,
    };
    let (status, out) = respond(&req);
    let reason = if status == 200 { "OK" } else { "Error" };
    // One request per connection: nothing the reader buffered is lost.
    let mut w = r.into_inner();
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/tab-separated-values; charset=UTF-8\r\n\
         X-ClickHouse-Server-Display-Name: capture\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        out.len()
    );
    w.write_all(head.as_bytes()).ok()?;
    w.write_all(&out).ok()?;
    w.flush().ok()?;
    Some(req)
}

/// `application/x-www-form-urlencoded` decoding (`+` is a space).
fn form_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(h, 16).expect("percent escape"));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).expect("utf-8 parameter")
}

/// Fixed answers for tests about flags and formats, not about stored data:
/// DDL and inserts return nothing, `SELECT max(offset) ...` returns 0, every
/// other SELECT no rows. It cannot prove resuming; [`engine_backed`] does.
fn static_answers(req: &Request) -> (u16, Vec<u8>) {
    if req.sql().contains("max(offset)") {
        (200, b"0\n".to_vec())
    } else {
        (200, Vec::new())
    }
}

/// Answers as a ClickHouse server would, from the real embedded engine, as
/// each request arrives: statements are executed, inserts decompressed and
/// written with their deduplication token (as the embedded backend writes
/// them), SELECTs answered with the engine's TabSeparated output; an engine
/// error is a 500 with its message. So the loader's resume query sees what
/// was really stored before.
fn engine_backed(req: &Request) -> (u16, Vec<u8>) {
    let sql = req.sql();
    let result = if req.param("query").is_some() {
        let target = sql
            .strip_prefix("INSERT INTO ")
            .and_then(|r| r.split_once(" ("))
            .map(|(t, _)| t)
            .unwrap_or_else(|| panic!("unexpected insert {sql:?}"));
        let (db, table) = target.split_once('.').expect("qualified table");
        let (rows, _) = decode_blocks(&req.body);
        let token = req.param("insert_deduplication_token").unwrap_or("");
        engine()
            .insert_rowbinary(
                &db.parse().unwrap(),
                table,
                structure_of(table),
                &rows,
                token,
            )
            .map(|()| Vec::new())
    } else if sql.trim_start().starts_with("SELECT") {
        Backend::query_tsv(engine(), &sql).map(String::into_bytes)
    } else {
        Backend::execute(engine(), &sql).map(|()| Vec::new())
    };
    match result {
        Ok(body) => (200, body),
        Err(e) => (500, format!("{e}\n").into_bytes()),
    }
}

/// Decodes ClickHouse's compressed-block stream (`decompress=1` bodies):
/// per block a 16-byte CityHash128 checksum, method 0x82 (LZ4), u32
/// compressed size (header included), u32 decompressed size, LZ4 block.
/// Returns the data and the number of blocks.
pub(crate) fn decode_blocks(mut body: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut blocks = 0;
    while !body.is_empty() {
        assert!(body.len() >= 25, "truncated block header");
        let checksum = u128::from_le_bytes(body[..16].try_into().unwrap());
        assert_eq!(body[16], 0x82, "method byte: LZ4");
        let compressed = u32::from_le_bytes(body[17..21].try_into().unwrap()) as usize;
        let size = u32::from_le_bytes(body[21..25].try_into().unwrap()) as usize;
        assert!(
            compressed >= 9 && body.len() >= 16 + compressed,
            "truncated block"
        );
        let framed = &body[16..16 + compressed];
        assert_eq!(
            checksum,
            cityhash_rs::cityhash_102_128(framed).rotate_right(64),
            "CityHash128 checksum of block {blocks}"
        );
        let data = lz4_flex::block::decompress(&framed[9..], size).expect("LZ4 block");
        assert_eq!(data.len(), size, "decompressed size of block {blocks}");
        out.extend_from_slice(&data);
        blocks += 1;
        body = &body[16 + compressed..];
    }
    (out, blocks)
}

/// One insert as the embedded backend received it.
#[derive(Debug, Clone, PartialEq)]
struct Insert {
    table: String,
    rows: Vec<u8>,
    token: String,
}

/// The embedded engine, recording every insert.
struct Recording<'a> {
    inner: &'a Engine,
    inserts: Mutex<Vec<Insert>>,
}

impl Backend for Recording<'_> {
    fn execute(&self, sql: &str) -> Result<()> {
        Backend::execute(self.inner, sql)
    }

    fn query_tsv(&self, sql: &str) -> Result<String> {
        Backend::query_tsv(self.inner, sql)
    }

    fn insert_rowbinary(
        &self,
        db: &flamehouse::Ident,
        table: &str,
        structure: &str,
        rows: &[u8],
        token: &str,
    ) -> Result<()> {
        self.inserts.lock().unwrap().push(Insert {
            table: table.to_string(),
            rows: rows.to_vec(),
            token: token.to_string(),
        });
        self.inner
            .insert_rowbinary(db, table, structure, rows, token)
    }
}

/// The RowBinary structure of each table the loader writes.
fn structure_of(table: &str) -> &'static str {
    [
        (ProcessRow::TABLE, ProcessRow::STRUCTURE),
        (FrameRow::TABLE, FrameRow::STRUCTURE),
        (StackRow::TABLE, StackRow::STRUCTURE),
        (ProcessStackRow::TABLE, ProcessStackRow::STRUCTURE),
        (SampleRow::TABLE, SampleRow::STRUCTURE),
        (TotalRow::TABLE, TotalRow::STRUCTURE),
        (RollupRow::TABLE, RollupRow::STRUCTURE),
        (ProgressRow::TABLE, ProgressRow::STRUCTURE),
        (IntentRow::TABLE, IntentRow::STRUCTURE),
    ]
    .into_iter()
    .find(|(t, _)| *t == table)
    .unwrap_or_else(|| panic!("no row type for table {table}"))
    .1
}

/// Every stored table of `db` (views excluded), as sorted TabSeparated text:
/// columns filled by DEFAULT (load times) left out, aggregate states
/// finalized, FINAL on the engines that merge rows.
fn dump(db: &str) -> Vec<(String, String)> {
    let tables = q(&format!(
        "SELECT name, engine FROM system.tables WHERE database = '{db}' \
         AND engine NOT LIKE '%View' ORDER BY name"
    ));
    let mut out = Vec::new();
    for line in tables.lines() {
        let (table, eng) = line.split_once('\t').unwrap();
        let cols = q(&format!(
            "SELECT name, type FROM system.columns WHERE database = '{db}' AND table = '{table}' \
             AND default_kind = '' ORDER BY position"
        ));
        let exprs: Vec<String> = cols
            .lines()
            .map(|l| {
                let (name, ty) = l.split_once('\t').unwrap();
                if ty.starts_with("AggregateFunction") {
                    format!("finalizeAggregation({name})")
                } else {
                    name.to_string()
                }
            })
            .collect();
        let fin = if eng == "MergeTree" { "" } else { " FINAL" };
        let rows = q(&format!(
            "SELECT {} FROM {db}.{table}{fin} ORDER BY ALL",
            exprs.join(", ")
        ));
        out.push((table.to_string(), rows));
    }
    out
}

#[test]
fn server_backend_wire_bytes_replay_to_the_same_tables() {
    let eng = engine();
    let dir = temp_path("server");
    let binary = compile_workload(&dir).expect("compile the fixture workload");
    let mut fo = FixtureOptions::new(&binary, dir.join("memhawk_workload_4242_protobuf.binpb"));
    fo.snapshots = 24;
    fo.stacks = 400;
    generate(&fo).expect("generate the fixture");
    let lo = |db: &str| LoadOptions {
        database: db.parse().unwrap(),
        // Several batches, so several deduplication tokens per table.
        batch_snapshots: 6,
        ..Default::default()
    };
    let schema = |db: &str| SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    let (db_a, db_b) = ("fh_server_a", "fh_server_b");
    for db in [db_a, db_b] {
        q(&format!("DROP DATABASE IF EXISTS {db}"));
    }

    // A: the embedded backend, recording what it inserts.
    let rec = Recording {
        inner: eng,
        inserts: Mutex::new(Vec::new()),
    };
    migrate(&rec, &schema(db_a)).expect("migrate A");
    let sum_a = load_file(&rec, &fo.output, &lo(db_a), &mut |_| {}).expect("load A");
    assert!(
        sum_a.sample_rows > 0 && sum_a.snapshots_stored > 0,
        "{sum_a:?}"
    );

    // B: the server backend, against the capture server.
    let server = CaptureServer::start(Box::new(engine_backed));
    let backend = ServerBackend::new(&ServerOptions {
        url: server.url.clone(),
        user: "fh_user".into(),
        password: "fh_secret".into(),
        ..Default::default()
    })
    .expect("server backend")
    // Small pieces: bodies of several compressed blocks, rows cut across.
    .with_insert_chunk(4096);
    migrate(&backend, &schema(db_b)).expect("migrate B (capture)");
    let sum_b = load_file(&backend, &fo.output, &lo(db_b), &mut |_| {}).expect("load B (capture)");
    drop(backend);
    let requests = server.finish();
    assert_eq!(sum_a.sample_rows, sum_b.sample_rows);
    assert_eq!(sum_a.snapshots_stored, sum_b.snapshots_stored);

    // What every request carries.
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(r.header("x-clickhouse-user"), Some("fh_user"));
        assert_eq!(r.header("x-clickhouse-key"), Some("fh_secret"));
        assert_eq!(r.param("database"), Some("default"));
    }

    // The captured session, in order: statements as sent, inserts (already
    // written to the engine as they arrived) checked for their framing.
    let mut captured = Vec::new();
    let mut multi_block = 0;
    let mut statements = 0;
    for r in &requests {
        let sql = r.sql();
        if r.param("query").is_some() {
            let prefix = format!("INSERT INTO {db_b}.");
            let rest = sql
                .strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("unexpected insert {sql:?}"));
            let (table, rest) = rest.split_once(" (").unwrap();
            let (cols, format) = rest.split_once(") ").unwrap();
            assert_eq!(format, "FORMAT RowBinary");
            let structure = structure_of(table);
            assert_eq!(
                cols.split(", ").collect::<Vec<_>>(),
                column_names(structure),
                "columns of {table}"
            );
            assert_eq!(r.param("decompress"), Some("1"), "compressed body");
            assert_eq!(
                r.param("deduplicate_blocks_in_dependent_materialized_views"),
                Some("1")
            );
            // A cluster's Distributed cp_samples: on the shards on return.
            assert_eq!(r.param("insert_distributed_sync"), Some("1"), "{table}");
            let token = r
                .param("insert_deduplication_token")
                .expect("insert_deduplication_token")
                .to_string();
            let (rows, blocks) = decode_blocks(&r.body);
            assert!(
                r.body.len() < rows.len() + 25 * blocks + 1,
                "LZ4 made the body no larger than framing allows"
            );
            if blocks > 1 {
                multi_block += 1;
            }
            captured.push(Insert {
                table: table.to_string(),
                rows,
                token,
            });
        } else if sql.trim_start().starts_with("SELECT") {
            // Answered by the engine behind the capture server.
            assert_eq!(r.param("default_format"), Some("TabSeparated"), "{sql}");
            assert_eq!(r.header("accept-encoding"), Some("lz4"));
        } else {
            assert_eq!(r.param("default_format"), None, "{sql}");
            statements += 1;
        }
    }
    assert!(statements > 10, "DDL sent: {statements}");
    assert!(multi_block > 0, "no insert body had more than one block");

    // The same inserts, byte for byte, with the same tokens.
    let recorded = rec.inserts.lock().unwrap().clone();
    assert_eq!(
        captured
            .iter()
            .map(|i| (&i.table, &i.token))
            .collect::<Vec<_>>(),
        recorded
            .iter()
            .map(|i| (&i.table, &i.token))
            .collect::<Vec<_>>()
    );
    assert!(captured == recorded, "RowBinary bodies differ");
    let mut tokens: Vec<_> = captured.iter().map(|i| &i.token).collect();
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), captured.len(), "one token per insert");

    // And the same tables, row by row.
    let (a, b) = (dump(db_a), dump(db_b));
    assert_eq!(
        a.iter().map(|(t, _)| t).collect::<Vec<_>>(),
        b.iter().map(|(t, _)| t).collect::<Vec<_>>()
    );
    for ((table, ra), (_, rb)) in a.iter().zip(&b) {
        // Only migrations and deletes write these two, and a memory load
        // writes none of the continuous-profile tables (`cp_`).
        if table != "schema_migrations"
            && table != "process_generations"
            && !table.starts_with("cp_")
        {
            assert!(!ra.is_empty(), "table {table} is empty");
        }
        assert!(ra == rb, "table {table} differs:\nA:\n{ra}\nB:\n{rb}");
    }

    // Loading the same file again through the server: the resume query is
    // answered from the stored progress, so nothing is sent or stored.
    let server = CaptureServer::start(Box::new(engine_backed));
    let backend = ServerBackend::new(&ServerOptions {
        url: server.url.clone(),
        ..Default::default()
    })
    .expect("server backend");
    let again = load_file(&backend, &fo.output, &lo(db_b), &mut |_| {}).expect("load B again");
    drop(backend);
    let requests = server.finish();
    assert_eq!(
        (again.snapshots_stored, again.sample_rows),
        (0, 0),
        "{again:?}"
    );
    let inserts: Vec<String> = requests
        .iter()
        .filter_map(|r| r.param("query").map(str::to_owned))
        .collect();
    // Only the process row is written again (a ReplacingMergeTree upsert:
    // the dump below reads it FINAL); no progress, samples or stacks.
    assert!(
        inserts
            .iter()
            .all(|i| i.starts_with(&format!("INSERT INTO {db_b}.processes "))),
        "inserts on the second load: {inserts:?}"
    );
    assert!(dump(db_b) == b, "the second load changed B");

    for db in [db_a, db_b] {
        q(&format!("DROP DATABASE IF EXISTS {db}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn server_backend_passes_formats_and_errors_through() {
    let server = CaptureServer::start(Box::new(|r: &Request| {
        let sql = r.sql();
        if sql.contains("missing") {
            (
                404,
                b"Code: 60. DB::Exception: Unknown table expression identifier 'missing'. (UNKNOWN_TABLE) (version 25.8.1.1)\n"
                    .to_vec(),
            )
        } else {
            (200, b"{\"x\":1,\"q\":\"?\"}\n".to_vec())
        }
    }));
    let b = ServerBackend::new(&ServerOptions {
        url: server.url.clone(),
        database: "flamehouse".into(),
        ..Default::default()
    })
    .unwrap();
    // `?` is sent verbatim (no client-side bind parameters).
    let out = b.query("SELECT 1 AS x, '?' AS q", "JSONEachRow").unwrap();
    assert_eq!(out, b"{\"x\":1,\"q\":\"?\"}\n");
    let e = b
        .query_tsv("SELECT * FROM missing")
        .unwrap_err()
        .to_string();
    assert!(e.contains("Code: 60") && e.contains("UNKNOWN_TABLE"), "{e}");
    drop(b);
    let reqs = server.finish();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].sql(), "SELECT 1 AS x, '?' AS q");
    assert_eq!(reqs[0].param("default_format"), Some("JSONEachRow"));
    assert_eq!(reqs[0].param("database"), Some("flamehouse"));
    // No credentials given: the default user, no key.
    assert_eq!(reqs[0].header("x-clickhouse-user"), Some("default"));
    assert_eq!(reqs[0].header("x-clickhouse-key"), None);
}

#[test]
fn server_cli_flags_and_env_select_the_server() {
    let exe = udf_binary().with_file_name("flamehouse");
    assert!(
        exe.is_file(),
        "{} is missing (cargo build --release --bins)",
        exe.display()
    );
    let server = CaptureServer::start(Box::new(|r: &Request| {
        if r.param("default_format") == Some("CSV") {
            (200, b"1\n".to_vec())
        } else {
            static_answers(r)
        }
    }));
    let data = temp_path("server-cli").join("data");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = std::process::Command::new(&exe);
        c.args(args).env("FLAMEHOUSE_DATA", &data);
        for v in [
            "CLICKHOUSE_URL",
            "CLICKHOUSE_USER",
            "CLICKHOUSE_PASSWORD",
            "CLICKHOUSE_DATABASE",
        ] {
            c.env_remove(v);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "flamehouse {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // Flags.
    let out = run(
        &[
            "sql",
            "--url",
            &server.url,
            "--user",
            "u1",
            "--format",
            "CSV",
            "SELECT 1",
        ],
        &[],
    );
    assert_eq!(out, "1\n");
    // Environment.
    let out = run(
        &["init", "--database", "fh_cli"],
        &[
            ("CLICKHOUSE_URL", &server.url),
            ("CLICKHOUSE_USER", "u2"),
            ("CLICKHOUSE_PASSWORD", "p2"),
            ("CLICKHOUSE_DATABASE", "other"),
        ],
    );
    assert!(
        out.contains("applied migrations [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]"),
        "{out}"
    );
    let reqs = server.finish();
    // The embedded engine was never opened.
    assert!(
        !data.exists(),
        "the embedded engine's directory was created"
    );
    assert_eq!(reqs[0].sql(), "SELECT 1");
    assert_eq!(reqs[0].param("default_format"), Some("CSV"));
    assert_eq!(reqs[0].header("x-clickhouse-user"), Some("u1"));
    let init = &reqs[1..];
    assert!(init.len() > 10);
    for r in init {
        assert_eq!(r.header("x-clickhouse-user"), Some("u2"));
        assert_eq!(r.header("x-clickhouse-key"), Some("p2"));
        assert_eq!(r.param("database"), Some("other"));
    }
    assert!(init.iter().any(|r| r
        .sql()
        .contains("CREATE TABLE IF NOT EXISTS fh_cli.samples")));
    assert!(init
        .iter()
        .any(|r| r.sql().contains("INSERT INTO fh_cli.schema_migrations")));
    let _ = std::fs::remove_dir_all(data.parent().unwrap());
}

/// A self-signed certificate for `localhost`, as a rustls server config and
/// the certificate's PEM (what a user would pass to `--ca-cert`).
fn self_signed() -> (Arc<rustls::ServerConfig>, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let der = rustls::pki_types::CertificateDer::from(cert.der().to_vec());
    let key_der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![der], key_der)
    .unwrap();
    (Arc::new(cfg), cert.pem())
}

/// `https://` through rustls: a server whose certificate the given CA file
/// vouches for answers; without it the connection is refused as untrusted,
/// naming the server; a CA file that is not PEM is named in the error.
#[test]
fn server_backend_speaks_tls_with_the_given_ca() {
    let (cfg, pem) = self_signed();
    let dir = temp_path("tls");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &pem).unwrap();
    let server = CaptureServer::start_with(
        Box::new(|req: &Request| {
            if req.sql().contains("SELECT 42") {
                (200, b"42\n".to_vec())
            } else {
                (200, Vec::new())
            }
        }),
        Some(cfg),
    );
    let url = server.url.clone();
    let opts = |ca_cert: Option<PathBuf>| ServerOptions {
        url: url.clone(),
        ca_cert,
        timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let trusted = ServerBackend::new(&opts(Some(ca.clone()))).unwrap();
    assert_eq!(trusted.query_tsv("SELECT 42").unwrap(), "42\n");
    let rows = vec![0u8; SampleRow::ENCODED_LEN];
    trusted
        .insert_rowbinary(
            &"db".parse().unwrap(),
            "samples",
            SampleRow::STRUCTURE,
            &rows,
            "tok",
        )
        .unwrap();
    let untrusted = ServerBackend::new(&opts(None))
        .unwrap()
        .query_tsv("SELECT 42")
        .unwrap_err()
        .to_string();
    assert!(untrusted.contains(&url), "{untrusted}");
    assert!(
        untrusted.to_lowercase().contains("certificate"),
        "{untrusted}"
    );
    let reqs = server.finish();
    assert!(reqs.iter().any(|r| r.sql().contains("SELECT 42")));
    assert!(reqs
        .iter()
        .any(|r| r.sql().starts_with("INSERT INTO db.samples")));
    // Not a PEM file.
    let junk = dir.join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let e = ServerBackend::new(&opts(Some(junk.clone())))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&junk.display().to_string()), "{e}");
}

/// A server that accepts the connection and never answers: the request
/// fails after the timeout, saying so.
#[test]
fn server_backend_gives_up_after_the_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hold = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(5));
        drop(s);
    });
    let b = ServerBackend::new(&ServerOptions {
        url: url.clone(),
        timeout: Duration::from_secs(1),
        ..Default::default()
    })
    .unwrap();
    let t = Instant::now();
    let e = b.query_tsv("SELECT 1").unwrap_err().to_string();
    let took = t.elapsed();
    assert!(e.contains("no answer within 1 s"), "{e}");
    assert!(e.contains(&url), "{e}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    hold.join().unwrap();
}
