//! The server backend: the same [`Backend`] over ClickHouse's HTTP interface,
//! through the official `clickhouse` crate, for users who run a ClickHouse
//! server.
//!
//! The rest of the loader is synchronous, so the backend owns a
//! current-thread tokio runtime and blocks on each request.
//!
//! Inserts send the bytes that [`crate::storage::rows::RowBinary::encode`] produced,
//! unchanged, as `INSERT INTO db.table (columns) FORMAT RowBinary` through the
//! crate's pre-formatted insert ([`clickhouse::Client::insert_formatted_with`]),
//! LZ4-compressed in ClickHouse's block framing. The embedded engine reads the
//! very same bytes with `file(..., RowBinary, structure)`, so there is one
//! encoding of a row (in `rows.rs`) for both backends, and what the embedded
//! tests check is what a server receives. (The crate's typed inserts,
//! `client.insert::<T>()`, would serialize the row structs a second time
//! through serde, and by default first fetch `DESCRIBE TABLE` for every
//! table.)
//!
//! `https://` URLs are served by rustls (ring): the system's CA certificates
//! (`SSL_CERT_FILE` / `SSL_CERT_DIR` are honoured) plus an optional PEM file
//! of the user's own. Connecting gives up after
//! [`ServerOptions::connect_timeout`], and every request after
//! [`ServerOptions::timeout`] (ClickHouse's own send/receive timeout is 300 s).
//!
//! Every insert carries the settings `insert_deduplication_token` and
//! `deduplicate_blocks_in_dependent_materialized_views = 1`, as the embedded
//! backend's inserts do, so a batch sent again is stored once, and
//! `insert_distributed_sync = 1` (the alias of
//! `distributed_foreground_insert` since 23.10, kept for older servers), so
//! an insert into a cluster's Distributed table returns once its rows are
//! on their shards.

use crate::error::{Error, Result};
use crate::storage::ident::Ident;
use crate::storage::{column_names, Backend, Insert};
use clickhouse::{Client, Compression};
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

/// Default server URL (`CLICKHOUSE_URL`): ClickHouse's HTTP port on this
/// machine.
pub const DEFAULT_URL: &str = "http://localhost:8123";
/// Default user (`CLICKHOUSE_USER`).
pub const DEFAULT_USER: &str = "default";
/// Default session database (`CLICKHOUSE_DATABASE`).
pub const DEFAULT_DATABASE: &str = "default";
/// Default request timeout: ClickHouse's own `send_timeout` /
/// `receive_timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default size of the uncompressed pieces an insert body is cut into (each
/// one LZ4 block on the wire).
pub const DEFAULT_INSERT_CHUNK: usize = 1 << 20;

/// Where the server is and who connects.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// HTTP or HTTPS URL of the server (`host:port` means
    /// `http://host:port`). Default: [`DEFAULT_URL`].
    pub url: String,
    /// User. Default: [`DEFAULT_USER`].
    pub user: String,
    /// Password. Default: empty.
    pub password: String,
    /// The session's default database, for names the SQL does not qualify
    /// (the loader's own SQL always names the flamehouse database). Default:
    /// [`DEFAULT_DATABASE`].
    pub database: String,
    /// A PEM file of CA certificates trusted for `https://`, besides the
    /// system's. Default: none.
    pub ca_cert: Option<PathBuf>,
    /// How long one request (a query, or one piece of an insert) may take;
    /// zero means no limit. Default: [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// How long connecting may take. Default: [`DEFAULT_CONNECT_TIMEOUT`].
    pub connect_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            url: DEFAULT_URL.to_string(),
            user: DEFAULT_USER.to_string(),
            password: String::new(),
            database: DEFAULT_DATABASE.to_string(),
            ca_cert: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("url", &self.url)
            .field("user", &self.user)
            .field(
                "password",
                &if self.password.is_empty() { "" } else { "***" },
            )
            .field("database", &self.database)
            .field("ca_cert", &self.ca_cert)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// A ClickHouse server reached over HTTP.
#[derive(Debug)]
pub struct ServerBackend {
    client: Client,
    url: String,
    rt: tokio::runtime::Runtime,
    insert_chunk: usize,
    timeout: Duration,
}

