//! The process side of ClickHouse's executable-UDF protocol.
//!
//! - `executable`: rows until end of input, one result row per input row.
//! - `executable_pool` with `send_chunk_header=1`: stdin stays open; each
//!   call is `N\n` and N rows, answered by exactly N rows and a flush. End of
//!   input is a normal shutdown.
//! - table commands (for the `executable()` table function): every input
//!   row is one `(stack, value)` sample; the output is one row per node. A
//!   diff reads the baseline on stdin and the comparison on another
//!   descriptor (fd 3, ClickHouse's second input query).

use crate::codec::{Format, Input, Limits, Output};
use crate::fold::stack_fold;
use crate::options::{DiffOptions, FilterOptions, TreeOptions};
use crate::samples::Samples;
use crate::tree::{stack_diff_counted, stack_tree_counted};
use crate::Result;
use std::io::{Read, Write};

/// Which stack function a process serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Function {
    /// Flame-graph tree.
    Tree,
    /// Diff flame-graph tree.
    Diff,
    /// Folded stacks.
    Fold,
}

impl Function {
    /// Lower-case name used in commands and function names.
    pub fn name(self) -> &'static str {
        match self {
            Function::Tree => "tree",
            Function::Diff => "diff",
            Function::Fold => "fold",
        }
    }
}

/// Serves UDF calls from `r` to `w` until the input ends.
pub fn serve_udf<R: Read, W: Write>(
    function: Function,
    format: Format,
    pool: bool,
    limits: Limits,
    r: R,
    w: W,
) -> Result<()> {
    let mut input = Input::new(r, format, limits);
    let mut out = Output::new(w, format);
    let mut a = Samples::new();
    let mut b = Samples::new();
    if pool {
        while let Some(n) = input.chunk_header()? {
            for _ in 0..n {
                one_row(function, &mut input, &mut out, &mut a, &mut b)?;
            }
            out.flush()?;
        }
    } else {
        while !input.at_eof()? {
            one_row(function, &mut input, &mut out, &mut a, &mut b)?;
        }
    }
    out.flush()?;
    Ok(())
}

fn one_row<R: Read, W: Write>(
    function: Function,
    input: &mut Input<R>,
    out: &mut Output<W>,
    a: &mut Samples,
    b: &mut Samples,
) -> Result<()> {
    input.begin_row();
    a.clear();
    input.samples(a)?;
    input.column_sep()?;
    if function == Function::Diff {
        b.clear();
        input.samples(b)?;
        input.column_sep()?;
    }
    let opts = input.options()?;
    input.end_row()?;
    match function {
        Function::Tree => {
            let o = TreeOptions::from_pairs(&opts)?;
            out.tree_streamed(false, |count, emit| stack_tree_counted(a, &o, count, emit))?
        }
        Function::Diff => {
            let o = DiffOptions::from_pairs(&opts)?;
            out.tree_streamed(true, |count, emit| {
                stack_diff_counted(a, b, &o, count, emit)
            })?
        }
        Function::Fold => out.fold(&stack_fold(a, &FilterOptions::from_pairs(&opts)?)?)?,
    }
    out.end_row()?;
    Ok(())
}

/// Reads every `(stack, value)` row of `r`.
pub fn read_stack_rows<R: Read>(r: R, format: Format, limits: Limits) -> Result<Samples> {
    let mut input = Input::new(r, format, limits);
    let mut s = Samples::new();
    while !input.at_eof()? {
        input.stack_row(&mut s)?;
    }
    Ok(s)
}

/// Options of a table command, per function: each command takes only the
/// options that mean something to it.
#[derive(Debug, Clone)]
pub enum TableOptions {
    /// `tree-table`.
    Tree(TreeOptions),
    /// `diff-table`.
    Diff(DiffOptions),
    /// `fold-table`.
    Fold(FilterOptions),
}

impl TableOptions {
    /// The options of `function` from SQL-style `(key, value)` pairs.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(
        function: Function,
        pairs: &[(K, V)],
    ) -> Result<Self> {
        Ok(match function {
            Function::Tree => TableOptions::Tree(TreeOptions::from_pairs(pairs)?),
            Function::Diff => TableOptions::Diff(DiffOptions::from_pairs(pairs)?),
            Function::Fold => TableOptions::Fold(FilterOptions::from_pairs(pairs)?),
        })
    }

    /// The function these options belong to.
    pub fn function(&self) -> Function {
        match self {
            TableOptions::Tree(_) => Function::Tree,
            TableOptions::Diff(_) => Function::Diff,
            TableOptions::Fold(_) => Function::Fold,
        }
    }
}

/// Runs a table command: samples from `r` (and the comparison from
/// `comparison` for a diff), one output row per node or folded line.
pub fn serve_table<R: Read, R2: Read, W: Write>(
    format: Format,
    opts: &TableOptions,
    limits: Limits,
    r: R,
    comparison: Option<R2>,
    w: W,
) -> Result<()> {
    match opts {
        TableOptions::Tree(o) => o.validate()?,
        TableOptions::Diff(o) => o.tree.validate()?,
        TableOptions::Fold(_) => {}
    }
    let mut a = read_stack_rows(r, format, limits)?;
    let mut out = Output::new(w, format);
    match opts {
        TableOptions::Tree(o) => {
            out.tree_table_streamed(false, |e| stack_tree_counted(&mut a, o, None, e))?
        }
        TableOptions::Fold(o) => out.fold_table(&stack_fold(&a, o)?)?,
        TableOptions::Diff(o) => {
            let mut b = match comparison {
                Some(c) => read_stack_rows(c, format, limits)?,
                None => Samples::new(),
            };
            out.tree_table_streamed(true, |e| stack_diff_counted(&mut a, &mut b, o, None, e))?
        }
    }
    out.flush()?;
    Ok(())
}
