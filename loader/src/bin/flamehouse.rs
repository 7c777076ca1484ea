//! `flamehouse`: the command line over the flamehouse library.

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use flamehouse::continuous_query::{QueryOptions, Selection, Selector};
use flamehouse::flame;
use flamehouse::ingest::continuous::{self, ContinuousOptions, ContinuousSummary};
use flamehouse::ingest::cp_batch::{self, BatchOptions, FileEvent};
use flamehouse::ingest::{self, LoadOptions, LoadSummary, Loaded};
use flamehouse::profiles;
use flamehouse::render;
use flamehouse::storage::engine::{Engine, EngineOptions};
use flamehouse::storage::schema::{self, SchemaOptions};
use flamehouse::storage::server::{ServerBackend, ServerOptions};
use flamehouse::storage::Backend;
use flamehouse::symbolize::{Granularity, SymbolizerOptions};
use flamehouse::Ident;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(version, about = "Flame graphs computed inside ClickHouse")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The embedded engine's data directory (commands that open it).
#[derive(clap::Args, Debug)]
struct DataArgs {
    /// Database directory of the embedded engine (when not given:
    /// ~/.local/share/flamehouse).
    #[arg(long, env = "FLAMEHOUSE_DATA")]
    data: Option<PathBuf>,
}

impl DataArgs {
    fn options(&self) -> EngineOptions {
        EngineOptions {
            data_dir: self.data.clone(),
            ..Default::default()
        }
    }
}

/// Where a command's SQL runs: the embedded engine on --data, or the server
/// given by --url.
#[derive(clap::Args, Debug)]
struct TargetArgs {
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    server: ServerArgs,
}

/// A ClickHouse server to use instead of the embedded engine.
#[derive(clap::Args, Debug)]
struct ServerArgs {
    /// URL of a ClickHouse server's HTTP interface (e.g.
    /// http://localhost:8123): the command then runs there instead of on
    /// the embedded engine.
    #[arg(long, env = "CLICKHOUSE_URL")]
    url: Option<String>,
    /// Server user.
    #[arg(long, env = "CLICKHOUSE_USER", default_value = flamehouse::storage::server::DEFAULT_USER)]
    user: String,
    /// Server password.
    #[arg(
        long,
        env = "CLICKHOUSE_PASSWORD",
        hide_env_values = true,
        default_value = ""
    )]
    password: String,
    /// The server session's default database, for names `sql` does not
    /// qualify (the flamehouse tables are in --database).
    #[arg(long, env = "CLICKHOUSE_DATABASE", default_value = flamehouse::storage::server::DEFAULT_DATABASE)]
    server_database: String,
    /// PEM file of CA certificates to trust for an https:// server, besides
    /// the system's (SSL_CERT_FILE and SSL_CERT_DIR are honoured too).
    #[arg(long, env = "CLICKHOUSE_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// Seconds one server request may take (0: no limit).
    #[arg(long, default_value_t = flamehouse::storage::server::DEFAULT_TIMEOUT.as_secs())]
    timeout: u64,
    /// Seconds connecting to the server may take.
    #[arg(long, default_value_t = flamehouse::storage::server::DEFAULT_CONNECT_TIMEOUT.as_secs())]
    connect_timeout: u64,
}

/// Options of ServerArgs that only mean something with --url.
const SERVER_ONLY: &[&str] = &[
    "user",
    "password",
    "server_database",
    "ca_cert",
    "timeout",
    "connect_timeout",
];

impl ServerArgs {
    /// The server's options, when --url (or CLICKHOUSE_URL) is set.
    fn options(&self) -> Option<ServerOptions> {
        self.url.as_ref().map(|url| ServerOptions {
            url: url.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            database: self.server_database.clone(),
            ca_cert: self.ca_cert.clone(),
            timeout: std::time::Duration::from_secs(self.timeout),
            connect_timeout: std::time::Duration::from_secs(self.connect_timeout.max(1)),
        })
    }
}

impl TargetArgs {
    /// The backend: the server given by --url, or the embedded engine.
    fn backend(&self) -> anyhow::Result<Box<dyn Backend>> {
        Ok(match self.server.options() {
            Some(o) => Box::new(ServerBackend::new(&o)?),
            None => Box::new(Engine::open(&self.data.options())?),
        })
    }
}

/// A `--granularity` value.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum GranularityArg {
    /// The function name only.
    Function,
    /// Function and source line: `parse_record (workload.c:42)`.
    Line,
}

