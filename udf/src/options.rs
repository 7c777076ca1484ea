//! Options of the stack functions, with their documented defaults.
//!
//! The same structs serve the `flamehouse-udf` command line (clap) and the
//! SQL options map (`stackTreeWith(samples, map('max_nodes', '500'))`), so the
//! names and defaults cannot drift apart. SQL keys are the long flag names
//! with `_` instead of `-`. An unknown key is an error, so a typo never
//! silently does nothing.

use crate::{Error, Result};
use regex::bytes::Regex;

/// Default label of the root node.
pub const DEFAULT_ROOT: &str = "total";
/// Label of the node that holds a parent's pruned children. Bracketed like
/// `[truncated]` and `[unknown]` so it can never be mistaken for a real
/// frame named `other` (which would otherwise get a same-named sibling).
pub const OTHER_LABEL: &str = "[other]";
/// Label of the frame that stands for frames cut by `max_depth`.
pub const TRUNCATED_LABEL: &str = "[truncated]";

/// Per-stack transforms applied before folding or tree building.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterOptions {
    /// Collapse direct recursion: consecutive identical frames become one.
    /// Default: off.
    #[arg(long)]
    pub collapse_recursion: bool,
    /// Strip hex addresses: `foo+0x1a` becomes `foo`, `lib.so+0x10` becomes
    /// `lib.so`, and a frame that is only an address becomes `[unknown]`, so
    /// stacks that differ only in offsets merge. Default: off.
    #[arg(long)]
    pub strip_hex: bool,
    /// Keep at most this many frames per stack (0 = no limit): the root-most
    /// `N-1` frames are kept and the rest replaced by one visible
    /// `[truncated]` frame.
    #[arg(long, default_value_t = 0)]
    pub max_depth: usize,
    /// Keep only stacks with at least one frame matching this regex (RE2
    /// syntax, unanchored). Default: none.
    #[arg(long, value_parser = parse_regex)]
    pub focus: Option<Regex>,
    /// Drop stacks with any frame matching this regex. Default: none.
    #[arg(long, value_parser = parse_regex)]
    pub exclude: Option<Regex>,
}

/// Options of the flame-graph tree (`stackTree`, and the tree part of
/// `stackDiff`). Defaults (shown by `--help` from the clap attributes):
/// no row limit, no share threshold, root label `total`, no transform.
#[derive(Debug, Clone, clap::Args)]
pub struct TreeOptions {
    /// Maximum number of output rows, `[other]` rows included (0 = no
    /// limit). Nodes are taken heaviest first while they fit; each parent's
    /// dropped children are folded into one `[other]` child so no value is
    /// lost.
    #[arg(long, default_value_t = 0)]
    pub max_nodes: usize,
    /// Minimum share of the root's magnitude (0..1) a node needs to be kept;
    /// smaller nodes go to their parent's `[other]` child.
    #[arg(long, default_value_t = 0.0)]
    pub min_share: f64,
    /// Label of the root node.
    #[arg(long, default_value = DEFAULT_ROOT)]
    pub root: String,
    /// Stack transforms.
    #[command(flatten)]
    pub filter: FilterOptions,
}

impl Default for TreeOptions {
    fn default() -> Self {
        Self {
            max_nodes: 0,
            min_share: 0.0,
            root: DEFAULT_ROOT.to_string(),
            filter: FilterOptions::default(),
        }
    }
}

/// Options of the diff flame graph (`stackDiff`): the tree options plus
/// baseline normalization.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DiffOptions {
    /// Scale the baseline so its total equals the comparison's total
    /// (largest-remainder rounding keeps `value = self + children`).
    /// Default: off.
    #[arg(long)]
    pub normalize: bool,
    /// Tree options.
    #[command(flatten)]
    pub tree: TreeOptions,
}

fn parse_regex(s: &str) -> std::result::Result<Regex, String> {
    Regex::new(s).map_err(|e| e.to_string().replace('\n', " "))
}

