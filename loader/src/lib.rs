//! flamehouse: load profiles into ClickHouse and query flame graphs.
//!
//! - [`engine`]: the embedded ClickHouse engine (chDB) with the flamehouse
//!   functions registered;
//! - [`demo`]: the generated demo profile and the flame-graph outputs of the
//!   README's first command;
//! - [`binpb`]: the MemHawk `.binpb` snapshot-stream decoder;
//! - [`symbolize`]: module map and DWARF/ELF symbolizer for stack addresses;
//! - [`fixture`]: generator of realistic `.binpb` fixtures from a compiled
//!   workload binary;
//! - [`server`]: the backend for a ClickHouse server over HTTP;
//! - [`ident`]: validated SQL identifiers (database, cluster);
//! - [`error`]: the crate's error type.

pub mod continuous_query;
pub mod error;
pub mod flame;
pub mod formats;
pub mod grafana;
pub mod ingest;
pub mod render;
pub mod storage;
pub mod symbolize;

pub use error::{Error, Result};
pub use storage::engine::{Engine, EngineOptions};
pub use storage::ident::Ident;
