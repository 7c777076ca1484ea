//! Shared by the Grafana tests: flame-graph rows as a Grafana data frame, and
//! the renderer that draws frames with Grafana's own component.

use flamehouse_tests::Row;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The data frame the flame graph panel reads.
pub fn frame_json(rows: &[Row], diff: bool, unit: &str) -> Value {
    let col = |i: usize| -> Vec<i64> { rows.iter().map(|r| r.vals[i]).collect() };
    let mut fields = vec![
        json!({"name": "level", "type": "number", "values": rows.iter().map(|r| r.level).collect::<Vec<_>>()}),
        json!({"name": "label", "type": "string", "values": rows.iter().map(|r| r.label.clone()).collect::<Vec<_>>()}),
        json!({"name": "value", "type": "number", "values": col(0), "config": {"unit": unit}}),
        json!({"name": "self", "type": "number", "values": col(1), "config": {"unit": unit}}),
    ];
    if diff {
        fields.push(json!({"name": "valueRight", "type": "number", "values": col(2), "config": {"unit": unit}}));
        fields.push(json!({"name": "selfRight", "type": "number", "values": col(3), "config": {"unit": unit}}));
    }
    json!({ "fields": fields })
}

/// Renders frame files with `grafana/render/render.mjs` into `out`; asserts
/// the renderer succeeded and returns one report per frame.
pub fn render(out: &Path, frames: &[PathBuf]) -> Vec<Value> {
    let render = repo().join("grafana/render");
    assert!(
        render.join("node_modules").exists() && render.join("dist").exists(),
        "run scripts/setup-grafana.sh first (scripts/test does)"
    );
    let res = Command::new("node")
        .arg(render.join("render.mjs"))
        .arg("--out")
        .arg(out)
        .args(frames)
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        res.status.success(),
        "renderer failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let reports: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), frames.len(), "{stdout}");
    for r in &reports {
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["canvasDrawn"], true, "{r}");
        assert_eq!(r["rootSpansFullWidth"], true, "{r}");
    }
    reports
}
