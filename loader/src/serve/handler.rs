//! One HTTP request: ClickHouse's HTTP interface on an engine session.
//!
//! The query is the `query` URL parameter followed by a line break and the
//! body, or the body alone (as ClickHouse reads it). URL parameters other
//! than the interface's own are settings, `param_NAME` binds `{NAME:Type}`
//! (by the engine: nothing is spliced into the SQL). An INSERT's inline data
//! (after `FORMAT name` or `VALUES`) goes to the engine through an anonymous
//! pipe read with `FROM INFILE` (`storage::through_pipe`), because the engine
//! cuts inline data silently.
//!
//! Read-only requests (a reader user, or any GET as in ClickHouse) may run
//! one SELECT-like statement, without `INTO OUTFILE`; their session gets
//! the server's limits, the settings of the URL (limits only lowered), and
//! then `readonly = 1`, so the engine itself refuses writes, DDL, table
//! functions that reach files or the network, and any later change of a
//! setting (a `SETTINGS` clause included).

use super::codec;
use super::http::{self, ChError};
use super::sql::{self, Kind, INFILE_MARKER};
use super::users::{Role, Users};
use super::ServeOptions;
use crate::storage::engine::{Engine, QueryOutput};
use crate::storage::{quote_ident, sql_string};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::sync::Arc;
use std::time::Duration;

/// What every request shares.
#[derive(Debug)]
pub struct State {
    /// The engine.
    pub engine: Arc<Engine>,
    /// The users.
    pub users: Users,
    /// The options.
    pub opts: ServeOptions,
    /// One permit per query running.
    pub permits: Arc<tokio::sync::Semaphore>,
    /// The engine's time zone (`X-ClickHouse-Timezone`).
    pub timezone: String,
}

/// URL parameters of the interface itself (not settings).
const RESERVED: &[&str] = &[
    "query",
    "database",
    "default_format",
    "query_id",
    "user",
    "password",
    "quota_key",
    "compress",
    "decompress",
    "session_id",
    "session_timeout",
    "session_check",
    "buffer_size",
    "wait_end_of_query",
    "stacktrace",
    "role",
    "client_protocol_version",
    "http_native_compression_disable_checksumming_on_decompress",
    "enable_http_compression",
];

/// Functions a read-only request may not call: they read the server's files
/// (`file()` reads any path on this engine; `catboostEvaluate` loads a model
/// file).
const READER_DENIED_CALLS: &[&str] = &["file", "catboostevaluate"];

/// The words a ClickHouse statement starts with (lower case). A statement
/// starting with another word is a syntax error, as the server says, not a
/// write a read-only user may not run (a reader's `SELEC 1` was refused as
/// READONLY).
const STATEMENT_WORDS: &[&str] = &[
    "select", "with", "show", "describe", "desc", "explain", "exists", "insert", "create", "alter",
    "drop", "detach", "attach", "rename", "truncate", "optimize", "system", "set", "use", "kill",
    "grant", "revoke", "check", "watch", "delete", "update", "exchange", "undrop", "backup",
    "restore", "move", "begin", "commit", "rollback", "replace", "from",
];

/// Handles one request; every failure is a ClickHouse-style error response.
pub async fn handle(state: Arc<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let query_id = req
        .uri()
        .query()
        .map(http::parse_query)
        .and_then(|p| p.into_iter().find(|(k, _)| k == "query_id").map(|(_, v)| v))
        .or_else(|| header(&req, "x-clickhouse-query-id"))
        .unwrap_or_else(new_query_id);
    match process(&state, req, &query_id).await {
        Ok(r) => r,
        Err(e) => error_response(&state, &query_id, &e),
    }
}

