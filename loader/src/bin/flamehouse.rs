//! `flamehouse`: the command line over the flamehouse library.

/// mimalloc: decoding profiles allocates many small strings and vectors,
/// and glibc's malloc and free were about a third of a pprof load's
/// decoding time (a load of 1,800 pprof files read 28% faster with it).
/// The embedded engine keeps its own allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use flamehouse::continuous_query::QueryOptions;
use flamehouse::flame;
use flamehouse::formats;
use flamehouse::ingest::continuous::{self, ContinuousOptions, ContinuousSummary};
use flamehouse::ingest::cp_batch::{self, BatchOptions, FileEvent};
use flamehouse::ingest::{self, stdin, LoadOptions, LoadSummary, Loaded};
use flamehouse::profiles::{self, plural};
use flamehouse::render;
use flamehouse::storage::engine::{Engine, EngineOptions};
use flamehouse::storage::schema::{self, SchemaOptions};
use flamehouse::storage::server::{ServerBackend, ServerOptions};
use flamehouse::storage::Backend;
use flamehouse::symbolize::{Granularity, SymbolizerOptions};
use flamehouse::Ident;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A line of the command's report on stdout. A reader that went away
/// (`load ... | head -1`) loses the rest of the report, not the work: the
/// command goes on (a load stores every file) and exits as it would have
/// (`println!` panicked there).
macro_rules! say {
    ($($arg:tt)*) => {{
        if let Err(e) = writeln!(std::io::stdout().lock(), $($arg)*) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                eprintln!("flamehouse: writing stdout: {e}");
            }
        }
    }};
}

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

    /// [`TargetArgs::backend`] for a command that only reads: an embedded
    /// data directory that does not exist is an error, not made (a typo
    /// in --data left a new engine directory behind).
    fn existing_backend(&self) -> anyhow::Result<Box<dyn Backend>> {
        if self.server.options().is_none() {
            let dir = self
                .data
                .options()
                .data_dir
                .unwrap_or_else(flamehouse::storage::engine::default_data_dir);
            if !dir.exists() {
                anyhow::bail!(
                    "no data directory at {}: nothing is loaded there yet (`flamehouse load` or \
                     `flamehouse init` makes it; check --data)",
                    dir.display()
                );
            }
            // An empty directory: the engine would leave its files there
            // for a read that can only fail.
            if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_none()) {
                anyhow::bail!(
                    "{} is empty: nothing is loaded there yet (`flamehouse load` or `flamehouse \
                     init` fills it; check --data)",
                    dir.display()
                );
            }
        }
        self.backend()
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
    /// Cluster for ON CLUSTER, Replicated engines and the continuous
    /// samples sharded by series behind Distributed tables (needs --url,
    /// or `init --print`: the embedded engine is one node).
    #[arg(long, value_parser = parse_cluster)]
    cluster: Option<Ident>,
}

fn parse_label(s: &str) -> Result<(String, String), flamehouse::Error> {
    continuous::parse_label(s)
}

