//! The flame-graph tree: Grafana's nested-set data frame, single or diff.
//!
//! Rows come out in depth-first pre-order with one level-0 root; each row is
//! exactly one level below its parent; siblings are ordered by descending
//! value (for a diff: by descending `value + valueRight`, the bar width
//! Grafana draws), ties by label bytes; and `value = self + sum(children)`
//! holds at every node, on each side.
//!
//! How it is built: the tree is never stored as a whole. A node is a
//! contiguous range of an index over the stacks that pass through it;
//! expanding a node partitions its range by the next frame (a stable
//! counting sort), which gives every child's value, self and magnitude at
//! once. Without a filter or a normalization, frames stay as decoded and
//! each expansion groups the raw bytes of the frames it looks at (compared
//! in turn on a node of a few stacks, else in a small hash table); with
//! one, every frame is first interned as a label id (the decoded input is
//! then freed) and the partition goes through a per-label slot table.
//!
//! The full tree (over raw frames) takes two passes: the first partitions
//! every node more than one stack passes through, counts the rows and
//! leaves each node's stacks contiguous with the depth where neighbouring
//! stacks part recorded; the second finds each node's children from those
//! depths alone and streams the rows in pre-order. A node only one stack
//! passes through is that stack's remaining frames, a chain emitted
//! without expanding it (and, over raw frames, never hashed). An encoding
//! that needs the row count first (a RowBinary array) gets it from the
//! first pass, which is cheaper than holding the encoded rows (a large
//! tree's output is larger than its input). With `max_nodes`/`min_share`
//! only the nodes that are kept are expanded, heaviest first (a node's
//! magnitude is at most its parent's, so the kept nodes form a connected
//! top of the tree): the millions of small nodes below the cut are never
//! built.
//!
//! Negative values are summed as they are (a memory delta may be negative):
//! they are legal, sort after positive siblings and keep the invariants.
//! Pruning and `min_share` use a node's *magnitude*, the sum of `|value|`
//! of every sample that passes through it, so mixed signs never make a
//! busy node look empty.

use crate::filter::IdFilter;
use crate::options::{DiffOptions, FilterOptions, TreeOptions, OTHER_LABEL};
use crate::samples::{hash_label, same, Labels, Samples};
use crate::{Error, Result};
use hashbrown::HashTable;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasher, Hasher};

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

const NONE: u32 = u32::MAX;

/// `a + b`, or the overflow error (built only when it happens: `ok_or`
/// would build and drop an error for every sum).
#[inline(always)]
fn plus(a: i64, b: i64) -> Result<i64> {
    match a.checked_add(b) {
        Some(v) => Ok(v),
        None => Err(Error::Overflow),
    }
}

enum Frames<'a> {
    /// Every frame interned (after the filter).
    Ids { labels: Labels, ids: Vec<u32> },
    /// Frames as decoded, in the inputs.
    Raw(Vec<&'a Samples>),
}

/// The stacks of one call, filtered.
struct Work<'a> {
    frames: Frames<'a>,
    /// One entry per stack, its cursor on the first frame; the stacks of
    /// the baseline (side 0) first.
    recs: Vec<Entry>,
    /// The number of baseline stacks: stack `s` is on side `s >= split`.
    split: u32,
    /// Per stack, `|value|` before normalization; empty when no value was
    /// normalized (a stack's magnitude is then `|value|`).
    mags: Vec<u64>,
}

impl<'a> Work<'a> {
    /// The entries of every stack; `at` a byte offset (`raw`) or a frame
    /// index within its input. Also the number of baseline stacks.
    fn recs(inputs: &[&Samples], raw: bool) -> (Vec<Entry>, u32) {
        let mut recs = Vec::with_capacity(inputs.iter().map(|s| s.len()).sum());
        for s in inputs {
            for i in 0..s.len() {
                let (f0, n, b0) = s.pos(i);
                recs.push(Entry {
                    at: if raw { b0 } else { f0 },
                    value: s.value(i),
                    s: recs.len() as u32,
                    left: n as u32,
                });
            }
        }
        let split = inputs.first().map_or(0, |s| s.len() as u32);
        (recs, split)
    }

