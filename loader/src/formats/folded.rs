//! Folded stacks, one `root;...;leaf COUNT` a line: Brendan Gregg's
//! FlameGraph collapsers, inferno, py-spy's `-f raw`.
//!
//! - the count is the last field after a space or a tab (FlameGraph takes
//!   either), a non-negative integer; a line with two counts (`a;b 10
//!   12`, difffolded.pl's differential input, which FlameGraph and inferno
//!   read as a diff) is refused naming its line rather than read with
//!   ` 10` in the leaf's name;
//!   a line with nothing before it (` 5`) is a sample with an empty stack
//!   (py-spy writes it when it catches no Python frame); the same stack on
//!   several lines is summed; blank lines are skipped;
//! - a frame `name (file:line)` (py-spy) becomes a symbol with its file and
//!   line; any other frame (`thread (123)`, `foo_[k]`) is a function name
//!   as written;
//! - the file carries no type, unit or time: one value type from
//!   [`FoldedOptions`] (default `folded:folded:count`, profile type
//!   `folded:count`: not pprof's `samples:count`, so folded counts never
//!   mix with a Go CPU profile's unless asked for), one batch at
//!   [`FoldedOptions::time_ns`] (default: the file's modification time)
//!   covering [`FoldedOptions::duration_ns`] (default 0: unknown).

use std::fs::File;
use std::path::Path;

use super::text::{self, Builder, Error};
use super::{Format, ProfileFormat, ProfileReader, ReadOptions, Sniff};
use crate::model::{Frame, Source, Symbol};

const NAME: &str = "folded stacks";

/// What folded stacks count, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedOptions {
    /// Profile kind (`cpu`, `wall`, `alloc`...), informational (the
    /// profile type is `sample:unit`). Default: `folded`.
    pub kind: String,
    /// Sample name. Default: `folded`.
    pub sample: String,
    /// Unit of the counts. Default: `count`.
    pub unit: String,
    /// Time of the profile, ns since the epoch. Default: `None`, the
    /// file's modification time.
    pub time_ns: Option<u64>,
    /// Period the profile covers, ns. Default: 0 (unknown).
    pub duration_ns: u64,
    /// Parse py-spy's `name (file:line)` frames. Default: on.
    pub file_lines: bool,
}

impl Default for FoldedOptions {
    fn default() -> Self {
        FoldedOptions {
            kind: "folded".into(),
            sample: "folded".into(),
            unit: "count".into(),
            time_ns: None,
            duration_ns: 0,
            file_lines: true,
        }
    }
}

/// The folded-stacks format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Folded;

/// `(stack, count)` of a line: split at its last space or tab.
fn split_count(line: &str) -> Option<(&str, &str)> {
    line.rfind([' ', '\t'])
        .map(|i| (&line[..i], &line[i + 1..]))
}