fn parse_database(s: &str) -> Result<Ident, flamehouse::Error> {
    Ident::database(s)
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
        /// place is kept (a new schema's is 30 days). At most 36,500 (a TTL past
        /// the engine's last Date, 2149-06-06, would wrap and drop everything).
        #[arg(long, value_name = "DAYS", value_parser = parse_retention, allow_negative_numbers = true)]
        retention: Option<u32>,
        /// Apply a --retention that expires stored profiles: the engine
        /// applies a changed TTL to the days already stored, so they are
        /// deleted at once. Without it such a retention is refused, naming
        /// what it would delete, and the retention stays as it was.
        #[arg(long, requires = "retention")]
        expire_now: bool,
        /// Print the SQL that builds a new database (every migration
        /// rendered for --database and --cluster, then --retention's
        /// ALTERs) and run nothing: a cluster's DDL reviewed before it runs.
        #[arg(long)]
        print: bool,
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
    /// snapshot streams into the memory tables; pprof files (gzipped or
    /// raw), `perf script` text, bpftrace map output and folded stacks as
    /// continuous profiles; the format is detected from each file's
    /// content. Every file is tried: a bad one is reported (file and byte
    /// offset) and the others are still loaded; the exit status is non-zero
    /// if any failed. A named pipe or socket among the files is refused
    /// before anything is loaded (opening one can wait forever; give it as
    /// `-`). A continuous profile is stored whole or not at all.
    Load {
        /// Files to load; `-` is standard input (`perf script | flamehouse
        /// load -`), copied to a temporary file named `stdin` first (its
        /// time is when the input ended, unless --time).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Continuous profiles: the `service` label of every series (when
        /// not given: unknown_service; a pprof sample label `service` wins).
        #[arg(long, value_parser = parse_service)]
        service: Option<String>,
        /// Continuous profiles: a label `key=value` on every series
        /// (repeatable); pprof sample labels are added on top.
        #[arg(long = "label", value_parser = parse_label)]
        labels: Vec<(String, String)>,
        /// Continuous profiles: pprof sample label keys holding span ids
        /// (comma-separated), stored per sample (`{span_id="..."}` selects
        /// them), never as series labels; `''`: none.
        #[arg(long, value_delimiter = ',', default_value = "span_id", value_parser = parse_span_label)]
        span_labels: Vec<String>,
        #[command(flatten)]
        schema: SchemaArgs,
        /// The files' format; when not given, each file's is detected from
        /// its first bytes.
        #[arg(long, value_enum)]
        format: Option<flamehouse::formats::Format>,
        #[command(flatten)]
        text: flamehouse::formats::text_args::TextArgs,
        /// Follow the files as they grow (resumes where the last load
        /// stopped), like `tail -F`: a file replaced at the same path
        /// (rotation) is followed and loaded as the process its header names;
        /// a file that shrinks is an error; a file not created yet is waited
        /// for.
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
        #[arg(long, default_value_t = flamehouse::formats::binpb::reader::DEFAULT_MAX_RECORD_LEN >> 20,
              value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
        max_record_mib: u64,
        /// Largest decompressed MemHawk record, and largest decompressed
        /// pprof profile, accepted, in MiB.
        #[arg(long, default_value_t = flamehouse::formats::binpb::reader::DEFAULT_MAX_DECOMPRESSED_LEN >> 20,
              value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
        max_decompressed_mib: u64,
        /// Most entries of one pprof profile or MemHawk snapshot record
        /// (samples, stack traces, locations, strings, labels, ...),
        /// counted before decoding: decoded, an entry takes ~100 bytes
        /// however few it has on the wire.
        #[arg(long, default_value_t = flamehouse::formats::wire::DEFAULT_MAX_ENTRIES,
              value_parser = clap::value_parser!(u64).range(1..))]
        max_entries: u64,
        /// The most frames of one file's stacks, all counted (pprof: its
        /// samples' location ids, counted before decoding; perf script,
        /// bpftrace, folded: the frames of its distinct stacks; MemHawk:
        /// the stack traces one snapshot record defines); each costs ~16
        /// bytes on its way to the engine. A file of more is refused,
        /// never cut.
        #[arg(long, default_value_t = flamehouse::formats::wire::DEFAULT_MAX_STACK_FRAMES,
              value_parser = clap::value_parser!(u64).range(1..))]
        max_stack_frames: u64,
        /// The most frames of one stack, every format (profilers stop at
        /// 128 to 2048); a file with a deeper one is refused.
        #[arg(long, default_value_t = flamehouse::formats::wire::DEFAULT_MAX_STACK_DEPTH,
              value_parser = clap::value_parser!(u64).range(1..))]
        max_stack_depth: u64,
        /// pprof: the most MiB its names and labels may take as decoded,
        /// each string counted every time a function, mapping or sample
        /// label names it (checked before they are resolved).
        #[arg(long, value_name = "MIB", default_value_t = flamehouse::formats::pprof::DEFAULT_MAX_NAMES_BYTES >> 20,
              value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
        max_names_mib: u64,
        /// Continuous profiles: the most series (distinct label sets) of
        /// one profile; a label with a value per sample makes one per
        /// sample. A profile of more is refused.
        #[arg(long, default_value_t = continuous::DEFAULT_MAX_SERIES,
              value_parser = clap::value_parser!(u64).range(1..))]
        max_series: u64,
        /// Continuous profiles: the longest name one frame (function, file,
        /// module) or label may have, in KiB; a profile holding a longer one
        /// is refused naming it, before it reaches the engine.
        #[arg(long, value_name = "KIB", default_value_t = continuous::DEFAULT_MAX_NAME_BYTES >> 10,
              value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
        max_name_kib: u64,
        /// Continuous profiles: store a batch (one insert per table for
        /// many files) once this many sample rows are pending (the first
        /// batch at 1/32 of it, each next twice the last: storing starts
        /// while the next files are read).
        #[arg(long, default_value_t = cp_batch::DEFAULT_BATCH_ROWS, value_parser = parse_batch_rows)]
        batch_rows: usize,
        /// Continuous profiles: how far the file readers may read ahead of
        /// the batches being stored, in MiB of decoded rows over all
        /// readers (a reader holding less than its share reads its next
        /// file whatever its size).
        #[arg(long, value_name = "MIB",
              default_value_t = (cp_batch::DEFAULT_READ_AHEAD_BYTES >> 20) as u64,
              value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
        read_ahead_mib: u64,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Delete everything stored for a process (its samples, rollup, totals,
    /// stats, load progress and process row), so it can be loaded again.
    /// The shared frame and stack dictionaries are kept.
    Delete {
        /// Process: its process_id, pid or name (of several, the one
        /// started last, with a note).
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
        /// Output file: `.svg` renders with inferno, anything else is folded
        /// text; `-` writes the folded text to standard output.
        #[arg(long)]
        out: PathBuf,
        /// Database holding the flamehouse schema (letters, digits and `_`).
        #[arg(long, default_value = schema::DEFAULT_DATABASE, value_parser = parse_database)]
        database: Ident,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Continuous profiles (loaded from pprof, perf script, bpftrace or
    /// folded stacks): flame graphs, diffs, top functions, sandwich,
    /// series over time, the list of profiles, export to pprof.
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
        args: profiles::FlameArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Diff of two selections of one type: the baseline (--selector, --from,
    /// --to) against the comparison (--selector-b, --from-b, --to-b, each
    /// defaulting to the baseline's), computed in one scan. Folded output is
    /// `stack baseline comparison` (inferno's differential form).
    Diff {
        #[command(flatten)]
        args: profiles::DiffArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Top functions of a selection: self and total (recursion counted
    /// once), as shares of the whole selection, largest total first. A
    /// tab-separated table; a tab, newline or backslash in a function
    /// name is escaped as TSV does (`\t`, `\n`, `\\`).
    Top {
        #[command(flatten)]
        args: profiles::TopArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Callers and callees of one function (a sandwich view).
    Sandwich {
        #[command(flatten)]
        args: profiles::SandwichArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// List the stored profiles of a type in a range, newest first.
    List {
        #[command(flatten)]
        args: profiles::ListArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Flame graph of one stored profile (its id from `profile list`).
    Open {
        #[command(flatten)]
        args: profiles::OpenArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Export a selection, its stacks merged, as one gzipped pprof profile
    /// with every selected type (`go tool pprof` reads it; files and lines
    /// where the stored frames have them).
    Export {
        #[command(flatten)]
        args: profiles::ExportArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Values over time: one series per value of a label (--by) or per
    /// function (--function, repeatable), as a table time, series, value.
    Series {
        #[command(flatten)]
        args: profiles::SeriesArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
    /// Label keys and values of a type in a range, with their series count
    /// (cardinality).
    Labels {
        #[command(flatten)]
        args: profiles::LabelsArgs,
        #[command(flatten)]
        at: ProfileTarget,
    },
}

impl ProfileCommand {
    fn at(&self) -> &ProfileTarget {
        match self {
            ProfileCommand::Flame { at, .. }
            | ProfileCommand::Diff { at, .. }
            | ProfileCommand::Top { at, .. }
            | ProfileCommand::Series { at, .. }
            | ProfileCommand::Sandwich { at, .. }
            | ProfileCommand::List { at, .. }
            | ProfileCommand::Open { at, .. }
            | ProfileCommand::Export { at, .. }
            | ProfileCommand::Labels { at, .. } => at,
        }
    }

    fn target(&self) -> &TargetArgs {
        &self.at().target
    }
}

/// What `name` is among the continuous profiles of `db`, when it is one
/// (a service, or a profile id as `load` prints it): `delete` was asked
/// for it as a process.
fn continuous_namesake(backend: &dyn Backend, db: &Ident, name: &str) -> Option<String> {
    let id = profiles::parse_profile_id(name).ok();
    let out = backend
        .query_tsv(&format!(
            "SELECT countIf(service = {s}), countIf(profile_id = {id}) FROM \
             (SELECT DISTINCT profile_id, service FROM {db}.cp_profiles)",
            s = flamehouse::storage::sql_string(name),
            id = id.unwrap_or(0),
        ))
        .ok()?;
    let (services, ids) = out.trim().split_once('\t')?;
    match (services.parse::<u64>().ok()?, ids.parse::<u64>().ok()?) {
        (n, _) if n > 0 => Some(format!(
            "{name:?} is the service of {}",
            plural(n as usize, "continuous profile")
        )),
        (_, n) if n > 0 && id.is_some() => Some(format!("{name} is a continuous profile")),
        _ => None,
    }
}

/// An engine error of a query on database `db`, with how to upgrade the
/// database when an earlier binary made it (its queries then fail on a
/// table or column of a later migration: the engine's "Unknown table
/// expression identifier ... cp_stacks" said nothing of `init`). Asked
/// only after an error: a query that works costs nothing more.
fn upgrade_hinted(backend: &dyn Backend, db: &Ident, e: flamehouse::Error) -> flamehouse::Error {
    match e {
        flamehouse::Error::Query { message } => match schema::pending_migrations(backend, db) {
            Ok(Some(p)) if !p.is_empty() => flamehouse::Error::Query {
                message: format!("{message} ({})", schema::upgrade_hint(db, &p)),
            },
            _ => flamehouse::Error::Query { message },
        },
        other => other,
    }
}

/// [`schema::refresh_views`] for the commands that read a data directory
/// (`sql`, `serve`): a database that lacks migrations keeps its views,
/// and the user is told how to upgrade it.
fn refresh_views(backend: &dyn Backend, who: &str) -> anyhow::Result<()> {
    let opts = SchemaOptions::default();
    if let schema::Refreshed::Pending(p) = schema::refresh_views(backend, &opts)? {
        eprintln!(
            "{who}: warning: {}",
            schema::views_left_warning(&opts.database, &p)
        );
    }
    Ok(())
}

fn parse_batch_rows(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a row count (at least 1)")),
    }
}

/// `--retention`: refused by the parser (exit 2), so a bad one changes
/// nothing, not even a new database. A whole number out of range says the
/// range (past `u32` as the largest would: it said "no number of days").
fn parse_retention(s: &str) -> Result<u32, String> {
    let days: i128 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is no number of days"))?;
    // Below 1 is checked as 0, past u32 as its largest: each range's words.
    let days = u32::try_from(days.clamp(0, i128::from(u32::MAX))).expect("clamped to u32");
    continuous::check_retention(days).map_err(|e| format!("`{s}`: {e}"))?;
    Ok(days)
}

/// A service names every series it loads: an empty or blank one would be
/// a series no picker shows.
fn parse_service(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("the service must not be empty".into())
    } else {
        Ok(s.to_string())
    }
}

fn parse_span_label(s: &str) -> Result<String, String> {
    if s.is_empty() || continuous::is_label_key(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a label key (letters, digits, `_`, `.`, `-`, `/`, starting with a letter or `_`)"
        ))
    }
}

/// Runs a `profile` subcommand: its options to its library function, its
/// output through one buffered stdout (a closed pipe ends it quietly).
fn run_profile(command: ProfileCommand) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = std::io::stderr();
    let backend = command.target().existing_backend()?;
    let b = &*backend;
    let r = match &command {
        ProfileCommand::Flame { args, at } => {
            profiles::flame_command(b, &at.query_options(), args, &mut out, &mut err)
        }
        ProfileCommand::Diff { args, at } => {
            profiles::diff_command(b, &at.query_options(), args, &mut out, &mut err)
        }
        ProfileCommand::Top { args, at } => {
            profiles::top_command(b, &at.query_options(), args, &mut out, &mut err)
        }
        ProfileCommand::Sandwich { args, at } => {
            profiles::sandwich_command(b, &at.query_options(), args, &mut out, &mut err)
        }
        ProfileCommand::List { args, at } => {
            profiles::list_command(b, &at.query_options(), args, &mut out, &mut err)
        }
        ProfileCommand::Open { args, at } => {
            profiles::open_command(b, &at.query_options(), args, &mut out)
        }
        ProfileCommand::Export { args, at } => {
            profiles::export_command(b, &at.query_options(), args, &mut out, &mut err)
        }
        ProfileCommand::Series { args, at } => {
            profiles::series_command(b, &at.query_options(), args, &mut out, &mut err)
        }
        ProfileCommand::Labels { args, at } => {
            profiles::labels_command(b, &at.query_options(), args, &mut out, &mut err)
        }
    }
    .and_then(|()| {
        out.flush().map_err(|cause| flamehouse::Error::File {
            path: "<stdout>".into(),
            cause,
        })
    })
    .map_err(|e| upgrade_hinted(b, &command.at().database, e));
    match r {
        Err(e) if profiles::is_broken_pipe(&e) => Ok(()),
        r => Ok(r?),
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
    // Usage errors (exit 2): flags that do not fit together.
    let refuse = |m: String| Err(flamehouse::Error::Arguments(m).into());
    if target.server.url.is_none() {
        if let Some(id) = SERVER_ONLY.iter().find(|id| typed(id)) {
            return refuse(format!(
                "{} needs --url (it only applies to a server)",
                flag(id)
            ));
        }
        if typed("cluster") && !typed("print") {
            return refuse("--cluster needs --url (the embedded engine is a single node)".into());
        }
    } else if typed("data") {
        return refuse(
            "--data is the embedded engine's directory: it does nothing with --url".into(),
        );
    }
    Ok(())
}

/// One line for a file that failed to load, naming it (unless the error
/// already does); with `--format` forcing another format than the file's
/// content shows, says so (a perf script read as folded stacks failed on
/// its "two counts", which pointed at difffolded files).
/// `name` names standard input's copy `-`.
fn report_failed(
    f: &Path,
    e: &flamehouse::Error,
    forced: Option<formats::Format>,
    name: &dyn Fn(String) -> String,
) {
    let mut m = name(e.to_string().replace('\n', " "));
    if !e.names_file() {
        m = format!("loading {}: {m}", name(f.display().to_string()));
    }
    let detected = forced
        .filter(|_| !matches!(e, flamehouse::Error::File { .. }))
        .and_then(|_| std::fs::File::open(f).ok())
        .and_then(|file| formats::recognize_open(&file, f).ok().flatten());
    if let (Some(forced), Some(found)) = (forced, detected) {
        if forced != found {
            let hint = format!(
                "(forced as {forced} by --format, but the file looks like {found}: drop \
                 --format, or give --format {found})"
            );
            // MemHawk's reader says what an unrecognized text looks like
            // ("no text format claims it"): untrue when it was forced.
            if let (
                flamehouse::Error::Format(formats::Error::Binpb(formats::binpb::Error::NotBinpb {
                    path,
                    ..
                })),
                formats::Format::Perf | formats::Format::Bpftrace | formats::Format::Folded,
            ) = (e, found)
            {
                m = name(format!(
                    "{}: not a MemHawk .binpb stream {hint}",
                    path.display()
                ));
            } else {
                m.push(' ');
                m.push_str(&hint);
            }
        }
    }
    eprintln!("flamehouse: {m}");
}

fn print_continuous(s: &ContinuousSummary) {
    say!(
        "{}: profile {:016x}{} | types {} | {} | {} series{} | {} | {} | symbolized {:.1}%",
        s.source,
        s.profile_id,
        if s.already_stored {
            " (already stored: nothing sent)"
        } else {
            ""
        },
        s.types.join(", "),
        plural(s.sample_rows, "sample row"),
        s.series,
        // A series is one type's label set: counted per type, as `profile
        // list` shows them.
        if s.types.len() > 1 {
            format!(" of {} types", s.types.len())
        } else {
            String::new()
        },
        plural(s.stacks, "stack"),
        plural(s.frames, "frame"),
        s.symbolized_percent,
    );
    for m in &s.missing_modules {
        say!("  no symbols: {m}");
    }
}

/// Says which process `--process` chose when it named several (runs of one
/// program, a reused pid): the one started last.
fn note_namesakes(given: &str, p: &flame::Process) {
    if p.others > 0 {
        eprintln!(
            "flamehouse: --process {given:?} names {} processes; this is the one started last, \
             process_id {} (give a process_id from process_list to choose another)",
            p.others + 1,
            p.id
        );
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
    say!(
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
        say!("  no symbols: {m}");
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
        // Flags that do not fit together: a usage error, as clap's.
        if let Some(flamehouse::Error::Arguments(m)) = e.downcast_ref::<flamehouse::Error>() {
            eprintln!("error: {}", m.replace('\n', "\\n"));
            std::process::exit(2);
        }
        if e.downcast_ref::<Reported>().is_none() {
            let mut line = format!("{e:#}").replace('\n', " ");
            // A query of a data directory (or server database) nothing was
            // loaded into: say what makes the schema, not only the engine's
            // "Database flamehouse does not exist".
            if line.contains("(UNKNOWN_DATABASE)") {
                line.push_str(
                    " (nothing is loaded there yet: `flamehouse init` or a `flamehouse load` \
                     makes the schema; check --data or --url and --database)",
                );
            }
            eprintln!("flamehouse: {line}");
        }
        std::process::exit(1);
    }
}

/// A value a parser of ours refused (a bad time, selector, regex, count):
/// clap's message on one line, which holds the flag, the value and why
/// (without the blank line and "For more information, try '--help'."
/// after it), exit 2. Other usage errors (a missing or unexpected
/// argument) on one line as well; help and version as clap prints them.
fn usage_exit(e: clap::Error) -> ! {
    if e.kind() == clap::error::ErrorKind::ValueValidation {
        let text = e.to_string();
        // A value holding a line end is shown with `\n`: the flag's name
        // comes after it.
        let text = text
            .split_once("\n\nFor more information")
            .map_or(text.as_str(), |(m, _)| m)
            .trim_end()
            .replace('\n', "\\n");
        eprintln!("{text}");
        std::process::exit(2);
    }
    use clap::error::ErrorKind as K;
    if matches!(
        e.kind(),
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    // Any other usage error on one line too: its paragraphs but the usage
    // and the pointer to --help, each line's indentation folded ("the
    // following required arguments were not provided: --watch").
    let text = e.to_string();
    let line = text
        .split("\n\n")
        .filter(|p| !p.starts_with("Usage:") && !p.starts_with("For more information"))
        .map(|p| {
            p.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    eprintln!("{line}");
    std::process::exit(2);
}

fn run() -> anyhow::Result<()> {
    let matches = Cli::command()
        .try_get_matches()
        .unwrap_or_else(|e| usage_exit(e));
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
                None => {
                    let engine = Engine::open(&target.data.options())?;
                    // A data directory an older binary wrote answers with
                    // this binary's views (as after a load).
                    refresh_views(&engine, "flamehouse")?;
                    engine.query(&query, &format)?
                }
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
            print: true,
            ..
        } => {
            let opts = schema.options();
            // A new database's layout: sharded on a cluster. Checked before
            // anything is printed (a bad --retention prints nothing).
            let distributed: Vec<String> = if opts.cluster.is_some() {
                schema::SHARDED_TABLES
                    .iter()
                    .map(|t| t.to_string())
                    .collect()
            } else {
                Vec::new()
            };
            let retention = retention
                .map(|days| {
                    continuous::retention_statements(&opts, days, &distributed).map(|s| (days, s))
                })
                .transpose()?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut last = None;
            for (version, name, stmt) in schema::new_database_statements(&opts) {
                if last != Some(version) {
                    writeln!(out, "-- migration {version}: {name}")?;
                    last = Some(version);
                }
                writeln!(out, "{stmt};\n")?;
            }
            if let Some((days, stmts)) = retention {
                writeln!(out, "-- retention: {}", plural(days as usize, "day"))?;
                for stmt in stmts {
                    writeln!(out, "{stmt};\n")?;
                }
            }
            out.flush()?;
            Ok(())
        }
        Command::Init {
            schema,
            retention,
            expire_now,
            target,
            ..
        } => {
            let engine = target.backend()?;
            let applied = schema::migrate(&*engine, &schema.options())?;
            // `init` re-creates every view of migration 9 (a load only the
            // stale ones), so it also repairs a node a cluster's DDL missed.
            if !applied.contains(&schema::VIEWS_MIGRATION) {
                schema::recreate_views(&*engine, &schema.options(), true)?;
            }
            // Said after the retention is checked: a refused --retention
            // prints its one error line alone (the migrations, if any, did
            // run and are said in it).
            let schema_line = if applied.is_empty() {
                format!("schema {} is up to date", schema.database)
            } else {
                format!("schema {}: applied migrations {applied:?}", schema.database)
            };
            if let Some(days) = retention {
                // A shorter retention deletes stored days at once (the
                // engine materializes a changed TTL): only when asked.
                let older = continuous::older_than(&*engine, &schema.database, days)?.map(
                    |(n, first, last)| {
                        format!(
                            "{} ({first} to {last}) older than {}",
                            plural(n as usize, "stored profile"),
                            plural(days as usize, "day")
                        )
                    },
                );
                let wrapping = continuous::ttl_wrapping(&*engine, &schema.database, days)?.map(
                    |(n, first, last)| {
                        format!(
                            "{} ({first} to {last}) dated so late that {} after them is \
                             past 2149-06-06, where the TTL's date wraps to 1970",
                            plural(n as usize, "stored profile"),
                            plural(days as usize, "day")
                        )
                    },
                );
                let dropped: Vec<String> = older.into_iter().chain(wrapping).collect();
                if !dropped.is_empty() && !expire_now {
                    let migrated = if applied.is_empty() {
                        String::new()
                    } else {
                        format!("; migrations {applied:?} were applied")
                    };
                    return Err(flamehouse::Error::Usage(format!(
                        "--retention {days} would delete {} at once; give --expire-now to apply \
                         it, or a longer retention (the retention is unchanged{migrated})",
                        dropped.join(", and ")
                    ))
                    .into());
                }
                continuous::set_retention(&*engine, &schema.options(), days)?;
                for d in &dropped {
                    eprintln!("flamehouse: --expire-now: deleted {d}");
                }
            }
            say!("{schema_line}");
            match continuous::retention_days(&*engine, &schema.database)? {
                Some(d) => say!("continuous profiles kept {}", plural(d as usize, "day")),
                None => say!("continuous profiles kept forever (no TTL)"),
            }
            Ok(())
        }
        Command::Compact { schema, target } => {
            let engine = target.backend()?;
            for (table, before, after) in schema::compact(&*engine, &schema.options())? {
                say!("{}.{table}: {before} -> {after} parts", schema.database);
            }
            Ok(())
        }
        Command::Load {
            files,
            service,
            span_labels,
            labels,
            schema,
            format,
            text,
            watch,
            idle_exit,
            replace,
            sysroot,
            granularity,
            binary,
            max_record_mib,
            max_decompressed_mib,
            max_entries,
            max_stack_frames,
            max_stack_depth,
            max_names_mib,
            max_series,
            max_name_kib,
            batch_rows,
            read_ahead_mib,
            target,
        } => {
            // Before anything is read: a key given twice is the user's
            // mistake, the same for every file.
            // Refused as clap refuses a bad key: a usage error, exit 2.
            if let Err(e) = continuous::check_label_keys(&labels, &text.bpftrace_labels) {
                let m = e.to_string();
                let cmd = Cli::command();
                let load = cmd.find_subcommand("load").expect("the load command");
                let mut load = load.clone().bin_name("flamehouse load");
                load.error(clap::error::ErrorKind::ArgumentConflict, m)
                    .exit();
            }
            // `/dev/stdin` as `-`; a named pipe refused (read twice).
            let files = stdin::inputs(files)?;
            if watch && files.iter().any(|f| f.as_os_str() == stdin::STDIN_NAME) {
                anyhow::bail!("--watch follows a file; `-` (standard input) cannot be followed");
            }
            // `-`: standard input, copied to a file first (removed at the end).
            let (files, spooled) = stdin::spool_stdin(
                &files,
                text.max_text_mib << 20,
                max_decompressed_mib.saturating_mul(1 << 20),
                max_record_mib.saturating_mul(1 << 20),
            )?;
            // Messages name standard input as such, not its passing copy.
            let copy_paths: Vec<String> = spooled
                .iter()
                .flat_map(|s| {
                    let p = s.path();
                    let canonical = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
                    [canonical.display().to_string(), p.display().to_string()]
                })
                .collect();
            let name_stdin = |m: String| {
                copy_paths
                    .iter()
                    .fold(m, |m, p| m.replace(p.as_str(), stdin::STDIN_SOURCE))
            };
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
                read: text.apply(flamehouse::formats::ReadOptions {
                    text: flamehouse::formats::text::TextOptions {
                        max_stack_frames,
                        max_stack_depth,
                        ..Default::default()
                    },
                    binpb: flamehouse::formats::binpb::ReaderOptions {
                        max_record_len: max_record_mib.saturating_mul(1 << 20),
                        max_decompressed_len: max_decompressed_mib.saturating_mul(1 << 20),
                        max_entries,
                        max_stack_frames,
                        max_stack_depth,
                    },
                    pprof: flamehouse::formats::pprof::DecodeOptions {
                        max_decompressed_bytes: max_decompressed_mib.saturating_mul(1 << 20),
                        max_entries,
                        max_stack_frames,
                        max_stack_depth,
                        max_names_bytes: max_names_mib << 20,
                        ..Default::default()
                    },
                    ..Default::default()
                }),
                format,
                watch,
                idle_exit: idle_exit.map(Duration::from_secs),
                replace,
                ..Default::default()
            };
            let copts = ContinuousOptions {
                service,
                labels,
                span_labels: span_labels.into_iter().filter(|k| !k.is_empty()).collect(),
                max_series,
                max_name_bytes: max_name_kib.saturating_mul(1 << 10),
                ..Default::default()
            };
            let mut failed = 0usize;
            let mut batch_summary = None;
            let mut formats_seen: Vec<flamehouse::formats::Format> = Vec::new();
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
                    formats_seen.extend(format);
                    let continuous =
                        format.is_some_and(|f| f != flamehouse::formats::Format::Binpb);
                    if continuous && (watch || replace) {
                        // Not silently: a continuous profile is written
                        // whole, so there is nothing to follow or replace.
                        eprintln!(
                            "flamehouse: warning: {}: --{} applies to MemHawk streams only; this {} \
                             profile is loaded once, as without it",
                            f.display(),
                            if watch { "watch" } else { "replace" },
                            format.map_or("continuous", |f| f.name())
                        );
                    }
                    continuous
                });
            // A reader's flag given for files none of which it reads does
            // nothing: said, not silently.
            if let Some(m) = matches.subcommand_matches("load") {
                use flamehouse::formats::Format as F;
                for (id, only, what) in [
                    ("perf_window", F::Perf, "perf script"),
                    ("perf_comm", F::Perf, "perf script"),
                    ("perf_pid", F::Perf, "perf script"),
                    ("perf_tid", F::Perf, "perf script"),
                    ("annotate_kernel", F::Perf, "perf script"),
                    ("annotate_jit", F::Perf, "perf script"),
                    ("bpftrace_labels", F::Bpftrace, "bpftrace"),
                    ("bpftrace_maps", F::Bpftrace, "bpftrace"),
                    ("folded_type", F::Folded, "folded stacks"),
                ] {
                    let typed = m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
                    if typed && !formats_seen.contains(&only) && !files.is_empty() {
                        eprintln!(
                            "flamehouse: warning: --{} applies to {} files only, and none of \
                             the files is one: it does nothing here",
                            id.replace('_', "-"),
                            what
                        );
                    }
                }
            }
            if !batched.is_empty() {
                let copts = ContinuousOptions {
                    database: schema.database.clone(),
                    decode: lo.read.pprof,
                    read: lo.read.clone(),
                    format,
                    symbolizer: lo.symbolizer.clone(),
                    main_binary: lo.main_binary.clone(),
                    ..copts.clone()
                };
                let bo = BatchOptions {
                    batch_rows,
                    read_ahead_bytes: (read_ahead_mib << 20) as usize,
                    ..Default::default()
                };
                let s = cp_batch::load_files(&*engine, &batched, &copts, &bo, &mut |e| match e {
                    FileEvent::Stored(profiles) => {
                        for p in profiles {
                            print_continuous(p);
                        }
                    }
                    FileEvent::Failed(f, e) => report_failed(f, &e, format, &name_stdin),
                    FileEvent::Expired {
                        source,
                        ts_ms,
                        retention_days,
                    } => {
                        let at = flame::format_utc_ms(ts_ms);
                        if cp_batch::ttl_wraps(ts_ms, retention_days) {
                            eprintln!(
                                "flamehouse: warning: {source}: profile at {at}: its day plus the \
                                 retention ({}) is past 2149-06-06, the \
                                 engine's last date, where the TTL's date wraps to 1970 and would \
                                 drop it: not stored (lower it with init --retention)",
                                plural(retention_days as usize, "day")
                            );
                        } else {
                            eprintln!(
                                "flamehouse: warning: {source}: profile at {at} is older than the \
                                 retention ({}): not stored (raise it with init \
                                 --retention)",
                                plural(retention_days as usize, "day")
                            );
                        }
                    }
                })?;
                failed += s.failed;
                // Always, so scripts can read it; after the files loaded
                // one by one, whose lines would otherwise follow it.
                // Outside the retention: older than it, or so late that
                // the retention's end is past the engine's last Date (each
                // said in its own warning line).
                batch_summary = Some(format!(
                    "continuous: {}, {} ({} already stored, {} outside the retention, not \
                     stored), {} in {}{}",
                    plural(s.files, "file"),
                    plural(s.profiles, "profile"),
                    s.already_stored,
                    s.expired,
                    plural(s.sample_rows, "sample row"),
                    plural(s.batches, "batch"),
                    if s.failed > 0 {
                        format!(", {} failed", plural(s.failed, "file"))
                    } else {
                        String::new()
                    }
                ));
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
                        report_failed(f, &e, format, &name_stdin);
                    }
                }
            }
            if let Some(line) = batch_summary {
                say!("{line}");
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
            // An unknown process is an error that says how to list them,
            // and, for a continuous profile's service or id, that `delete`
            // is not how those go.
            let p = flame::resolve_process(&*engine, db, &process).map_err(|e| {
                match continuous_namesake(&*engine, db, &process) {
                    Some(what) => flamehouse::Error::Usage(format!(
                        "{e}; {what}: `delete` removes MemHawk processes only, continuous \
                         profiles leave with their day at the retention (`init --retention`)"
                    )),
                    None => e,
                }
            })?;
            note_namesakes(&process, &p);
            ingest::delete_process(&*engine, db, p.id)?;
            say!("deleted process {} ({}) from {db}", p.id, p.name);
            Ok(())
        }
        Command::Flame {
            request,
            out,
            database,
            target,
        } => {
            let engine = target.existing_backend()?;
            let f = flame::flame(&*engine, &database, &request)
                .map_err(|e| upgrade_hinted(&*engine, &database, e))?;
            note_namesakes(&request.process, &f.process);
            if out
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
            {
                // inferno draws no negative width: say what the picture
                // leaves out (memory views may hold brief negative values).
                let negative: Vec<i64> = f
                    .lines
                    .iter()
                    .filter_map(|l| l.rsplit_once(' ')?.1.parse::<i64>().ok())
                    .filter(|v| *v < 0)
                    .collect();
                if !negative.is_empty() {
                    eprintln!(
                        "flamehouse: the SVG leaves out {} stacks with negative values (sum {}): \
                         the folded output (--out FILE.folded) keeps them",
                        negative.len(),
                        negative.iter().sum::<i64>()
                    );
                }
                let labels = render::SvgOptions {
                    title: f.title.clone(),
                    count_name: f.unit.to_string(),
                    root: f.root.clone(),
                };
                render::render_svg(&f.lines, &labels, &out)?;
            } else if out == Path::new("-") {
                // `--out -`: the folded text on standard output, no report
                // line (as `profile flame`); a closed pipe ends it quietly.
                let text = f.lines.join("\n") + "\n";
                let mut stdout = std::io::stdout().lock();
                return match stdout
                    .write_all(text.as_bytes())
                    .and_then(|()| stdout.flush())
                {
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                        Err(e).context("writing standard output")
                    }
                    _ => Ok(()),
                };
            } else {
                std::fs::write(&out, f.lines.join("\n") + "\n")
                    .with_context(|| format!("writing {}", out.display()))?;
            }
            say!(
                "wrote {} ({})",
                out.display(),
                plural(f.lines.len(), "stack")
            );
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
                say!("wrote {}", p.display());
            }
            Ok(())
        }
        Command::Serve(args) => Ok(flamehouse::serve::serve(&args.options())?),
    }
}