    /// Frames as decoded when `raw` and nothing is filtered, else interned.
    fn new(inputs: &[&'a Samples], filter: &FilterOptions, raw: bool) -> Work<'a> {
        if filter.is_identity() && raw {
            let (recs, split) = Self::recs(inputs, true);
            return Work {
                recs,
                split,
                mags: Vec::new(),
                frames: Frames::Raw(inputs.to_vec()),
            };
        }
        Work::interned(inputs, filter)
    }

    /// The side (0 baseline, 1 comparison) of stack `s`.
    #[inline(always)]
    fn side(&self, s: u32) -> usize {
        usize::from(s >= self.split)
    }

    /// The magnitude of `e`'s stack: `|value|` before normalization.
    #[inline(always)]
    fn mag(&self, e: &Entry) -> u64 {
        if self.mags.is_empty() {
            e.value.unsigned_abs()
        } else {
            self.mags[e.s as usize]
        }
    }

    /// Every frame interned: the result no longer needs the inputs.
    fn interned(inputs: &[&Samples], filter: &FilterOptions) -> Work<'static> {
        let mut labels = Labels::default();
        let mut ids = Vec::new();
        if filter.is_identity() {
            // Interned in input order: the frame indexes stay valid, offset
            // by the frames of the inputs before.
            let (mut recs, split) = Self::recs(inputs, false);
            let mut offset = 0;
            for (side, s) in inputs.iter().enumerate() {
                s.intern_into(&mut labels, &mut ids);
                let side_recs = if side == 0 {
                    &mut recs[..split as usize]
                } else {
                    &mut recs[split as usize..]
                };
                for r in side_recs {
                    r.at += offset;
                }
                offset = ids.len();
            }
            return Work {
                frames: Frames::Ids { labels, ids },
                recs,
                split,
                mags: Vec::new(),
            };
        }
        let mut recs = Vec::new();
        let mut split = 0;
        let mut f = IdFilter::new(filter, &mut labels);
        let mut all = Vec::new();
        let mut out = Vec::new();
        for (side, s) in inputs.iter().enumerate() {
            all.clear();
            s.intern_into(&mut labels, &mut all);
            for i in 0..s.len() {
                let (f0, n, _) = s.pos(i);
                if !f.apply(&mut labels, &all[f0..f0 + n], &mut out) {
                    continue;
                }
                recs.push(Entry {
                    at: ids.len(),
                    value: s.value(i),
                    s: recs.len() as u32,
                    left: out.len() as u32,
                });
                ids.extend_from_slice(&out);
            }
            if side == 0 {
                split = recs.len() as u32;
            }
        }
        Work {
            frames: Frames::Ids { labels, ids },
            recs,
            split,
            mags: Vec::new(),
        }
    }

    /// The interned stack of `r` (interned frames only, cursor unmoved).
    fn stack(&self, r: &Entry) -> &[u32] {
        match &self.frames {
            Frames::Ids { ids, .. } => &ids[r.at..r.at + r.left as usize],
            Frames::Raw(_) => unreachable!("normalize interns frames"),
        }
    }

    /// A node's label.
    fn label(&self, n: &Node) -> &[u8] {
        match &self.frames {
            Frames::Ids { labels, .. } => labels.get(n.at as u32),
            Frames::Raw(inputs) => inputs[self.side(n.first)].frame_at(n.at).0,
        }
    }

    /// Scales the baseline's self values so its total equals the
    /// comparison's total, with largest-remainder rounding. A node's self is
    /// the sum over the identical stacks that end at it, so identical
    /// baseline stacks are grouped first; the group's first stack then
    /// carries the scaled self and the others 0.
    fn normalize_baseline(&mut self) -> Result<()> {
        let split = self.split as usize;
        let t0: i128 = self.recs[..split].iter().map(|r| r.value as i128).sum();
        let t1: i128 = self.recs[split..].iter().map(|r| r.value as i128).sum();
        if t0 == 0 || t0 == t1 {
            return Ok(());
        }
        let hash = |s: &[u32]| {
            let mut h = rustc_hash::FxBuildHasher.build_hasher();
            for &id in s {
                h.write_u32(id);
            }
            h.write_usize(s.len());
            h.finish()
        };
        // Group representative rec and summed self, in first-seen order.
        let mut groups: Vec<(usize, i64)> = Vec::new();
        let mut table: HashTable<u32> = HashTable::new();
        let mut group_of = vec![NONE; split];
        for (i, r) in self.recs[..split].iter().enumerate() {
            let st = self.stack(r);
            let h = hash(st);
            let g = match table.find(h, |&g| self.stack(&self.recs[groups[g as usize].0]) == st) {
                Some(&g) => g,
                None => {
                    let g = groups.len() as u32;
                    groups.push((i, 0));
                    table.insert_unique(h, g, |&g| {
                        hash(self.stack(&self.recs[groups[g as usize].0]))
                    });
                    g
                }
            };
            let sum = &mut groups[g as usize].1;
            *sum = plus(*sum, r.value)?;
            group_of[i] = g;
        }
        // Make the denominator positive so floor division is well defined.
        let (num, den) = if t0 < 0 { (-t1, -t0) } else { (t1, t0) };
        let mut rems: Vec<(i128, usize)> = Vec::new();
        let mut scaled = Vec::with_capacity(groups.len());
        let mut sum: i128 = 0;
        for (g, &(_, s)) in groups.iter().enumerate() {
            let x = s as i128 * num;
            let q = x.div_euclid(den);
            let r = x.rem_euclid(den);
            scaled.push(i64::try_from(q).map_err(|_| Error::Overflow)?);
            sum += q;
            if r != 0 {
                rems.push((r, g));
            }
        }
        let mut deficit = t1 - sum;
        rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, g) in rems {
            if deficit <= 0 {
                break;
            }
            scaled[g] += 1;
            deficit -= 1;
        }
        self.mags = self.recs.iter().map(|r| r.value.unsigned_abs()).collect();
        for (i, r) in self.recs[..split].iter_mut().enumerate() {
            let g = group_of[i] as usize;
            r.value = if groups[g].0 == i { scaled[g] } else { 0 };
        }
        Ok(())
    }
}

/// A node: the range `lo..hi` of the stack index that passes through it.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// Interned frames: the label id; raw frames: the byte offset of the
    /// label in the input of stack `first` (72 bytes a node: a pruned
    /// tree stores every child of every node it expands).
    at: usize,
    depth: u32,
    lo: u32,
    hi: u32,
    value: [i64; 2],
    self_: [i64; 2],
    magnitude: u64,
    /// Index of the first stack through the node: with `depth`, the order
    /// in which an incremental build would have created it (the tie-break
    /// of pruning, kept stable across implementations).
    first: u32,
    /// Index of the parent among the pruning candidates.
    parent: u32,
    has_children: bool,
}

/// A stack in the index, with a cursor on its next frame: partitioning
/// moves these small records (sequential) instead of looking each stack up
/// (random) at every level. 24 bytes: the index and its partition buffer
/// are most of the memory a pruned tree needs besides the input (the side
/// and the magnitude follow from `s`).
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The next frame: an index into the ids, or a byte offset in the input.
    at: usize,
    value: i64,
    /// The stack's index (input order, the pruning tie-break; baseline
    /// stacks first).
    s: u32,
    /// Frames left below the cursor.
    left: u32,
}

struct Builder<'w, 'a> {
    w: &'w Work<'a>,
    idx: Vec<Entry>,
    /// Interned frames: per label id, the child group it went to in the
    /// current expansion.
    slot: Vec<u32>,
    /// Raw frames: the current expansion's groups by label bytes; each
    /// group's hash and label, copied into one small buffer (comparing a
    /// frame with the label where it first occurred in the input would be
    /// a cache miss each time).
    groups: HashTable<u32>,
    group_keys: Vec<(u64, usize, usize)>,
    group_bytes: Vec<u8>,
    tag: Vec<u32>,
    tmp: Vec<Entry>,
    /// [`Self::split_raw`]'s children: their stacks (then their write
    /// cursors), and whether any has frames below.
    counts: Vec<(u32, bool)>,
}

