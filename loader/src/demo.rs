//! A generated demo profile and the outputs of the README's first command:
//! stack samples loaded into the engine, then the flame graph computed in
//! SQL by the flamehouse functions and written as folded text and SVG.
//!
//! The generator is also the benchmark's data source: it makes `distinct`
//! stacks of depth 10-40 that share prefixes like real call trees, and the
//! sample rows are drawn in SQL with a skewed (cubic) distribution over them.

use crate::error::{file_err, Error, Result};
use crate::storage::engine::Engine;
use crate::storage::ident::Ident;
use crate::storage::Backend;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Shape of a synthetic profile.
#[derive(Debug, Clone)]
pub struct SyntheticProfile {
    /// Number of sample rows. Default: 100,000.
    pub samples: u64,
    /// Number of distinct stacks. Default: 2,000.
    pub distinct: usize,
    /// Minimum stack depth. Default: 10.
    pub min_depth: usize,
    /// Maximum stack depth. Default: 40.
    pub max_depth: usize,
    /// Random seed; the same seed gives the same profile. Default: 42.
    pub seed: u64,
}

impl Default for SyntheticProfile {
    fn default() -> Self {
        SyntheticProfile {
            samples: 100_000,
            distinct: 2_000,
            min_depth: 10,
            max_depth: 40,
            seed: 42,
        }
    }
}

const MODULES: &[&str] = &[
    "server", "http", "json", "db", "cache", "auth", "render", "alloc", "io", "sched",
];
const VERBS: &[&str] = &[
    "handle", "parse", "read", "write", "lookup", "encode", "decode", "flush", "poll", "build",
    "merge", "sort", "hash", "compress", "send",
];

/// Generates `p.distinct` distinct stacks, root first.
pub fn synthetic_stacks(p: &SyntheticProfile) -> Vec<Vec<String>> {
    let mut rng = StdRng::seed_from_u64(p.seed);
    let mut seen = HashSet::new();
    let mut out: Vec<Vec<String>> = Vec::with_capacity(p.distinct);
    let frame = |rng: &mut StdRng| -> String {
        let m = MODULES[rng.gen_range(0..MODULES.len())];
        let v = VERBS[rng.gen_range(0..VERBS.len())];
        format!("{m}::{v}_{}", rng.gen_range(0..40))
    };
    while out.len() < p.distinct {
        let depth = rng.gen_range(p.min_depth..=p.max_depth);
        // Share a prefix with an earlier stack most of the time, as calls
        // from the same entry points do.
        let mut s: Vec<String> = if !out.is_empty() && rng.gen_bool(0.9) {
            let base = &out[rng.gen_range(0..out.len())];
            let cut = rng.gen_range(1..=base.len().min(depth));
            base[..cut].to_vec()
        } else {
            vec!["main".to_string()]
        };
        while s.len() < depth {
            s.push(frame(&mut rng));
        }
        if seen.insert(s.clone()) {
            out.push(s);
        }
    }
    out
}

/// Creates `table (ts DateTime, stack Array(String), value Int64)` filled
/// with `p.samples` rows drawn from [`synthetic_stacks`]; the distinct
/// stacks are kept in `{table}_stacks (id UInt32, stack Array(String))`.
/// The demo's samples table.
fn demo_table() -> Ident {
    Ident::new("demo_samples").expect("an identifier")
}

