//! Shared strategies, independent reference implementations and checks.

use flamehouse_fixtures::testing;
use flamehouse_udf::options::{DiffOptions, FilterOptions, TreeOptions};
use flamehouse_udf::samples::Samples;
use flamehouse_udf::tree::{DiffRow, TreeRow};
use proptest::prelude::*;
use regex::bytes::Regex;
use std::collections::HashMap;

/// Frames of the property tests: few enough that prefixes are shared, with
/// hex offsets for `strip_hex`, and `;`/`:`/line breaks for fold's mapping.
/// No label is `[other]`, so an `[other]` row is always a pruning aggregate
/// (`other` itself is a real frame, as in real profiles).
pub const VOCAB: &[&[u8]] = &[
    b"a", b"b", b"c", b"other", b"b+0x1a", b"b+0x2f", b"0xdead", b"d;e", b"d:e", b"n\nl", b"n l",
    b"r\rx",
];

/// Literal patterns for focus/exclude (escaped before use as regexes).
const PATTERNS: &[&str] = &["a", "b", "d", "0x", "unknown", "zzz"];

pub type Stack = testing::Stack;
pub type RawSamples = Vec<(Stack, i64)>;
/// `path -> (value, self)`, both sides.
pub use flamehouse_fixtures::testing::PathValues;

pub fn to_samples(raw: &RawSamples) -> Samples {
    let mut s = Samples::new();
    for (stack, v) in raw {
        s.push(stack, *v);
    }
    s
}

pub fn value() -> impl Strategy<Value = i64> {
    prop_oneof![3 => -5i64..=5, 1 => -1000i64..=1000, 1 => Just(0i64)]
}

pub fn vocab_stack() -> impl Strategy<Value = Stack> {
    prop::collection::vec(prop::sample::select(VOCAB).prop_map(<[u8]>::to_vec), 0..6)
}

pub fn vocab_samples() -> impl Strategy<Value = RawSamples> {
    prop::collection::vec((vocab_stack(), value()), 0..30)
}

/// Filter options in a form the reference can interpret without regexes.
#[derive(Debug, Clone, Default)]
pub struct FilterSpec {
    pub collapse_recursion: bool,
    pub strip_hex: bool,
    pub max_depth: usize,
    pub focus: Option<&'static str>,
    pub exclude: Option<&'static str>,
}

pub fn filter_spec() -> impl Strategy<Value = FilterSpec> {
    let pat = || prop::option::weighted(0.25, prop::sample::select(PATTERNS));
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![2 => Just(0usize), 1 => 1usize..5],
        pat(),
        pat(),
    )
        .prop_map(
            |(collapse_recursion, strip_hex, max_depth, focus, exclude)| FilterSpec {
                collapse_recursion,
                strip_hex,
                max_depth,
                focus,
                exclude,
            },
        )
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// `strip_hex` on the vocabulary, by table.
fn ref_strip_hex(f: &[u8]) -> Vec<u8> {
    match f {
        b"b+0x1a" | b"b+0x2f" => b"b".to_vec(),
        b"0xdead" => b"[unknown]".to_vec(),
        _ => {
            assert!(
                !contains(f, b"0x"),
                "frame {f:?} missing from the strip table"
            );
            f.to_vec()
        }
    }
}

impl FilterSpec {
    pub fn options(&self) -> FilterOptions {
        let re = |p: &str| Regex::new(&regex::escape(p)).unwrap();
        FilterOptions {
            collapse_recursion: self.collapse_recursion,
            strip_hex: self.strip_hex,
            max_depth: self.max_depth,
            focus: self.focus.map(re),
            exclude: self.exclude.map(re),
        }
    }

    /// The documented transform: strip hex, collapse recursion,
    /// focus/exclude, then the depth limit. `None` when dropped.
    pub fn apply(&self, stack: &[Vec<u8>]) -> Option<Stack> {
        let mut out: Stack = Vec::new();
        for f in stack {
            let f = if self.strip_hex {
                ref_strip_hex(f)
            } else {
                f.clone()
            };
            if self.collapse_recursion && out.last() == Some(&f) {
                continue;
            }
            out.push(f);
        }
        if let Some(p) = self.focus {
            if !out.iter().any(|f| contains(f, p.as_bytes())) {
                return None;
            }
        }
        if let Some(p) = self.exclude {
            if out.iter().any(|f| contains(f, p.as_bytes())) {
                return None;
            }
        }
        if self.max_depth > 0 && out.len() > self.max_depth {
            out.truncate(self.max_depth - 1);
            out.push(b"[truncated]".to_vec());
        }
        Some(out)
    }

