//! `flamehouse`: the command line over the flamehouse library.

use anyhow::Context;
use clap::{Parser, Subcommand};
use flamehouse::demo::{self, SyntheticProfile};
use flamehouse::engine::{Engine, EngineOptions};
use std::io::Write;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(version, about = "Flame graphs computed inside ClickHouse")]
struct Cli {
    /// Database directory of the embedded engine (default:
    /// ~/.local/share/flamehouse).
    #[arg(long, global = true, env = "FLAMEHOUSE_DATA")]
    data: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run SQL on the embedded engine with the flamehouse functions
    /// registered, printing the result.
    Sql {
        /// Output format: any ClickHouse output format.
        #[arg(long, default_value = "TabSeparated")]
        format: String,
        /// The query.
        query: String,
    },
    /// Load a generated demo profile and write its flame graphs.
    Demo {
        /// Output directory.
        #[arg(long, default_value = "out")]
        out: PathBuf,
        /// Number of sample rows.
        #[arg(long, default_value_t = SyntheticProfile::default().samples)]
        samples: u64,
        /// Number of distinct stacks.
        #[arg(long, default_value_t = SyntheticProfile::default().distinct)]
        distinct: usize,
    },
}

fn main() {
    if let Err(e) = run() {
        eprintln!("flamehouse: {}", format!("{e:#}").replace('\n', " "));
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let opts = EngineOptions {
        data_dir: cli.data.clone(),
        ..Default::default()
    };
    match cli.command {
        Command::Sql { format, query } => {
            let engine = Engine::open(&opts)?;
            let out = engine.query(&query, &format)?;
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(&out).and_then(|_| stdout.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("writing stdout"),
            }
        }
        Command::Demo {
            out,
            samples,
            distinct,
        } => {
            let engine = Engine::open(&opts)?;
            let p = SyntheticProfile {
                samples,
                distinct,
                ..Default::default()
            };
            let r = demo::run_demo(&engine, &out, &p)?;
            println!(
                "demo: {} samples over {} distinct stacks in {}; root total {}; {} tree rows",
                samples,
                distinct,
                engine.data_dir().display(),
                r.total,
                r.tree_rows
            );
            for f in r.files {
                println!("wrote {}", f.display());
            }
            Ok(())
        }
    }
}