pub fn load_synthetic(engine: &Engine, table: &Ident, p: &SyntheticProfile) -> Result<()> {
    let stacks = synthetic_stacks(p);
    engine.execute(&format!("DROP TABLE IF EXISTS {table}"))?;
    engine.execute(&format!("DROP TABLE IF EXISTS {table}_stacks"))?;
    engine.execute(&format!(
        "CREATE TABLE {table}_stacks (id UInt32, stack Array(String)) ENGINE = MergeTree ORDER BY id"
    ))?;
    engine.execute(&format!(
        "CREATE TABLE {table} (ts DateTime, stack Array(String), value Int64) \
         ENGINE = MergeTree ORDER BY ts"
    ))?;
    // RowBinary through the backend's pipe path: data inline after `FORMAT`
    // can be cut by the engine without an error.
    let db = Ident::new(engine.query_tsv("SELECT currentDatabase()")?.trim())?;
    for (chunk_no, chunk) in stacks.chunks(5_000).enumerate() {
        let mut rows = Vec::new();
        for (i, s) in chunk.iter().enumerate() {
            let id = u32::try_from(chunk_no * 5_000 + i).expect("fewer than 2^32 stacks");
            rows.extend_from_slice(&id.to_le_bytes());
            crate::storage::rows::uleb(&mut rows, s.len() as u64);
            for f in s {
                crate::storage::rows::string(&mut rows, f);
            }
        }
        engine.insert_rowbinary(
            &db,
            &format!("{table}_stacks"),
            "id UInt32, stack Array(String)",
            &rows,
            &format!("{table}-stacks-{}-{chunk_no}", p.seed),
        )?;
    }
    expect_rows(engine, &format!("{table}_stacks"), stacks.len() as u64)?;
    // Skewed ids: u^3 piles most samples on a few hot stacks.
    engine.execute(&format!(
        "INSERT INTO {table} SELECT toDateTime('2026-01-01 10:00:00') + intDiv(n.number * 3600, {samples}), \
         s.stack, toInt64(1 + cityHash64(n.number, {seed}, 1) % 4096) \
         FROM (SELECT number, toUInt32(floor(pow(cityHash64(number, {seed}) / 18446744073709551616.0, 3) * {distinct})) AS id \
               FROM numbers({samples})) AS n \
         INNER JOIN {table}_stacks AS s ON s.id = n.id \
         SETTINGS max_threads = 2",
        samples = p.samples,
        seed = p.seed,
        distinct = stacks.len(),
    ))?;
    expect_rows(engine, table.as_str(), p.samples)
}

/// Fails unless `table` holds exactly `expected` rows.
fn expect_rows(engine: &Engine, table: &str, expected: u64) -> Result<()> {
    let got = engine.query_tsv(&format!("SELECT count() FROM {table}"))?;
    if got.trim().parse::<u64>().ok() == Some(expected) {
        Ok(())
    } else {
        Err(Error::Query {
            message: format!("{table}: {} rows stored, {expected} expected", got.trim()),
        })
    }
}

/// The per-stack pre-aggregation every flame-graph query starts with:
/// samples are summed per distinct stack in SQL (in parallel, by the
/// engine), so the UDF receives one tuple per distinct stack, not per
/// sample. Grouping by a 64-bit hash of the stack is ~30% faster than
/// grouping by the array itself; two different stacks would have to collide
/// in cityHash64 to merge (about 3e-8 for a million distinct stacks).
pub fn grouped_sql(table: &Ident, filter: &str) -> String {
    format!(
        "(SELECT any(st) AS stack, sum(value) AS v FROM \
         (SELECT stack AS st, value FROM {table} {filter}) GROUP BY cityHash64(st))"
    )
}

/// The SQL that folds `table`'s samples through the flamehouse functions.
pub fn fold_sql(table: &Ident, filter: &str) -> String {
    format!(
        "SELECT line, v FROM (SELECT stackFold(groupArray((stack, v))) AS folded FROM {}) \
         ARRAY JOIN folded.1 AS line, folded.2 AS v",
        grouped_sql(table, filter)
    )
}

/// How [`render_svg`] labels a flame graph.
#[derive(Debug, Clone)]
pub struct SvgOptions {
    /// The title above the graph. Default: `flamehouse`.
    pub title: String,
    /// The unit every tooltip names after the value (`1,234 bytes`): the
    /// views' `bytes` metric is `bytes`, `count` is `allocations`. Default:
    /// `samples` (inferno's).
    pub count_name: String,
    /// The text of the root (bottom) bar and its tooltip, where inferno
    /// leaves the bar empty and says `all`: pass the tree's own root label
    /// so the SVG and the Grafana panel agree. Default: `total` (the
    /// functions' default `root`).
    pub root: String,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            title: "flamehouse".into(),
            count_name: "samples".into(),
            root: "total".into(),
        }
    }
}

/// Renders folded lines (`a;b;c N`) to an SVG flame graph with inferno.
pub fn render_svg(lines: &[String], svg: &SvgOptions, path: &Path) -> Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = svg.title.clone();
    opts.count_name = svg.count_name.clone();
    let mut buf = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut buf)
        .map_err(|e| Error::Render(e.to_string()))?;
    let text = String::from_utf8(buf).map_err(|e| Error::Render(e.to_string()))?;
    let text = label_root(&text, &xml_escape(&svg.root));
    std::fs::write(path, text).map_err(file_err(path))
}

