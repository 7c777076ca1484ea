//! Properties of `stack_tree`, `stack_diff` and `stack_fold` against the
//! references in `common`.

use crate::common::*;
use flamehouse_udf::fold::stack_fold;
use flamehouse_udf::tree::{stack_diff, stack_tree};
use proptest::prelude::*;
use std::collections::HashMap;

/// The folded line of a filtered stack: `;` in a frame becomes `:`, line
/// breaks become spaces, frames are joined by `;`.
fn fold_line(stack: &[Vec<u8>]) -> Vec<u8> {
    let frames: Vec<Vec<u8>> = stack
        .iter()
        .map(|f| {
            f.iter()
                .map(|&b| match b {
                    b';' => b':',
                    b'\n' | b'\r' => b' ',
                    b => b,
                })
                .collect()
        })
        .collect();
    frames.join(&b';')
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn tree_invariants_reference_and_pruning(raw in vocab_samples(), spec in tree_spec()) {
        let samples = to_samples(&raw);
        let pruned = rows(&stack_tree(&samples, &spec.options()).unwrap());
        let full = rows(&stack_tree(&samples, &spec.unpruned()).unwrap());
        check_valid(&full, false)?;
        check_valid(&pruned, false)?;

        // Total conserved, root labelled as asked.
        prop_assert_eq!(full[0].value[0], spec.filter.total(&raw));
        prop_assert_eq!(&full[0].label, spec.root.as_bytes());

        // The unpruned tree is the prefix enumeration.
        let reference = reference_tree(&[&raw], &spec.filter);
        prop_assert_eq!(path_map(&full)?, ref_values(&reference));

        check_pruned(&pruned, &full, &spec, &reference)?;
    }

    #[test]
    fn diff_invariants_reference_normalize_and_pruning(
        a in vocab_samples(),
        b in vocab_samples(),
        spec in tree_spec(),
    ) {
        let (sa, sb) = (to_samples(&a), to_samples(&b));
        let pruned = rows(&stack_diff(&sa, &sb, &spec.diff(spec.options())).unwrap());
        let full = rows(&stack_diff(&sa, &sb, &spec.diff(spec.unpruned())).unwrap());
        let raw_opts = flamehouse_udf::options::DiffOptions {
            normalize: false,
            tree: spec.unpruned(),
        };
        let raw_full = rows(&stack_diff(&sa, &sb, &raw_opts).unwrap());
        check_valid(&raw_full, true)?;
        check_valid(&full, true)?;
        check_valid(&pruned, true)?;

        let (t0, t1) = (spec.filter.total(&a), spec.filter.total(&b));
        prop_assert_eq!(raw_full[0].value, [t0, t1]);
        let reference = reference_tree(&[&a, &b], &spec.filter);
        prop_assert_eq!(path_map(&raw_full)?, ref_values(&reference));

        if spec.normalize {
            // The comparison side is untouched; the baseline total becomes
            // the comparison's (unless it is 0); every baseline self is its
            // exact scaled value rounded down or up.
            prop_assert_eq!(full[0].value, [if t0 != 0 { t1 } else { 0 }, t1]);
            let norm = path_map(&full)?;
            let orig = path_map(&raw_full)?;
            prop_assert_eq!(norm.len(), orig.len());
            for (path, (_, s)) in &orig {
                let n = norm.get(path);
                prop_assert!(n.is_some(), "path {:?} lost by normalize", path);
                let (nv, ns) = n.unwrap();
                prop_assert_eq!(nv[1], orig[path].0[1]);
                prop_assert_eq!(ns[1], s[1]);
                if t0 != 0 {
                    let x = i128::from(s[0]) * i128::from(t1);
                    let (num, den) = if t0 < 0 { (-x, -i128::from(t0)) } else { (x, i128::from(t0)) };
                    let lo = num.div_euclid(den);
                    let hi = lo + i128::from(num.rem_euclid(den) != 0);
                    let got = i128::from(ns[0]);
                    prop_assert!(lo <= got && got <= hi, "path {:?}: {} not in [{}, {}]", path, got, lo, hi);
                } else {
                    prop_assert_eq!(ns[0], s[0]);
                }
            }
        } else {
            prop_assert_eq!(&full, &raw_full);
        }

        check_pruned(&pruned, &full, &spec, &reference)?;
    }

    #[test]
    fn fold_matches_grouping_reference(raw in vocab_samples(), spec in filter_spec()) {
        let got = stack_fold(&to_samples(&raw), &spec.options()).unwrap();
        let mut merged: HashMap<Vec<u8>, i64> = HashMap::new();
        for (stack, v) in &raw {
            if let Some(stack) = spec.apply(stack) {
                *merged.entry(fold_line(&stack)).or_default() += v;
            }
        }
        let mut want: Vec<(Vec<u8>, i64)> = merged.into_iter().filter(|(_, v)| *v != 0).collect();
        want.sort();
        prop_assert_eq!(got, want);
    }
}

