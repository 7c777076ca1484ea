//! Command-line flags of the text readers (`perf script`, bpftrace, folded
//! stacks), as one `clap` group a command flattens, mapped onto
//! [`ReadOptions`]; the defaults are the options structs' own, which a test
//! checks.

use super::perf::Placement;
use super::ReadOptions;

/// Flags of the text formats.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct TextArgs {
    /// perf script: where each sample's command name goes (a `comm` label,
    /// a root frame, or nowhere).
    #[arg(long, value_enum, default_value_t = Placement::Label)]
    pub perf_comm: Placement,
    /// perf script: where each sample's process id goes (label `pid`);
    /// needs `perf script -F +pid` (the default fields show the thread id
    /// only).
    #[arg(long, value_enum, default_value_t = Placement::Omit)]
    pub perf_pid: Placement,
    /// perf script: where each sample's thread id goes (label `tid`).
    #[arg(long, value_enum, default_value_t = Placement::Omit)]
    pub perf_tid: Placement,
    /// perf script: suffix kernel frames with `_[k]`.
    #[arg(long)]
    pub annotate_kernel: bool,
    /// perf script: suffix JIT frames (`/tmp/perf-PID.map`) with `_[j]`.
    #[arg(long)]
    pub annotate_jit: bool,
    /// perf script: one profile per window of this many seconds of the
    /// recording; when not given, one for the file.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub perf_window: Option<u64>,
    /// bpftrace: label keys of the map key's non-stack parts, in order
    /// (`comm,tid`), one per part, the last taking any rest (a comm
    /// holding `, `); without it every part is a root frame. Not
    /// `service` (--service sets it), a name twice, or a --label key.
    #[arg(long, value_delimiter = ',', value_parser = parse_label_key)]
    pub bpftrace_labels: Vec<String>,
    /// Folded stacks: the profile type the counts are stored as,
    /// `sample:unit` (queried as given: `--folded-type wall:count` is
    /// `profile flame --type wall:count`), or `kind:sample:unit` (the
    /// kind only describes; stored as `sample:unit`).
    #[arg(long, default_value = "folded:count", value_parser = parse_type)]
    pub folded_type: ProfileType,
    /// When the profile was taken (`2026-12-01 14:00:00[.fff]`, UTC, as the
    /// `profile` commands take and print times, a `T` allowed; RFC 3339
    /// with `Z` or an offset, `2026-12-01T14:00:00+02:00`; a date alone, its
    /// midnight; seconds since the epoch, or milliseconds with `ms`; not
    /// `now-1h`, as the time joins the profile's id); for perf the first sample's time, for
    /// pprof instead of its `time_nanos` (the same file at another time is
    /// another profile). When not given: pprof's own time, perf's `-F
    /// +tod` wall-clock time (local time), else the file's modification
    /// time.
    #[arg(long, value_parser = parse_time, allow_negative_numbers = true)]
    pub time: Option<u64>,
    /// bpftrace, folded stacks and pprof (instead of its
    /// `duration_nanos`): the seconds the profile covers; when not given,
    /// pprof's own, else 0 (unknown).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub duration: Option<u64>,
    /// bpftrace: a copy of the traced process's `/proc/PID/maps`, taken
    /// while it ran (`cat /proc/PID/maps > maps.txt`): raw addresses
    /// (`0x...`, printed when the process exited before bpftrace did) are
    /// symbolized through its executable mappings, with the binaries at
    /// their paths (or under --sysroot; --binary names the main program's).
    #[arg(long, value_name = "FILE", value_parser = parse_maps_file)]
    pub bpftrace_maps: Option<MapsFile>,
    /// perf script, bpftrace, folded: the largest file read, in MiB (a text
    /// profile is held in memory whole; a larger file is refused, never
    /// cut; text on standard input, `-`, is copied up to it). Raise it for a
    /// long recording's `perf script`.
    #[arg(long, value_name = "MIB", default_value_t = super::text::MAX_TEXT_BYTES >> 20,
          value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    pub max_text_mib: u64,
    /// perf script, bpftrace, folded: the most distinct stacks of one file
    /// (each costs ~1 KB of memory on its way to the engine, a frame of
    /// its own included); a file of more is refused, never cut.
    #[arg(long, value_name = "N", default_value_t = super::text::MAX_TEXT_STACKS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_stacks: u64,
    /// perf script, bpftrace, folded: the most distinct frames of one file
    /// (each costs ~400 bytes: its names and its dictionary row); a file
    /// of more is refused, never cut.
    #[arg(long, value_name = "N", default_value_t = super::text::MAX_TEXT_FRAMES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_frames: u64,
}