fn header<B>(req: &Request<B>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn new_query_id() -> String {
    let b: [u8; 16] = rand::random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

fn base_response(state: &State, query_id: &str) -> hyper::http::response::Builder {
    Response::builder()
        .header("X-ClickHouse-Query-Id", query_id)
        .header("X-ClickHouse-Timezone", state.timezone.as_str())
        .header(
            "X-ClickHouse-Server-Display-Name",
            state.opts.display_name.as_str(),
        )
        .header("Keep-Alive", "timeout=10")
}

fn error_response(state: &State, query_id: &str, e: &ChError) -> Response<Full<Bytes>> {
    base_response(state, query_id)
        .status(e.status)
        .header("Content-Type", "text/plain; charset=UTF-8")
        .header("X-ClickHouse-Exception-Code", e.code.to_string())
        .body(Full::new(Bytes::from(format!("{}\n", e.message))))
        .expect("valid response")
}

fn text_response(status: u16, body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("Content-Type", "text/html; charset=UTF-8")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("valid response")
}

/// What a request asks the engine to do.
#[derive(Debug)]
struct Plan {
    /// `SET ...` for the session, in order.
    setup: Vec<String>,
    /// The statement (with [`INFILE_MARKER`] for an insert's pipe).
    sql: String,
    /// An insert's data.
    data: Option<Bytes>,
    /// Format given to the engine.
    format: String,
    /// `param_*` values.
    params: Vec<(String, String)>,
}

async fn process(
    state: &Arc<State>,
    req: Request<Incoming>,
    query_id: &str,
) -> Result<Response<Full<Bytes>>, ChError> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let params = req.uri().query().map(http::parse_query).unwrap_or_default();
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    // ClickHouse's headers for the `database` and `default_format`
    // parameters (a parameter given too wins); they were ignored, so a
    // client that sent them got TabSeparated of `default` without a word.
    let header_database = header(&req, "x-clickhouse-database");
    let header_format = header(&req, "x-clickhouse-format");
    if path == "/ping" || path == "/replicas_status" {
        return Ok(text_response(200, "Ok.\n"));
    }
    if path != "/" {
        return Err(ChError::new(
            36,
            "BAD_ARGUMENTS",
            format!("There is no handle {path}. Use / or /ping"),
        )
        .with_status(404));
    }
    let is_get = method == hyper::Method::GET || method == hyper::Method::HEAD;
    if !is_get && method != hyper::Method::POST {
        return Err(ChError::new(
            36,
            "BAD_ARGUMENTS",
            format!("HTTP method {method} is not supported: use GET or POST"),
        )
        .with_status(405));
    }
    if is_get && param("query").is_none() {
        return Ok(text_response(200, "Ok.\n"));
    }

    // Who is asking.
    let role = authenticate(&state.users, &req, param)?;
    let user = role.0;
    let readonly = role.1 == Role::Reader || is_get;

    // The body, bounded before and after decompression.
    let accept = header(&req, "accept-encoding").unwrap_or_default();
    let content_encoding = header(&req, "content-encoding").unwrap_or_default();
    let limit = state.opts.max_body_bytes;
    let body = Limited::new(req.into_body(), limit as usize)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                ChError::too_large(limit)
            } else {
                ChError::new(
                    33,
                    "CANNOT_READ_ALL_DATA",
                    format!("Cannot read the request body: {e}"),
                )
            }
        })?
        .to_bytes();
    let body = if content_encoding.is_empty() {
        body
    } else {
        Bytes::from(codec::decode_content(&content_encoding, &body, limit)?)
    };
    let body = if param("decompress") == Some("1") {
        Bytes::from(codec::decode_blocks(&body, limit)?)
    } else {
        body
    };
    let text: Bytes = match param("query") {
        Some(q) => {
            let mut t = Vec::with_capacity(q.len() + 1 + body.len());
            t.extend_from_slice(q.as_bytes());
            t.push(b'\n');
            t.extend_from_slice(&body);
            Bytes::from(t)
        }
        None => body,
    };

    let stmt = sql::analyze(&text).map_err(|e| match e {
        sql::SqlError::Empty => ChError::new(62, "SYNTAX_ERROR", "Empty query"),
        sql::SqlError::MultiStatement => ChError::new(
            62,
            "SYNTAX_ERROR",
            "Syntax error: Multi-statements are not allowed",
        ),
        sql::SqlError::Unterminated => ChError::new(
            62,
            "SYNTAX_ERROR",
            "Syntax error: a string, quoted identifier or comment is not closed",
        ),
    })?;
    if stmt.kind == sql::Kind::Other
        && stmt.first.starts_with(|c: char| c.is_ascii_alphabetic())
        && !STATEMENT_WORDS.contains(&stmt.first.as_str())
    {
        return Err(ChError::new(
            62,
            "SYNTAX_ERROR",
            format!(
                "Syntax error: failed at position 1 ('{}'): not the start of a query",
                stmt.first.chars().take(64).collect::<String>()
            ),
        ));
    }
    // Functions that reach the server's files (the engine's `readonly`
    // does not stop them); a DESCRIBE of a table function infers its
    // structure from the file or URL.
    let reaches_out = stmt
        .calls
        .iter()
        .any(|c| READER_DENIED_CALLS.contains(&c.as_str()))
        || (stmt.kind == Kind::Read
            && (stmt.first == "describe" || stmt.first == "desc")
            && !stmt.calls.is_empty());
    if readonly && (stmt.kind != Kind::Read || stmt.outfile || reaches_out) {
        let why = if role.1 == Role::Reader {
            String::new()
        } else {
            ". For queries over HTTP, method GET implies readonly. You should use method POST \
             for modifying queries"
                .into()
        };
        return Err(ChError::new(
            164,
            "READONLY",
            format!("{user}: Cannot execute query in readonly mode{why}"),
        ));
    }

    // The session: the server's limits, the URL's settings, then readonly.
    let o = &state.opts;
    let mut limits = [
        ("max_execution_time", o.max_execution_time),
        ("max_memory_usage", o.max_memory_usage),
        ("max_result_bytes", o.max_result_bytes),
    ];
    let mut settings: Vec<(String, String)> = Vec::new();
    let mut bound = Vec::new();
    for (k, v) in &params {
        if let Some(name) = k.strip_prefix("param_") {
            bound.push((name.to_string(), v.clone()));
            continue;
        }
        if RESERVED.contains(&k.as_str()) {
            continue;
        }
        if k.is_empty()
            || !k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(ChError::new(
                115,
                "UNKNOWN_SETTING",
                format!("Unknown setting '{k}'"),
            ));
        }
        if readonly {
            if k == "readonly" {
                // Asking for read-only is fine; lifting it is not.
                if v.trim() == "1" || v.trim() == "2" {
                    continue;
                }
                return Err(ChError::new(
                    164,
                    "READONLY",
                    "Cannot modify 'readonly' setting in readonly mode",
                ));
            }
            if let Some(l) = limits.iter_mut().find(|l| l.0 == k) {
                let n: Option<f64> = v.trim().parse().ok();
                match n {
                    Some(n) if n > 0.0 && n <= l.1 as f64 => {
                        // Lowered: the URL's value replaces the cap.
                        l.1 = n.ceil() as u64;
                        continue;
                    }
                    _ => {
                        return Err(ChError::new(
                            452,
                            "SETTING_CONSTRAINT_VIOLATION",
                            format!(
                            "Setting {k} shouldn't be greater than {} (or 0, which is no limit)",
                            l.1
                        ),
                        ))
                    }
                }
            }
        }
        settings.push((k.clone(), v.clone()));
    }
    let mut setup = Vec::new();
    let set = |pairs: &[(String, String)]| {
        let list: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{k} = {}", sql_string(v)))
            .collect();
        format!("SET {}", list.join(", "))
    };
    let limit_pairs: Vec<(String, String)> = limits
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    setup.push(set(&limit_pairs));
    if !settings.is_empty() {
        setup.push(set(&settings));
    }
    if let Some(db) = param("database")
        .or(header_database.as_deref())
        .filter(|d| !d.is_empty())
    {
        setup.push(format!("USE {}", quote_ident(db)));
    }
    if readonly {
        setup.push("SET readonly = 1".into());
    }

    let default_format = param("default_format")
        .or(header_format.as_deref())
        .filter(|f| !f.is_empty())
        .unwrap_or("TabSeparated")
        .to_string();
    let out_format = stmt
        .format
        .clone()
        .unwrap_or_else(|| default_format.clone());
    let (sql_text, data) = match &stmt.insert {
        Some(ins) => (ins.statement.clone(), Some(text.slice(ins.data_start..))),
        None => (
            String::from_utf8(text.to_vec())
                .map_err(|_| ChError::new(36, "BAD_ARGUMENTS", "The query is not valid UTF-8"))?,
            None,
        ),
    };
    let plan = Plan {
        setup,
        sql: sql_text,
        data,
        format: default_format,
        params: bound,
    };

    // A slot, then the engine on a blocking thread. The wait is the
    // request's own time limit (a writer's setting, a reader's lowered
    // cap), not always the server's: `max_execution_time=1` waited 2.3 s.
    let own_limit = settings
        .iter()
        .find(|(k, _)| k == "max_execution_time")
        .and_then(|(_, v)| v.trim().parse::<f64>().ok())
        .filter(|n| *n > 0.0)
        .map(|n| n.ceil() as u64)
        .or_else(|| {
            limits
                .iter()
                .find(|l| l.0 == "max_execution_time")
                .map(|l| l.1)
        })
        .unwrap_or(o.max_execution_time);
    let wait = Duration::from_secs(own_limit.max(1));
    let permit = tokio::time::timeout(wait, state.permits.clone().acquire_owned())
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(|| {
            ChError::new(
                202,
                "TOO_MANY_SIMULTANEOUS_QUERIES",
                format!(
                    "Too many simultaneous queries. Maximum: {}",
                    o.max_concurrent_queries
                ),
            )
        })?;
    let engine = state.engine.clone();
    let asking = user.clone();
    let out = tokio::task::spawn_blocking(move || {
        let r = run(&engine, &plan).map_err(|mut e| {
            // The engine's sessions run as its `default` user: an error
            // naming it names the HTTP user, as ClickHouse's would.
            if asking != "default" {
                e.message = e.message.replacen(
                    "DB::Exception: default: ",
                    &format!("DB::Exception: {asking}: "),
                    1,
                );
            }
            e
        });
        drop(permit);
        r
    })
    .await
    .map_err(|e| ChError::new(1001, "STD_EXCEPTION", format!("query thread: {e}")))??;

    // The response.
    let summary = format!(
        "{{\"read_rows\":\"{}\",\"read_bytes\":\"{}\",\"written_rows\":\"{}\",\"written_bytes\":\"{}\",\"total_rows_to_read\":\"{}\",\"result_rows\":\"{}\",\"result_bytes\":\"{}\",\"elapsed_ns\":\"{}\"}}",
        out.read_rows,
        out.read_bytes,
        out.written_rows,
        out.written_bytes,
        out.read_rows,
        out.result_rows,
        out.data.len(),
        (out.elapsed * 1e9) as u64
    );
    let mut b = base_response(state, query_id)
        .status(200)
        .header("Content-Type", http::content_type(&out_format))
        .header("X-ClickHouse-Format", out_format.as_str())
        .header("X-ClickHouse-Summary", summary);
    let mut data = out.data;
    if param("compress") == Some("1") {
        data = codec::encode_blocks(&data);
    } else if param("enable_http_compression") == Some("1") {
        if let Some(enc) = codec::choose_encoding(&accept) {
            data = codec::encode_content(enc, &data).map_err(|e| {
                ChError::new(
                    1001,
                    "STD_EXCEPTION",
                    format!("compressing the response: {e}"),
                )
            })?;
            b = b.header("Content-Encoding", enc);
        }
    }
    Ok(b.body(Full::new(Bytes::from(data)))
        .expect("valid response"))
}

