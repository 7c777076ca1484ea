//! A 1,000,000-sample table, both pre-aggregated per stack (the intended
//! query shape) and sent to the UDF raw in one row.

use flamehouse_fixtures::demo::{fold_sql, load_synthetic, synthetic_stacks, SyntheticProfile};
use flamehouse_tests::*;
use std::collections::BTreeMap;

/// Checks what `load_synthetic` stored against the generator, not against
/// the table itself: every stack of `synthetic_stacks` once under its id,
/// `samples` rows, and the value total recomputed from the sample formula
/// over `numbers()` (no join, no table). Returns that total.
pub(crate) fn check_synthetic(table: &str, p: &SyntheticProfile) -> i64 {
    let stacks = synthetic_stacks(p);
    let stored = q(&format!(
        "SELECT id, stack FROM {table}_stacks ORDER BY id FORMAT JSONCompactEachRow"
    ));
    let stored: Vec<(u32, Vec<String>)> = stored
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stored.len(), stacks.len(), "{table}_stacks rows");
    for (i, ((id, stack), want)) in stored.iter().zip(&stacks).enumerate() {
        assert_eq!((*id as usize, stack), (i, want));
    }
    let rows: u64 = q(&format!("SELECT count() FROM {table}"))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(rows, p.samples, "{table} rows");
    q(&format!(
        "SELECT sum(toInt64(1 + cityHash64(number, {seed}, 1) % 4096)) FROM numbers({n})",
        seed = p.seed,
        n = p.samples
    ))
    .trim()
    .parse()
    .unwrap()
}

#[test]
fn million_samples_through_group_by() {
    let p = SyntheticProfile {
        samples: 1_000_000,
        distinct: 20_000,
        seed: 5,
        ..Default::default()
    };
    load_synthetic(engine(), &"million".parse().unwrap(), &p).unwrap();
    let total = check_synthetic("million", &p);
    let rows = parse_rows(&q(
        "SELECT n.* FROM (SELECT stackTree(groupArray((stack, v))) AS t \
         FROM (SELECT stack, sum(value) AS v FROM million GROUP BY stack)) ARRAY JOIN t AS n",
    ));
    let tree = check_tree(&rows);
    assert_eq!(tree[&Vec::new()][0], total);
    // Leaves' self values, read back as folded stacks, equal flameGraph()'s.
    let builtin: BTreeMap<String, i64> = q(
        "SELECT arrayJoin(flameGraph(stack, value)) FROM million SETTINGS allow_introspection_functions = 1, max_threads = 1",
    )
    .lines()
    .map(|l| {
        let (k, v) = l.rsplit_once(' ').unwrap();
        (k.to_string(), v.parse().unwrap())
    })
    .collect();
    let from_tree: BTreeMap<String, i64> = tree
        .iter()
        .filter(|(p, v)| !p.is_empty() && v[1] != 0)
        .map(|(p, v)| (p.join(";"), v[1]))
        .collect();
    assert_eq!(from_tree, builtin);
    let ours: BTreeMap<String, i64> = q(&fold_sql(&"million".parse().unwrap(), ""))
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(ours, builtin);
}

#[test]
fn million_samples_in_one_udf_row() {
    let rows = parse_rows(&q(
        "SELECT n.* FROM (SELECT stackTree(groupArray(([toString(number % 7), toString(number % 13)], toInt64(1)))) AS t \
         FROM numbers(1000000)) ARRAY JOIN t AS n",
    ));
    let tree = check_tree(&rows);
    assert_eq!(tree[&Vec::new()][0], 1_000_000);
    let counts = q("SELECT toString(number % 7), toString(number % 13), count() FROM numbers(1000000) GROUP BY 1, 2");
    for l in counts.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let path = vec![f[0].to_string(), f[1].to_string()];
        assert_eq!(tree[&path][0], f[2].parse::<i64>().unwrap(), "{path:?}");
    }
}