/// The executable mappings read from a `/proc/PID/maps` copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsFile(pub Vec<crate::model::Mapping>);

/// Reads and parses a `/proc/PID/maps` copy; errors name the file and line.
fn parse_maps_file(s: &str) -> Result<MapsFile, String> {
    // A maps file is a few hundred lines; anything past 16 MiB is not one.
    const MAX: u64 = 16 << 20;
    let len = std::fs::metadata(s).map_err(|e| format!("{s}: {e}"))?.len();
    if len > MAX {
        return Err(format!(
            "{s}: {len} bytes, more than a maps file holds (16 MiB)"
        ));
    }
    let text = std::fs::read_to_string(s).map_err(|e| format!("{s}: {e}"))?;
    let maps = crate::symbolize::parse_proc_maps(&text)
        .map_err(|(line, m)| format!("{s}: line {line}: {m}"))?;
    if maps.is_empty() {
        return Err(format!(
            "{s}: no executable file mapping (a copy of /proc/PID/maps?)"
        ));
    }
    Ok(MapsFile(maps))
}

/// A profile type `[kind:]sample:unit` typed on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileType {
    /// What was profiled (`cpu`, `wall`); `folded` when not given.
    pub kind: String,
    /// Which value (`samples`).
    pub sample: String,
    /// Its unit (`count`, `nanoseconds`).
    pub unit: String,
}

impl std::fmt::Display for ProfileType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.kind, self.sample, self.unit)
    }
}

fn name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
}

fn parse_type(s: &str) -> Result<ProfileType, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let ok = parts.iter().all(|p| name_ok(p));
    match parts[..] {
        [sample, unit] if ok => Ok(ProfileType {
            kind: "folded".into(),
            sample: sample.into(),
            unit: unit.into(),
        }),
        [kind, sample, unit] if ok => Ok(ProfileType {
            kind: kind.into(),
            sample: sample.into(),
            unit: unit.into(),
        }),
        _ => Err(format!(
            "`{s}` is no `sample:unit` or `kind:sample:unit` (each part letters, digits, `_`, `.`, `-`)"
        )),
    }
}

fn parse_label_key(s: &str) -> Result<String, String> {
    // As `--label service=x`: a label `service` would override --service.
    if s == crate::ingest::continuous::SERVICE_LABEL {
        return Err("the service is set with --service, not as a label".into());
    }
    if crate::ingest::continuous::is_label_key(s) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "`{s}` is no label key (letters, digits, `_`, `.`, `-`, `/`, starting with a letter or `_`)"
        ))
    }
}

/// Seconds (a decimal fraction allowed) as ns.
fn parse_seconds(s: &str) -> Result<u64, String> {
    let no = || format!("`{s}` is no number of seconds");
    // Decimal digits read exactly: through an f64, `1796133600.25` s came
    // out as ...249999 ns, a millisecond early.
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit());
    if !(digits(whole) || whole.is_empty() && digits(frac)) || !(frac.is_empty() || digits(frac)) {
        return Err(no());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| no())?
    };
    // Nanoseconds: the first nine digits, rounded at the tenth.
    let mut ns: u64 = 0;
    for i in 0..9 {
        ns = ns * 10 + frac.as_bytes().get(i).map_or(0, |c| u64::from(c - b'0'));
    }
    if frac.as_bytes().get(9).is_some_and(|&c| c >= b'5') {
        ns += 1;
    }
    if whole >= 10_000_000_000 {
        return Err(format!("`{s}`: seconds must be below 10^10"));
    }
    let v = whole * 1_000_000_000 + ns;
    if v == 0 {
        return Err(format!("`{s}`: seconds must be above 0"));
    }
    Ok(v)
}