impl ServerBackend {
    /// A backend for the server in `opts`. Nothing is sent until the first
    /// statement (so a wrong URL shows up as the first statement's error).
    pub fn new(opts: &ServerOptions) -> Result<ServerBackend> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Query {
                message: format!("starting the HTTP client runtime: {e}"),
            })?;
        // `host:port` without a scheme means plain HTTP.
        let url = if opts.url.contains("://") {
            opts.url.clone()
        } else {
            format!("http://{}", opts.url)
        };
        let client = {
            // The connector needs the runtime (for its timers) when it is
            // built.
            let _guard = rt.enter();
            http_client(opts)?
        };
        let mut client = client
            .with_url(url.as_str())
            .with_user(opts.user.as_str())
            .with_compression(Compression::Lz4);
        if !opts.password.is_empty() {
            client = client.with_password(opts.password.as_str());
        }
        if !opts.database.is_empty() {
            client = client.with_database(opts.database.as_str());
        }
        Ok(ServerBackend {
            client,
            url,
            rt,
            insert_chunk: DEFAULT_INSERT_CHUNK,
            timeout: opts.timeout,
        })
    }

    /// Runs `fut` to completion on the backend's runtime, within the request
    /// timeout.
    fn run<T>(
        &self,
        fut: impl Future<Output = std::result::Result<T, clickhouse::error::Error>>,
    ) -> Result<T> {
        self.rt.block_on(async {
            if self.timeout.is_zero() {
                return fut.await.map_err(|e| self.err(e));
            }
            match tokio::time::timeout(self.timeout, fut).await {
                Ok(r) => r.map_err(|e| self.err(e)),
                Err(_) => Err(Error::Query {
                    message: format!(
                        "ClickHouse server at {}: no answer within {} s (--timeout)",
                        self.url,
                        self.timeout.as_secs_f64()
                    ),
                }),
            }
        })
    }

    /// Cuts insert bodies into pieces of at most `bytes` (uncompressed; each
    /// piece is one compressed block). Default: [`DEFAULT_INSERT_CHUNK`].
    #[must_use]
    pub fn with_insert_chunk(mut self, bytes: usize) -> ServerBackend {
        self.insert_chunk = bytes.max(1);
        self
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Runs one statement and returns its output in `format` (any ClickHouse
    /// output format; a `FORMAT` clause in `sql` wins, as on the server).
    pub fn query(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        // `query_raw`: sent verbatim (`?` in the SQL is not a bind
        // placeholder).
        let mut cursor = self
            .client
            .query_raw(sql)
            .fetch_bytes(format)
            .map_err(|e| self.err(e))?;
        let bytes = self.run(cursor.collect())?;
        Ok(bytes.to_vec())
    }

    fn err(&self, e: clickhouse::error::Error) -> Error {
        // The causes too: "client error (Connect)" alone does not say that
        // the certificate was refused or the host not found.
        let mut msg = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            let c_msg = c.to_string();
            if !msg.contains(&c_msg) {
                msg = format!("{msg}: {c_msg}");
            }
            cause = c.source();
        }
        let msg = msg.trim();
        // Server exceptions speak for themselves; say where a network error
        // happened.
        let message = if msg.contains("Code: ") || msg.contains("DB::Exception") {
            msg.replace('\n', " ")
        } else {
            format!(
                "ClickHouse server at {}: {}",
                self.url,
                msg.replace('\n', " ")
            )
        };
        Error::Query { message }
    }
}

impl Backend for ServerBackend {
    fn execute(&self, sql: &str) -> Result<()> {
        self.run(self.client.query_raw(sql).execute())
    }

