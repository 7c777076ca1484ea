//! The line-by-line reader as it was before the fast path (test only):
//! the reference the fast reader must equal row for row
//! (`fast_path_equals_the_line_by_line_reference`).

use std::collections::HashMap;
use std::path::Path;

use super::{parse_frame, text, Builder, Error, PerfOptions, Placement, NAME};
use crate::formats::Format;
use crate::model::{Frame, Label, Source, Symbol};

/// A sample header.
#[derive(Debug, PartialEq, Eq)]
struct Header<'a> {
    comm: String,
    pid: Option<u32>,
    tid: u32,
    time_ns: u64,
    /// No time on the line.
    untimed: bool,
    wall: bool,
    period: Option<u64>,
    event: String,
    /// Text after the event (a single-frame sample's `addr sym (dso)`).
    rest: Vec<&'a str>,
}

/// The fast reader's header, owned, and as it is (for the checks the
/// readers share): how a header line reads is not what
/// the fast path changed (its chains are).
fn parse_header(line: &str) -> Result<(Header<'_>, super::Header<'_>), String> {
    let h = super::parse_header(line, &mut Vec::new())?;
    let kept = super::parse_header(line, &mut Vec::new())?;
    Ok((
        Header {
            comm: h.comm.into_owned(),
            pid: h.pid,
            tid: h.tid,
            time_ns: h.time_ns.unwrap_or(0),
            untimed: h.time_ns.is_none(),
            wall: h.wall,
            period: h.period,
            event: h.event.into_owned(),
            rest: h.rest.split_whitespace().collect(),
        },
        kept,
    ))
}

struct Sample {
    time_ns: u64,
    event: usize,
    period: u64,
    /// Frame ids, leaf first.
    frames: Vec<u32>,
    /// Index of the sample's (labels, root frame ids) in `sets`.
    set: u32,
}

