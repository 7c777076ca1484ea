//! Every function, format and mode against the reference implementation.

use flamehouse_tests::*;
use flamehouse_udf::catalog::Udf;
use flamehouse_udf::serve::Function;
use rand::{rngs::StdRng, SeedableRng};
use std::collections::BTreeMap;

const SAMPLES_T: &str = "Array(Tuple(Array(String), Int64))";

fn tree_rows(expr: &str) -> Vec<Row> {
    parse_rows(&q(&format!(
        "SELECT n.* FROM (SELECT {expr} AS t) ARRAY JOIN t AS n"
    )))
}

fn fold_map(expr: &str) -> BTreeMap<String, i64> {
    q(&format!(
        "SELECT n.1, n.2 FROM (SELECT {expr} AS t) ARRAY JOIN t AS n"
    ))
    .lines()
    .map(|l| {
        let (a, b) = l.split_once('\t').unwrap();
        (unescape_tsv(a), b.parse().unwrap())
    })
    .collect()
}

fn reference_fold(samples: &[Sample]) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    for (st, v) in samples {
        *m.entry(st.join(";")).or_insert(0) += v;
    }
    m.retain(|_, v| *v != 0);
    m
}

#[test]
fn every_udf_matches_the_reference() {
    let mut rng = StdRng::seed_from_u64(7);
    for round in 0..3 {
        let a = random_samples(&mut rng, 60, 6, 5);
        let b = random_samples(&mut rng, 60, 6, 5);
        let (la, lb) = (samples_lit(&a), samples_lit(&b));
        for udf in Udf::all() {
            let name = udf.name();
            let opts = "CAST(map() AS Map(String, String))";
            let ctx = format!("{name}, round {round}");
            match udf.function {
                Function::Tree => {
                    let rows = tree_rows(&format!("{name}(CAST({la} AS {SAMPLES_T}), {opts})"));
                    assert_eq!(check_tree(&rows), reference(&[&a]), "{ctx}");
                }
                Function::Diff => {
                    let rows = tree_rows(&format!(
                        "{name}(CAST({la} AS {SAMPLES_T}), CAST({lb} AS {SAMPLES_T}), {opts})"
                    ));
                    assert_eq!(check_tree(&rows), reference(&[&a, &b]), "{ctx}");
                }
                Function::Fold => {
                    let m = fold_map(&format!("{name}(CAST({la} AS {SAMPLES_T}), {opts})"));
                    assert_eq!(m, reference_fold(&a), "{ctx}");
                }
            }
        }
    }
}

#[test]
fn wrappers_cast_any_numeric_type() {
    // UInt8 values and a literal array: the wrapper's CAST makes RowBinary safe.
    let rows = tree_rows("stackTree([(['a','b'], 5), (['a'], 2)])");
    assert_eq!(
        rows,
        vec![
            Row {
                level: 0,
                label: "total".into(),
                vals: vec![7, 0]
            },
            Row {
                level: 1,
                label: "a".into(),
                vals: vec![7, 2]
            },
            Row {
                level: 2,
                label: "b".into(),
                vals: vec![5, 5]
            },
        ]
    );
}

#[test]
fn empty_arrays() {
    let empty = "[]::Array(Tuple(Array(String), Int64))";
    assert_eq!(
        q(&format!("SELECT stackTree({empty})")),
        "[(0,'total',0,0)]\n"
    );
    assert_eq!(q(&format!("SELECT stackFold({empty})")), "[]\n");
    assert_eq!(
        q(&format!("SELECT stackDiff({empty}, {empty})")),
        "[(0,'total',0,0,0,0)]\n"
    );
    // An empty stack is the root's own value.
    assert_eq!(q("SELECT stackTree([([], 4)])"), "[(0,'total',4,4)]\n");
}

