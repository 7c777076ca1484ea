//! Profile formats: one module per input format, engine-free.

pub mod binpb;
pub mod pprof;
