//! flamehouse-udf: fold, diff and tree-build stack samples inside ClickHouse.
//!
//! The crate is the library behind the `flamehouse-udf` executable that
//! ClickHouse runs as an executable user-defined function. It owns:
//! - [`samples`]: the compact in-memory form of decoded stack samples;
//! - [`filter`]: per-stack transforms (recursion collapsing, hex stripping,
//!   depth limits, focus/exclude) shared by every function;
//! - [`tree`]: the Grafana flame-graph frame (single and diff) with pruning;
//! - [`fold`]: folded-stack lines readable by flamegraph.pl and inferno;
//! - [`codec`]: ClickHouse's TabSeparated and RowBinary encodings;
//! - [`serve`]: the stdin/stdout process protocol (executable and
//!   executable_pool modes, and the `executable()` table-function commands);
//! - [`catalog`]: the function catalog that generates the XML configs and the
//!   SQL wrapper functions shipped in `sql/`;
//! - `alloc` (Linux): the executable's allocator, large buffers in
//!   transparent huge pages.

#[cfg(target_os = "linux")]
pub mod alloc;
pub mod catalog;
pub mod codec;
pub mod error;
pub mod filter;
pub mod fold;
pub mod options;
pub mod samples;
pub mod serve;
pub mod tree;

pub use error::{Error, Result};