/// Parses a whole `perf script` text (`path` and `mtime` for messages and
/// the default time).
///
/// # Errors
/// The first bad line, or a file without a sample.
pub(super) fn parse(
    text: &str,
    path: &Path,
    mtime: u64,
    options: &PerfOptions,
) -> Result<text::TextReader, Error> {
    let err = |line: usize, message: String| Error::Line {
        format: NAME,
        path: path.to_owned(),
        line: line as u64 + 1,
        message,
    };
    // perf script ends every line with a newline: a file that stops inside
    // a line was cut short (the check shared by the text formats).
    text::ends_whole(text, path, NAME)?;
    let mut events: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    let mut has_period: Vec<bool> = Vec::new();
    let (mut chained, mut wall) = (false, true);
    let mut one_liner = false;
    let mut headers = super::HeadersSeen::default();
    let mut event_ix: HashMap<String, usize> = HashMap::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut comms = std::collections::BTreeSet::new();
    let mut pids = std::collections::BTreeSet::new();
    let mut periods = std::collections::BTreeSet::new();
    let mut open = false;
    let mut sets: Vec<(Vec<Label>, Vec<u32>)> = Vec::new();
    let mut set_ix: HashMap<(String, u32, u32), u32> = HashMap::new();
    let mut b = Builder::new(0);
    // Frame line -> id: each distinct line is parsed once per file.
    let mut seen: HashMap<&str, u32> = HashMap::new();
    let mut untimed_at: Option<usize> = None;
    let frameless_untimed = |samples: &[Sample], at: Option<usize>| match (at, samples.last()) {
        (Some(line), Some(s)) if s.frames.is_empty() => Err(err(
            line,
            "a sample header without a time has no frames (`perf script -F` needs `ip`)".into(),
        )),
        _ => Ok(()),
    };
    let mut lines = 0;
    let total = text.lines().count();
    for (n, line) in text.lines().enumerate() {
        lines = n + 1;
        if line.trim().is_empty() {
            // The file's last line, blanks without a line end, a sample
            // open: a frame line cut inside its indentation.
            if open
                && lines == total
                && !text.ends_with('\n')
                && (chained && !one_liner || line.contains('\t'))
            {
                return Err(err(n, super::CUT_INSIDE_A_SAMPLE.into()));
            }
            open = false;
            continue;
        }
        if line.starts_with('#') && !open || super::is_srccode(line) {
            continue;
        }
        if line.starts_with(char::is_whitespace) && !super::is_indented_header(line) {
            if !open {
                return Err(err(n, "a frame line outside a sample".into()));
            }
            if super::is_srcline(line) {
                continue;
            }
            chained = true;
            one_liner = false;
            let line = line.trim();
            let id = match seen.get(line) {
                Some(&id) => id,
                None => {
                    let f = parse_frame(line, options).map_err(|m| err(n, m))?;
                    let id = b.frame(f);
                    seen.insert(line, id);
                    id
                }
            };
            samples.last_mut().expect("open sample").frames.push(id);
            continue;
        }
        if super::is_side_band(line) {
            open = false;
            continue;
        }
        let (h, kept) = parse_header(line).map_err(|m| err(n, m))?;
        frameless_untimed(&samples, untimed_at)?;
        untimed_at = (h.untimed && kept.event == super::NO_EVENT).then_some(n);
        super::check_header(&kept, options, &mut headers).map_err(|m| err(n, m))?;
        wall &= h.wall;
        let event = *event_ix.entry(h.event.clone()).or_insert_with(|| {
            events.push(h.event.clone().into());
            has_period.push(false);
            events.len() - 1
        });
        has_period[event] |= h.period.is_some();
        let mut frames = Vec::new();
        // No call graph: the sampled ip on the header line (tracepoint
        // arguments, which do not start with an address, are not one).
        if h.rest
            .first()
            .is_some_and(|t| u64::from_str_radix(t, 16).is_ok())
        {
            let f = parse_frame(&h.rest.join(" "), options).map_err(|m| err(n, m))?;
            frames.push(b.frame(f));
        }
        let pid = h.pid.unwrap_or(h.tid);
        // The (comm, pid, tid) of a sample become its labels and root
        // frames once per distinct triple, not once per sample.
        let triple = (h.comm, pid, h.tid);
        let set = match set_ix.get(&triple) {
            Some(&i) => i,
            None => {
                let (comm, pid, tid) = &triple;
                let parts = [
                    ("comm", super::comm_placement(comm, options), comm.clone()),
                    ("pid", options.pid, super::id_string(*pid)),
                    ("tid", options.tid, super::id_string(*tid)),
                ];
                let mut labels: Vec<Label> = parts
                    .iter()
                    .filter(|(_, place, _)| *place == Placement::Label)
                    .map(|(key, _, value)| Label {
                        key: (*key).into(),
                        value: value.clone(),
                    })
                    .collect();
                labels.sort();
                // Root frames, root first (comm, pid, tid): pushed leaf
                // side first after the chain.
                let roots: Vec<u32> = parts
                    .iter()
                    .rev()
                    .filter(|(_, place, _)| *place == Placement::Frame)
                    .map(|(_, _, value)| {
                        b.frame(Frame::Symbol(Symbol {
                            function: value.clone(),
                            ..Default::default()
                        }))
                    })
                    .collect();
                comms.insert(comm.clone());
                pids.insert(*pid);
                sets.push((labels, roots));
                let i = u32::try_from(sets.len() - 1).expect("fewer than 2^32 threads");
                set_ix.insert(triple, i);
                i
            }
        };
        periods.insert((event, h.period));
        samples.push(Sample {
            time_ns: h.time_ns,
            event,
            period: h.period.unwrap_or(1),
            frames,
            set,
        });
        open = true;
        one_liner = super::is_one_liner(line, &kept);
    }
    frameless_untimed(&samples, untimed_at)?;
    if chained && open && !one_liner {
        return Err(err(
            lines.saturating_sub(1),
            super::CUT_INSIDE_A_SAMPLE.into(),
        ));
    }
    if samples.is_empty() {
        return Err(Error::File {
            format: NAME,
            path: path.to_owned(),
            message: "no sample header (`comm tid secs.frac: period event:`) in the file".into(),
        });
    }
    let (types, slots) = super::event_types(&events, &has_period);
    let first = samples.iter().map(|s| s.time_ns).min().unwrap_or(0);
    let last = samples.iter().map(|s| s.time_ns).max().unwrap_or(0);
    let span = last - first;
    let base = super::time_base(options, wall, first, mtime, span);
    b.set_types(types.len());
    let window = options.window_ns.filter(|&w| w > 0);
    let mut order: Vec<usize> = (0..samples.len()).collect();
    if window.is_some() {
        order.sort_by_key(|&i| samples[i].time_ns);
    }
    let mut current = None;
    for i in order {
        let s = &mut samples[i];
        let (start, len) = match window {
            Some(w) => ((s.time_ns - first) / w * w, w),
            None => (0, span),
        };
        if current != Some(start) {
            b.batch(base.saturating_add(start), len);
            current = Some(start);
        }
        let (labels, roots) = &sets[s.set as usize];
        s.frames.extend_from_slice(roots);
        let value = i64::try_from(s.period).unwrap_or(i64::MAX);
        let (count, period) = slots[s.event];
        let mut values = vec![(count, 1)];
        values.extend(period.map(|p| (p, value)));
        b.add(&s.frames, labels, &values);
    }
    let single_period =
        (periods.len() == events.len()).then(|| periods.iter().next().and_then(|p| p.1));
    let source = Source {
        identity: text::identity_with("perf", text, options),
        pid: if pids.len() == 1 {
            pids.iter()
                .next()
                .copied()
                .filter(|&p| p != super::UNKNOWN_ID)
                .unwrap_or(0)
        } else {
            0
        },
        name: if comms.len() == 1 {
            comms.iter().next().cloned().unwrap_or_default()
        } else {
            String::new()
        },
        main_path: String::new(),
        start_ns: 0,
        labels: Vec::new(),
        period: single_period
            .flatten()
            .map_or(0, |p| i64::try_from(p).unwrap_or(0)),
        // perf script does not say what its period counts.
        period_type: String::new(),
        legacy_identity: Vec::new(),
    };
    let types = text::value_types(&types);
    Ok(b.finish(Format::Perf, types, source, text.len() as u64))
}
