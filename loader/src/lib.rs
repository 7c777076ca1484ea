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
//! - [`serve`]: `flamehouse serve`, the engine behind ClickHouse's HTTP interface;
//! - [`ident`]: validated SQL identifiers (database, cluster);
//! - [`error`]: the crate's error type.

pub mod backend;
pub mod binpb;
pub mod demo;
pub mod engine;
pub mod error;
pub mod fixture;
pub mod flame;
pub mod grafana;
pub mod ident;
pub mod load;
pub mod rows;
pub mod schema;
pub mod serve;
pub mod server;
pub mod symbolize;

pub use engine::{Engine, EngineOptions};
pub use error::{Error, Result};
pub use ident::Ident;