impl<'w, 'a> Builder<'w, 'a> {
    /// Over the stacks `idx` (taken from the work, cursors on their first
    /// frames).
    fn new(w: &'w Work<'a>, idx: Vec<Entry>) -> Self {
        let labels = match &w.frames {
            Frames::Ids { labels, .. } => labels.len(),
            Frames::Raw(_) => 0,
        };
        Builder {
            w,
            idx,
            slot: vec![NONE; labels],
            groups: HashTable::new(),
            group_keys: Vec::new(),
            group_bytes: Vec::new(),
            tag: Vec::new(),
            tmp: Vec::new(),
            counts: Vec::new(),
        }
    }

    /// The number of nodes of the whole tree under (and with) `root`: every
    /// node expanded once, in any order; the cursors are then reset, so the
    /// tree can be expanded again.
    fn count_full(&mut self, root: &Node) -> Result<u64> {
        // The partitions move and advance the entries: start again from a
        // copy (24 bytes a stack; the ids are not copied).
        let start = self.idx.clone();
        let mut n: u64 = 1;
        let mut pending: Vec<Node> = Vec::new();
        let mut kids: Vec<Node> = Vec::new();
        let mut cur = *root;
        loop {
            if cur.has_children && cur.hi - cur.lo == 1 {
                // One stack: a chain of its frames left.
                n += u64::from(self.idx[cur.lo as usize].left);
            } else if cur.has_children {
                kids.clear();
                self.expand(&cur, NONE, &mut kids)?;
                n += kids.len() as u64;
                pending.extend(kids.iter().filter(|k| k.has_children));
            }
            let Some(c) = pending.pop() else { break };
            cur = c;
        }
        self.idx = start;
        Ok(n)
    }

    /// Emits the nodes below `n` when only one stack passes through it (a
    /// chain of that stack's frames left, each with its value), without
    /// expanding them; false when the frames are not interned.
    fn chain(&self, n: &Node, emit: &mut Emit<'_>) -> Result<bool> {
        let Frames::Ids { labels, ids } = &self.w.frames else {
            return Ok(false);
        };
        let e = &self.idx[n.lo as usize];
        let mut v = [0; 2];
        v[self.w.side(e.s)] = e.value;
        let frames = &ids[e.at..e.at + e.left as usize];
        for (i, &l) in frames.iter().enumerate() {
            let s = if i + 1 == frames.len() { v } else { [0; 2] };
            emit(n.depth + 1 + i as u32, labels.get(l), v, s)?;
        }
        Ok(true)
    }

    /// The first pass of [`full_raw`] on node `n` (raw frames, more than
    /// one stack): partitions its range by the next frame as
    /// [`Self::expand`] does, without summing anything, records where each
    /// child's run starts in `cut` (`n`'s depth), pushes the children with
    /// frames below them onto `pending` and returns the number of children.
    fn split_raw(&mut self, n: &Node, cut: &mut [u32], pending: &mut Vec<Node>) -> u64 {
        let Frames::Raw(inputs) = &self.w.frames else {
            unreachable!("split_raw over interned frames");
        };
        let w = self.w;
        let Builder {
            idx,
            groups,
            group_keys,
            group_bytes,
            tag,
            tmp,
            counts,
            ..
        } = self;
        let (lo, hi) = (n.lo as usize, n.hi as usize);
        let small = hi - lo <= SMALL_NODE;
        let mut few: [&[u8]; SMALL_NODE] = [&[]; SMALL_NODE];
        // Per child: its stacks, and whether any has frames below it.
        counts.clear();
        tag.clear();
        let mut nterm = 0usize;
        if !small {
            groups.clear();
            group_keys.clear();
            group_bytes.clear();
            if groups.capacity() > 4 * (hi - lo) + 64 {
                *groups = HashTable::new();
            }
        }
        for k in lo..hi {
            if let Some(ahead) = idx.get(k + PREFETCH) {
                prefetch(inputs[w.side(ahead.s)].bytes(), ahead.at);
            }
            let e = &mut idx[k];
            if e.left == 0 {
                tag.push(NONE);
                nterm += 1;
                continue;
            }
            let (f, next) = inputs[w.side(e.s)].frame_at(e.at);
            let g = if small {
                let nfew = counts.len();
                match few[..nfew].iter().position(|l| same(l, f)) {
                    Some(g) => g,
                    None => {
                        few[nfew] = f;
                        counts.push((0, false));
                        nfew
                    }
                }
            } else {
                let h = hash_label(f);
                let found = groups.find(h, |&g| {
                    let (gh, a, b) = group_keys[g as usize];
                    gh == h && same(&group_bytes[a..b], f)
                });
                match found {
                    Some(&g) => g as usize,
                    None => {
                        let g = counts.len();
                        counts.push((0, false));
                        let a = group_bytes.len();
                        group_bytes.extend_from_slice(f);
                        group_keys.push((h, a, group_bytes.len()));
                        let keys = &*group_keys;
                        groups.insert_unique(h, g as u32, |&g| keys[g as usize].0);
                        g
                    }
                }
            };
            let c = &mut counts[g];
            c.0 += 1;
            c.1 |= e.left > 1;
            e.at = next;
            e.left -= 1;
            tag.push(g as u32);
        }
        let child = |lo: u32, hi: u32| Node {
            at: 0,
            depth: n.depth + 1,
            lo,
            hi,
            value: [0; 2],
            self_: [0; 2],
            magnitude: 0,
            first: 0,
            parent: NONE,
            has_children: true,
        };
        if counts.len() == 1 && nterm == 0 {
            // Every stack goes on to one child: the same range.
            if counts[0].1 {
                pending.push(child(n.lo, n.hi));
            }
            return 1;
        }
        // Counting sort, stable, as in `expand`: the stacks that end here
        // first, then each child's run.
        let mut pos = (lo + nterm) as u32;
        for c in counts.iter_mut() {
            let len = c.0;
            if pos as usize != lo {
                cut[pos as usize] = n.depth;
            }
            if c.1 {
                pending.push(child(pos, pos + len));
            }
            c.0 = pos;
            pos += len;
        }
        tmp.clear();
        tmp.extend_from_slice(&idx[lo..hi]);
        let mut t = lo;
        for (k, e) in tmp.iter().enumerate() {
            let g = tag[k];
            if g == NONE {
                idx[t] = *e;
                t += 1;
            } else {
                let c = &mut counts[g as usize];
                idx[c.0 as usize] = *e;
                c.0 += 1;
            }
        }
        counts.len() as u64
    }