    fn query_tsv(&self, sql: &str) -> Result<String> {
        let out = self.query(sql, "TabSeparated")?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn insert_rowbinary(
        &self,
        db: &Ident,
        table: &str,
        structure: &str,
        rows: &[u8],
        token: &str,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let table = Ident::parse_as("table", table)?;
        self.run(self.insert_block(db, &table, structure, rows, token))
    }

    /// The blocks at once, each its own request on the client's pooled
    /// connections (the first failure is returned; the others still end).
    fn insert_rowbinary_all(&self, db: &Ident, inserts: &[Insert]) -> Result<()> {
        let tables = inserts
            .iter()
            .map(|i| Ident::parse_as("table", i.table))
            .collect::<Result<Vec<_>>>()?;
        self.run(async {
            let all = inserts
                .iter()
                .zip(&tables)
                .filter(|(i, _)| !i.rows.is_empty())
                .map(|(i, table)| self.insert_block(db, table, i.structure, &i.rows, &i.token));
            futures_util::future::join_all(all)
                .await
                .into_iter()
                .collect::<std::result::Result<Vec<()>, _>>()
                .map(|_| ())
        })
    }
}

impl ServerBackend {
    /// One insert request of `rows` (RowBinary) into `db.table`.
    async fn insert_block(
        &self,
        db: &Ident,
        table: &Ident,
        structure: &str,
        rows: &[u8],
        token: &str,
    ) -> std::result::Result<(), clickhouse::error::Error> {
        let sql = insert_sql(db, table, structure);
        let mut insert = self
            .client
            .insert_formatted_with(sql)
            .with_setting("insert_deduplication_token", token)
            .with_setting("deduplicate_blocks_in_dependent_materialized_views", "1")
            // Into a cluster's Distributed cp_samples: the rows are on their
            // shards when the insert returns (not queued on this node), so
            // the next batch's lookups see them and a failure is reported.
            .with_setting("insert_distributed_sync", "1");
        // One request; the body is a stream of compressed blocks (a row may
        // span two blocks: the server decompresses the stream before parsing
        // it).
        for chunk in rows.chunks(self.insert_chunk) {
            insert.send(bytes::Bytes::copy_from_slice(chunk)).await?;
        }
        insert.end().await
    }
}

/// A client over plain HTTP or rustls (the system's CA certificates and
/// `opts.ca_cert`), with the connect timeout.
fn http_client(opts: &ServerOptions) -> Result<Client> {
    use hyper_util::client::legacy::{connect::HttpConnector, Client as HyperClient};
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut http = HttpConnector::new();
    http.set_keepalive(Some(Duration::from_secs(60)));
    http.set_connect_timeout(Some(opts.connect_timeout));
    http.enforce_http(false);
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped (a plain-HTTP user must
    // not fail for them); a server then shows as untrusted.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = &opts.ca_cert {
        let bad = |why: String| Error::File {
            path: path.clone(),
            cause: std::io::Error::other(why),
        };
        let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(format!("reading CA certificates: {e}")))?
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| bad(format!("reading CA certificates: {e}")))?;
        if certs.is_empty() {
            return Err(bad("no PEM certificate in the file".into()));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| bad(format!("CA certificate: {e}")))?;
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::Query {
        message: format!("TLS setup: {e}"),
    })?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    // ClickHouse closes idle connections after 3 s (keep_alive_timeout).
    Ok(Client::with_http_client(
        HyperClient::builder(hyper_util::rt::TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(2))
            .build(https),
    ))
}

/// The statement of an insert: the columns named in encoding order, data in
/// RowBinary after it.
pub fn insert_sql(db: &Ident, table: &Ident, structure: &str) -> String {
    format!(
        "INSERT INTO {db}.{table} ({}) FORMAT RowBinary",
        column_names(structure).join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::rows::{RowBinary, SampleRow};

    #[test]
    fn insert_statement_names_columns_in_encoding_order() {
        assert_eq!(
            insert_sql(
                &Ident::new("fh").unwrap(),
                &Ident::new(SampleRow::TABLE).unwrap(),
                SampleRow::STRUCTURE
            ),
            "INSERT INTO fh.samples (process_id, ts, stack_id, size, active, overhead, \
             total_count, total_bytes, size_delta, active_delta, count_delta, bytes_delta) \
             FORMAT RowBinary"
        );
    }

    #[test]
    fn debug_hides_the_password() {
        let o = ServerOptions {
            password: "hunter2".into(),
            ..Default::default()
        };
        let s = format!("{o:?}");
        assert!(!s.contains("hunter2"), "{s}");
        let b = ServerBackend::new(&o).unwrap();
        assert!(!format!("{b:?}").contains("hunter2"));
    }

    #[test]
    fn unreachable_server_names_the_url() {
        // Port 9 (discard) on loopback: nothing listens there.
        let b = ServerBackend::new(&ServerOptions {
            url: "http://127.0.0.1:9".into(),
            ..Default::default()
        })
        .unwrap();
        let e = b.query_tsv("SELECT 1").unwrap_err().to_string();
        assert!(e.contains("http://127.0.0.1:9"), "{e}");
        let b = ServerBackend::new(&ServerOptions {
            url: "127.0.0.1:9".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(b.url(), "http://127.0.0.1:9");
    }
}
