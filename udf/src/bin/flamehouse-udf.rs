//! `flamehouse-udf`: the executable ClickHouse runs for the flamehouse stack
//! functions. A thin main over the library: parse options, call one library
//! function, stream stdin to stdout.

use anyhow::Context;
use clap::{Parser, Subcommand};
use flamehouse_udf::codec::{Format, Limits};
use flamehouse_udf::options::{DiffOptions, FilterOptions, TreeOptions};
use flamehouse_udf::serve::{self, Function, TableOptions};
use flamehouse_udf::{catalog, Error};
use std::io::{self, BufWriter};
use std::path::PathBuf;

/// Large buffers in transparent huge pages (see the library's `alloc`).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOC: flamehouse_udf::alloc::HugePageAlloc = flamehouse_udf::alloc::HugePageAlloc;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Fold, diff and tree-build stack samples for ClickHouse"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve `stackTree` calls (one result row per input row).
    Tree(UdfArgs),
    /// Serve `stackDiff` calls.
    Diff(UdfArgs),
    /// Serve `stackFold` calls.
    Fold(UdfArgs),
    /// For `executable()`: `(stack Array(String), value Int64)` rows in, one
    /// `(level, label, value, self)` row per node out.
    TreeTable(TreeTableArgs),
    /// For `executable()`: baseline rows on stdin, comparison rows on
    /// `--comparison-fd` (ClickHouse's second input query is fd 3).
    DiffTable(DiffTableArgs),
    /// For `executable()`: rows in, `(stack String, value Int64)` folded
    /// lines out.
    FoldTable(FoldTableArgs),
    /// Write the UDF XML config and SQL wrappers into a directory.
    Config {
        /// Output directory (e.g. `sql/udf`).
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
struct UdfArgs {
    /// Wire format, as in the function's `<format>`.
    #[arg(long, value_enum)]
    format: Format,
    /// executable_pool mode with `send_chunk_header=1`.
    #[arg(long)]
    pool: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Input options every command shares.
#[derive(clap::Args, Debug)]
struct LimitArgs {
    /// Maximum encoded size of one input row, in bytes.
    #[arg(long, default_value_t = Limits::default().max_row_bytes)]
    max_row_bytes: u64,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            max_row_bytes: self.max_row_bytes,
        }
    }
}

#[derive(clap::Args, Debug)]
struct TreeTableArgs {
    /// Wire format of input and output.
    #[arg(long, value_enum)]
    format: Format,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    tree: TreeOptions,
}

#[derive(clap::Args, Debug)]
struct DiffTableArgs {
    /// Wire format of input and output.
    #[arg(long, value_enum)]
    format: Format,
    /// Descriptor the comparison rows arrive on.
    #[arg(long, default_value_t = 3)]
    comparison_fd: i32,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    diff: DiffOptions,
}

#[derive(clap::Args, Debug)]
struct FoldTableArgs {
    /// Wire format of input and output.
    #[arg(long, value_enum)]
    format: Format,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    filter: FilterOptions,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        // A closed stdout means the reader went away: not our error.
        if let Some(Error::Io(io)) = e.downcast_ref::<Error>() {
            if io.kind() == io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
        // One line: ClickHouse shows stderr to the user as the error text.
        let msg = format!("{e:#}").replace('\n', " ");
        eprintln!("flamehouse-udf: {msg}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let stdin = io::stdin().lock();
    let stdout = BufWriter::with_capacity(256 * 1024, io::stdout().lock());
    match cli.command {
        Command::Tree(a) => udf(Function::Tree, a, stdin, stdout),
        Command::Diff(a) => udf(Function::Diff, a, stdin, stdout),
        Command::Fold(a) => udf(Function::Fold, a, stdin, stdout),
        Command::TreeTable(a) => table(
            a.format,
            TableOptions::Tree(a.tree),
            a.limits.limits(),
            None,
            stdin,
            stdout,
        ),
        Command::DiffTable(a) => table(
            a.format,
            TableOptions::Diff(a.diff),
            a.limits.limits(),
            Some(a.comparison_fd),
            stdin,
            stdout,
        ),
        Command::FoldTable(a) => table(
            a.format,
            TableOptions::Fold(a.filter),
            a.limits.limits(),
            None,
            stdin,
            stdout,
        ),
        Command::Config { out } => {
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            for (name, text) in [
                ("flamehouse_function.xml", catalog::functions_xml()),
                ("functions.sql", catalog::functions_sql()),
            ] {
                let p = out.join(name);
                std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
            }
            Ok(())
        }
    }
}

fn udf(f: Function, a: UdfArgs, r: impl io::Read, w: impl io::Write) -> anyhow::Result<()> {
    Ok(serve::serve_udf(
        f,
        a.format,
        a.pool,
        a.limits.limits(),
        r,
        w,
    )?)
}

fn table(
    format: Format,
    opts: TableOptions,
    limits: Limits,
    comparison_fd: Option<i32>,
    r: impl io::Read,
    w: impl io::Write,
) -> anyhow::Result<()> {
    let comparison = match comparison_fd {
        // ClickHouse passes the second input query as this descriptor;
        // opening it through /dev/fd gives a clear error when it is absent.
        Some(fd) => {
            let path = format!("/dev/fd/{fd}");
            Some(std::fs::File::open(&path).with_context(|| {
                format!("no comparison input on {path} (diff-table needs a second input query)")
            })?)
        }
        None => None,
    };
    Ok(serve::serve_table(format, &opts, limits, r, comparison, w)?)
}