    /// [`Self::chain`] over raw frames: the frames left of the one stack
    /// through `n`, each emitted as it is stored.
    fn chain_raw(&self, n: &Node, emit: &mut Emit<'_>) -> Result<()> {
        let Frames::Raw(inputs) = &self.w.frames else {
            return Err(Error::Internal("raw chain over interned frames".into()));
        };
        let e = &self.idx[n.lo as usize];
        let side = self.w.side(e.s);
        let mut v = [0; 2];
        v[side] = e.value;
        let mut at = e.at;
        for i in 0..e.left {
            let (f, next) = inputs[side].frame_at(at);
            let s = if i + 1 == e.left { v } else { [0; 2] };
            emit(n.depth + 1 + i, f, v, s)?;
            at = next;
        }
        Ok(())
    }

    /// The children of `n` (raw frames, the index as [`full_raw`]'s first
    /// pass left it): the stacks that end at `n` come first, then each
    /// child's run, which starts where `cut` is `n`'s depth. Sums each
    /// child and moves the cursors of its stacks one frame down.
    fn children_by_cut(&mut self, n: &Node, cut: &[u32], out: &mut Vec<Node>) -> Result<()> {
        let Frames::Raw(inputs) = &self.w.frames else {
            return Err(Error::Internal(
                "children by cut over interned frames".into(),
            ));
        };
        let w = self.w;
        let (lo, hi) = (n.lo as usize, n.hi as usize);
        let idx = &mut self.idx[..hi];
        let cut = &cut[..hi];
        let mut k = lo;
        while k < hi && idx[k].left == 0 {
            k += 1;
        }
        while k < hi {
            let e = idx[k];
            let mut c = Node {
                at: e.at,
                depth: n.depth + 1,
                lo: k as u32,
                hi: 0,
                value: [0; 2],
                self_: [0; 2],
                magnitude: 0,
                first: e.s,
                parent: NONE,
                has_children: false,
            };
            loop {
                let e = &mut idx[k];
                let side = w.side(e.s);
                c.value[side] = plus(c.value[side], e.value)?;
                if e.left == 1 {
                    c.self_[side] = plus(c.self_[side], e.value)?;
                } else {
                    c.has_children = true;
                }
                e.at = inputs[side].frame_at(e.at).1;
                e.left -= 1;
                k += 1;
                if k == hi || cut[k] == n.depth {
                    break;
                }
            }
            c.hi = k as u32;
            out.push(c);
        }
        Ok(())
    }

    fn root(&self) -> Result<Node> {
        let mut n = Node {
            at: 0,
            depth: 0,
            lo: 0,
            hi: self.idx.len() as u32,
            value: [0; 2],
            self_: [0; 2],
            magnitude: 0,
            first: 0,
            parent: NONE,
            has_children: false,
        };
        for r in &self.idx {
            let side = self.w.side(r.s);
            n.value[side] = plus(n.value[side], r.value)?;
            n.magnitude = n.magnitude.saturating_add(self.w.mag(r));
            if r.left == 0 {
                n.self_[side] = plus(n.self_[side], r.value)?;
            } else {
                n.has_children = true;
            }
        }
        Ok(n)
    }

