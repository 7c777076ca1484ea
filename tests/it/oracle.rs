//! Independent oracles: ClickHouse's built-in `flameGraph()` on the same
//! data (folded lines must agree as multisets), and random inputs against
//! the reference implementation.

use flamehouse_fixtures::demo::{load_synthetic, SyntheticProfile};
use flamehouse_tests::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn lines_to_map(text: &str, sep: char) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let (k, v) = l.rsplit_once(sep).unwrap();
        *m.entry(k.to_string()).or_insert(0) += v.parse::<i64>().unwrap();
    }
    m
}

#[test]
fn fold_agrees_with_builtin_flamegraph() {
    let p = SyntheticProfile {
        samples: 50_000,
        distinct: 3_000,
        seed: 3,
        ..Default::default()
    };
    load_synthetic(engine(), &"oracle_samples".parse().unwrap(), &p).unwrap();
    let total = super::scale::check_synthetic("oracle_samples", &p);
    let builtin = q(
        "SELECT arrayJoin(flameGraph(stack, value)) FROM oracle_samples \
                     SETTINGS allow_introspection_functions = 1, max_threads = 1",
    );
    let ours = q(&flamehouse_fixtures::demo::fold_sql(
        &"oracle_samples".parse().unwrap(),
        "",
    ));
    let builtin = lines_to_map(&builtin, ' ');
    let ours = lines_to_map(&ours, '\t');
    assert!(ours.len() > 1_000, "{} lines", ours.len());
    assert_eq!(ours, builtin);
    assert_eq!(ours.values().sum::<i64>(), total);
}

fn arb_samples() -> impl Strategy<Value = Vec<Sample>> {
    let frame = prop::sample::select(vec!["a", "b", "c", "d;e", "f'g", "h\\i", "j\tk"]);
    let stack = prop::collection::vec(frame.prop_map(String::from), 0..6);
    prop::collection::vec((stack, -20i64..1000), 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_trees_match_reference(a in arb_samples(), b in arb_samples(), max_nodes in 0usize..30) {
        let max_nodes = if max_nodes == 1 { 0 } else { max_nodes };
        let rows = parse_rows(&q(&format!(
            "SELECT n.* FROM (SELECT stackTreeWith({}, map('max_nodes', '{max_nodes}')) AS t) ARRAY JOIN t AS n",
            samples_lit(&a)
        )));
        let got = check_tree(&rows);
        let want = reference(&[&a]);
        prop_assert_eq!(got[&Vec::new()][0], want[&Vec::new()][0]);
        if max_nodes == 0 {
            prop_assert_eq!(&got, &want);
        } else {
            prop_assert!(rows.len() <= max_nodes.max(2));
        }
        let rows = parse_rows(&q(&format!(
            "SELECT n.* FROM (SELECT stackDiff({}, {}) AS t) ARRAY JOIN t AS n",
            samples_lit(&a), samples_lit(&b)
        )));
        prop_assert_eq!(check_tree(&rows), reference(&[&a, &b]));
    }
}