/// `load --time`: a time as the query flags take it ([`crate::flame::parse_utc_ns`]:
/// `2026-12-01 14:00:00[.f]` UTC, a date alone, RFC 3339 with `Z` or an
/// offset), or seconds since the epoch, as ns since the epoch. `now` and
/// `now-1h` are refused: the time joins the profile's id, so a load run
/// again would store the same file a second time.
fn parse_time(s: &str) -> Result<u64, String> {
    let forms = "`2026-12-01 14:00:00` UTC, `2026-12-01T14:00:00+02:00`, a date alone, \
                 seconds since the epoch, or milliseconds with `ms`";
    // The rollups' minutes and hours are 32-bit `DateTime`s: a later time
    // is refused here, in one line, rather than by every file of the load.
    let in_range = |ns: u64| {
        if ns / 1_000_000 > crate::ingest::continuous::LAST_TIME_MS as u64 {
            Err(format!(
                "`{s}` is after 2106-02-07 06:28:15 UTC, the last time the engine stores"
            ))
        } else {
            Ok(ns)
        }
    };
    // Milliseconds with `ms`, as the query flags and Grafana's URLs.
    if let Some(ms) = s.strip_suffix("ms") {
        if !ms.is_empty() && ms.bytes().all(|c| c.is_ascii_digit()) {
            let ms: u64 = ms
                .parse()
                .map_err(|_| format!("`{s}` is no time ({forms})"))?;
            if ms == 0 {
                return Err(format!("`{s}`: a time must be after 1970-01-01 00:00:00"));
            }
            return in_range(ms.saturating_mul(1_000_000));
        }
    }
    if s.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return parse_seconds(s)
            .map_err(|why| format!("{why} (a time: {forms})"))
            .and_then(in_range);
    }
    if s.trim_start().starts_with("now") {
        return Err(format!(
            "`{s}`: a relative time is not taken here, as the time joins the profile's id (a \
             second run would store the file again); give an absolute one ({forms})"
        ));
    }
    let ns = crate::flame::parse_utc_ns(s).map_err(|why| {
        if why == "not a time" {
            format!("`{s}` is no time ({forms})")
        } else {
            format!("`{s}` is no time: {why} ({forms})")
        }
    })?;
    if ns < 0 {
        return Err(format!(
            "`{s}` is before 1970-01-01, the first time the engine stores"
        ));
    }
    in_range(u64::try_from(ns).unwrap_or(u64::MAX))
}

impl TextArgs {
    /// `read` with these flags applied to the text readers' options.
    #[must_use]
    pub fn apply(&self, mut read: ReadOptions) -> ReadOptions {
        read.perf.comm = self.perf_comm;
        read.perf.pid = self.perf_pid;
        read.perf.tid = self.perf_tid;
        read.perf.annotate_kernel = self.annotate_kernel;
        read.perf.annotate_jit = self.annotate_jit;
        read.perf.window_ns = self.perf_window;
        read.perf.time_ns = self.time;
        read.bpftrace.labels.clone_from(&self.bpftrace_labels);
        read.bpftrace.time_ns = self.time;
        read.bpftrace.duration_ns = self.duration.unwrap_or(0);
        read.bpftrace.mappings = self
            .bpftrace_maps
            .as_ref()
            .map(|m| m.0.clone())
            .unwrap_or_default();
        read.text.max_bytes = self.max_text_mib << 20;
        read.text.max_stacks = self.max_stacks;
        read.text.max_frames = self.max_frames;
        read.folded.kind.clone_from(&self.folded_type.kind);
        read.folded.sample.clone_from(&self.folded_type.sample);
        read.folded.unit.clone_from(&self.folded_type.unit);
        read.folded.time_ns = self.time;
        read.folded.duration_ns = self.duration.unwrap_or(0);
        read.pprof.time_ns = self.time;
        read.pprof.duration_ns = self.duration;
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        text: TextArgs,
    }

    fn cli(args: &[&str]) -> Result<TextArgs, String> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map(|c| c.text)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn no_flags_give_the_library_defaults() {
        let read = cli(&[]).unwrap().apply(ReadOptions::default());
        assert_eq!(read, ReadOptions::default());
    }

    #[test]
    fn flags_reach_the_reader_options() {
        let a = cli(&[
            "--perf-comm=frame",
            "--perf-tid=label",
            "--annotate-kernel",
            "--perf-window=0.5",
            "--bpftrace-labels=comm,tid",
            "--folded-type=wall:wall:nanoseconds",
            "--time=2026-12-01T14:00:00Z",
            "--duration=10",
        ])
        .unwrap();
        let r = a.apply(ReadOptions::default());
        assert_eq!(r.perf.comm, Placement::Frame);
        assert_eq!(r.perf.tid, Placement::Label);
        assert!(r.perf.annotate_kernel && !r.perf.annotate_jit);
        assert_eq!(r.perf.window_ns, Some(500_000_000));
        assert_eq!(r.bpftrace.labels, ["comm", "tid"]);
        // `date -u -d 2026-12-01T14:00:00Z +%s` = 1796133600.
        assert_eq!(r.folded.time_ns, Some(1_796_133_600_000_000_000));
        assert_eq!(r.perf.time_ns, r.folded.time_ns);
        assert_eq!(r.folded.duration_ns, 10_000_000_000);
        assert_eq!(
            (
                r.folded.kind.as_str(),
                r.folded.sample.as_str(),
                r.folded.unit.as_str()
            ),
            ("wall", "wall", "nanoseconds")
        );
    }