    /// Sum of the values of the samples that pass the filter.
    pub fn total(&self, raw: &RawSamples) -> i64 {
        raw.iter()
            .filter(|(s, _)| self.apply(s).is_some())
            .map(|(_, v)| v)
            .sum()
    }
}

#[derive(Debug, Clone)]
pub struct TreeSpec {
    pub max_nodes: usize,
    pub min_share: f64,
    pub normalize: bool,
    pub root: &'static str,
    pub filter: FilterSpec,
}

pub fn tree_spec() -> impl Strategy<Value = TreeSpec> {
    (
        prop_oneof![1 => Just(0usize), 2 => 2usize..50],
        prop_oneof![1 => Just(0.0f64), 1 => 0.0f64..0.3],
        any::<bool>(),
        prop::sample::select(&["total", "root"][..]),
        filter_spec(),
    )
        .prop_map(|(max_nodes, min_share, normalize, root, filter)| TreeSpec {
            max_nodes,
            min_share,
            normalize,
            root,
            filter,
        })
}

impl TreeSpec {
    pub fn options(&self) -> TreeOptions {
        let o = TreeOptions {
            max_nodes: self.max_nodes,
            min_share: self.min_share,
            root: self.root.to_string(),
            filter: self.filter.options(),
        };
        o.validate().unwrap();
        o
    }

    /// The diff options (the tree options and `normalize`).
    pub fn diff(&self, tree: TreeOptions) -> DiffOptions {
        DiffOptions {
            normalize: self.normalize,
            tree,
        }
    }

    /// The same options without pruning.
    pub fn unpruned(&self) -> TreeOptions {
        TreeOptions {
            max_nodes: 0,
            min_share: 0.0,
            ..self.options()
        }
    }

    pub fn prunes(&self) -> bool {
        self.max_nodes > 0 || self.min_share > 0.0
    }
}

/// A tree or diff row with both sides (side 1 is 0 for a single tree): the
/// workspace's shared test row.
pub use flamehouse_fixtures::testing::{RefNode, TreeRow as Row};

/// The library's rows as the shared test rows.
pub trait AsRow {
    fn as_row(&self) -> Row;
}

impl AsRow for TreeRow {
    fn as_row(&self) -> Row {
        Row {
            level: self.level,
            label: self.label.clone(),
            value: [self.value, 0],
            self_: [self.self_, 0],
        }
    }
}

impl AsRow for DiffRow {
    fn as_row(&self) -> Row {
        Row {
            level: self.level,
            label: self.label.clone(),
            value: [self.value, self.value_right],
            self_: [self.self_, self.self_right],
        }
    }
}

pub fn rows<T: AsRow>(rows: &[T]) -> Vec<Row> {
    rows.iter().map(AsRow::as_row).collect()
}

fn fail(e: String) -> TestCaseError {
    TestCaseError::fail(e)
}

fn children(rows: &[Row]) -> Result<Vec<Vec<usize>>, TestCaseError> {
    testing::children(rows).map_err(fail)
}

/// The frame invariants ([`testing::check_tree_rows`]): one level-0 root
/// first, pre-order levels, `value = self + sum(children)` on both sides,
/// distinct sibling labels, siblings by descending key (value, or value +
/// valueRight for a diff), ties by label bytes.
pub fn check_valid(rows: &[Row], diff: bool) -> Result<(), TestCaseError> {
    testing::check_tree_rows(rows, diff).map_err(fail)
}

/// Every row with its path (labels below the root).
pub fn with_paths(rows: &[Row]) -> Vec<(Stack, &Row)> {
    testing::with_paths(rows)
}

/// The tree computed without a tree: every prefix of every filtered stack
/// ([`testing::reference_tree`] on the samples `filter` keeps).
pub fn reference_tree(sides: &[&RawSamples], filter: &FilterSpec) -> HashMap<Stack, RefNode> {
    let kept: Vec<RawSamples> = sides
        .iter()
        .map(|raw| {
            raw.iter()
                .filter_map(|(s, v)| Some((filter.apply(s)?, *v)))
                .collect()
        })
        .collect();
    let kept: Vec<&[(Stack, i64)]> = kept.iter().map(Vec::as_slice).collect();
    testing::reference_tree(&kept)
}