fn opt_err(key: &str, reason: impl Into<String>) -> Error {
    Error::Option {
        key: key.to_string(),
        reason: reason.into(),
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err(opt_err(key, format!("expected a boolean, got {v:?}"))),
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T> {
    v.trim()
        .parse()
        .map_err(|_| opt_err(key, format!("expected a number, got {v:?}")))
}

impl FilterOptions {
    /// Applies one SQL option; returns false when the key is not a filter key.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "collapse_recursion" => self.collapse_recursion = parse_bool(key, value)?,
            "strip_hex" => self.strip_hex = parse_bool(key, value)?,
            "max_depth" => self.max_depth = parse_num(key, value)?,
            "focus" | "exclude" => {
                let re = if value.is_empty() {
                    None
                } else {
                    Some(parse_regex(value).map_err(|e| opt_err(key, e))?)
                };
                if key == "focus" {
                    self.focus = re;
                } else {
                    self.exclude = re;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Builds filter options from SQL `(key, value)` pairs.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> Result<Self> {
        let mut o = Self::default();
        for (k, v) in pairs {
            if !o.apply(k.as_ref(), v.as_ref())? {
                return Err(misplaced(k.as_ref(), "stackFold", FOLD_KEYS));
            }
        }
        Ok(o)
    }

    /// True when no transform is configured.
    pub fn is_identity(&self) -> bool {
        !self.collapse_recursion
            && !self.strip_hex
            && self.max_depth == 0
            && self.focus.is_none()
            && self.exclude.is_none()
    }
}

const FOLD_KEYS: &str = "collapse_recursion, strip_hex, max_depth, focus, exclude";
const TREE_KEYS: &str =
    "max_nodes, min_share, root, collapse_recursion, strip_hex, max_depth, focus, exclude";
const DIFF_KEYS: &str =
    "max_nodes, min_share, root, normalize, collapse_recursion, strip_hex, max_depth, focus, exclude";

/// The error for a key the function does not take: a key another function
/// takes says so (an option that would do nothing is an error, not ignored).
fn misplaced(key: &str, function: &str, known: &str) -> Error {
    let takes = match key {
        "max_nodes" | "min_share" | "root" => Some("stackTree and stackDiff"),
        "normalize" => Some("stackDiff"),
        _ => None,
    };
    match takes {
        Some(f) => opt_err(
            key,
            format!(
                "{function} does not take this option (only {f} do; {function} takes: {known})"
            ),
        ),
        None => opt_err(key, format!("unknown option (known: {known})")),
    }
}

impl TreeOptions {
    /// Applies one SQL option; returns false when the key is not a tree key.
    fn apply(&mut self, k: &str, v: &str) -> Result<bool> {
        match k {
            "max_nodes" => self.max_nodes = parse_num(k, v)?,
            "min_share" => self.min_share = parse_num(k, v)?,
            "root" => self.root = v.to_string(),
            _ => return self.filter.apply(k, v),
        }
        Ok(true)
    }

    /// Builds `stackTree` options from SQL `(key, value)` pairs.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> Result<Self> {
        let mut o = Self::default();
        for (k, v) in pairs {
            if !o.apply(k.as_ref(), v.as_ref())? {
                return Err(misplaced(k.as_ref(), "stackTree", TREE_KEYS));
            }
        }
        o.validate()?;
        Ok(o)
    }

    /// Checks value ranges.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.min_share) {
            return Err(opt_err("min_share", "must be between 0 and 1"));
        }
        if self.max_nodes == 1 {
            return Err(opt_err(
                "max_nodes",
                "must be 0 (no limit) or at least 2 (the root and one `[other]` row)",
            ));
        }
        Ok(())
    }
}

impl DiffOptions {
    /// Builds `stackDiff` options from SQL `(key, value)` pairs.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> Result<Self> {
        let mut o = Self::default();
        for (k, v) in pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            if k == "normalize" {
                o.normalize = parse_bool(k, v)?;
            } else if !o.tree.apply(k, v)? {
                return Err(misplaced(k, "stackDiff", DIFF_KEYS));
            }
        }
        o.tree.validate()?;
        Ok(o)
    }
}
