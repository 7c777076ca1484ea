//! `flamehouse serve`: the embedded engine behind ClickHouse's HTTP
//! interface, so that ClickHouse clients (Grafana's data source, the
//! loader's server sink, clickhouse-connect, @clickhouse/client, curl) work
//! on a data directory without a ClickHouse server, and a `load --watch`
//! into it can be watched live.
//!
//! One process owns the data directory. Every request runs in its own
//! engine [`Session`](crate::storage::engine::Session) (a chDB connection: its own
//! settings and current database, queries in parallel with the others'),
//! opened for the request and closed after it, on a blocking thread, at
//! most [`ServeOptions::max_concurrent_queries`] at a time.
//!
//! - [`handler`]: one request, from URL and body to the engine and back;
//! - [`sql`]: what the server must know of a statement before running it;
//! - [`codec`]: HTTP `Content-Encoding` and ClickHouse's compressed blocks;
//! - [`users`]: users, passwords and roles;
//! - [`http`]: ClickHouse's error format, statuses and URL conventions.

pub mod codec;
pub mod handler;
pub mod http;
pub mod sql;
pub mod users;

use crate::error::{Error, Result};
use crate::storage::engine::{Engine, EngineOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Default listen address: ClickHouse's HTTP port, on loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8123";
/// Default number of queries run at once (more wait for a slot).
pub const DEFAULT_MAX_CONCURRENT_QUERIES: usize = 16;
/// Default largest request body, compressed or not (bytes).
pub const DEFAULT_MAX_BODY_BYTES: u64 = 256 << 20;
/// Default per-query `max_execution_time` (seconds); readers cannot raise it.
pub const DEFAULT_MAX_EXECUTION_TIME: u64 = 60;
/// Default per-query `max_memory_usage` (bytes); readers cannot raise it.
pub const DEFAULT_MAX_MEMORY_USAGE: u64 = 4 << 30;
/// Default per-query `max_result_bytes` (bytes); readers cannot raise it.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 1 << 30;
/// How long a TLS handshake may take.
const TLS_HANDSHAKE: Duration = Duration::from_secs(10);
/// Default `X-ClickHouse-Server-Display-Name`.
pub const DEFAULT_DISPLAY_NAME: &str = "flamehouse";

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on. Default: [`DEFAULT_LISTEN`] (a non-loopback
    /// address needs configured users: the built-in `default` has no
    /// password).
    pub listen: SocketAddr,
    /// The engine (its data directory). Default: the embedded engine's.
    pub engine: EngineOptions,
    /// File of users (see [`users`]). Default: none (users from the
    /// environment, else `default` without a password).
    pub users: Option<PathBuf>,
    /// Queries run at once; a request waits up to `max_execution_time` for
    /// a slot, then fails with TOO_MANY_SIMULTANEOUS_QUERIES. Default:
    /// [`DEFAULT_MAX_CONCURRENT_QUERIES`].
    pub max_concurrent_queries: usize,
    /// Largest request body, before and after decompression. Default:
    /// [`DEFAULT_MAX_BODY_BYTES`].
    pub max_body_bytes: u64,
    /// Seconds a query may run (`max_execution_time`). Default:
    /// [`DEFAULT_MAX_EXECUTION_TIME`].
    pub max_execution_time: u64,
    /// Bytes of memory a query may use (`max_memory_usage`). Default:
    /// [`DEFAULT_MAX_MEMORY_USAGE`].
    pub max_memory_usage: u64,
    /// Bytes a query's result may hold (`max_result_bytes`). Default:
    /// [`DEFAULT_MAX_RESULT_BYTES`].
    pub max_result_bytes: u64,
    /// The server's display name. Default: [`DEFAULT_DISPLAY_NAME`].
    pub display_name: String,
    /// PEM certificate chain for HTTPS (with [`ServeOptions::tls_key`]).
    /// Default: none (plain HTTP).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS. Default: none.
    pub tls_key: Option<PathBuf>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: DEFAULT_LISTEN.parse().expect("valid address"),
            engine: EngineOptions::default(),
            users: None,
            max_concurrent_queries: DEFAULT_MAX_CONCURRENT_QUERIES,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_execution_time: DEFAULT_MAX_EXECUTION_TIME,
            max_memory_usage: DEFAULT_MAX_MEMORY_USAGE,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            display_name: DEFAULT_DISPLAY_NAME.into(),
            tls_cert: None,
            tls_key: None,
        }
    }
}

