//! The schema package in `sql/schema/`: versioned, idempotent migrations
//! applied by `flamehouse init` (and before every load), for a single node or
//! a cluster.

use crate::error::Result;
use crate::storage::ident::Ident;
use crate::storage::Backend;
use flamehouse_udf::catalog;

/// Default database name.
pub const DEFAULT_DATABASE: &str = "flamehouse";

/// The migrations, in order: (version, name, SQL template).
pub const MIGRATIONS: &[(u32, &str, &str)] = &[
    (
        1,
        "tables",
        include_str!("../../../sql/schema/001_tables.sql"),
    ),
    (
        2,
        "views",
        include_str!("../../../sql/schema/002_views.sql"),
    ),
    (
        3,
        "rollup",
        include_str!("../../../sql/schema/003_rollup.sql"),
    ),
    (
        4,
        "checked_views",
        include_str!("../../../sql/schema/004_checked_views.sql"),
    ),
    (
        5,
        "exact_loads",
        include_str!("../../../sql/schema/005_exact_loads.sql"),
    ),
    (
        6,
        "continuous",
        include_str!("../../../sql/schema/006_continuous.sql"),
    ),
    (
        7,
        "continuous_rollups",
        include_str!("../../../sql/schema/007_continuous_rollups.sql"),
    ),
    (
        8,
        "span_ids",
        include_str!("../../../sql/schema/008_span_ids.sql"),
    ),
];

/// Days a day of continuous profiles is kept (the TTL of migration 6's
/// time-keyed tables, whole partitions dropped) unless changed with
/// [`crate::ingest::continuous::set_retention`]. 30 days: a month of
/// comparisons (this release against the last) at a cost a user sees
/// coming; Pyroscope and Coroot keep less by default.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;

/// [`DEFAULT_DATABASE`] as an identifier.
pub fn default_database() -> Ident {
    Ident::new(DEFAULT_DATABASE).expect("the default database is an identifier")
}

/// Where the schema goes.
#[derive(Debug, Clone)]
pub struct SchemaOptions {
    /// Database name. Default: `flamehouse`.
    pub database: Ident,
    /// Cluster name for `ON CLUSTER` and Replicated engines. Default: none
    /// (single node).
    pub cluster: Option<Ident>,
}

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            database: default_database(),
            cluster: None,
        }
    }
}

impl SchemaOptions {
    /// Fills the placeholders of a migration template.
    pub fn render(&self, sql: &str) -> String {
        let (on_cluster, replicated) = match &self.cluster {
            Some(c) => (format!("ON CLUSTER {c}"), "Replicated"),
            None => (String::new(), ""),
        };
        sql.replace("{db}", self.database.as_str())
            .replace(" {on_cluster}", format!(" {on_cluster}").trim_end())
            .replace("{replicated}", replicated)
            .replace("{retention_days}", &DEFAULT_RETENTION_DAYS.to_string())
    }
}

/// Applies every migration not yet recorded in `schema_migrations`, after
/// (re)creating the SQL wrapper functions. Returns the versions applied;
/// re-running applies nothing.
pub fn migrate(backend: &dyn Backend, opts: &SchemaOptions) -> Result<Vec<u32>> {
    for stmt in catalog::statements(&catalog::functions_sql()) {
        backend.execute(&stmt)?;
    }
    let first = opts.render(MIGRATIONS[0].2);
    let stmts = catalog::statements(&first);
    // Bootstrap: the database and the migrations table itself.
    backend.execute(&stmts[0])?;
    if let Some(t) = stmts.iter().find(|s| s.contains(".schema_migrations")) {
        backend.execute(t)?;
    }
    let applied = backend.query_tsv(&format!(
        "SELECT DISTINCT version FROM {}.schema_migrations",
        opts.database
    ))?;
    let applied: Vec<u32> = applied
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let mut done = Vec::new();
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        for stmt in catalog::statements(&opts.render(sql)) {
            backend.execute(&stmt)?;
        }
        backend.execute(&format!(
            "INSERT INTO {}.schema_migrations (version, name) VALUES ({version}, '{name}')",
            opts.database
        ))?;
        done.push(*version);
    }
    Ok(done)
}

/// Merges every MergeTree table of the schema into as few parts as it will
/// go (`OPTIMIZE TABLE ... FINAL`), returning (table, active parts before,
/// after). The embedded engine's merges only run while a process lives, and
/// loads pause them, so parts add up over many loads; this is the explicit
/// way to fold them.
pub fn compact(backend: &dyn Backend, opts: &SchemaOptions) -> Result<Vec<(String, u64, u64)>> {
    let db = &opts.database;
    let parts = |table: &str| -> Result<u64> {
        Ok(backend
            .query_tsv(&format!(
                "SELECT count() FROM system.parts WHERE active AND database = {} AND table = {}",
                crate::storage::sql_string(db.as_str()),
                crate::storage::sql_string(table)
            ))?
            .trim()
            .parse()
            .unwrap_or(0))
    };
    let tables = backend.query_tsv(&format!(
        "SELECT name FROM system.tables WHERE database = {} AND engine LIKE '%MergeTree' ORDER BY name",
        crate::storage::sql_string(db.as_str())
    ))?;
    let on_cluster = opts
        .cluster
        .as_ref()
        .map(|c| format!(" ON CLUSTER {c}"))
        .unwrap_or_default();
    let mut out = Vec::new();
    for table in tables.lines().map(str::trim).filter(|t| !t.is_empty()) {
        let before = parts(table)?;
        // Names read back from system.tables may be anything a user created
        // in the database: quoted, not trusted.
        backend.execute(&format!(
            "OPTIMIZE TABLE {db}.{}{on_cluster} FINAL",
            crate::storage::quote_ident(table)
        ))?;
        out.push((table.to_string(), before, parts(table)?));
    }
    Ok(out)
}
