//! Running the built `flamehouse` CLI on a data directory, shared by the
//! CLI tests (`FLAMEHOUSE_TEST_CLI` picks another build:
//! [`flamehouse_tests::cli_binary`]).

use std::path::Path;
use std::process::{Command, Output};

/// `flamehouse ARGS --data DATA`, whatever its status.
pub(crate) fn fh_out(data: &Path, args: &[&str]) -> Output {
    Command::new(flamehouse_tests::cli_binary())
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("flamehouse runs")
}

/// `flamehouse ARGS --data DATA`, which must succeed; its stdout.
pub(crate) fn fh(data: &Path, args: &[&str]) -> String {
    let out = fh_out(data, args);
    assert!(
        out.status.success(),
        "flamehouse {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `flamehouse sql QUERY`, trimmed.
pub(crate) fn sql(data: &Path, query: &str) -> String {
    fh(data, &["sql", query]).trim().to_string()
}