    /// Partitions node `n`'s range by the next frame and appends its
    /// children to `out` (in order of first appearance); the cursors of
    /// the stacks in the range move one frame down.
    fn expand(&mut self, n: &Node, parent: u32, out: &mut Vec<Node>) -> Result<()> {
        let Builder {
            w,
            idx,
            slot,
            groups,
            group_keys,
            group_bytes,
            tag,
            tmp,
            ..
        } = self;
        let (lo, hi, d) = (n.lo as usize, n.hi as usize, n.depth as usize);
        let base = out.len();
        tag.clear();
        let mut nterm = 0usize;
        let mut result = Ok(());
        let new_child = |out: &mut Vec<Node>, at: usize, s: u32| {
            out.push(Node {
                at,
                depth: d as u32 + 1,
                lo: 0,
                hi: 0,
                value: [0; 2],
                self_: [0; 2],
                magnitude: 0,
                first: s,
                parent,
                has_children: false,
            });
        };
        let w: &Work<'_> = w;
        let mut add = |c: &mut Node, e: &Entry| {
            c.hi += 1;
            let side = w.side(e.s);
            match c.value[side].checked_add(e.value) {
                Some(v) => c.value[side] = v,
                None => result = Err(Error::Overflow),
            }
            c.magnitude = c.magnitude.saturating_add(w.mag(e));
            if e.left == 1 {
                match c.self_[side].checked_add(e.value) {
                    Some(v) => c.self_[side] = v,
                    None => result = Err(Error::Overflow),
                }
            } else {
                c.has_children = true;
            }
        };
        match &w.frames {
            Frames::Ids { ids, .. } => {
                for k in lo..hi {
                    if let Some(ahead) = idx.get(k + PREFETCH) {
                        prefetch(ids, ahead.at);
                    }
                    let e = &mut idx[k];
                    if e.left == 0 {
                        tag.push(NONE);
                        nterm += 1;
                        continue;
                    }
                    let l = ids[e.at];
                    let mut g = slot[l as usize];
                    if g == NONE {
                        g = (out.len() - base) as u32;
                        slot[l as usize] = g;
                        new_child(out, l as usize, e.s);
                    }
                    add(&mut out[base + g as usize], e);
                    e.at += 1;
                    e.left -= 1;
                    tag.push(g);
                }
                for c in &out[base..] {
                    slot[c.at] = NONE;
                }
            }
            Frames::Raw(inputs) => {
                group_keys.clear();
                group_bytes.clear();
                // Most nodes have a few stacks and fewer children: their
                // frames are compared with each child's label in turn,
                // which is cheaper than hashing them (and than clearing a
                // table).
                let small = hi - lo <= SMALL_NODE;
                let mut few: [&[u8]; SMALL_NODE] = [&[]; SMALL_NODE];
                let mut nfew = 0;
                if !small {
                    groups.clear();
                    // A big expansion would leave a big table to clear
                    // each time after it: start small again.
                    if groups.capacity() > 4 * (hi - lo) + 64 {
                        *groups = HashTable::new();
                    }
                }
                for k in lo..hi {
                    if let Some(ahead) = idx.get(k + PREFETCH) {
                        prefetch(inputs[w.side(ahead.s)].bytes(), ahead.at);
                    }
                    let e = &mut idx[k];
                    if e.left == 0 {
                        tag.push(NONE);
                        nterm += 1;
                        continue;
                    }
                    let side = w.side(e.s);
                    let (f, next) = inputs[side].frame_at(e.at);
                    let g = if small {
                        let seen = &mut few[..nfew];
                        match seen.iter().position(|l| same(l, f)) {
                            Some(g) => g as u32,
                            None => {
                                new_child(out, e.at, e.s);
                                few[nfew] = f;
                                nfew += 1;
                                (nfew - 1) as u32
                            }
                        }
                    } else {
                        let h = hash_label(f);
                        let found = groups.find(h, |&g| {
                            let (gh, a, b) = group_keys[g as usize];
                            gh == h && same(&group_bytes[a..b], f)
                        });
                        match found {
                            Some(&g) => g,
                            None => {
                                let g = group_keys.len() as u32;
                                new_child(out, e.at, e.s);
                                let a = group_bytes.len();
                                group_bytes.extend_from_slice(f);
                                group_keys.push((h, a, group_bytes.len()));
                                let keys = &*group_keys;
                                groups.insert_unique(h, g, |&g| keys[g as usize].0);
                                g
                            }
                        }
                    };
                    add(&mut out[base + g as usize], e);
                    e.at = next;
                    e.left -= 1;
                    tag.push(g);
                }
            }
        }
        result?;
        if out.len() - base == 1 && nterm == 0 {
            // One child through which every stack passes: same range.
            let c = &mut out[base];
            c.lo = n.lo;
            c.hi = n.hi;
            return Ok(());
        }
        // Counting sort, stable: stacks that end here first, then each
        // child's stacks; `hi` is the write cursor until the end.
        let mut pos = (lo + nterm) as u32;
        for c in &mut out[base..] {
            let count = c.hi;
            c.lo = pos;
            c.hi = pos;
            pos += count;
        }
        tmp.clear();
        tmp.extend_from_slice(&idx[lo..hi]);
        let mut t = lo;
        for (k, e) in tmp.iter().enumerate() {
            let g = tag[k];
            if g == NONE {
                idx[t] = *e;
                t += 1;
            } else {
                let c = &mut out[base + g as usize];
                idx[c.hi as usize] = *e;
                c.hi += 1;
            }
        }
        Ok(())
    }
}

/// Up to this many stacks, a node's raw frames are grouped by comparing
/// each with the children found so far instead of hashing it.
const SMALL_NODE: usize = 16;

/// How many stacks ahead the partition loop prefetches the next frame: the
/// frames of a node's stacks are scattered over the input, and the loop is
/// otherwise bound by waiting for each of them.
const PREFETCH: usize = 16;

