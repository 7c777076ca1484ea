//! The `executable()` table-function commands: N sample rows in, one row per
//! node out, for inputs too big for one row.

use flamehouse_tests::*;
use rand::{rngs::StdRng, SeedableRng};

fn values_sql(samples: &[Sample]) -> String {
    let rows: Vec<String> = samples
        .iter()
        .map(|(st, v)| {
            let f: Vec<String> = st.iter().map(|x| lit(x)).collect();
            format!("([{}], {v})", f.join(","))
        })
        .collect();
    format!(
        "SELECT stack, value FROM values('stack Array(String), value Int64', {})",
        rows.join(",")
    )
}

#[test]
fn tree_diff_and_fold_tables_match_the_reference() {
    let mut rng = StdRng::seed_from_u64(21);
    let mut a = random_samples(&mut rng, 80, 5, 5);
    let b = random_samples(&mut rng, 80, 5, 5);
    a.push((vec!["tab\there".into(), "quote'back\\slash".into()], 9));
    for fmt in ["TabSeparated", "RowBinary"] {
        let rows = parse_rows(&q(&format!(
            "SELECT * FROM executable('flamehouse-udf tree-table --format {fmt}', {fmt}, \
             'level UInt32, label String, value Int64, self Int64', ({}))",
            values_sql(&a)
        )));
        assert_eq!(check_tree(&rows), reference(&[&a]), "{fmt} tree");

        let rows = parse_rows(&q(&format!(
            "SELECT * FROM executable('flamehouse-udf diff-table --format {fmt}', {fmt}, \
             'level UInt32, label String, value Int64, self Int64, valueRight Int64, selfRight Int64', \
             ({}), ({}))",
            values_sql(&a),
            values_sql(&b)
        )));
        assert_eq!(check_tree(&rows), reference(&[&a, &b]), "{fmt} diff");

        let folded = q(&format!(
            "SELECT * FROM executable('flamehouse-udf fold-table --format {fmt} --max-depth 3', {fmt}, \
             'stack String, value Int64', ({}))",
            values_sql(&a)
        ));
        let sum: i64 = folded
            .lines()
            .map(|l| l.rsplit_once('\t').unwrap().1.parse::<i64>().unwrap())
            .sum();
        let want: i64 = a.iter().map(|s| s.1).sum();
        assert_eq!(sum, want, "{fmt} fold total");
        assert!(folded
            .lines()
            .all(|l| l.split('\t').next().unwrap().split(';').count() <= 3));
    }
    let rows = parse_rows(&q(&format!(
        "SELECT * FROM executable('flamehouse-udf tree-table --format RowBinary --max-nodes 5', RowBinary, \
         'level UInt32, label String, value Int64, self Int64', ({}))",
        values_sql(&a)
    )));
    assert!(rows.len() <= 5);
    assert_eq!(
        check_tree(&rows)[&Vec::new()][0],
        a.iter().map(|s| s.1).sum::<i64>()
    );
}