/// Stacks over a wider vocabulary and deeper than `vocab_samples`, so that
/// pruning cuts deep, bushy trees.
fn bushy_samples() -> impl Strategy<Value = RawSamples> {
    let frame = (0u8..40).prop_map(|i| format!("f{}", i % 13 + i / 13).into_bytes());
    let stack = prop::collection::vec(frame, 0..12);
    prop::collection::vec(
        (stack, prop_oneof![4 => 1i64..1000, 1 => -50i64..50]),
        0..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The pruned tree without a filter groups raw frame bytes; with a
    /// filter that changes nothing it groups interned ids. Both must give
    /// the same rows, every kept node exact against the reference, nothing
    /// lost (root and `value = self + children` hold), rows within the cap.
    #[test]
    fn pruning_raw_and_interned_agree_and_keep_value(
        raw in bushy_samples(),
        cmp in bushy_samples(),
        max_nodes in prop_oneof![Just(0usize), 2usize..80],
        min_share in prop_oneof![Just(0.0f64), 0.0f64..0.2],
    ) {
        let spec = TreeSpec {
            max_nodes,
            min_share,
            normalize: false,
            root: "total",
            filter: FilterSpec::default(),
        };
        let samples = to_samples(&raw);
        let opts = spec.options();
        let mut noop = opts.clone();
        noop.filter.exclude = Some(regex::bytes::Regex::new("^never matches$").unwrap());
        let pruned = rows(&stack_tree(&samples, &opts).unwrap());
        prop_assert_eq!(&pruned, &rows(&stack_tree(&samples, &noop).unwrap()));
        let full = rows(&stack_tree(&samples, &spec.unpruned()).unwrap());
        check_valid(&pruned, false)?;
        let reference = reference_tree(&[&raw], &spec.filter);
        prop_assert_eq!(path_map(&full)?, ref_values(&reference));
        check_pruned(&pruned, &full, &spec, &reference)?;

        // The diff: both sides through the same pruning.
        let sc = to_samples(&cmp);
        let d = |t: flamehouse_udf::options::TreeOptions| spec.diff(t);
        let pruned = rows(&stack_diff(&samples, &sc, &d(opts.clone())).unwrap());
        prop_assert_eq!(&pruned, &rows(&stack_diff(&samples, &sc, &d(noop)).unwrap()));
        let full = rows(&stack_diff(&samples, &sc, &d(spec.unpruned())).unwrap());
        check_valid(&pruned, true)?;
        let reference = reference_tree(&[&raw, &cmp], &spec.filter);
        check_pruned(&pruned, &full, &spec, &reference)?;
    }
}

/// Many stacks over a few labels, deep: nodes of more than 16 stacks
/// (grouped by hashing their raw frames), small ones (grouped by
/// comparing), long chains, duplicates and empty stacks.
fn shared_samples() -> impl Strategy<Value = RawSamples> {
    let frame = (0u8..6).prop_map(|i| format!("m{i}").into_bytes());
    let stack = prop::collection::vec(frame, 0..14);
    prop::collection::vec(
        (stack, prop_oneof![4 => 1i64..1000, 1 => -50i64..50]),
        0..200,
    )
}

/// Runs a counted build: the rows it streams and the count it announced.
fn counted(
    build: impl FnOnce(
        &mut flamehouse_udf::tree::Count<'_>,
        &mut flamehouse_udf::tree::Emit<'_>,
    ) -> flamehouse_udf::Result<()>,
) -> (Vec<Row>, Option<u64>) {
    let mut out = Vec::new();
    let mut announced = None;
    build(
        &mut |n| {
            announced = Some(n);
            Ok(())
        },
        &mut |level, label, value, self_| {
            out.push(Row {
                level,
                label: label.to_vec(),
                value,
                self_,
            });
            Ok(())
        },
    )
    .unwrap();
    (out, announced)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The full tree over raw frames (a counting pass that leaves every
    /// node's stacks contiguous, then an emitting pass that finds children
    /// from where neighbouring stacks part) against the reference, against
    /// the same tree over interned ids (a filter that changes nothing),
    /// and the announced row count against the rows streamed; single and
    /// diff.
    #[test]
    fn full_tree_over_raw_frames_matches_interned_reference_and_count(
        a in shared_samples(),
        b in shared_samples(),
    ) {
        use flamehouse_udf::options::DiffOptions;
        use flamehouse_udf::tree::{stack_diff_counted, stack_tree_counted};
        let spec = TreeSpec {
            max_nodes: 0,
            min_share: 0.0,
            normalize: false,
            root: "total",
            filter: FilterSpec::default(),
        };
        let opts = spec.options();
        let mut noop = opts.clone();
        noop.filter.exclude = Some(regex::bytes::Regex::new("^never matches$").unwrap());

        let (full, n) = counted(|c, e| stack_tree_counted(&mut to_samples(&a), &opts, Some(c), e));
        prop_assert_eq!(n, Some(full.len() as u64));
        check_valid(&full, false)?;
        let reference = reference_tree(&[&a], &spec.filter);
        prop_assert_eq!(path_map(&full)?, ref_values(&reference));
        let (interned, _) = counted(|c, e| stack_tree_counted(&mut to_samples(&a), &noop, Some(c), e));
        prop_assert_eq!(&full, &interned);

        let d = |tree| DiffOptions { normalize: false, tree };
        let (full, n) = counted(|c, e| {
            stack_diff_counted(&mut to_samples(&a), &mut to_samples(&b), &d(opts.clone()), Some(c), e)
        });
        prop_assert_eq!(n, Some(full.len() as u64));
        check_valid(&full, true)?;
        let reference = reference_tree(&[&a, &b], &spec.filter);
        prop_assert_eq!(path_map(&full)?, ref_values(&reference));
        let (interned, _) = counted(|c, e| {
            stack_diff_counted(&mut to_samples(&a), &mut to_samples(&b), &d(noop.clone()), Some(c), e)
        });
        prop_assert_eq!(&full, &interned);
    }
}