#[test]
fn constant_and_column_arguments_give_one_answer_per_row() {
    let out = q("SELECT stackFold([(['a'], 1)]) FROM numbers(4)");
    assert_eq!(out, "[('a',1)]\n".repeat(4));
    let out = q(
        "SELECT stackFoldWith([([toString(number % 3)], toInt64(number + 1))], map('exclude', '^1$')) \
         FROM numbers(6) ORDER BY number",
    );
    let want = [
        "[('0',1)]",
        "[]",
        "[('2',3)]",
        "[('0',4)]",
        "[]",
        "[('2',6)]",
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
}

#[test]
fn hostile_labels_round_trip_in_both_formats() {
    let labels = [
        "tab\there",
        "new\nline",
        "quote'd",
        "back\\slash",
        "semi;colon",
        "ünïcødé ✓ 火",
        "cr\rlf",
        "nul\0byte",
        "{'map':'like'}",
        "[(0,'tuple',1,1)]",
        "",
    ];
    let samples: Vec<Sample> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| (vec![l.to_string(), format!("leaf{i}")], i as i64 + 1))
        .collect();
    let lits = samples_lit(&samples);
    for fmt in ["tsv", "rowbinary"] {
        for pool in ["", "_pool"] {
            let f = format!("flamehouse_tree_{fmt}{pool}");
            let rows = tree_rows(&format!(
                "{f}(CAST({lits} AS {SAMPLES_T}), CAST(map() AS Map(String,String)))"
            ));
            assert_eq!(check_tree(&rows), reference(&[&samples]), "{f}");
            let f = format!("flamehouse_fold_{fmt}{pool}");
            let m = fold_map(&format!(
                "{f}(CAST({lits} AS {SAMPLES_T}), CAST(map() AS Map(String,String)))"
            ));
            // Folded lines cannot carry ';' or line breaks inside a frame.
            let want: BTreeMap<String, i64> = reference_fold(&samples)
                .into_iter()
                .map(|(k, v)| {
                    let (a, b) = k.split_once(";leaf").unwrap();
                    let a = a.replace(';', ":").replace(['\n', '\r'], " ");
                    (format!("{a};leaf{b}"), v)
                })
                .collect();
            assert_eq!(m, want, "{f}");
        }
    }
    // Options travel as Map(String, String) with hostile text too.
    let m = fold_map("stackFoldWith([(['a\\'b\\tc'], 1), (['x'], 2)], map('focus', 'a\\'b\\t'))");
    assert_eq!(m, BTreeMap::from([("a'b\tc".to_string(), 1)]));
}

#[test]
fn tree_options_prune_without_losing_value() {
    let mut rng = StdRng::seed_from_u64(11);
    let s = random_samples(&mut rng, 400, 12, 6)
        .into_iter()
        .map(|(st, v)| (st, v.abs() + 1))
        .collect::<Vec<_>>();
    let lits = samples_lit(&s);
    let full = reference(&[&s]);
    let total = full[&Vec::new()][0];
    for max_nodes in [2, 3, 10, 50, 200] {
        let rows = tree_rows(&format!(
            "stackTreeWith({lits}, map('max_nodes', '{max_nodes}', 'root', 'all'))"
        ));
        assert!(rows.len() <= max_nodes, "{} rows > {max_nodes}", rows.len());
        assert_eq!(rows[0].label, "all");
        let got = check_tree(&rows);
        assert_eq!(got[&Vec::new()][0], total, "root value conserved");
        // Every kept real node has exactly its full value.
        for (path, v) in &got {
            if path.last().map(String::as_str) != Some("[other]") {
                assert_eq!(full[path][0], v[0], "value of {path:?}");
            }
        }
    }
    let rows = tree_rows(&format!("stackTreeWith({lits}, map('min_share', '0.05'))"));
    for (path, r) in check_tree(&rows) {
        if path.last().map(String::as_str) != Some("[other]") {
            assert!(r[0] * 20 >= total, "{path:?} kept below min_share");
        }
    }
    let e = q_err(&format!(
        "SELECT stackTreeWith({lits}, map('max_nodes', '1'))"
    ));
    assert!(e.contains("max_nodes"), "{e}");
}

#[test]
fn options_of_another_function_are_errors() {
    let s = "[(['main','f'], 2)]";
    for (call, key) in [
        (
            format!("stackTreeWith({s}, map('normalize', '1'))"),
            "normalize",
        ),
        (
            format!("stackFoldWith({s}, map('max_nodes', '5'))"),
            "max_nodes",
        ),
        (format!("stackFoldWith({s}, map('root', 'all'))"), "root"),
        (
            format!("stackFoldWith({s}, map('normalize', '1'))"),
            "normalize",
        ),
    ] {
        let e = q_err(&format!("SELECT {call}"));
        assert!(e.contains(&format!("option {key}")), "{call}: {e}");
        assert!(e.contains("does not take this option"), "{call}: {e}");
    }
}