/// The nodes a pruned tree keeps, chosen the plain way: a heap of every
/// child of every kept node at or above the magnitude threshold, heaviest
/// first (ties: first stack, then depth); a node is kept when its rows
/// (itself, plus an `[other]` row if it has children, minus its parent's
/// `[other]` row when it is the last of the parent's children to be kept)
/// still fit in `max_nodes`. Sorted paths, the root included.
pub fn reference_kept(reference: &HashMap<Stack, RefNode>, spec: &TreeSpec) -> Vec<Stack> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut kids: HashMap<&[Vec<u8>], Vec<&Stack>> = HashMap::new();
    for p in reference.keys().filter(|p| !p.is_empty()) {
        kids.entry(&p[..p.len() - 1]).or_default().push(p);
    }
    let root_mag = reference[&Vec::new()].magnitude;
    let threshold = if spec.min_share > 0.0 {
        (spec.min_share * root_mag as f64).ceil() as u64
    } else {
        0
    };
    let limit = if spec.max_nodes == 0 {
        usize::MAX
    } else {
        spec.max_nodes
    };
    let n_kids = |p: &[Vec<u8>]| kids.get(p).map_or(0, Vec::len);
    let mut heap = BinaryHeap::new();
    let push = |heap: &mut BinaryHeap<_>, p: &[Vec<u8>]| {
        for &c in kids.get(p).into_iter().flatten() {
            let n = &reference[c];
            if n.magnitude >= threshold {
                heap.push((n.magnitude, Reverse((n.first, c.len())), c.clone()));
            }
        }
    };
    let mut kept = vec![Vec::new()];
    let mut selected: HashMap<Stack, usize> = HashMap::new();
    let mut rows = 1 + usize::from(n_kids(&[]) > 0);
    push(&mut heap, &[]);
    while let Some((_, _, c)) = heap.pop() {
        let parent = c[..c.len() - 1].to_vec();
        let sel = selected.entry(parent.clone()).or_default();
        let completes = *sel + 1 == n_kids(&parent);
        let cost = 1 + usize::from(n_kids(&c) > 0);
        if rows + cost - usize::from(completes) > limit {
            continue;
        }
        rows = rows + cost - usize::from(completes);
        *sel += 1;
        push(&mut heap, &c);
        kept.push(c);
    }
    kept.sort();
    kept
}

/// `path -> (value, self)` of an output, failing on a duplicate path.
pub fn path_map(rows: &[Row]) -> Result<PathValues, TestCaseError> {
    testing::path_values(rows).map_err(fail)
}

pub fn ref_values(reference: &HashMap<Stack, RefNode>) -> HashMap<Stack, ([i64; 2], [i64; 2])> {
    reference
        .iter()
        .map(|(k, n)| (k.clone(), (n.value, n.self_)))
        .collect()
}

/// Pruning keeps value: at most `max_nodes` rows, the same root, every
/// kept node exactly as in the unpruned tree, `other` rows are leaves;
/// with `min_share` only, the kept nodes are exactly those at or above the
/// magnitude threshold.
pub fn check_pruned(
    pruned: &[Row],
    full: &[Row],
    spec: &TreeSpec,
    reference: &HashMap<Stack, RefNode>,
) -> Result<(), TestCaseError> {
    if !spec.prunes() {
        prop_assert_eq!(pruned, full);
        return Ok(());
    }
    if spec.max_nodes > 0 {
        prop_assert!(
            pruned.len() <= spec.max_nodes,
            "{} rows > max_nodes {}",
            pruned.len(),
            spec.max_nodes
        );
        if spec.min_share == 0.0 && full.len() <= spec.max_nodes {
            prop_assert_eq!(pruned, full);
        }
    }
    prop_assert_eq!(&pruned[0], &full[0]);
    let full_map = path_map(full)?;
    let kids = children(pruned)?;
    let mut kept = Vec::new();
    for (i, (path, r)) in with_paths(pruned).into_iter().enumerate() {
        if r.level > 0 && r.label == b"[other]" {
            prop_assert!(kids[i].is_empty(), "`other` row {} has children", i);
            prop_assert_eq!(r.value, r.self_);
            continue;
        }
        let want = full_map.get(&path);
        prop_assert_eq!(want, Some(&(r.value, r.self_)), "path {:?}", path);
        kept.push(path);
    }
    // Exactly the nodes the plain greedy choice keeps (the builder only
    // expands those, skips children that can never fit, stops early).
    let mut sorted = kept.clone();
    sorted.sort();
    prop_assert_eq!(sorted, reference_kept(reference, spec));
    if spec.max_nodes == 0 {
        let root_mag = reference[&Vec::new()].magnitude;
        let threshold = (spec.min_share * root_mag as f64).ceil() as u64;
        let mut want: Vec<Stack> = reference
            .iter()
            .filter(|(p, n)| p.is_empty() || n.magnitude >= threshold)
            .map(|(p, _)| p.clone())
            .collect();
        want.sort();
        kept.sort();
        prop_assert_eq!(kept, want);
    }
    Ok(())
}
