//! The function catalog: which executable UDFs exist, and the generated
//! `sql/udf/flamehouse_function.xml` and `sql/udf/functions.sql` built from
//! it. A test checks the committed files are fresh.

use crate::codec::Format;
use crate::serve::Function;

/// Name of the UDF executable inside `user_scripts_path`.
pub const BINARY: &str = "flamehouse-udf";

/// Argument type of a samples argument.
pub const SAMPLES_TYPE: &str = "Array(Tuple(Array(String), Int64))";
/// Argument type of the options argument.
pub const OPTIONS_TYPE: &str = "Map(String, String)";

/// Timeouts written to every config; generous because one call may carry a
/// whole profile. Milliseconds unless noted.
const READ_TIMEOUT_MS: u64 = 600_000;
const WRITE_TIMEOUT_MS: u64 = 600_000;
const TERMINATION_TIMEOUT_S: u64 = 10;
const MAX_EXECUTION_S: u64 = 600;
const POOL_SIZE: u64 = 16;

/// One executable UDF.
#[derive(Debug, Clone, Copy)]
pub struct Udf {
    /// The stack function.
    pub function: Function,
    /// Wire format.
    pub format: Format,
    /// `executable_pool` (true) or `executable`.
    pub pool: bool,
}

impl Udf {
    /// Every shipped combination.
    pub fn all() -> Vec<Udf> {
        let mut v = Vec::new();
        for function in [Function::Tree, Function::Diff, Function::Fold] {
            for format in [Format::TabSeparated, Format::RowBinary] {
                for pool in [false, true] {
                    v.push(Udf {
                        function,
                        format,
                        pool,
                    });
                }
            }
        }
        v
    }

    /// The SQL name, e.g. `flamehouse_tree_rowbinary_pool`.
    pub fn name(&self) -> String {
        let f = match self.format {
            Format::TabSeparated => "tsv",
            Format::RowBinary => "rowbinary",
        };
        let p = if self.pool { "_pool" } else { "" };
        format!("flamehouse_{}_{f}{p}", self.function.name())
    }

    /// The declared return type.
    pub fn return_type(&self) -> &'static str {
        match self.function {
            Function::Tree => "Array(Tuple(level UInt32, label String, value Int64, self Int64))",
            Function::Diff => "Array(Tuple(level UInt32, label String, value Int64, self Int64, valueRight Int64, selfRight Int64))",
            Function::Fold => "Array(Tuple(stack String, value Int64))",
        }
    }

    /// Argument `(name, type)` pairs.
    pub fn arguments(&self) -> Vec<(&'static str, &'static str)> {
        match self.function {
            Function::Diff => vec![
                ("baseline", SAMPLES_TYPE),
                ("comparison", SAMPLES_TYPE),
                ("options", OPTIONS_TYPE),
            ],
            _ => vec![("samples", SAMPLES_TYPE), ("options", OPTIONS_TYPE)],
        }
    }

    /// The command line after `user_scripts_path`.
    pub fn command(&self) -> String {
        let mut c = format!(
            "{BINARY} {} --format {}",
            self.function.name(),
            self.format.name()
        );
        if self.pool {
            c.push_str(" --pool");
        }
        c
    }

    fn xml(&self) -> String {
        let mut s = String::new();
        let kind = if self.pool {
            "executable_pool"
        } else {
            "executable"
        };
        s.push_str("    <function>\n");
        s.push_str(&format!("        <type>{kind}</type>\n"));
        s.push_str(&format!("        <name>{}</name>\n", self.name()));
        s.push_str(&format!(
            "        <return_type>{}</return_type>\n",
            self.return_type()
        ));
        s.push_str("        <return_name>result</return_name>\n");
        for (name, ty) in self.arguments() {
            s.push_str(&format!(
                "        <argument><type>{ty}</type><name>{name}</name></argument>\n"
            ));
        }
        s.push_str(&format!(
            "        <format>{}</format>\n",
            self.format.name()
        ));
        s.push_str(&format!("        <command>{}</command>\n", self.command()));
        s.push_str("        <execute_direct>1</execute_direct>\n");
        s.push_str(&format!(
            "        <send_chunk_header>{}</send_chunk_header>\n",
            u8::from(self.pool)
        ));
        if self.pool {
            s.push_str(&format!("        <pool_size>{POOL_SIZE}</pool_size>\n"));
            s.push_str(&format!(
                "        <max_command_execution_time>{MAX_EXECUTION_S}</max_command_execution_time>\n"
            ));
        }
        s.push_str(&format!(
            "        <command_read_timeout>{READ_TIMEOUT_MS}</command_read_timeout>\n"
        ));
        s.push_str(&format!(
            "        <command_write_timeout>{WRITE_TIMEOUT_MS}</command_write_timeout>\n"
        ));
        s.push_str(&format!(
            "        <command_termination_timeout>{TERMINATION_TIMEOUT_S}</command_termination_timeout>\n"
        ));
        s.push_str("        <stderr_reaction>throw</stderr_reaction>\n");
        s.push_str("        <check_exit_code>1</check_exit_code>\n");
        s.push_str("        <deterministic>1</deterministic>\n");
        s.push_str("    </function>\n");
        s
    }
}

