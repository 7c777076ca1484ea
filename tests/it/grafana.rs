//! The frames the functions build are drawn by Grafana's own flame graph
//! component (`@grafana/flamegraph`) in headless Chromium: no page error,
//! canvas drawn, root spanning the full width, and the total Grafana shows
//! equal to the SQL root value. Screenshots land in
//! `target/grafana-render/` as test artifacts.

use crate::render::{frame_json, render, repo};
use flamehouse_fixtures::demo::{grouped_sql, load_synthetic, SyntheticProfile};
use flamehouse_tests::*;

#[test]
fn tree_and_diff_frames_render_in_grafanas_flame_graph() {
    let p = SyntheticProfile {
        samples: 20_000,
        distinct: 800,
        seed: 9,
        ..Default::default()
    };
    load_synthetic(engine(), &"grafana_samples".parse().unwrap(), &p).unwrap();
    let g = grouped_sql(&"grafana_samples".parse().unwrap(), "");
    let tree = parse_rows(&q(&format!(
        "SELECT n.* FROM (SELECT stackTreeWith(groupArray((stack, v)), map('max_nodes', '600')) AS t FROM {g}) \
         ARRAY JOIN t AS n"
    )));
    check_tree(&tree);
    let first = grouped_sql(
        &"grafana_samples".parse().unwrap(),
        "WHERE ts < toDateTime('2026-01-01 10:30:00')",
    );
    let second = grouped_sql(
        &"grafana_samples".parse().unwrap(),
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
    std::fs::write(&tree_json, frame_json(&tree, false, "bytes").to_string()).unwrap();
    std::fs::write(&diff_json, frame_json(&diff, true, "bytes").to_string()).unwrap();
    let reports = render(&out, &[tree_json, diff_json]);
    for (r, rows) in reports.iter().zip([&tree, &diff]) {
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
