//! The frames the functions build are drawn by Grafana's own flame graph
//! component (`@grafana/flamegraph`) in headless Chromium: no page error,
//! canvas drawn, root spanning the full width, and the total Grafana shows
//! equal to the SQL root value. Screenshots land in
//! `target/grafana-render/` as test artifacts.

use flamehouse::demo::{grouped_sql, load_synthetic, SyntheticProfile};
use flamehouse_tests::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn frame(rows: &[Row], diff: bool) -> Value {
    let col = |i: usize| -> Vec<i64> { rows.iter().map(|r| r.vals[i]).collect() };
    let mut fields = vec![
        json!({"name": "level", "type": "number", "values": rows.iter().map(|r| r.level).collect::<Vec<_>>()}),
        json!({"name": "label", "type": "string", "values": rows.iter().map(|r| r.label.clone()).collect::<Vec<_>>()}),
        json!({"name": "value", "type": "number", "values": col(0), "config": {"unit": "bytes"}}),
        json!({"name": "self", "type": "number", "values": col(1), "config": {"unit": "bytes"}}),
    ];
    if diff {
        fields.push(json!({"name": "valueRight", "type": "number", "values": col(2), "config": {"unit": "bytes"}}));
        fields.push(json!({"name": "selfRight", "type": "number", "values": col(3), "config": {"unit": "bytes"}}));
    }
    json!({ "fields": fields })
}

#[test]
fn tree_and_diff_frames_render_in_grafanas_flame_graph() {
    let render = repo().join("grafana/render");
    assert!(
        render.join("node_modules").exists() && render.join("dist").exists(),
        "run scripts/setup-grafana.sh first (scripts/test does)"
    );
    let p = SyntheticProfile {
        samples: 20_000,
        distinct: 800,
        seed: 9,
        ..Default::default()
    };
    load_synthetic(engine(), "grafana_samples", &p).unwrap();
    let g = grouped_sql("grafana_samples", "");
    let tree = parse_rows(&q(&format!(
        "SELECT n.* FROM (SELECT stackTreeWith(groupArray((stack, v)), map('max_nodes', '600')) AS t FROM {g}) \
         ARRAY JOIN t AS n"
    )));
    check_tree(&tree);
    let first = grouped_sql(
        "grafana_samples",
        "WHERE ts < toDateTime('2026-01-01 10:30:00')",
    );
    let second = grouped_sql(
        "grafana_samples",
        "WHERE ts >= toDateTime('2026-01-01 10:30:00')",
    );
    let diff = parse_rows(&q(&format!(
        "SELECT n.* FROM (SELECT stackDiffWith((SELECT groupArray((stack, v)) FROM {first}), \
           (SELECT groupArray((stack, v)) FROM {second}), map('max_nodes', '600')) AS t) ARRAY JOIN t AS n"
    )));
    check_tree(&diff);

    let out = repo().join("target/grafana-render");
    std::fs::create_dir_all(&out).unwrap();
    let tree_json = out.join("stacktree.json");
    let diff_json = out.join("stackdiff.json");
    std::fs::write(&tree_json, frame(&tree, false).to_string()).unwrap();
    std::fs::write(&diff_json, frame(&diff, true).to_string()).unwrap();
    let res = Command::new("node")
        .arg(render.join("render.mjs"))
        .arg("--out")
        .arg(&out)
        .arg(&tree_json)
        .arg(&diff_json)
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
    assert_eq!(reports.len(), 2, "{stdout}");
    for (r, rows) in reports.iter().zip([&tree, &diff]) {
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["canvasDrawn"], true, "{r}");
        assert_eq!(r["rootSpansFullWidth"], true, "{r}");
        assert_eq!(r["rootValue"].as_i64(), Some(rows[0].vals[0]), "{r}");
    }
    // Grafana's tooltip shows the exact root total for a single tree.
    assert_eq!(
        reports[0]["tableTotal"].as_i64(),
        Some(tree[0].vals[0]),
        "{}",
        reports[0]
    );
}
