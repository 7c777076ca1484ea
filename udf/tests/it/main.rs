//! The udf crate's own integration tests: properties of the library against
//! independent references computed here, wire round trips through
//! `serve::serve_udf` / `serve::serve_table` with an encoder written here,
//! decoder robustness on arbitrary bytes, and insta snapshots pinning the
//! exact wire output.

mod cli;
mod common;
mod golden;
mod peak;
mod props;
mod wire;