/// The user's name and role, from `X-ClickHouse-User`/`X-ClickHouse-Key`,
/// HTTP basic auth, or the `user`/`password` URL parameters (one of them,
/// as ClickHouse requires).
fn authenticate<'a, B>(
    users: &'a Users,
    req: &Request<B>,
    param: impl Fn(&str) -> Option<&'a str>,
) -> Result<(String, Role), ChError>
where
    B: 'a,
{
    let failed = |what: String| ChError::new(516, "AUTHENTICATION_FAILED", what);
    let x_user = header(req, "x-clickhouse-user");
    let x_key = header(req, "x-clickhouse-key");
    let basic = header(req, "authorization");
    let url_creds = param("user").is_some() || param("password").is_some();
    let (name, password) = if x_user.is_some() || x_key.is_some() {
        if basic.is_some() || url_creds {
            return Err(failed(
                "Invalid authentication: it is not allowed to use X-ClickHouse HTTP headers and \
                 other authentication methods simultaneously"
                    .into(),
            ));
        }
        (
            x_user.unwrap_or_else(|| "default".into()),
            x_key.unwrap_or_default(),
        )
    } else if let Some(auth) = basic {
        if url_creds {
            return Err(failed(
                "Invalid authentication: it is not allowed to use Authorization HTTP header and \
                 authentication via parameters simultaneously"
                    .into(),
            ));
        }
        http::basic_credentials(&auth).ok_or_else(|| {
            // Which of the two went wrong: the scheme, or its credentials
            // (bad base64 was called an unsupported scheme).
            let basic = auth
                .trim_start()
                .get(..6)
                .is_some_and(|s| s.eq_ignore_ascii_case("basic "));
            failed(if basic {
                "Invalid authentication: the 'Basic' credentials are not base64 of \
                 `user:password`"
                    .into()
            } else {
                "Invalid authentication: only the 'Basic' HTTP Authorization scheme is supported"
                    .into()
            })
        })?
    } else {
        (
            param("user").unwrap_or("default").to_string(),
            param("password").unwrap_or("").to_string(),
        )
    };
    match users.authenticate(&name, &password) {
        Some(u) => Ok((u.name.clone(), u.role)),
        None => Err(failed(format!(
            "{name}: Authentication failed: password is incorrect, or there is no user with such \
             name"
        ))),
    }
}