/// The command line of `flamehouse serve` (its defaults are the
/// [`ServeOptions`] defaults).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address and port to listen on (ClickHouse's HTTP port on loopback by
    /// default; another address needs users with passwords).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Database directory of the embedded engine (when not given:
    /// ~/.local/share/flamehouse).
    #[arg(long, env = "FLAMEHOUSE_DATA")]
    pub data: Option<PathBuf>,
    /// File of users, one `NAME reader|writer PASSWORD` per line (PASSWORD
    /// plain or `sha256:HEX`). FLAMEHOUSE_WRITER_PASSWORD and
    /// FLAMEHOUSE_READER_PASSWORD define users `writer` and `reader`. With
    /// neither: user `default`, writer, no password.
    #[arg(long, env = "FLAMEHOUSE_USERS")]
    pub users: Option<PathBuf>,
    /// Queries run at once; more wait for a slot.
    #[arg(long, default_value_t = DEFAULT_MAX_CONCURRENT_QUERIES)]
    pub max_concurrent_queries: usize,
    /// Largest request body in bytes, compressed and decompressed.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: u64,
    /// Seconds a query may run (readers cannot raise it).
    #[arg(long, default_value_t = DEFAULT_MAX_EXECUTION_TIME)]
    pub max_execution_time: u64,
    /// Bytes of memory a query may use (readers cannot raise it).
    #[arg(long, default_value_t = DEFAULT_MAX_MEMORY_USAGE)]
    pub max_memory_usage: u64,
    /// Bytes a query's result may hold (readers cannot raise it).
    #[arg(long, default_value_t = DEFAULT_MAX_RESULT_BYTES)]
    pub max_result_bytes: u64,
    /// Server name sent in X-ClickHouse-Server-Display-Name.
    #[arg(long, default_value = DEFAULT_DISPLAY_NAME)]
    pub display_name: String,
    /// PEM certificate chain: serve HTTPS (with --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl ServeArgs {
    /// The options these arguments give.
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            listen: self.listen,
            engine: EngineOptions {
                data_dir: self.data.clone(),
                ..Default::default()
            },
            users: self.users.clone(),
            max_concurrent_queries: self.max_concurrent_queries,
            max_body_bytes: self.max_body_bytes,
            max_execution_time: self.max_execution_time,
            max_memory_usage: self.max_memory_usage,
            max_result_bytes: self.max_result_bytes,
            display_name: self.display_name.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
        }
    }
}

/// Serves until SIGTERM or SIGINT, then stops accepting, lets the requests
/// in flight finish (their queries too), and closes the engine. Prints one
/// line `flamehouse serve: listening on http://ADDR` once it accepts.
pub fn serve(opts: &ServeOptions) -> Result<()> {
    let users = users::Users::load(opts.users.as_deref())?;
    if users.implicit_default && !opts.listen.ip().is_loopback() {
        return Err(Error::Usage(format!(
            "refusing to listen on {} with the password-less user `default`: configure users \
             (--users FILE, or {} / {})",
            opts.listen,
            users::WRITER_PASSWORD_ENV,
            users::READER_PASSWORD_ENV
        )));
    }
    // Users configured with an empty password are as open as `default`
    // (a set but empty FLAMEHOUSE_WRITER_PASSWORD made a password-less
    // writer on every interface).
    let open = users.without_password();
    if !open.is_empty() && !opts.listen.ip().is_loopback() {
        return Err(Error::Usage(format!(
            "refusing to listen on {} with users that have an empty password ({}): give them \
             passwords (--users FILE, or {} / {}), or listen on a loopback address",
            opts.listen,
            open.join(", "),
            users::WRITER_PASSWORD_ENV,
            users::READER_PASSWORD_ENV
        )));
    }
    let tls = tls_acceptor(opts)?;
    let engine = Arc::new(Engine::open(&opts.engine)?);
    // A data directory an older binary wrote: its stale views re-created,
    // so the views answer as this binary's CLI (a load would do the same);
    // left, with a warning, while it lacks a migration.
    let schema_opts = crate::storage::schema::SchemaOptions::default();
    if let crate::storage::schema::Refreshed::Pending(p) =
        crate::storage::schema::refresh_views(&*engine, &schema_opts)?
    {
        eprintln!(
            "flamehouse serve: warning: {}",
            crate::storage::schema::views_left_warning(&schema_opts.database, &p)
        );
    }
    let timezone = engine
        .query_tsv("SELECT timezone()")
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|_| "UTC".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(opts.max_concurrent_queries.max(1) + 4)
        .enable_all()
        .build()
        .map_err(|e| Error::Usage(format!("starting the server runtime: {e}")))?;
    let state = Arc::new(handler::State {
        engine: engine.clone(),
        users,
        opts: opts.clone(),
        permits: Arc::new(tokio::sync::Semaphore::new(
            opts.max_concurrent_queries.max(1),
        )),
        timezone,
    });
    let served = rt.block_on(run(state.clone(), tls));
    // Every query holds a slot: taking them all waits for queries whose
    // client went away, then nothing runs on the engine any more.
    rt.block_on(async {
        let _ = tokio::time::timeout(
            Duration::from_secs(opts.max_execution_time + 10),
            state
                .permits
                .acquire_many(opts.max_concurrent_queries.max(1) as u32),
        )
        .await;
    });
    engine.close();
    served
}

