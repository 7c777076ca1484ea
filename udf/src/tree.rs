//! The flame-graph tree: Grafana's nested-set data frame, single or diff.
//!
//! Rows come out in depth-first pre-order with one level-0 root; each row is
//! exactly one level below its parent; siblings are ordered by descending
//! value (for a diff: by descending `value + valueRight`, the bar width
//! Grafana draws), ties by label bytes; and `value = self + sum(children)`
//! holds at every node, on each side.
//!
//! Negative values are summed as they are (a memory delta may be negative):
//! they are legal, sort after positive siblings and keep the invariants.
//! Pruning and `min_share` use a node's *magnitude*, the sum of `|value|`
//! of every sample that passes through it, so mixed signs never make a
//! busy node look empty.

use crate::filter;
use crate::options::{TreeOptions, OTHER_LABEL};
use crate::samples::Samples;
use crate::{Error, Result};
use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::collections::BinaryHeap;

/// One row of a single flame graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeRow {
    /// Depth; the root is 0.
    pub level: u32,
    /// Frame label.
    pub label: Vec<u8>,
    /// Inclusive value.
    pub value: i64,
    /// Exclusive value.
    pub self_: i64,
}

/// One row of a diff flame graph: baseline on the left, comparison on the
/// right, as Grafana's diff view expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRow {
    /// Depth; the root is 0.
    pub level: u32,
    /// Frame label.
    pub label: Vec<u8>,
    /// Baseline inclusive value.
    pub value: i64,
    /// Baseline exclusive value.
    pub self_: i64,
    /// Comparison inclusive value.
    pub value_right: i64,
    /// Comparison exclusive value.
    pub self_right: i64,
}

const ROOT: u32 = 0;
const NO_LABEL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Node {
    parent: u32,
    label: u32,
    self_: [i64; 2],
    value: [i64; 2],
    magnitude: u64,
    /// First child and next sibling: an intrusive list, because one small
    /// Vec per node made allocation the tree's main cost.
    first_child: u32,
    next_sibling: u32,
    child_count: u32,
}

const NONE: u32 = u32::MAX;

/// A prefix tree of stacks with two value sides (0 = baseline or single,
/// 1 = comparison).
#[derive(Debug)]
pub struct Tree {
    labels: Vec<Box<[u8]>>,
    label_ids: HashMap<Box<[u8]>, u32>,
    nodes: Vec<Node>,
    child_ids: HashMap<(u32, u32), u32>,
}

impl Node {
    fn new(parent: u32, label: u32) -> Node {
        Node {
            parent,
            label,
            self_: [0; 2],
            value: [0; 2],
            magnitude: 0,
            first_child: NONE,
            next_sibling: NONE,
            child_count: 0,
        }
    }
}

/// Iterates the children of node `n`.
fn children(nodes: &[Node], n: u32) -> impl Iterator<Item = u32> + '_ {
    let mut c = nodes[n as usize].first_child;
    std::iter::from_fn(move || {
        if c == NONE {
            return None;
        }
        let cur = c;
        c = nodes[c as usize].next_sibling;
        Some(cur)
    })
}

impl Default for Tree {
    fn default() -> Self {
        Self::new()
    }
}

impl Tree {
    /// An empty tree holding only the root.
    pub fn new() -> Self {
        Tree {
            labels: Vec::new(),
            label_ids: HashMap::default(),
            nodes: vec![Node::new(ROOT, NO_LABEL)],
            child_ids: HashMap::default(),
        }
    }

