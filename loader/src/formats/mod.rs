//! Profile formats: one module per input format, engine-free.

pub mod binpb;