/// Hints that `data[at]` will be read soon (no effect off x86-64, or out
/// of bounds).
#[inline(always)]
fn prefetch<T>(data: &[T], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = data.get(at) {
        // SAFETY: a prefetch is only a hint; the pointer comes from a live
        // reference.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (x as *const T).cast::<i8>(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at);
}

/// Receives the rows of a tree in pre-order: level, label, value and self
/// on both sides (side 1 is 0 for a single tree).
pub type Emit<'e> = dyn FnMut(u32, &[u8], [i64; 2], [i64; 2]) -> Result<()> + 'e;

/// Receives the number of rows of a tree before its first row (for an
/// encoding that writes the length of an array first).
pub type Count<'e> = dyn FnMut(u64) -> Result<()> + 'e;

fn sort_key(diff: bool, v: [i64; 2]) -> i128 {
    if diff {
        v[0] as i128 + v[1] as i128
    } else {
        v[0] as i128
    }
}

/// Whether the tree of these options works on the frames as decoded
/// (nothing filtered, no normalization: those need whole stacks of label
/// ids). A pruned tree then looks only at the few frames its kept nodes
/// need; a full tree hashes only the frames of nodes that more than one
/// stack passes through (a node one stack passes through is a chain of its
/// remaining frames, copied out as they are).
fn raw_frames(diff: bool, opts: &TreeOptions, normalize: bool) -> bool {
    !(diff && normalize) && opts.filter.is_identity()
}

fn build(
    inputs: &[&Samples],
    opts: &TreeOptions,
    normalize: bool,
    count: Option<&mut Count<'_>>,
    emit: &mut Emit<'_>,
) -> Result<()> {
    let diff = inputs.len() > 1;
    let raw = raw_frames(diff, opts, normalize);
    let w = Work::new(inputs, &opts.filter, raw);
    run(w, diff, opts, normalize, count, emit)
}

/// [`build`] that empties the inputs (and frees their memory) as soon as
/// the tree no longer needs them: once every frame is interned.
fn build_releasing(
    inputs: &mut [&mut Samples],
    opts: &TreeOptions,
    normalize: bool,
    count: Option<&mut Count<'_>>,
    emit: &mut Emit<'_>,
) -> Result<()> {
    let diff = inputs.len() > 1;
    if raw_frames(diff, opts, normalize) {
        // The stacks' offsets and values are taken: only the frame bytes
        // stay (the per-sample index is 24 bytes a stack).
        let (recs, split) = Work::recs(&inputs.iter().map(|s| &**s).collect::<Vec<_>>(), true);
        for s in inputs.iter_mut() {
            s.release_index();
        }
        let w = Work {
            frames: Frames::Raw(inputs.iter().map(|s| &**s).collect()),
            recs,
            split,
            mags: Vec::new(),
        };
        return run(w, diff, opts, normalize, count, emit);
    }
    let w = if opts.filter.is_identity() {
        // The stacks' entries are taken first and the inputs' per-sample
        // index freed before the ids are allocated: the index, the entries,
        // the frames and their ids would otherwise all be held at once
        // (the peak of a full tree read as a table).
        let index: Vec<(Vec<u32>, Vec<i64>)> = inputs
            .iter_mut()
            .map(|s| s.take_counts_and_values())
            .collect();
        let frames = index
            .iter()
            .flat_map(|(c, _)| c.iter().map(|&n| n as usize))
            .sum();
        let mut labels = Labels::default();
        let mut ids = Vec::with_capacity(frames);
        for s in inputs.iter_mut() {
            s.intern_into(&mut labels, &mut ids);
            **s = Samples::new();
        }
        let split = index.first().map_or(0, |(c, _)| c.len() as u32);
        let mut recs = Vec::with_capacity(index.iter().map(|(c, _)| c.len()).sum());
        let mut at = 0;
        for (counts, values) in index {
            for (&n, value) in counts.iter().zip(values) {
                recs.push(Entry {
                    at,
                    value,
                    s: recs.len() as u32,
                    left: n,
                });
                at += n as usize;
            }
        }
        Work {
            frames: Frames::Ids { labels, ids },
            recs,
            split,
            mags: Vec::new(),
        }
    } else {
        let shared: Vec<&Samples> = inputs.iter().map(|s| &**s).collect();
        Work::interned(&shared, &opts.filter)
    };
    for s in inputs.iter_mut() {
        **s = Samples::new();
    }
    run(w, diff, opts, normalize, count, emit)
}

fn run(
    mut w: Work<'_>,
    diff: bool,
    opts: &TreeOptions,
    normalize: bool,
    count: Option<&mut Count<'_>>,
    emit: &mut Emit<'_>,
) -> Result<()> {
    if diff && normalize {
        w.normalize_baseline()?;
    }
    let idx = std::mem::take(&mut w.recs);
    let mut b = Builder::new(&w, idx);
    let root = b.root()?;
    let threshold = if opts.min_share > 0.0 {
        (opts.min_share * root.magnitude as f64).ceil() as u64
    } else {
        0
    };
    if opts.max_nodes == 0 && threshold == 0 {
        if let Frames::Raw(_) = w.frames {
            return full_raw(&mut b, root, opts, diff, count, emit);
        }
        if let Some(count) = count {
            count(b.count_full(&root)?)?;
        }
        full(&mut b, root, opts, diff, emit)
    } else {
        pruned(&mut b, root, opts, threshold, diff, count, emit)
    }
}

/// The whole tree, streamed in pre-order while it is expanded.
fn full(
    b: &mut Builder<'_, '_>,
    root: Node,
    opts: &TreeOptions,
    diff: bool,
    emit: &mut Emit<'_>,
) -> Result<()> {
    emit(0, opts.root.as_bytes(), root.value, root.self_)?;
    let w = b.w;
    let mut pending: Vec<Node> = Vec::new();
    let mut kids: Vec<Node> = Vec::new();
    let mut cur = root;
    loop {
        if cur.has_children && !(cur.hi - cur.lo == 1 && b.chain(&cur, emit)?) {
            kids.clear();
            b.expand(&cur, NONE, &mut kids)?;
            kids.sort_unstable_by(|a, c| {
                sort_key(diff, c.value)
                    .cmp(&sort_key(diff, a.value))
                    .then_with(|| w.label(a).cmp(w.label(c)))
            });
            pending.extend(kids.iter().rev());
        }
        let Some(n) = pending.pop() else { break };
        emit(n.depth, w.label(&n), n.value, n.self_)?;
        cur = n;
    }
    Ok(())
}

/// The whole tree over raw frames, in two passes over one index.
///
/// The first pass partitions every node that more than one stack passes
/// through (hashing each of those frames once) and counts the nodes; it
/// leaves the index so that every node's stacks are one contiguous run,
/// the stacks that end at a node first, and records in `cut[k]` the depth
/// at which the stack at `k` parted from the one before it. The second
/// pass, with every cursor back on its stack's first frame, finds each
/// node's children from `cut` alone (no hashing, no moves), sums them
/// while advancing the cursors, and streams the rows in pre-order. A full
/// tree used to be expanded twice with every frame interned first: this
/// hashes only the frames of shared nodes, once (a `stackTree` of 20,000
/// stacks: 266,000 of its 500,000 frames), and needs no ids array.
fn full_raw(
    b: &mut Builder<'_, '_>,
    root: Node,
    opts: &TreeOptions,
    diff: bool,
    count: Option<&mut Count<'_>>,
    emit: &mut Emit<'_>,
) -> Result<()> {
    let orig = b.idx.clone();
    let mut cut = vec![u32::MAX; b.idx.len()];
    let mut rows: u64 = 1;
    let mut pending: Vec<Node> = Vec::new();
    let mut kids: Vec<Node> = Vec::new();
    let mut cur = root;
    loop {
        if cur.has_children && cur.hi - cur.lo == 1 {
            // One stack: a chain of its frames left.
            rows += u64::from(b.idx[cur.lo as usize].left);
        } else if cur.has_children {
            rows += b.split_raw(&cur, &mut cut, &mut pending);
        }
        let Some(c) = pending.pop() else { break };
        cur = c;
    }
    if let Some(count) = count {
        count(rows)?;
    }
    for e in b.idx.iter_mut() {
        *e = orig[e.s as usize];
    }
    drop(orig);
    b.tmp = Vec::new();
    b.tag = Vec::new();

    emit(0, opts.root.as_bytes(), root.value, root.self_)?;
    let w = b.w;
    let mut cur = root;
    loop {
        if cur.has_children {
            if cur.hi - cur.lo == 1 {
                b.chain_raw(&cur, emit)?;
            } else {
                kids.clear();
                b.children_by_cut(&cur, &cut, &mut kids)?;
                kids.sort_unstable_by(|a, c| {
                    sort_key(diff, c.value)
                        .cmp(&sort_key(diff, a.value))
                        .then_with(|| w.label(a).cmp(w.label(c)))
                });
                pending.extend(kids.iter().rev());
            }
        }
        let Some(n) = pending.pop() else { break };
        emit(n.depth, w.label(&n), n.value, n.self_)?;
        cur = n;
    }
    Ok(())
}

/// The candidates of a pruned tree: every stored child of every expanded
/// node, each node's children sorted heaviest first. The heap holds only
/// the best child not yet considered of each expanded node (the next one
/// enters when it leaves), which pops in the same order as a heap of all
/// candidates.
struct Selection {
    cands: Vec<Node>,
    /// Per candidate: the range of its children in `cands` once expanded.
    kids_of: Vec<(u32, u32)>,
    kept: Vec<bool>,
    /// Per candidate: how many of its children are kept.
    selected: Vec<u32>,
    heap: BinaryHeap<HeapKey>,
    /// Parents whose lightest children were not stored (they can never be
    /// kept): the sum of their values.
    truncated: HashMap<u32, [i64; 2]>,
    limit: usize,
    threshold: u64,
    /// Sorting buffers: children's packed keys, then the nodes in order.
    order: Vec<u128>,
    sorted: Vec<Node>,
}

/// Heaviest first, then the node an incremental build would have created
/// first; the candidate's index.
type HeapKey = (u64, Reverse<(u32, u32)>, u32);

fn heap_key(k: &Node, c: u32) -> HeapKey {
    (k.magnitude, Reverse((k.first, k.depth)), c)
}

impl Selection {
    /// Expands candidate `c` (kept): its children become candidates.
    fn open(&mut self, b: &mut Builder<'_, '_>, c: u32) -> Result<()> {
        let n = self.cands[c as usize];
        if !n.has_children {
            return Ok(());
        }
        let cands = &mut self.cands;
        let start = cands.len();
        b.expand(&n, c, cands)?;
        // Heaviest first, then by first stack (siblings share a depth and
        // never a first stack): the order of `heap_key`.
        self.order.clear();
        self.order.extend(
            cands[start..].iter().enumerate().map(|(i, k)| {
                u128::from(k.magnitude) << 64 | u128::from(!k.first) << 32 | i as u128
            }),
        );
        self.order.sort_unstable_by(|a, b| b.cmp(a));
        self.sorted.clear();
        self.sorted.extend(
            self.order
                .iter()
                .map(|&o| cands[start + (o as u32) as usize]),
        );
        cands[start..].copy_from_slice(&self.sorted);
        debug_assert!(cands[start..].is_sorted_by_key(|k| Reverse(heap_key(k, 0))));
        // Children under the threshold can never be kept: they are only
        // their parent's `[other]` row, summed here and not stored. (No such
        // bound by count: a light leaf may still fit where heavier siblings
        // with children did not.)
        let keep = cands[start..]
            .iter()
            .take_while(|k| k.magnitude >= self.threshold)
            .count()
            .max(1);
        if start + keep < cands.len() {
            let mut rest = [0i64; 2];
            for k in &cands[start + keep..] {
                rest[0] = plus(rest[0], k.value[0])?;
                rest[1] = plus(rest[1], k.value[1])?;
            }
            cands.truncate(start + keep);
            self.truncated.insert(c, rest);
        }
        self.kids_of[c as usize] = (start as u32, cands.len() as u32);
        let k = &cands[start];
        if k.magnitude >= self.threshold {
            self.heap.push(heap_key(k, start as u32));
        }
        let len = cands.len();
        self.kids_of.resize(len, (0, 0));
        self.kept.resize(len, false);
        self.selected.resize(len, 0);
        Ok(())
    }

    /// Chooses the kept nodes, expanding each; returns the number of rows.
    fn run(&mut self, b: &mut Builder<'_, '_>, root: &Node) -> Result<usize> {
        self.open(b, 0)?;
        let limit = self.limit;
        let mut rows: usize = 1 + usize::from(root.has_children);
        while let Some((_, _, c)) = self.heap.pop() {
            let node = self.cands[c as usize];
            let p = node.parent as usize;
            let (ks, ke) = self.kids_of[p];
            let completes =
                self.selected[p] + 1 == ke - ks && !self.truncated.contains_key(&(p as u32));
            let cost = 1 + usize::from(node.has_children);
            let new_rows = rows + cost - usize::from(completes);
            let take = new_rows <= limit;
            if take {
                rows = new_rows;
                self.selected[p] += 1;
                self.kept[c as usize] = true;
            }
            // The next sibling (sorted) becomes a candidate; not when every
            // row is used and it cannot complete its parent (only a leaf
            // that is the last child of a parent whose other children are
            // all kept still fits then: it takes the place of the `[other]`
            // row). Without this, every child of every expanded node would
            // pass through the heap only to be rejected.
            if c + 1 < ke && (rows < limit || self.selected[p] + 1 == ke - ks) {
                let k = &self.cands[c as usize + 1];
                if k.magnitude >= self.threshold {
                    self.heap.push(heap_key(k, c + 1));
                }
            }
            if take {
                self.open(b, c)?;
            }
        }
        Ok(rows)
    }
}

/// The pruned tree: greedy, heaviest node first among those whose parent is
/// kept; a node is taken when the rows it costs (itself, plus an `[other]`
/// row for its own children, minus its parent's `[other]` row when it is the
/// parent's last child) still fit. A node that does not fit stays in its
/// parent's `[other]` row with its whole subtree, never expanded.
fn pruned(
    b: &mut Builder<'_, '_>,
    root: Node,
    opts: &TreeOptions,
    threshold: u64,
    diff: bool,
    count: Option<&mut Count<'_>>,
    emit: &mut Emit<'_>,
) -> Result<()> {
    let mut sel = Selection {
        cands: vec![root],
        kids_of: vec![(0, 0)],
        kept: vec![true],
        selected: vec![0],
        heap: BinaryHeap::new(),
        truncated: HashMap::new(),
        limit: if opts.max_nodes == 0 {
            usize::MAX
        } else {
            opts.max_nodes
        },
        threshold,
        order: Vec::new(),
        sorted: Vec::new(),
    };
    let rows = sel.run(b, &root)?;
    let Selection {
        cands,
        kids_of,
        kept,
        truncated,
        ..
    } = sel;
    if let Some(count) = count {
        count(rows as u64)?;
    }
    // Pre-order output of the kept nodes and each parent's `[other]` row.
    #[derive(Clone, Copy)]
    enum Item {
        Node(u32),
        Other([i64; 2]),
    }
    let w = b.w;
    let other_label = OTHER_LABEL.as_bytes();
    let mut stack: Vec<(Item, u32)> = vec![(Item::Node(0), 0)];
    let mut kids: Vec<(Item, [i64; 2])> = Vec::new();
    while let Some((item, level)) = stack.pop() {
        match item {
            Item::Other(v) => emit(level, other_label, v, v)?,
            Item::Node(id) => {
                let node = &cands[id as usize];
                let label: &[u8] = if id == 0 {
                    opts.root.as_bytes()
                } else {
                    w.label(node)
                };
                emit(level, label, node.value, node.self_)?;
                kids.clear();
                let (mut other, mut dropped) = match truncated.get(&id) {
                    Some(&rest) => (rest, true),
                    None => ([0i64; 2], false),
                };
                let (ks, ke) = kids_of[id as usize];
                for c in ks..ke {
                    let cn = &cands[c as usize];
                    if kept[c as usize] {
                        kids.push((Item::Node(c), cn.value));
                    } else {
                        dropped = true;
                        other[0] = plus(other[0], cn.value[0])?;
                        other[1] = plus(other[1], cn.value[1])?;
                    }
                }
                if dropped {
                    kids.push((Item::Other(other), other));
                }
                let lbl = |it: &Item| -> &[u8] {
                    match it {
                        Item::Node(c) => w.label(&cands[*c as usize]),
                        Item::Other(_) => other_label,
                    }
                };
                kids.sort_by(|a, c| {
                    sort_key(diff, c.1)
                        .cmp(&sort_key(diff, a.1))
                        .then_with(|| lbl(&a.0).cmp(lbl(&c.0)))
                });
                // Push in reverse so the first sibling is popped first.
                for (it, _) in kids.iter().rev() {
                    stack.push((*it, level + 1));
                }
            }
        }
    }
    Ok(())
}

/// Streams the single flame graph of `samples` to `emit` in pre-order.
pub fn stack_tree_with(samples: &Samples, opts: &TreeOptions, emit: &mut Emit<'_>) -> Result<()> {
    build(&[samples], opts, false, None, emit)
}

/// [`stack_tree_with`], telling `count` (when given) the number of rows
/// before the first one. A full tree is then expanded twice (the first
/// time only to count its nodes): cheaper than holding its encoded rows.
/// Empties `samples` (freeing its memory) once every frame is interned:
/// peak memory is then about the input's, not input plus tree.
pub fn stack_tree_counted(
    samples: &mut Samples,
    opts: &TreeOptions,
    count: Option<&mut Count<'_>>,
    emit: &mut Emit<'_>,
) -> Result<()> {
    build_releasing(&mut [samples], opts, false, count, emit)
}

/// [`stack_diff_with`], telling `count` the number of rows before the
/// first one; empties both inputs (see [`stack_tree_counted`]).
pub fn stack_diff_counted(
    baseline: &mut Samples,
    comparison: &mut Samples,
    opts: &DiffOptions,
    count: Option<&mut Count<'_>>,
    emit: &mut Emit<'_>,
) -> Result<()> {
    build_releasing(
        &mut [baseline, comparison],
        &opts.tree,
        opts.normalize,
        count,
        emit,
    )
}

/// Streams the diff flame graph of `baseline` against `comparison` to
/// `emit` in pre-order.
pub fn stack_diff_with(
    baseline: &Samples,
    comparison: &Samples,
    opts: &DiffOptions,
    emit: &mut Emit<'_>,
) -> Result<()> {
    build(
        &[baseline, comparison],
        &opts.tree,
        opts.normalize,
        None,
        emit,
    )
}

/// Builds the single flame graph of `samples`.
pub fn stack_tree(samples: &Samples, opts: &TreeOptions) -> Result<Vec<TreeRow>> {
    let mut out = Vec::new();
    stack_tree_with(samples, opts, &mut |level, label, v, s| {
        out.push(TreeRow {
            level,
            label: label.to_vec(),
            value: v[0],
            self_: s[0],
        });
        Ok(())
    })?;
    Ok(out)
}

/// Builds the diff flame graph of `baseline` against `comparison`.
pub fn stack_diff(
    baseline: &Samples,
    comparison: &Samples,
    opts: &DiffOptions,
) -> Result<Vec<DiffRow>> {
    let mut out = Vec::new();
    stack_diff_with(baseline, comparison, opts, &mut |level, label, v, s| {
        out.push(DiffRow {
            level,
            label: label.to_vec(),
            value: v[0],
            self_: s[0],
            value_right: v[1],
            self_right: s[1],
        });
        Ok(())
    })?;
    Ok(out)
}
