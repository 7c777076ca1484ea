//! End-to-end tests: every function runs inside the real embedded ClickHouse
//! engine, which executes the real `flamehouse-udf` binary through its
//! executable-UDF mechanism.

mod cli;
mod cli_run;
mod cluster;
mod continuous;
mod continuous_cli;
mod continuous_exports;
mod continuous_ingest;
mod continuous_labels;
mod continuous_legacy_ids;
mod continuous_stacks;
mod continuous_text_cli;
mod continuous_verify;
mod continuous_views;
mod errors;
mod freshness;
mod functions;
mod grafana;
mod grafana_continuous;
mod grafana_pack;
mod memhawk;
mod memory;
mod oracle;
mod render;
mod scale;
mod serve;
mod server;
mod table;
mod watch;