/// Names inferno's root frame: its tooltip `all (N unit, 100%)` becomes
/// `{root} (N unit, 100%)` and its empty text element gets `{root}` (the
/// page's script rebuilds bar texts from the tooltips on zoom, so both must
/// say the same). `root` is already XML-escaped.
fn label_root(svg: &str, root: &str) -> String {
    const ROOT_TITLE: &str = "<title>all (";
    let Some(at) = svg.find(ROOT_TITLE) else {
        return svg.to_string();
    };
    let after = at + ROOT_TITLE.len();
    let mut out = String::with_capacity(svg.len() + 2 * root.len());
    out.push_str(&svg[..at]);
    out.push_str("<title>");
    out.push_str(root);
    out.push_str(" (");
    let rest = &svg[after..];
    // The root's own (empty) text element closes its frame.
    match (rest.find("></text>"), rest.find("</g>")) {
        (Some(t), Some(g)) if t < g => {
            out.push_str(&rest[..t + 1]);
            out.push_str(root);
            out.push_str(&rest[t + 1..]);
        }
        _ => out.push_str(rest),
    }
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// What [`run_demo`] wrote.
#[derive(Debug)]
pub struct DemoOutput {
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Total value of the flame graph's root.
    pub total: i64,
    /// Number of tree rows.
    pub tree_rows: usize,
}

/// Loads the demo profile and writes its flame graph (folded + SVG), the
/// Grafana tree frame (TSV) and the diff of the first and second half hour.
pub fn run_demo(engine: &Engine, out_dir: &Path, p: &SyntheticProfile) -> Result<DemoOutput> {
    std::fs::create_dir_all(out_dir).map_err(file_err(out_dir))?;
    load_synthetic(engine, &demo_table(), p)?;
    let mut files = Vec::new();

    let folded = engine.query_tsv(&fold_sql(&demo_table(), ""))?;
    let lines: Vec<String> = folded.lines().map(|l| l.replacen('\t', " ", 1)).collect();
    let folded_path = out_dir.join("demo.folded");
    std::fs::write(&folded_path, lines.join("\n") + "\n").map_err(file_err(&folded_path))?;
    files.push(folded_path);
    let svg = out_dir.join("demo.svg");
    let labels = SvgOptions {
        title: "flamehouse demo: stackFold() in ClickHouse".into(),
        ..Default::default()
    };
    render_svg(&lines, &labels, &svg)?;
    files.push(svg);

    let tree = engine.query_tsv(&format!(
        "SELECT n.level, n.label, n.value, n.self FROM \
         (SELECT stackTreeWith(groupArray((stack, v)), map('max_nodes', '2000')) AS t FROM {}) \
         ARRAY JOIN t AS n",
        grouped_sql(&demo_table(), "")
    ))?;
    let tree_path = out_dir.join("demo-tree.tsv");
    std::fs::write(&tree_path, format!("level\tlabel\tvalue\tself\n{tree}"))
        .map_err(file_err(&tree_path))?;
    files.push(tree_path);
    let total = tree
        .lines()
        .next()
        .and_then(|l| l.split('\t').nth(2))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);

    let diff = engine.query_tsv(
        "WITH toDateTime('2026-01-01 10:30:00') AS mid SELECT n.* FROM \
         (SELECT stackDiffWith( \
            groupArrayIf((stack, v), half = 0), groupArrayIf((stack, v), half = 1), \
            map('max_nodes', '2000', 'normalize', '1')) AS t \
          FROM (SELECT stack, ts >= mid AS half, sum(value) AS v FROM demo_samples GROUP BY stack, half)) \
         ARRAY JOIN t AS n",
    )?;
    let diff_path = out_dir.join("demo-diff.tsv");
    std::fs::write(
        &diff_path,
        format!("level\tlabel\tvalue\tself\tvalueRight\tselfRight\n{diff}"),
    )
    .map_err(file_err(&diff_path))?;
    files.push(diff_path);
    Ok(DemoOutput {
        files,
        total,
        tree_rows: tree.lines().count(),
    })
}
