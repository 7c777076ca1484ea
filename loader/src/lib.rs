//! flamehouse: load profiles into ClickHouse and query flame graphs.
//!
//! The data path, one module each: [`formats`] (one reader per input
//! format, producing the neutral [`model`]) -> [`symbolize`] (addresses to
//! functions, against format-neutral mappings) -> [`ingest`] (interning,
//! per-source row logic, batches, the writer) -> [`storage`] (the embedded
//! engine, the server client, schema, row encoding, identifiers). Reading
//! back: [`flame`] (queries and outputs), [`render`] (SVG), [`grafana`]
//! (the dashboards pack), [`profiles`] (the continuous-profile commands:
//! folded, tables, pprof export). Serving: [`serve`] (`flamehouse serve`,
//! the engine behind ClickHouse's HTTP interface). [`error`] is the
//! crate's error type.

pub mod continuous_query;
pub mod continuous_views;
pub mod error;
pub mod flame;
pub mod formats;
pub mod grafana;
pub mod ingest;
pub mod model;
pub mod profiles;
pub mod render;
pub mod serve;
pub mod storage;
pub mod symbolize;

pub use error::{Error, Result};
pub use storage::engine::{Engine, EngineOptions};
pub use storage::ident::Ident;
