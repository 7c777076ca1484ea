//! SVG flame graphs: folded lines rendered by inferno, with the tree's own
//! root label (what `flamehouse flame --svg` and the demo write).

use crate::error::{file_err, Error, Result};
use std::path::Path;

/// How [`render_svg`] labels a flame graph.
#[derive(Debug, Clone)]
pub struct SvgOptions {
    /// The title above the graph. Default: `flamehouse`.
    pub title: String,
    /// The unit every tooltip names after the value (`1,234 bytes`): the
    /// views' `bytes` metric is `bytes`, `count` is `allocations`. Default:
    /// `samples` (inferno's).
    pub count_name: String,
    /// The text of the root (bottom) bar and its tooltip, where inferno
    /// leaves the bar empty and says `all`: pass the tree's own root label
    /// so the SVG and the Grafana panel agree. Default: `total` (the
    /// functions' default `root`).
    pub root: String,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            title: "flamehouse".into(),
            count_name: "samples".into(),
            root: "total".into(),
        }
    }
}

/// Renders folded lines (`a;b;c N`) to an SVG flame graph with inferno.
pub fn render_svg(lines: &[String], svg: &SvgOptions, path: &Path) -> Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = svg.title.clone();
    opts.count_name = svg.count_name.clone();
    let mut buf = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut buf)
        .map_err(|e| Error::Render(e.to_string()))?;
    let text = String::from_utf8(buf).map_err(|e| Error::Render(e.to_string()))?;
    let text = label_root(&text, &xml_escape(&svg.root));
    std::fs::write(path, text).map_err(file_err(path))
}

/// Names inferno's root frame: its tooltip `all (N unit, 100%)` becomes
/// `{root} (N unit, 100%)` and its empty text element gets `{root}` (the
/// page's script rebuilds bar texts from the tooltips on zoom, so both must
/// say the same). `root` is already XML-escaped.
fn label_root(svg: &str, root: &str) -> String {
    const ROOT_TITLE: &str = "<title>all (";
    let Some(at) = svg.find(ROOT_TITLE) else {
        return svg.to_string();
    };
    let after = at + ROOT_TITLE.len();
    let mut out = String::with_capacity(svg.len() + 2 * root.len());
    out.push_str(&svg[..at]);
    out.push_str("<title>");
    out.push_str(root);
    out.push_str(" (");
    let rest = &svg[after..];
    // The root's own (empty) text element closes its frame.
    match (rest.find("></text>"), rest.find("</g>")) {
        (Some(t), Some(g)) if t < g => {
            out.push_str(&rest[..t + 1]);
            out.push_str(root);
            out.push_str(&rest[t + 1..]);
        }
        _ => out.push_str(rest),
    }
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