fn is_count(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

fn folded_line(line: &str) -> bool {
    let line = line.trim_end();
    split_count(line).is_some_and(|(stack, n)| {
        !n.is_empty()
            && n.bytes().all(|c| c.is_ascii_digit())
            && !stack.starts_with(char::is_whitespace)
            && !stack.starts_with('@')
    }) || empty_stack_line(line)
}

/// An empty stack's line: ` COUNT`.
fn empty_stack_line(line: &str) -> bool {
    line.trim_end()
        .strip_prefix(' ')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

/// `stack COUNT` whose count is a number but no count (`-3`, `2.5`).
fn bad_count_line(line: &str) -> bool {
    let line = line.trim_end();
    split_count(line).is_some_and(|(stack, n)| {
        !stack.is_empty()
            && !stack.starts_with(char::is_whitespace)
            && !stack.starts_with(['@', '{', '#'])
            && {
                let n = n.strip_prefix(['-', '+']).unwrap_or(n);
                let (int, frac) = n.split_once('.').unwrap_or((n, "0"));
                is_count(int) && is_count(frac)
            }
    })
}

impl ProfileFormat for Folded {
    fn name(&self) -> &'static str {
        "folded"
    }

    fn sniff(&self, first: &[u8]) -> Sniff {
        if first.is_empty() || !text::looks_like_text(first) {
            return Sniff::No;
        }
        let s = String::from_utf8_lossy(first);
        match s.split_once('\n') {
            // An empty stack's line (` 12`) first: folded when it is the
            // only line or a stack follows; not when more such lines follow
            // and nothing else (a collapser writes one empty stack; `perf
            // script -F tid` prints ` 8638` a sample: counted as stacks,
            // the thread ids would be summed).
            Some((line, rest)) if folded_line(line) => {
                if !empty_stack_line(line)
                    || rest.lines().any(|l| folded_line(l) && !empty_stack_line(l))
                    || rest.trim().is_empty()
                {
                    Sniff::Yes
                } else {
                    Sniff::No
                }
            }
            // A stack with a signed or fractional count: folded text with
            // a bad first line, which the reader names (not "no format").
            Some((line, _)) if bad_count_line(line) => Sniff::Unsure,
            Some(_) => Sniff::No,
            // A first line longer than the sniff (py-spy's are): text not
            // starting as another text format does; the reader says which
            // line is wrong if it is no folded stack after all.
            None if !s.starts_with(['@', '{', '#', ' ', '\t']) => Sniff::Unsure,
            None => Sniff::No,
        }
    }

    fn open(
        &self,
        file: File,
        path: &Path,
        options: &ReadOptions,
    ) -> Result<Box<dyn ProfileReader>, super::Error> {
        let (text, mtime) = text::read_text(file, path, NAME, &options.text)?;
        let reader = parse_within(&text, path, mtime, &options.folded, &options.text)?;
        Ok(reader.boxed_with_legacy(options, "folded", &text, &options.folded))
    }
}

/// A py-spy frame `name (file:line)` as a symbol; any other as a name.
#[must_use]
pub fn frame(s: &str, file_lines: bool) -> Symbol {
    if file_lines {
        if let Some((name, rest)) = s.strip_suffix(')').and_then(|r| r.rsplit_once(" (")) {
            if let Some((file, line)) = rest.rsplit_once(':') {
                if let Ok(line) = line.parse::<u32>() {
                    if !name.is_empty() && !file.is_empty() {
                        return Symbol {
                            function: name.to_owned(),
                            file: Some(file.to_owned()),
                            line: Some(line),
                            module: None,
                        };
                    }
                }
            }
        }
    }
    Symbol {
        function: s.to_owned(),
        ..Default::default()
    }
}

/// The folded text of a symbol: the inverse of [`frame`].
#[must_use]
pub fn frame_text(s: &Symbol) -> String {
    match (&s.file, s.line) {
        (Some(f), Some(l)) => format!("{} ({f}:{l})", s.function),
        _ => s.function.clone(),
    }
}

/// Parses folded stacks (`path` and `mtime` for messages and the default
/// time).
///
/// # Errors
/// The first bad line, or a file without a stack.
pub fn parse(
    text: &str,
    path: &Path,
    mtime: u64,
    options: &FoldedOptions,
) -> Result<text::TextReader, Error> {
    parse_within(text, path, mtime, options, &text::TextOptions::unlimited())
}

/// [`parse`] keeping no more distinct stacks and frames than `limits`
/// allow (what `load` reads with; `limits.max_bytes` is the caller's).
///
/// # Errors
/// As [`parse`], and [`Error::TooMany`] past a limit.
pub fn parse_within(
    text: &str,
    path: &Path,
    mtime: u64,
    options: &FoldedOptions,
    limits: &text::TextOptions,
) -> Result<text::TextReader, Error> {
    let err = |line: usize, message: String| Error::Line {
        format: NAME,
        path: path.to_owned(),
        line: line as u64 + 1,
        message,
    };
    text::ends_whole(text, path, NAME)?;
    let mut b = Builder::within(1, limits);
    b.batch(options.time_ns.unwrap_or(mtime), options.duration_ns);
    let mut lines = 0usize;
    // Frame text -> id: a frame is parsed once per file.
    let mut seen: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let mut ids: Vec<u32> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        // A limit this line's frames or stack go past is said with it.
        b.at_line(n as u64 + 1);
        // Trailing blanks after the count, as inferno and flamegraph.pl
        // take them.
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let (stack, count) =
            split_count(line).ok_or_else(|| err(n, "no count (`a;b;c COUNT`)".into()))?;
        if split_count(stack).is_some_and(|(s, c)| is_count(c) && !s.trim().is_empty()) {
            // The line's end as it is (`a;b 10 12`), not the whole stack.
            let tail: String = {
                let chars: Vec<char> = line.chars().collect();
                let from = chars.len().saturating_sub(40);
                let t: String = chars[from..].iter().collect();
                if from > 0 {
                    format!("...{t}")
                } else {
                    t
                }
            };
            return Err(err(
                n,
                format!(
                    "two counts (`{tail}`): a differential folded file (difffolded.pl); load each side on its own"
                ),
            ));
        }
        let count: i64 = match count.parse::<i64>() {
            Ok(c) if c >= 0 => c,
            // Digits past Int64 are a number, just one no value can hold.
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
                return Err(err(
                    n,
                    format!(
                        "the count `{count}` is too large: a value holds at most {} (Int64)",
                        i64::MAX
                    ),
                ));
            }
            _ => {
                return Err(err(
                    n,
                    format!("the count `{count}` is no non-negative integer"),
                ))
            }
        };
        ids.clear();
        if !stack.is_empty() {
            if stack.split(';').any(str::is_empty) {
                return Err(err(n, "an empty frame (`;;`)".into()));
            }
            for f in stack.rsplit(';') {
                let id = match seen.get(f) {
                    Some(&id) => id,
                    None => {
                        let id = b.frame(Frame::Symbol(frame(f, options.file_lines)));
                        seen.insert(f, id);
                        id
                    }
                };
                ids.push(id);
            }
        }
        b.add(&ids, &[], &[(0, count)]);
        lines += 1;
    }
    if lines == 0 {
        return Err(Error::File {
            format: NAME,
            path: path.to_owned(),
            message: "no stack line".into(),
        });
    }
    let types = text::value_types(&[(
        options.kind.clone(),
        options.sample.clone(),
        options.unit.clone(),
    )]);
    let source = Source {
        identity: text::identity_with("folded", text, options),
        ..Default::default()
    };
    b.check(NAME, path)?;
    Ok(b.finish(Format::Folded, types, source, text.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Event;
    use std::collections::BTreeMap;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/continuous/pyspy")
            .join(name)
    }

    /// The reader's stacks written back as folded text, summed by line.
    fn write_back(r: &mut text::TextReader) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        let mut frames = Vec::new();
        for e in r.events() {
            let Event::Batch(b) = e else { continue };
            for (i, &k) in b.stacks.iter().enumerate() {
                r.stack(k, &mut frames);
                let s: Vec<String> = frames
                    .iter()
                    .rev()
                    .map(|f| match f {
                        Frame::Symbol(s) => frame_text(s),
                        Frame::Address(a) => format!("{a:#x}"),
                    })
                    .collect();
                *out.entry(s.join(";")).or_insert(0) += b.values[i];
            }
        }
        out
    }

    /// A reference reading: split each line at its last space, sum.
    fn reference(text: &str) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let (s, n) = l.rsplit_once(' ').unwrap();
            *out.entry(s.to_owned()).or_insert(0) += n.parse::<i64>().unwrap();
        }
        out
    }

    #[test]
    fn pyspy_files_round_trip_with_their_totals_and_empty_stack() {
        for name in ["work.raw.txt", "work.idle-threads.raw.txt"] {
            let text = std::fs::read_to_string(fixture(name)).unwrap();
            let mut r = parse(&text, &fixture(name), 0, &FoldedOptions::default()).unwrap();
            // Not pprof's `samples:count`.
            assert_eq!(r.value_types()[0].profile_type(), "folded:count");
            let got = write_back(&mut r);
            let want = reference(&text);
            assert_eq!(got, want, "{name}");
            // File totals: the sum of every line's last field (awk-style).
            let total: i64 = text
                .lines()
                .filter_map(|l| l.split(' ').next_back()?.parse::<i64>().ok())
                .sum();
            assert_eq!(got.values().sum::<i64>(), total, "{name}");
        }
        // The committed run has the empty-stack line ` 5`.
        let text = std::fs::read_to_string(fixture("work.raw.txt")).unwrap();
        assert!(text.lines().any(|l| l == " 5"));
        let mut r = parse(&text, Path::new("w"), 0, &FoldedOptions::default()).unwrap();
        assert_eq!(write_back(&mut r).get(""), Some(&5));
    }

    #[test]
    fn pyspy_frames_carry_file_and_line_and_options_set_type_and_time() {
        let text = "<module> (work.py:34);main (work.py:29);thread (31952) 7\n\
                    <module> (work.py:34);main (work.py:29);thread (31952) 3\n\
                    a;b_[k] 2\n";
        let options = FoldedOptions {
            kind: "wall".into(),
            sample: "wall".into(),
            unit: "nanoseconds".into(),
            time_ns: Some(1_700_000_000_000_000_000),
            duration_ns: 10_000_000_000,
            file_lines: true,
        };
        let mut r = parse(text, Path::new("f"), 0, &options).unwrap();
        assert_eq!(r.value_types()[0].to_string(), "wall:wall:nanoseconds");
        let events = r.events();
        let Event::Batch(b) = &events[1] else {
            panic!()
        };
        assert_eq!(
            (b.time_ns, b.duration_ns, b.values.as_slice()),
            (1_700_000_000_000_000_000, 10_000_000_000, &[10, 2][..])
        );
        let mut frames = Vec::new();
        r.stack(b.stacks[0], &mut frames);
        assert_eq!(
            frames,
            [
                Frame::Symbol(Symbol {
                    function: "thread (31952)".into(),
                    ..Default::default()
                }),
                Frame::Symbol(Symbol {
                    function: "main".into(),
                    file: Some("work.py".into()),
                    line: Some(29),
                    module: None
                }),
                Frame::Symbol(Symbol {
                    function: "<module>".into(),
                    file: Some("work.py".into()),
                    line: Some(34),
                    module: None
                }),
            ]
        );
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        for (input, line, what) in [
            ("a;b 1\nab\n", 2, "no count"),
            ("a;b 1\n\na;b x\n", 3, "no non-negative integer"),
            ("a;b -3\n", 1, "no non-negative integer"),
            // A count past Int64 is a number too large, not no number.
            (
                "a;b 18446744073709551615\n",
                1,
                "the count `18446744073709551615` is too large: a value holds at most \
                 9223372036854775807 (Int64)",
            ),
            ("a;b -99999999999999999999\n", 1, "no non-negative integer"),
            ("a;;b 3\n", 1, "empty frame"),
            ("a;b 1\na;b 10 12\n", 2, "two counts (`a;b 10 12`)"),
            ("a;b 1\na;b\t10\t12\n", 2, "two counts"),
            // A long stack: its last 40 characters.
            (
                &format!("{} 3 4\n", "f;".repeat(40) + "main.leaf"),
                1,
                "two counts (`...;f;f;f;f;f;f;f;f;f;f;f;f;f;main.leaf 3 4`)",
            ),
        ] {
            let e = parse(
                input,
                Path::new("/p/f.folded"),
                0,
                &FoldedOptions::default(),
            )
            .unwrap_err();
            let msg = e.to_string();
            assert_eq!(e.line(), Some(line), "{msg}");
            assert!(
                msg.starts_with(&format!("/p/f.folded:{line}: not folded stacks: ")),
                "{msg}"
            );
            assert!(msg.contains(what), "{msg}");
        }
        assert!(parse("\n\n", Path::new("e"), 0, &FoldedOptions::default()).is_err());
    }

    /// Past `--max-stacks`, `--max-frames`, `--max-stack-frames` or
    /// `--max-stack-depth` a file is refused (2 M one-frame stacks, a 31
    /// MB folded file, took 4 GB; 20,000 stacks of 200 distinct frames, 40
    /// MB, 3.3 GB); at each limit it is taken. The counts are those of the
    /// text, by hand: 3 distinct stacks (`a;b` twice), 4 distinct frames,
    /// 2 + 2 + 1 frames in them, 2 at most in one.
    #[test]
    fn past_a_limit_on_stacks_or_frames_a_file_is_refused() {
        use crate::formats::text::TextOptions;
        let o = FoldedOptions::default();
        let text = "a;b 1\na;c 2\na;b 3\nd 1\n";
        let run = |limits: TextOptions| {
            parse_within(text, Path::new("/p/f"), 0, &o, &limits).map(|r| r.stack_count())
        };
        let all = TextOptions::unlimited();
        assert_eq!(run(all).unwrap(), 3);
        // Each limit: at `at` the file loads; one below it is refused,
        // naming the file, the line that went past, what is past the
        // limit and the option.
        type Set = fn(&mut TextOptions, u64);
        let limits: [(Set, u64, &str, &str); 4] = [
            (
                |t, n| t.max_stacks = n,
                3,
                "4: more than 2 distinct stacks",
                "--max-stacks",
            ),
            (
                |t, n| t.max_frames = n,
                4,
                "4: more than 3 distinct frames",
                "--max-frames",
            ),
            (
                |t, n| t.max_stack_frames = n,
                5,
                "4: more than 4 frames in its distinct stacks",
                "--max-stack-frames",
            ),
            (
                |t, n| t.max_stack_depth = n,
                2,
                "1: more than 1 frames in one stack",
                "--max-stack-depth",
            ),
        ];
        for (set, at, what, option) in limits {
            let with = |n| {
                let mut t = all;
                set(&mut t, n);
                t
            };
            assert_eq!(run(with(at)).unwrap(), 3, "{option} {at}");
            let err = run(with(at - 1)).unwrap_err();
            let line = what.split(':').next().and_then(|n| n.parse().ok());
            assert_eq!(err.line(), line, "{err}");
            let e = err.to_string();
            assert!(e.starts_with(&format!("/p/f:{what} (the limit")), "{e}");
            assert!(e.ends_with(&format!("{option} raises it)")), "{e}");
        }
    }

    /// A file cut inside its last count stored `456` as `45`: a file that
    /// does not end its last line is refused, naming that line.
    #[test]
    fn a_file_cut_inside_its_last_line_is_refused() {
        let o = FoldedOptions::default();
        assert!(parse("main;a 123\nmain;b 456\n", Path::new("f"), 0, &o).is_ok());
        let e = parse("main;a 123\nmain;b 45", Path::new("/p/f.folded"), 0, &o).unwrap_err();
        assert_eq!(e.line(), Some(2));
        assert!(e.to_string().contains("cut short"), "{e}");
        // Blanks after the last line end are no cut line.
        let r = parse("main;a 123\nmain;b 456\n  \t", Path::new("f"), 0, &o).unwrap();
        assert_eq!(r.stack_count(), 2);
    }

    #[test]
    fn sniff_takes_folded_lines() {
        assert_eq!(Folded.sniff(b"main;foo;bar 12\n"), Sniff::Yes);
        assert_eq!(Folded.sniff(b" 5\nmain 1\n"), Sniff::Yes);
        // One empty stack alone is folded; a tid a line (`perf script -F
        // tid`) is not.
        assert_eq!(Folded.sniff(b" 12\n"), Sniff::Yes);
        assert_eq!(Folded.sniff(b" 8638 \n 8638 \n 8638 \n"), Sniff::No);
        let py = std::fs::read(fixture("work.raw.txt")).unwrap();
        let first = &py[..crate::formats::SNIFF_LEN];
        assert_eq!(crate::formats::detect(first), Some(Format::Folded));
        assert_eq!(Folded.sniff(b"@[\n    leaf+58\n"), Sniff::No);
        assert_eq!(
            Folded.sniff(b"burn 410 1.5: 2004008 cpu-clock:pppH: \n"),
            Sniff::No
        );
        assert_eq!(Folded.sniff(&[0x1f, 0x8b, 8, 0]), Sniff::No);
        // A short file with a Latin-1 name: text (the same line later in a
        // longer file was, and --format folded reads it).
        assert_eq!(Folded.sniff(b"a;b 10\na;\xffc 3\n"), Sniff::Yes);
        // A tab before the count, as FlameGraph's flamegraph.pl takes it.
        assert_eq!(Folded.sniff(b"main;foo;bar\t12\n"), Sniff::Yes);
        // A bad count: folded all the same, for the reader to name the line.
        assert_eq!(Folded.sniff(b"a;b -3\n"), Sniff::Unsure);
        assert_eq!(Folded.sniff(b"a;b 2.5\n"), Sniff::Unsure);
        assert_eq!(Folded.sniff(b"hello world\n"), Sniff::No);
    }

    /// A tab before the count reads as a space does; a frame ending in a
    /// number that is not the line's second count stays whole.
    #[test]
    fn a_tab_before_the_count_and_numbers_inside_frames() {
        let mut r = parse(
            "main;foo;bar\t12\nmain;Worker 3;run 5\n",
            Path::new("t"),
            0,
            &FoldedOptions::default(),
        )
        .unwrap();
        assert_eq!(
            write_back(&mut r),
            BTreeMap::from([
                ("main;foo;bar".to_string(), 12),
                ("main;Worker 3;run".to_string(), 5)
            ])
        );
    }
}