    /// Number of nodes, the root included.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    fn intern(&mut self, label: &[u8]) -> u32 {
        if let Some(&id) = self.label_ids.get(label) {
            return id;
        }
        let id = self.labels.len() as u32;
        let b: Box<[u8]> = label.into();
        self.labels.push(b.clone());
        self.label_ids.insert(b, id);
        id
    }

    fn add_stack<'a>(
        &mut self,
        frames: impl Iterator<Item = &'a [u8]>,
        side: usize,
        v: i64,
    ) -> Result<()> {
        let mag = v.unsigned_abs();
        let mut cur = ROOT;
        self.nodes[0].magnitude = self.nodes[0].magnitude.saturating_add(mag);
        for f in frames {
            let label = self.intern(f);
            let next = match self.child_ids.get(&(cur, label)) {
                Some(&n) => n,
                None => {
                    let n = self.nodes.len() as u32;
                    let mut node = Node::new(cur, label);
                    let parent = &mut self.nodes[cur as usize];
                    node.next_sibling = parent.first_child;
                    parent.first_child = n;
                    parent.child_count += 1;
                    self.nodes.push(node);
                    self.child_ids.insert((cur, label), n);
                    n
                }
            };
            let node = &mut self.nodes[next as usize];
            node.magnitude = node.magnitude.saturating_add(mag);
            cur = next;
        }
        let s = &mut self.nodes[cur as usize].self_[side];
        *s = s.checked_add(v).ok_or(Error::Overflow)?;
        Ok(())
    }

    /// Adds every sample of `samples` to `side` after the filter in `opts`.
    pub fn add_samples(
        &mut self,
        samples: &Samples,
        side: usize,
        opts: &TreeOptions,
    ) -> Result<()> {
        let identity = opts.filter.is_identity();
        let mut buf: Vec<Cow<'_, [u8]>> = Vec::new();
        for (stack, v) in samples.iter() {
            if identity {
                self.add_stack(stack.frames(), side, v)?;
            } else if filter::apply(&opts.filter, &stack, &mut buf) {
                self.add_stack(buf.iter().map(|c| &**c), side, v)?;
            }
        }
        Ok(())
    }

    /// Computes inclusive values bottom-up, checking for overflow.
    fn sum_values(&mut self) -> Result<()> {
        for n in &mut self.nodes {
            n.value = n.self_;
        }
        // Children always have larger indexes than their parent.
        for i in (1..self.nodes.len()).rev() {
            let (p, v) = (self.nodes[i].parent as usize, self.nodes[i].value);
            for (side, val) in v.iter().enumerate() {
                let pv = &mut self.nodes[p].value[side];
                *pv = pv.checked_add(*val).ok_or(Error::Overflow)?;
            }
        }
        Ok(())
    }

    /// Scales the baseline's self values so its total equals the
    /// comparison's total, with largest-remainder rounding.
    fn normalize_baseline(&mut self) -> Result<()> {
        let t0: i128 = self.nodes.iter().map(|n| n.self_[0] as i128).sum();
        let t1: i128 = self.nodes.iter().map(|n| n.self_[1] as i128).sum();
        if t0 == 0 || t0 == t1 {
            return Ok(());
        }
        // Make the denominator positive so floor division is well defined.
        let (num, den) = if t0 < 0 { (-t1, -t0) } else { (t1, t0) };
        let mut rems: Vec<(i128, usize)> = Vec::new();
        let mut sum: i128 = 0;
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let x = n.self_[0] as i128 * num;
            let q = x.div_euclid(den);
            let r = x.rem_euclid(den);
            n.self_[0] = i64::try_from(q).map_err(|_| Error::Overflow)?;
            sum += q;
            if r != 0 {
                rems.push((r, i));
            }
        }
        let mut deficit = t1 - sum;
        rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, i) in rems {
            if deficit <= 0 {
                break;
            }
            self.nodes[i].self_[0] += 1;
            deficit -= 1;
        }
        Ok(())
    }

    /// Chooses which nodes to keep under `max_nodes` and `min_share`;
    /// returns a keep flag per node.
    fn select(&self, opts: &TreeOptions) -> Vec<bool> {
        let n = self.nodes.len();
        let threshold = if opts.min_share > 0.0 {
            (opts.min_share * self.nodes[0].magnitude as f64).ceil() as u64
        } else {
            0
        };
        if opts.max_nodes == 0 && threshold == 0 {
            return vec![true; n];
        }
        let mut keep = vec![false; n];
        keep[0] = true;
        // Greedy: always consider the heaviest node whose parent is kept;
        // take it when the rows it costs (itself, plus an `other` row for
        // its own children, minus its parent's `other` row when it is the
        // parent's last child) still fit. A node that does not fit stays in
        // its parent's `other` row with its whole subtree.
        let limit = if opts.max_nodes == 0 {
            usize::MAX
        } else {
            opts.max_nodes
        };
        let mut heap = BinaryHeap::new();
        let push_children = |heap: &mut BinaryHeap<(u64, std::cmp::Reverse<u32>)>, p: u32| {
            for c in children(&self.nodes, p) {
                let m = self.nodes[c as usize].magnitude;
                if m >= threshold {
                    heap.push((m, std::cmp::Reverse(c)));
                }
            }
        };
        push_children(&mut heap, ROOT);
        let mut selected_children = vec![0u32; n];
        let mut rows: usize = 1 + usize::from(self.nodes[0].child_count > 0);
        while let Some((_, std::cmp::Reverse(c))) = heap.pop() {
            let node = &self.nodes[c as usize];
            let p = node.parent as usize;
            let completes = selected_children[p] + 1 == self.nodes[p].child_count;
            let cost = 1 + usize::from(node.child_count > 0);
            let new_rows = rows + cost - usize::from(completes);
            if new_rows > limit {
                continue;
            }
            rows = new_rows;
            selected_children[p] += 1;
            keep[c as usize] = true;
            push_children(&mut heap, c);
        }
        keep
    }

    fn finish_generic<R>(
        mut self,
        opts: &TreeOptions,
        diff: bool,
        mut emit: impl FnMut(u32, &[u8], [i64; 2], [i64; 2]) -> R,
    ) -> Result<Vec<R>> {
        if diff && opts.normalize {
            self.normalize_baseline()?;
        }
        self.sum_values()?;
        let keep = self.select(opts);
        let key = |v: [i64; 2]| -> i128 {
            if diff {
                v[0] as i128 + v[1] as i128
            } else {
                v[0] as i128
            }
        };
        // An entry is either a kept node or the `other` aggregate of a parent.
        #[derive(Clone, Copy)]
        enum Item {
            Node(u32),
            Other([i64; 2]),
        }
        let other_label = OTHER_LABEL.as_bytes();
        let mut out = Vec::new();
        let mut stack: Vec<(Item, u32)> = vec![(Item::Node(ROOT), 0)];
        let mut kids: Vec<(Item, [i64; 2])> = Vec::new();
        while let Some((item, level)) = stack.pop() {
            match item {
                Item::Other(v) => out.push(emit(level, other_label, v, v)),
                Item::Node(id) => {
                    let node = &self.nodes[id as usize];
                    let label: &[u8] = if id == ROOT {
                        opts.root.as_bytes()
                    } else {
                        &self.labels[node.label as usize]
                    };
                    out.push(emit(level, label, node.value, node.self_));
                    kids.clear();
                    let mut other = [0i64; 2];
                    let mut dropped = false;
                    for c in children(&self.nodes, id) {
                        let cn = &self.nodes[c as usize];
                        if keep[c as usize] {
                            kids.push((Item::Node(c), cn.value));
                        } else {
                            dropped = true;
                            other[0] = other[0].checked_add(cn.value[0]).ok_or(Error::Overflow)?;
                            other[1] = other[1].checked_add(cn.value[1]).ok_or(Error::Overflow)?;
                        }
                    }
                    if dropped {
                        kids.push((Item::Other(other), other));
                    }
                    let lbl = |it: &Item| -> &[u8] {
                        match it {
                            Item::Node(c) => &self.labels[self.nodes[*c as usize].label as usize],
                            Item::Other(_) => other_label,
                        }
                    };
                    kids.sort_by(|a, b| {
                        key(b.1)
                            .cmp(&key(a.1))
                            .then_with(|| lbl(&a.0).cmp(lbl(&b.0)))
                    });
                    // Push in reverse so the first sibling is popped first.
                    for (it, _) in kids.iter().rev() {
                        stack.push((*it, level + 1));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Finishes a single flame graph (side 0).
    pub fn finish(self, opts: &TreeOptions) -> Result<Vec<TreeRow>> {
        self.finish_generic(opts, false, |level, label, v, s| TreeRow {
            level,
            label: label.to_vec(),
            value: v[0],
            self_: s[0],
        })
    }

    /// Finishes a diff flame graph (side 0 = baseline, side 1 = comparison).
    pub fn finish_diff(self, opts: &TreeOptions) -> Result<Vec<DiffRow>> {
        self.finish_generic(opts, true, |level, label, v, s| DiffRow {
            level,
            label: label.to_vec(),
            value: v[0],
            self_: s[0],
            value_right: v[1],
            self_right: s[1],
        })
    }
}

/// Builds the single flame graph of `samples`.
pub fn stack_tree(samples: &Samples, opts: &TreeOptions) -> Result<Vec<TreeRow>> {
    let mut t = Tree::new();
    t.add_samples(samples, 0, opts)?;
    t.finish(opts)
}

/// Builds the diff flame graph of `baseline` against `comparison`.
pub fn stack_diff(
    baseline: &Samples,
    comparison: &Samples,
    opts: &TreeOptions,
) -> Result<Vec<DiffRow>> {
    let mut t = Tree::new();
    t.add_samples(baseline, 0, opts)?;
    t.add_samples(comparison, 1, opts)?;
    t.finish_diff(opts)
}