/// The TLS acceptor of `--tls-cert`/`--tls-key`, if given.
fn tls_acceptor(opts: &ServeOptions) -> Result<Option<tokio_rustls::TlsAcceptor>> {
    use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    let (Some(cert), Some(key)) = (&opts.tls_cert, &opts.tls_key) else {
        return Ok(None);
    };
    let bad = |path: &PathBuf, why: String| Error::File {
        path: path.clone(),
        cause: std::io::Error::other(why),
    };
    let chain: Vec<CertificateDer> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<std::result::Result<_, _>>())
        .map_err(|e| bad(cert, format!("reading the certificate: {e}")))?;
    if chain.is_empty() {
        return Err(bad(cert, "no PEM certificate in the file".into()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| bad(key, format!("reading the private key: {e}")))?;
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::Usage(format!("TLS setup: {e}")))?
    .with_no_client_auth()
    .with_single_cert(chain, key_der)
    .map_err(|e| bad(key, format!("the key does not fit the certificate: {e}")))?;
    Ok(Some(tokio_rustls::TlsAcceptor::from(Arc::new(cfg))))
}

async fn run(state: Arc<handler::State>, tls: Option<tokio_rustls::TlsAcceptor>) -> Result<()> {
    use hyper::server::conn::http1;
    use hyper_util::rt::TokioIo;
    use tokio::signal::unix::{signal, SignalKind};
    let addr = state.opts.listen;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Usage(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::Usage(format!("cannot listen on {addr}: {e}")))?;
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| Error::Usage(format!("installing the SIGTERM handler: {e}")))?;
    let mut int = signal(SignalKind::interrupt())
        .map_err(|e| Error::Usage(format!("installing the SIGINT handler: {e}")))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("flamehouse serve: listening on {scheme}://{local}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let st = state.clone();
                let svc = hyper::service::service_fn(move |req| {
                    let st = st.clone();
                    async move { Ok::<_, std::convert::Infallible>(handler::handle(st, req).await) }
                });
                let watcher = graceful.watcher();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let http = http1::Builder::new();
                    match tls {
                        None => {
                            let conn = http.serve_connection(TokioIo::new(stream), svc);
                            let _ = watcher.watch(conn).await;
                        }
                        Some(acceptor) => {
                            let hs = tokio::time::timeout(TLS_HANDSHAKE, acceptor.accept(stream));
                            if let Ok(Ok(stream)) = hs.await {
                                let conn = http.serve_connection(TokioIo::new(stream), svc);
                                let _ = watcher.watch(conn).await;
                            }
                        }
                    }
                });
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    drop(listener);
    eprintln!("flamehouse serve: shutting down (finishing requests in flight)");
    let wait = Duration::from_secs(state.opts.max_execution_time + 10);
    if tokio::time::timeout(wait, graceful.shutdown())
        .await
        .is_err()
    {
        eprintln!("flamehouse serve: requests still open after {wait:?}; closing");
    }
    Ok(())
}