/// The content of `sql/udf/flamehouse_function.xml`.
pub fn functions_xml() -> String {
    let mut s = String::from(
        "<!-- Generated by `flamehouse-udf config`; do not edit (a test checks freshness). -->\n\
         <!-- stderr_reaction=throw: the UDF writes stderr only to report an error, as one line. -->\n\
         <functions>\n",
    );
    for u in Udf::all() {
        s.push_str(&u.xml());
    }
    s.push_str("</functions>\n");
    s
}

/// The SQL wrapper functions users call. They cast arguments to the exact
/// declared types, because the engine sends the caller's raw column type
/// (ClickHouse issue 34664), which RowBinary would silently misread.
pub fn functions_sql() -> String {
    let mut s = String::from(
        "-- Generated by `flamehouse-udf config`; do not edit (a test checks freshness).\n\
         -- SQL wrappers over the executable UDFs in flamehouse_function.xml.\n\
         -- Each statement is on one line; statements are separated by blank lines.\n\n",
    );
    let raw = |f: Function| {
        Udf {
            function: f,
            format: Format::RowBinary,
            pool: true,
        }
        .name()
    };
    let samples = |x: &str| format!("CAST({x} AS {SAMPLES_TYPE})");
    let opts = |x: &str| format!("CAST({x} AS {OPTIONS_TYPE})");
    let empty = "CAST(map() AS Map(String, String))";
    let mut def = |name: &str, args: &str, body: String| {
        s.push_str(&format!(
            "CREATE OR REPLACE FUNCTION {name} AS ({args}) -> {body};\n\n"
        ));
    };
    def(
        "stackTree",
        "samples",
        format!("{}({}, {empty})", raw(Function::Tree), samples("samples")),
    );
    def(
        "stackTreeWith",
        "samples, options",
        format!(
            "{}({}, {})",
            raw(Function::Tree),
            samples("samples"),
            opts("options")
        ),
    );
    def(
        "stackDiff",
        "baseline, comparison",
        format!(
            "{}({}, {}, {empty})",
            raw(Function::Diff),
            samples("baseline"),
            samples("comparison")
        ),
    );
    def(
        "stackDiffWith",
        "baseline, comparison, options",
        format!(
            "{}({}, {}, {})",
            raw(Function::Diff),
            samples("baseline"),
            samples("comparison"),
            opts("options")
        ),
    );
    def(
        "stackFold",
        "samples",
        format!("{}({}, {empty})", raw(Function::Fold), samples("samples")),
    );
    def(
        "stackFoldWith",
        "samples, options",
        format!(
            "{}({}, {})",
            raw(Function::Fold),
            samples("samples"),
            opts("options")
        ),
    );
    s
}

/// Splits [`functions_sql`]-style text into statements.
pub fn statements(sql: &str) -> Vec<String> {
    sql.split("\n\n")
        .map(|s| {
            s.lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .map(|s| s.trim().trim_end_matches(';').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}