/// The database and cluster of the flamehouse schema.
#[derive(clap::Args, Debug)]
struct SchemaArgs {
    /// Database holding the flamehouse schema (letters, digits and `_`).
    #[arg(long, default_value = schema::DEFAULT_DATABASE, value_parser = parse_database)]
    database: Ident,
    /// Cluster for ON CLUSTER / Replicated engines (needs --url: the
    /// embedded engine is one node).
    #[arg(long, value_parser = parse_cluster)]
    cluster: Option<Ident>,
}

fn parse_label(s: &str) -> Result<(String, String), flamehouse::Error> {
    continuous::parse_label(s)
}

fn parse_database(s: &str) -> Result<Ident, flamehouse::Error> {
    Ident::parse_as("database", s)
}

fn parse_cluster(s: &str) -> Result<Ident, flamehouse::Error> {
    Ident::parse_as("cluster", s)
}

impl SchemaArgs {
    fn options(&self) -> SchemaOptions {
        SchemaOptions {
            database: self.database.clone(),
            cluster: self.cluster.clone(),
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run SQL on the embedded engine with the flamehouse functions
    /// registered (or on the --url server), printing the result.
    Sql {
        /// Output format: any ClickHouse output format.
        #[arg(long, default_value = "TabSeparated")]
        format: String,
        /// The query.
        query: String,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Create or upgrade the schema (idempotent: re-running is a no-op).
    Init {
        #[command(flatten)]
        schema: SchemaArgs,
        /// Keep continuous profiles this many days (TTL on the cp_* tables,
        /// whole day partitions dropped). When not given, the retention in
        /// place is kept (a new schema's is 30 days).
        #[arg(long)]
        retention: Option<u32>,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Merge every table's parts (OPTIMIZE TABLE ... FINAL): loads on the
    /// embedded engine leave their parts for a long-running session to merge.
    Compact {
        #[command(flatten)]
        schema: SchemaArgs,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Load profiles (the schema is created if missing): MemHawk .binpb
    /// snapshot streams into the memory tables, pprof files (gzipped or
    /// raw) as continuous profiles; the format is detected from each file's
    /// content. Every file is tried: a bad one is reported (file and byte
    /// offset) and the others are still loaded; the exit status is non-zero
    /// if any failed. A continuous profile is stored whole or not at all.
    Load {
        /// Files to load.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Continuous profiles: the `service` label of every series (when
        /// not given: unknown_service; a pprof sample label `service` wins).
        #[arg(long)]
        service: Option<String>,
        /// Continuous profiles: a label `key=value` on every series
        /// (repeatable); pprof sample labels are added on top.
        #[arg(long = "label", value_parser = parse_label)]
        labels: Vec<(String, String)>,
        #[command(flatten)]
        schema: SchemaArgs,
        /// The files' format; when not given, each file's is detected from
        /// its first bytes.
        #[arg(long, value_enum)]
        format: Option<flamehouse::formats::Format>,
        /// Follow the files as they grow (resumes where the last load
        /// stopped), like `tail -F`: a file replaced at the same path
        /// (rotation) is followed and loaded as the process its header names;
        /// a file that shrinks is an error.
        #[arg(long)]
        watch: bool,
        /// With --watch: exit once no record was read and the file did not
        /// grow for this many seconds.
        #[arg(long, requires = "watch")]
        idle_exit: Option<u64>,
        /// Delete everything stored for each file's process first, then load
        /// it again: redoes a load made with a wrong --sysroot, --binary or
        /// --granularity (a plain re-run stores nothing new).
        #[arg(long)]
        replace: bool,
        /// Root directory where the profiled machine's files are found.
        #[arg(long)]
        sysroot: Option<PathBuf>,
        /// Frame labels.
        #[arg(long, value_enum, default_value_t = GranularityArg::Function)]
        granularity: GranularityArg,
        /// Path of the profiled program's binary on this machine (when not
        /// given: the profile's own path, under --sysroot).
        #[arg(long)]
        binary: Option<PathBuf>,
        /// Largest record (compressed) accepted, in MiB: a larger length
        /// prefix is reported as corruption.
        #[arg(long, default_value_t = flamehouse::formats::binpb::reader::DEFAULT_MAX_RECORD_LEN >> 20)]
        max_record_mib: u64,
        /// Largest decompressed record accepted, in MiB.
        #[arg(long, default_value_t = flamehouse::formats::binpb::reader::DEFAULT_MAX_DECOMPRESSED_LEN >> 20)]
        max_decompressed_mib: u64,
        /// Continuous profiles: store a batch (one insert per table for
        /// many files) once this many sample rows are pending.
        #[arg(long, default_value_t = cp_batch::DEFAULT_BATCH_ROWS)]
        batch_rows: usize,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Delete everything stored for a process (its samples, rollup, totals,
    /// stats, load progress and process row), so it can be loaded again.
    /// The shared frame and stack dictionaries are kept.
    Delete {
        /// Process id or name (the latest process of that name).
        #[arg(long)]
        process: String,
        #[command(flatten)]
        schema: SchemaArgs,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Render a flame-graph view to folded text or SVG.
    Flame {
        #[command(flatten)]
        request: flame::FlameRequest,
        /// Output file: `.svg` renders with inferno, anything else is folded text.
        #[arg(long)]
        out: PathBuf,
        /// Database holding the flamehouse schema (letters, digits and `_`).
        #[arg(long, default_value = schema::DEFAULT_DATABASE, value_parser = parse_database)]
        database: Ident,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Continuous profiles (loaded from pprof): flame graphs, diffs, top
    /// functions, sandwich, the list of profiles, export to pprof.
    Profile {
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Write the Grafana pack (provisioning and dashboards) into a directory.
    Grafana {
        /// Output directory (the repository keeps it in `grafana/`).
        #[arg(long, default_value = "grafana")]
        out: PathBuf,
        /// Database holding the flamehouse schema that the dashboards query
        /// (letters, digits and `_`).
        #[arg(long, default_value = schema::DEFAULT_DATABASE, value_parser = parse_database)]
        database: Ident,
    },
    /// Serve the data directory over ClickHouse's HTTP interface (for
    /// Grafana, ClickHouse clients and `load --url` while others read),
    /// until SIGTERM or SIGINT.
    Serve(flamehouse::serve::ServeArgs),
}

/// What a continuous-profile command reads: a profile type, a time range
/// and a label selector.
#[derive(clap::Args, Debug)]
struct SelectionArgs {
    /// Profile type, `sample:unit` as loaded (cpu:nanoseconds,
    /// alloc_space:bytes, contentions:count; `profile labels` lists them).
    #[arg(long = "type")]
    profile_type: String,
    /// Start of the range (inclusive): `YYYY-MM-DD hh:mm:ss` (UTC), `now`,
    /// `now-15m`, `now-1h`, `now-7d`.
    #[arg(long, default_value = profiles::DEFAULT_FROM)]
    from: String,
    /// End of the range (exclusive), same forms.
    #[arg(long, default_value = profiles::DEFAULT_TO)]
    to: String,
    /// Label selector, Prometheus style: `{service="api", version=~"1\\.4.*",
    /// host!="a", region!~"eu.*"}`; empty: every series.
    #[arg(long, default_value = "")]
    selector: String,
}

impl SelectionArgs {
    fn selection(&self, now: i64) -> anyhow::Result<Selection> {
        let from_ms = profiles::parse_time(&self.from, now)?;
        let to_ms = profiles::parse_time(&self.to, now)?;
        if to_ms <= from_ms {
            anyhow::bail!("--to ({}) must be after --from ({})", self.to, self.from);
        }
        Ok(Selection {
            profile_type: self.profile_type.clone(),
            from_ms,
            to_ms,
            selector: Selector::parse(&self.selector)?,
        })
    }
}

/// Where a continuous-profile command runs.
#[derive(clap::Args, Debug)]
struct ProfileTarget {
    /// Database holding the flamehouse schema (letters, digits and `_`).
    #[arg(long, default_value = schema::DEFAULT_DATABASE, value_parser = parse_database)]
    database: Ident,
    #[command(flatten)]
    target: TargetArgs,
}

impl ProfileTarget {
    fn query_options(&self) -> QueryOptions {
        QueryOptions {
            database: self.database.clone(),
            ..Default::default()
        }
    }
}

#[derive(Subcommand, Debug)]
enum ProfileCommand {
    /// Flame graph of a selection (`--out x.svg`, or folded text).
    Flame {
        #[command(flatten)]
        sel: SelectionArgs,
        /// Keep at most this many nodes (0: all).
        #[arg(long, default_value_t = 0)]
        max_nodes: u32,
        /// Output file: `.svg` renders with inferno, anything else is folded text.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Diff of two selections of one type: the baseline (--selector, --from,
    /// --to) against the comparison (--selector-b, --from-b, --to-b, each
    /// defaulting to the baseline's), computed in one scan. Folded output is
    /// `stack baseline comparison` (inferno's differential form).
    Diff {
        #[command(flatten)]
        sel: SelectionArgs,
        /// The comparison's selector.
        #[arg(long)]
        selector_b: Option<String>,
        /// The comparison's start.
        #[arg(long)]
        from_b: Option<String>,
        /// The comparison's end.
        #[arg(long)]
        to_b: Option<String>,
        /// Scale the baseline to the comparison's total (compare shapes,
        /// not volumes).
        #[arg(long)]
        normalize: bool,
        /// Keep at most this many nodes (0: all).
        #[arg(long, default_value_t = 0)]
        max_nodes: u32,
        /// Output file: `.svg` renders with inferno, anything else is folded text.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Top functions of a selection: self and total (recursion counted
    /// once), as shares of the whole selection, largest total first.
    Top {
        #[command(flatten)]
        sel: SelectionArgs,
        /// Only functions matching this regex (shares stay of the whole
        /// selection).
        #[arg(long)]
        function_regex: Option<String>,
        /// At most this many rows (0: all).
        #[arg(long, default_value_t = 0)]
        limit: u32,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Callers and callees of one function (a sandwich view).
    Sandwich {
        #[command(flatten)]
        sel: SelectionArgs,
        /// The function.
        #[arg(long)]
        function: String,
        /// Output of the callers tree (`.svg` or folded); rooted at the
        /// function, each level one caller further up.
        #[arg(long, required_unless_present = "callees")]
        callers: Option<PathBuf>,
        /// Output of the callees tree.
        #[arg(long)]
        callees: Option<PathBuf>,
        /// Keep at most this many nodes per tree (0: all).
        #[arg(long, default_value_t = 0)]
        max_nodes: u32,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// List the stored profiles of a type in a range, newest first.
    List {
        /// Profile type.
        #[arg(long = "type")]
        profile_type: String,
        /// Only this service.
        #[arg(long)]
        service: Option<String>,
        /// Start of the range.
        #[arg(long, default_value = profiles::DEFAULT_FROM)]
        from: String,
        /// End of the range.
        #[arg(long, default_value = profiles::DEFAULT_TO)]
        to: String,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Flame graph of one stored profile (its id from `profile list`).
    Open {
        /// The profile id (hex, as `load` and `profile list` print it).
        #[arg(long, value_parser = parse_profile_id)]
        id: u64,
        /// Profile type.
        #[arg(long = "type")]
        profile_type: String,
        /// Keep at most this many nodes (0: all).
        #[arg(long, default_value_t = 0)]
        max_nodes: u32,
        /// Output file: `.svg`, or folded text.
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Export a selection, its stacks merged, as a gzipped pprof profile
    /// (`go tool pprof` reads it).
    Export {
        #[command(flatten)]
        sel: SelectionArgs,
        /// Output file (`x.pb.gz`).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Label keys and values of a type in a range, with their series count
    /// (cardinality).
    Labels {
        /// Profile type.
        #[arg(long = "type")]
        profile_type: String,
        /// Start of the range.
        #[arg(long, default_value = profiles::DEFAULT_FROM)]
        from: String,
        /// End of the range.
        #[arg(long, default_value = profiles::DEFAULT_TO)]
        to: String,
        #[command(flatten)]
        at: ProfileTarget,
    },
}

impl ProfileCommand {
    fn target(&self) -> &TargetArgs {
        match self {
            ProfileCommand::Flame { at, .. }
            | ProfileCommand::Diff { at, .. }
            | ProfileCommand::Top { at, .. }
            | ProfileCommand::Sandwich { at, .. }
            | ProfileCommand::List { at, .. }
            | ProfileCommand::Open { at, .. }
            | ProfileCommand::Export { at, .. }
            | ProfileCommand::Labels { at, .. } => &at.target,
        }
    }
}

fn parse_profile_id(s: &str) -> Result<u64, String> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16)
        .map_err(|_| format!("{s:?} is not a profile id (16 hex digits)"))
}

/// An empty answer for a type nothing is stored of: say so on stderr,
/// naming the stored types (the answer itself stays empty, exit 0).
fn hint_unknown_type(
    engine: &dyn Backend,
    at: &ProfileTarget,
    profile_type: &str,
) -> anyhow::Result<()> {
    if let Some(h) = profiles::unknown_type_hint(engine, &at.query_options(), profile_type)? {
        eprintln!("flamehouse: {h}");
    }
    Ok(())
}

/// Writes a tree: `.svg` through inferno, else folded lines.
fn write_tree(
    nodes: &[profiles::Node],
    out: &std::path::Path,
    title: &str,
    profile_type: &str,
    with_root: bool,
    diff: bool,
) -> anyhow::Result<()> {
    let lines = profiles::folded(nodes, with_root, diff);
    if out.extension().is_some_and(|e| e == "svg") {
        let labels = render::SvgOptions {
            title: title.to_string(),
            count_name: profile_type
                .split_once(':')
                .map_or(profile_type, |(_, u)| u)
                .to_string(),
            root: nodes
                .first()
                .map_or_else(|| "total".into(), |n| n.label.clone()),
        };
        render::render_svg(&lines, &labels, out)?;
    } else {
        std::fs::write(
            out,
            lines.join("\n") + if lines.is_empty() { "" } else { "\n" },
        )
        .with_context(|| format!("writing {}", out.display()))?;
    }
    println!("wrote {} ({} stacks)", out.display(), lines.len());
    Ok(())
}

fn run_profile(command: ProfileCommand) -> anyhow::Result<()> {
    let now = profiles::now_ms();
    match command {
        ProfileCommand::Flame {
            sel,
            max_nodes,
            out,
            at,
        } => {
            let s = sel.selection(now)?;
            let engine = at.target.backend()?;
            let nodes = profiles::flame(&*engine, &at.query_options(), &s, max_nodes)?;
            if nodes.is_empty() {
                hint_unknown_type(&*engine, &at, &s.profile_type)?;
            }
            write_tree(&nodes, &out, &s.profile_type, &s.profile_type, false, false)
        }
        ProfileCommand::Diff {
            sel,
            selector_b,
            from_b,
            to_b,
            normalize,
            max_nodes,
            out,
            at,
        } => {
            let a = sel.selection(now)?;
            let b = SelectionArgs {
                profile_type: sel.profile_type.clone(),
                from: from_b.unwrap_or(sel.from.clone()),
                to: to_b.unwrap_or(sel.to.clone()),
                selector: selector_b.unwrap_or(sel.selector.clone()),
            }
            .selection(now)?;
            let engine = at.target.backend()?;
            let sql = flamehouse::continuous_query::diff_sql(
                &at.query_options(),
                &a,
                &b,
                max_nodes,
                normalize,
            )?;
            let nodes = profiles::nodes(&*engine, &sql)?;
            write_tree(&nodes, &out, &a.profile_type, &a.profile_type, false, true)
        }
        ProfileCommand::Top {
            sel,
            function_regex,
            limit,
            at,
        } => {
            let s = sel.selection(now)?;
            let engine = at.target.backend()?;
            let rows = profiles::top(
                &*engine,
                &at.query_options(),
                &s,
                function_regex.as_deref(),
                limit,
            )?;
            if rows.is_empty() {
                hint_unknown_type(&*engine, &at, &s.profile_type)?;
            }
            let mut o = std::io::stdout().lock();
            writeln!(o, "self\tself%\ttotal\ttotal%\tfunction")?;
            for r in rows {
                writeln!(
                    o,
                    "{}\t{:.2}%\t{}\t{:.2}%\t{}",
                    r.self_value,
                    r.self_share * 100.0,
                    r.total,
                    r.total_share * 100.0,
                    r.function
                )?;
            }
            Ok(())
        }
        ProfileCommand::Sandwich {
            sel,
            function,
            callers,
            callees,
            max_nodes,
            at,
        } => {
            let s = sel.selection(now)?;
            let engine = at.target.backend()?;
            let (up, down) =
                profiles::sandwich(&*engine, &at.query_options(), &s, &function, max_nodes)?;
            if let Some(p) = callers {
                write_tree(
                    &up,
                    &p,
                    &format!("callers of {function}"),
                    &s.profile_type,
                    true,
                    false,
                )?;
            }
            if let Some(p) = callees {
                write_tree(
                    &down,
                    &p,
                    &format!("callees of {function}"),
                    &s.profile_type,
                    true,
                    false,
                )?;
            }
            Ok(())
        }
        ProfileCommand::List {
            profile_type,
            service,
            from,
            to,
            at,
        } => {
            let (f, t) = (
                profiles::parse_time(&from, now)?,
                profiles::parse_time(&to, now)?,
            );
            let engine = at.target.backend()?;
            let sql = flamehouse::continuous_query::profile_list_sql(
                &at.query_options(),
                &profile_type,
                service.as_deref(),
                f,
                t,
            );
            let tsv = engine.query_tsv(&format!(
                "SELECT lower(hex(profile_id)), service, ts, duration_ns, total, sample_count, \
                 series_count, labels, source FROM ({sql})"
            ))?;
            let mut o = std::io::stdout().lock();
            writeln!(
                o,
                "profile\tservice\ttime\tduration_ns\ttotal\tsamples\tseries\tlabels\tsource"
            )?;
            o.write_all(tsv.as_bytes())?;
            Ok(())
        }
        ProfileCommand::Open {
            id,
            profile_type,
            max_nodes,
            out,
            at,
        } => {
            let engine = at.target.backend()?;
            let sql = flamehouse::continuous_query::profile_flame_sql(
                &at.query_options(),
                id,
                &profile_type,
                max_nodes,
            );
            let nodes = profiles::nodes(&*engine, &sql)?;
            if nodes.is_empty() {
                anyhow::bail!(
                    "no profile {id:016x} of type {profile_type} (see `flamehouse profile list`)"
                );
            }
            write_tree(
                &nodes,
                &out,
                &format!("profile {id:016x}"),
                &profile_type,
                false,
                false,
            )
        }
        ProfileCommand::Export { sel, out, at } => {
            let s = sel.selection(now)?;
            let engine = at.target.backend()?;
            let bytes = profiles::export_pprof(&*engine, &at.query_options(), &s)?;
            std::fs::write(&out, bytes).with_context(|| format!("writing {}", out.display()))?;
            println!("wrote {}", out.display());
            Ok(())
        }
        ProfileCommand::Labels {
            profile_type,
            from,
            to,
            at,
        } => {
            let (f, t) = (
                profiles::parse_time(&from, now)?,
                profiles::parse_time(&to, now)?,
            );
            let engine = at.target.backend()?;
            let sql = flamehouse::continuous_query::label_values_sql(
                &at.query_options(),
                &profile_type,
                f,
                t,
            );
            let mut o = std::io::stdout().lock();
            writeln!(o, "key\tvalue\tseries")?;
            o.write_all(engine.query_tsv(&sql)?.as_bytes())?;
            Ok(())
        }
    }
}

/// Options that would do nothing are errors: server options without a
/// server, --data with one, --cluster on the embedded engine. Only values
/// typed on the command line count: CLICKHOUSE_* and FLAMEHOUSE_DATA may be
/// set in the environment for other commands.
fn check_unused(matches: &clap::ArgMatches, cli: &Cli) -> anyhow::Result<()> {
    let Some((_, m)) = matches.subcommand() else {
        return Ok(());
    };
    let (m, target) = match &cli.command {
        Command::Profile { command } => match m.subcommand() {
            Some((_, sub)) => (sub, command.target()),
            None => return Ok(()),
        },
        c => (
            m,
            match c {
                Command::Sql { target, .. }
                | Command::Init { target, .. }
                | Command::Compact { target, .. }
                | Command::Load { target, .. }
                | Command::Delete { target, .. }
                | Command::Flame { target, .. } => target,
                _ => return Ok(()),
            },
        ),
    };
    let typed = |id: &str| {
        m.try_get_raw(id).ok().flatten().is_some()
            && m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
    };
    let flag = |id: &str| format!("--{}", id.replace('_', "-"));
    if target.server.url.is_none() {
        if let Some(id) = SERVER_ONLY.iter().find(|id| typed(id)) {
            anyhow::bail!("{} needs --url (it only applies to a server)", flag(id));
        }
        if typed("cluster") {
            anyhow::bail!("--cluster needs --url (the embedded engine is a single node)");
        }
    } else if typed("data") {
        anyhow::bail!("--data is the embedded engine's directory: it does nothing with --url");
    }
    Ok(())
}

fn print_continuous(s: &ContinuousSummary) {
    println!(
        "{}: profile {:016x} | types {} | {} sample rows | {} series | {} stacks | {} frames | symbolized {:.1}%",
        s.source,
        s.profile_id,
        s.types.join(", "),
        s.sample_rows,
        s.series,
        s.stacks,
        s.frames,
        s.symbolized_percent,
    );
    for m in &s.missing_modules {
        println!("  no symbols: {m}");
    }
}

fn print_summary(s: &LoadSummary) {
    let span = s
        .span_ms
        .map(|(a, b)| format!("{:.1} s", (b - a) as f64 / 1000.0))
        .unwrap_or_else(|| "-".into());
    let peak = s
        .peak
        .map(|(v, t)| format!("{v} bytes at {}", flame::format_utc_ms(t)))
        .unwrap_or_else(|| "-".into());
    println!(
        "{}: process {} | {} snapshots ({} new) | {} stacks | {} frames | {} sample rows | symbolized {:.1}% | span {span} | peak {peak}{}",
        s.source,
        s.process_id,
        s.snapshots,
        s.snapshots_stored,
        s.stacks,
        s.frames,
        s.sample_rows,
        s.symbolized_percent,
        if s.torn_tail { " | file ends in a partial record (still being written?)" } else { "" }
    );
    for m in &s.missing_modules {
        println!("  no symbols: {m}");
    }
}

/// An error already printed to stderr (one line per file that failed): the
/// exit status says it, nothing more is printed.
#[derive(Debug)]
struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reported above")
    }
}

impl std::error::Error for Reported {}

fn main() {
    if let Err(e) = run() {
        if e.downcast_ref::<Reported>().is_none() {
            eprintln!("flamehouse: {}", format!("{e:#}").replace('\n', " "));
        }
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    check_unused(&matches, &cli)?;
    match cli.command {
        Command::Sql {
            format,
            query,
            target,
        } => {
            let out = match target.server.options() {
                Some(o) => ServerBackend::new(&o)?.query(&query, &format)?,
                None => Engine::open(&target.data.options())?.query(&query, &format)?,
            };
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(&out).and_then(|_| stdout.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("writing stdout"),
            }
        }
        Command::Init {
            schema,
            retention,
            target,
        } => {
            let engine = target.backend()?;
            let applied = schema::migrate(&*engine, &schema.options())?;
            if applied.is_empty() {
                println!("schema {} is up to date", schema.database);
            } else {
                println!("schema {}: applied migrations {applied:?}", schema.database);
            }
            if let Some(days) = retention {
                continuous::set_retention(&*engine, &schema.options(), days)?;
            }
            match continuous::retention_days(&*engine, &schema.database)? {
                Some(d) => println!("continuous profiles kept {d} days"),
                None => println!("continuous profiles kept forever (no TTL)"),
            }
            Ok(())
        }
        Command::Compact { schema, target } => {
            let engine = target.backend()?;
            for (table, before, after) in schema::compact(&*engine, &schema.options())? {
                println!("{}.{table}: {before} -> {after} parts", schema.database);
            }
            Ok(())
        }
        Command::Load {
            files,
            service,
            labels,
            schema,
            format,
            watch,
            idle_exit,
            replace,
            sysroot,
            granularity,
            binary,
            max_record_mib,
            max_decompressed_mib,
            batch_rows,
            target,
        } => {
            let engine = target.backend()?;
            schema::migrate(&*engine, &schema.options())?;
            let granularity = match granularity {
                GranularityArg::Function => Granularity::Function,
                GranularityArg::Line => Granularity::FunctionFileLine,
            };
            let lo = LoadOptions {
                database: schema.database.clone(),
                symbolizer: SymbolizerOptions {
                    sysroot,
                    granularity,
                    ..Default::default()
                },
                main_binary: binary,
                read: flamehouse::formats::ReadOptions {
                    binpb: flamehouse::formats::binpb::ReaderOptions {
                        max_record_len: max_record_mib.saturating_mul(1 << 20),
                        max_decompressed_len: max_decompressed_mib.saturating_mul(1 << 20),
                    },
                    pprof: flamehouse::formats::pprof::DecodeOptions {
                        max_decompressed_bytes: max_decompressed_mib.saturating_mul(1 << 20),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                format,
                watch,
                idle_exit: idle_exit.map(Duration::from_secs),
                replace,
                ..Default::default()
            };
            let copts = ContinuousOptions {
                service,
                labels,
                ..Default::default()
            };
            let mut failed = 0usize;
            // Continuous profiles load in batches, many files per insert;
            // MemHawk streams (and files no format claims, for MemHawk's
            // message) one by one.
            let (batched, single): (Vec<PathBuf>, Vec<PathBuf>) =
                files.iter().cloned().partition(|f| {
                    let format = format.or_else(|| {
                        std::fs::File::open(f)
                            .ok()
                            .and_then(|file| flamehouse::formats::detect_open(&file, f).ok())
                    });
                    format.is_some_and(|f| f != flamehouse::formats::Format::Binpb)
                        && !watch
                        && !replace
                });
            if !batched.is_empty() {
                let copts = ContinuousOptions {
                    database: schema.database.clone(),
                    decode: lo.read.pprof,
                    format,
                    symbolizer: lo.symbolizer.clone(),
                    main_binary: lo.main_binary.clone(),
                    ..copts.clone()
                };
                let bo = BatchOptions {
                    batch_rows: batch_rows.max(1),
                    ..Default::default()
                };
                let s = cp_batch::load_files(&*engine, &batched, &copts, &bo, &mut |e| match e {
                    FileEvent::Stored(profiles) => {
                        for p in profiles {
                            print_continuous(p);
                        }
                    }
                    FileEvent::Failed(f, e) => {
                        let m = e.to_string().replace('\n', " ");
                        if e.names_file() {
                            eprintln!("flamehouse: {m}");
                        } else {
                            eprintln!("flamehouse: loading {}: {m}", f.display());
                        }
                    }
                    FileEvent::Expired {
                        source,
                        ts_ms,
                        retention_days,
                    } => eprintln!(
                        "flamehouse: warning: {source}: profile at {} is older than the retention \
                         ({retention_days} days): not stored (raise it with init --retention)",
                        flame::format_utc_ms(ts_ms)
                    ),
                })?;
                failed += s.failed;
                {
                    // Always, so scripts can read it.
                    println!(
                        "continuous: {} files, {} profiles ({} already stored, {} older than the retention, not stored), {} sample rows in {} batches{}",
                        s.files,
                        s.profiles,
                        s.already_stored,
                        s.expired,
                        s.sample_rows,
                        s.batches,
                        if s.failed > 0 {
                            format!(", {} files failed", s.failed)
                        } else {
                            String::new()
                        }
                    );
                }
            }
            for f in &single {
                let bar = if std::io::stderr().is_terminal() {
                    let b = indicatif::ProgressBar::new(0);
                    b.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                        )
                        .expect("valid template")
                        .progress_chars("=> "),
                    );
                    b.set_message(f.display().to_string());
                    Some(b)
                } else {
                    None
                };
                let started = std::time::Instant::now();
                let r = ingest::load_any(&*engine, f, &lo, &copts, &mut |p| {
                    if let Some(b) = &bar {
                        b.set_length(p.total_bytes.max(p.bytes));
                        b.set_position(p.bytes);
                        let rate = p.snapshots as f64 / started.elapsed().as_secs_f64().max(1e-3);
                        b.set_message(format!(
                            "{} {} snapshots ({rate:.0}/s)",
                            f.display(),
                            p.snapshots
                        ));
                    }
                });
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
                match r {
                    Ok(Loaded::Memory(r)) => {
                        for s in &r.followed {
                            print_summary(s);
                        }
                        print_summary(&r);
                    }
                    Ok(Loaded::Continuous(profiles)) => {
                        for p in &profiles {
                            print_continuous(p);
                        }
                    }
                    // One line per bad file, naming it (unless the error
                    // already does); the other files are still loaded.
                    Err(e) => {
                        failed += 1;
                        let m = e.to_string().replace('\n', " ");
                        if e.names_file() {
                            eprintln!("flamehouse: {m}");
                        } else {
                            eprintln!("flamehouse: loading {}: {m}", f.display());
                        }
                    }
                }
            }
            if failed > 0 {
                if files.len() > 1 {
                    eprintln!(
                        "flamehouse: {failed} of {} files failed to load",
                        files.len()
                    );
                }
                return Err(Reported.into());
            }
            Ok(())
        }
        Command::Delete {
            process,
            schema,
            target,
        } => {
            let engine = target.backend()?;
            schema::migrate(&*engine, &schema.options())?;
            let db = &schema.database;
            // An unknown process is an error that says how to list them.
            let p = flame::resolve_process(&*engine, db, &process)?;
            ingest::delete_process(&*engine, db, p.id)?;
            println!("deleted process {} ({}) from {db}", p.id, p.name);
            Ok(())
        }
        Command::Flame {
            request,
            out,
            database,
            target,
        } => {
            let engine = target.backend()?;
            let f = flame::flame(&*engine, &database, &request)?;
            if out.extension().is_some_and(|e| e == "svg") {
                let labels = render::SvgOptions {
                    title: f.title.clone(),
                    count_name: f.unit.to_string(),
                    root: f.root.clone(),
                };
                render::render_svg(&f.lines, &labels, &out)?;
            } else {
                std::fs::write(&out, f.lines.join("\n") + "\n")
                    .with_context(|| format!("writing {}", out.display()))?;
            }
            println!("wrote {} ({} stacks)", out.display(), f.lines.len());
            Ok(())
        }
        Command::Profile { command } => run_profile(command),
        Command::Grafana { out, database } => {
            for (rel, text) in flamehouse::grafana::files(&database) {
                let p = out.join(rel);
                if let Some(d) = p.parent() {
                    std::fs::create_dir_all(d)
                        .with_context(|| format!("creating {}", d.display()))?;
                }
                std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
                println!("wrote {}", p.display());
            }
            Ok(())
        }
        Command::Serve(args) => Ok(flamehouse::serve::serve(&args.options())?),
    }
}