    #[test]
    fn a_folded_type_is_stored_as_given() {
        let r = cli(&["--folded-type=wall:nanoseconds"])
            .unwrap()
            .apply(ReadOptions::default());
        assert_eq!(
            (r.folded.sample.as_str(), r.folded.unit.as_str()),
            ("wall", "nanoseconds")
        );
    }

    #[test]
    fn times_parse_as_date_does_them() {
        // References: `date -u -d ... +%s`.
        assert_eq!(
            parse_time("2000-02-29T23:59:59Z"),
            Ok(951_868_799_000_000_000)
        );
        assert_eq!(parse_time("1970-01-01T00:00:00.25Z"), Ok(250_000_000));
        assert_eq!(parse_time("1796133600"), Ok(1_796_133_600_000_000_000));
        // Exact to the nanosecond (an f64 made .25 a millisecond early).
        assert_eq!(parse_time("1796133600.25"), Ok(1_796_133_600_250_000_000));
        assert_eq!(parse_time("1796133600.001"), Ok(1_796_133_600_001_000_000));
        assert_eq!(parse_seconds("2.5"), Ok(2_500_000_000));
        assert_eq!(parse_seconds(".5"), Ok(500_000_000));
        assert_eq!(parse_seconds("1.0000000015"), Ok(1_000_000_002));
        for bad in [
            "",
            ".",
            "0",
            "0.0",
            "-1",
            "1e3",
            "inf",
            "1.2.3",
            "10000000000",
        ] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        // The last second the engine's 32-bit `DateTime` holds, and past it.
        assert_eq!(
            parse_time("2106-02-07T06:28:15Z"),
            Ok(u64::from(u32::MAX) * 1_000_000_000)
        );
        for late in [
            "2106-02-07T06:28:16Z",
            "4294967296",
            "4294967295.5",
            "2106-02-07T06:28:15.001Z",
            "2200-01-01 00:00:00",
        ] {
            let e = parse_time(late).unwrap_err();
            assert!(e.contains("after 2106-02-07 06:28:15 UTC"), "{late}: {e}");
        }
        // As `profile list` prints times (UTC).
        assert_eq!(
            parse_time("2000-02-29 23:59:59.000"),
            Ok(951_868_799_000_000_000)
        );
        assert_eq!(
            parse_time("2000-02-29 23:59:59Z"),
            Ok(951_868_799_000_000_000)
        );
        // As every query flag: no offset is UTC, a date alone is its
        // midnight, an RFC 3339 offset is honoured (`date -ud ... +%s`).
        assert_eq!(
            parse_time("2000-02-29T23:59:59"),
            Ok(951_868_799_000_000_000)
        );
        assert_eq!(parse_time("2026-12-01"), Ok(1_796_083_200_000_000_000));
        assert_eq!(parse_time("1796083200001ms"), Ok(1_796_083_200_001_000_000));
        for (bad, why) in [
            ("0", "above 0"),
            ("99999999999999", "below 10^10"),
            ("0ms", "after 1970"),
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(
            parse_time("2026-12-01T02:00:00.000000001+02:00"),
            Ok(1_796_083_200_000_000_001)
        );
        for (bad, why) in [
            ("2026-13-01T00:00:00Z", "month 13"),
            ("2026-12-01 00:00:010", "is no time"),
            ("yesterday", "is no time"),
            ("1e9", "is no time"),
            ("now-1h", "relative"),
            ("now", "relative"),
            ("1969-12-31 23:59:59", "before 1970"),
            ("9999-01-01", "after 2106"),
            ("99999999999999999ms", "after 2106"),
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn hostile_names_are_refused() {
        for bad in [
            &["--folded-type=samples"][..],
            &["--folded-type=a:b:c:d"],
            &["--folded-type=cpu::count"],
            &["--folded-type=cpu:sam'ples:count"],
            &["--bpftrace-labels=comm,1tid"],
            &["--bpftrace-labels=a b"],
            &["--bpftrace-labels=comm,service"],
            &["--perf-window=0"],
            &["--perf-window=-1"],
        ] {
            assert!(cli(bad).is_err(), "{bad:?}");
        }
    }
}