/// Runs a plan in a new session; an insert's data goes through a pipe.
fn run(engine: &Engine, plan: &Plan) -> Result<QueryOutput, ChError> {
    let eng = |e: crate::Error| ChError::from_engine(&e.to_string());
    let session = engine.session().map_err(eng)?;
    for s in &plan.setup {
        session.query(s, "TabSeparated", &[]).map_err(eng)?;
    }
    let params: Vec<(&str, &str)> = plan
        .params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let Some(data) = &plan.data else {
        return session.query(&plan.sql, &plan.format, &params).map_err(eng);
    };
    // The body through an anonymous pipe the engine reads in this process
    // (`storage::through_pipe`): no file is made, none left by a kill.
    let (queried, fed) = crate::storage::through_pipe(data, |path| {
        let sql = plan.sql.replace(
            INFILE_MARKER,
            &format!("FROM INFILE {}", sql_string(&path.display().to_string())),
        );
        session.query(&sql, &plan.format, &params)
    })
    .map_err(eng)?;
    let out = queried.map_err(eng)?;
    // The engine must have taken every byte of the body.
    let unread = |e: String| {
        ChError::new(
            33,
            "CANNOT_READ_ALL_DATA",
            format!(
                "the engine did not read all {} bytes of the INSERT data: {e}",
                data.len()
            ),
        )
    };
    match fed {
        Ok(0) => Ok(out),
        Ok(left) => Err(unread(format!("{left} bytes left unread"))),
        Err(e) => Err(unread(e.to_string())),
    }
}