#[test]
fn pruned_remainder_and_a_real_other_frame_are_distinct_siblings() {
    let s = "[(['main','other'], 50), (['main','a'], 3), (['main','b'], 2), (['main','c'], 1)]";
    let rows = tree_rows(&format!("stackTreeWith({s}, map('max_nodes', '4'))"));
    let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["total", "main", "other", "[other]"]);
    assert_eq!(rows[2].vals, vec![50, 50]);
    assert_eq!(rows[3].vals, vec![6, 6]);
}

#[test]
fn diff_normalize_scales_baseline_to_comparison_total() {
    let a: Vec<Sample> = vec![(vec!["a".into()], 10), (vec!["b".into()], 30)];
    let b: Vec<Sample> = vec![(vec!["a".into()], 50), (vec!["b".into()], 50)];
    let rows = tree_rows(&format!(
        "stackDiffWith({}, {}, map('normalize', '1'))",
        samples_lit(&a),
        samples_lit(&b)
    ));
    let m = check_tree(&rows);
    assert_eq!(m[&Vec::<String>::new()], vec![100, 0, 100, 0]);
    assert_eq!(m[&vec!["a".to_string()]], vec![25, 25, 50, 50]);
    assert_eq!(m[&vec!["b".to_string()]], vec![75, 75, 50, 50]);
}

#[test]
fn fold_options() {
    let s = "[(['main','f','f','f','g+0x1a'], 2), (['main','0x7f00aa','h'], 3), (['main','x','y','z','w'], 5)]";
    let m = fold_map(&format!(
        "stackFoldWith({s}, map('collapse_recursion', '1'))"
    ));
    assert!(m.contains_key("main;f;g+0x1a"), "{m:?}");
    let m = fold_map(&format!("stackFoldWith({s}, map('strip_hex', '1'))"));
    assert!(
        m.contains_key("main;f;f;f;g") && m.contains_key("main;[unknown];h"),
        "{m:?}"
    );
    let m = fold_map(&format!("stackFoldWith({s}, map('max_depth', '3'))"));
    assert_eq!(m["main;x;[truncated]"], 5, "{m:?}");
    assert_eq!(m["main;f;[truncated]"], 2, "{m:?}");
    let m = fold_map(&format!("stackFoldWith({s}, map('focus', '^h$'))"));
    assert_eq!(m, BTreeMap::from([("main;0x7f00aa;h".to_string(), 3)]));
    let m = fold_map(&format!("stackFoldWith({s}, map('exclude', '^(h|w)$'))"));
    assert_eq!(m.keys().collect::<Vec<_>>(), vec!["main;f;f;f;g+0x1a"]);
}

#[test]
fn deep_stack_of_ten_thousand_frames() {
    let rows = tree_rows("stackTree([(arrayMap(i -> concat('f', toString(i)), range(10000)), 7)])");
    assert_eq!(rows.len(), 10_001);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.level as usize, i);
        assert_eq!(r.vals, vec![7, if i == 10_000 { 7 } else { 0 }]);
    }
    let m = fold_map("stackFold([(arrayMap(i -> concat('f', toString(i)), range(10000)), 7)])");
    assert_eq!(m.len(), 1);
    assert_eq!(m.keys().next().unwrap().split(';').count(), 10_000);
}

#[test]
fn ten_thousand_calls_through_one_pool_stay_aligned() {
    for f in ["flamehouse_fold_rowbinary_pool", "flamehouse_fold_tsv_pool"] {
        let bad = q(&format!(
            "SELECT count() FROM (SELECT number, \
               {f}(CAST([([toString(number)], toInt64(number + 1))] AS Array(Tuple(Array(String), Int64))), \
                   CAST(map() AS Map(String, String))) AS r FROM numbers(10000)) \
             WHERE length(r) != 1 OR r[1].1 != toString(number) OR r[1].2 != number + 1 \
             SETTINGS max_block_size = 1"
        ));
        assert_eq!(bad.trim(), "0", "{f}");
    }
}
