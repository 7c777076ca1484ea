//! Writing pprof profiles (`profile.proto` of github.com/google/pprof,
//! gzipped as Go writes them): the one pprof writer of the project, used by
//! `flamehouse profile export` and by the fixtures crate (the fleet bench's
//! generated profiles, tests).
//!
//! [`PprofWriter`] interns strings, functions and locations as Go's
//! `runtime/pprof` does: one function per `(name, file)`, one location per
//! `(function, line)` with one line (a stored frame is one function at
//! one line; pprof's inlined-lines-per-location is not kept) and a made-up
//! distinct address, no mappings (the frames are symbolized) and no
//! system names (so `go tool pprof` leaves the names as written). Samples carry
//! one value per sample type, leaf first, with string labels. The
//! decoder reads what it writes (the tests below); the decoder itself is
//! checked against `go tool pprof`, and so is `profile export`.

use super::proto::{Function, Label, Line, Location, Profile, Sample, ValueType};
use prost::Message;
use std::collections::HashMap;
use std::io::{self, Write};

/// One frame of a written sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteFrame<'a> {
    /// Function name.
    pub function: &'a str,
    /// Source file, empty when unknown.
    pub file: &'a str,
    /// Line, 0 when unknown.
    pub line: i64,
}

/// Builds one pprof profile.
#[derive(Debug, Clone)]
pub struct PprofWriter {
    profile: Profile,
    strings: HashMap<String, i64>,
    /// `(name, file)` -> function id.
    functions: HashMap<(String, String), u64>,
    /// `(function id, line)` -> location id.
    locations: HashMap<(u64, i64), u64>,
}

impl PprofWriter {
    /// A profile whose samples carry one value per `sample_types` entry
    /// (`(type, unit)`, e.g. `("samples", "count"), ("cpu", "nanoseconds")`
    /// as Go writes CPU profiles; `go tool pprof` shows the last by
    /// default), with the period type (`("", "")`: none) and period.
    #[must_use]
    pub fn new(sample_types: &[(&str, &str)], period_type: (&str, &str), period: i64) -> Self {
        let mut w = PprofWriter {
            profile: Profile::default(),
            strings: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
        };
        w.string("");
        for (t, u) in sample_types {
            let vt = ValueType {
                r#type: w.string(t),
                unit: w.string(u),
            };
            w.profile.sample_type.push(vt);
        }
        if !period_type.0.is_empty() || !period_type.1.is_empty() {
            w.profile.period_type = Some(ValueType {
                r#type: w.string(period_type.0),
                unit: w.string(period_type.1),
            });
        }
        w.profile.period = period;
        w
    }

    /// Sets `time_nanos` and `duration_nanos`.
    pub fn set_time(&mut self, time_nanos: i64, duration_nanos: i64) {
        self.profile.time_nanos = time_nanos;
        self.profile.duration_nanos = duration_nanos;
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.as_bytes().to_vec());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn location(&mut self, f: &WriteFrame<'_>) -> u64 {
        let key = (f.function.to_string(), f.file.to_string());
        let function_id = match self.functions.get(&key) {
            Some(&id) => id,
            None => {
                let name = self.string(f.function);
                let filename = self.string(f.file);
                let id = self.profile.function.len() as u64 + 1;
                self.profile.function.push(Function {
                    id,
                    name,
                    // No system name (string 0), as ddtrace writes: pprof's
                    // symbolizer demangles only a function whose name is
                    // its system name, and its simplified demangling would
                    // rewrite the stored (already demangled) names
                    // (`<u64>::wrapping_mul` to `::wrapping_mul`, Python's
                    // `<module>` to `<unknown>`, distinct `call_once`
                    // impls merged into one).
                    system_name: 0,
                    filename,
                    start_line: 0,
                });
                self.functions.insert(key, id);
                id
            }
        };
        if let Some(&id) = self.locations.get(&(function_id, f.line)) {
            return id;
        }
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(Location {
            id,
            mapping_id: 0,
            // A made-up, distinct address per location, as Go writes one.
            address: 0x40_0000 + id * 0x10,
            line: vec![Line {
                function_id,
                line: f.line,
                column: 0,
            }],
            is_folded: false,
        });
        self.locations.insert((function_id, f.line), id);
        id
    }

    /// Adds a sample: `frames` function names leaf first (as pprof stores
    /// them), one value per sample type, string labels.
    pub fn add_sample(&mut self, frames: &[&str], values: &[i64], labels: &[(&str, &str)]) {
        let frames: Vec<WriteFrame<'_>> = frames
            .iter()
            .map(|f| WriteFrame {
                function: f,
                ..Default::default()
            })
            .collect();
        self.add_frames(&frames, values, labels);
    }

    /// Adds a sample of frames with their files and lines, leaf first.
    pub fn add_frames(
        &mut self,
        frames: &[WriteFrame<'_>],
        values: &[i64],
        labels: &[(&str, &str)],
    ) {
        self.add_labelled(frames, values, labels, &[]);
    }

    /// [`PprofWriter::add_frames`] with numeric labels too: `(key, value,
    /// unit)`, the unit empty when unknown (pprof then reads the key as
    /// the unit, as Go's `bytes`).
    pub fn add_labelled(
        &mut self,
        frames: &[WriteFrame<'_>],
        values: &[i64],
        labels: &[(&str, &str)],
        numeric: &[(&str, i64, &str)],
    ) {
        let location_id = frames.iter().map(|f| self.location(f)).collect();
        let mut label: Vec<Label> = labels
            .iter()
            .map(|(k, v)| Label {
                key: self.string(k),
                str: self.string(v),
                num: 0,
                num_unit: 0,
            })
            .collect();
        for (k, n, unit) in numeric {
            label.push(Label {
                key: self.string(k),
                str: 0,
                num: *n,
                num_unit: self.string(unit),
            });
        }
        self.profile.sample.push(Sample {
            location_id,
            value: values.to_vec(),
            label,
        });
    }

    /// Samples added so far.
    #[must_use]
    pub fn samples(&self) -> usize {
        self.profile.sample.len()
    }

    /// The raw protobuf.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        self.profile.encode_to_vec()
    }

    /// The gzipped protobuf (what Go's `runtime/pprof` writes).
    ///
    /// # Errors
    /// If compression fails.
    pub fn encode_gzip(&self) -> io::Result<Vec<u8>> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&self.encode())?;
        gz.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pprof::{decode, DecodeOptions};
    use std::path::Path;

    /// A decoded sample: frames leaf first, values, string labels.
    type Decoded = (Vec<String>, Vec<i64>, Vec<(String, String)>);

    #[test]
    fn round_trips_through_the_decoder() {
        let mut w = PprofWriter::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            10_000_000,
        );
        w.set_time(1_750_000_000_000_000_000, 10_000_000_000);
        w.add_sample(
            &["leaf", "mid", "main"],
            &[2, 20_000_000],
            &[("host", "h1")],
        );
        w.add_sample(&["other", "main"], &[1, 10_000_000], &[("host", "h2")]);
        w.add_sample(&["leaf", "mid", "main"], &[3, 30_000_000], &[]);
        w.add_sample(&[], &[1, 10_000_000], &[]);
        assert_eq!(w.samples(), 4);
        for bytes in [w.encode(), w.encode_gzip().unwrap()] {
            let p = decode(Path::new("mem.pb"), &bytes, &DecodeOptions::default()).unwrap();
            assert_eq!(p.time_nanos, 1_750_000_000_000_000_000);
            assert_eq!(p.duration_nanos, 10_000_000_000);
            assert_eq!(p.period, 10_000_000);
            let types: Vec<(String, String)> = p
                .sample_types
                .iter()
                .map(|t| (t.kind.clone(), t.unit.clone()))
                .collect();
            assert_eq!(
                types,
                [("samples", "count"), ("cpu", "nanoseconds")]
                    .map(|(a, b)| (a.to_string(), b.to_string()))
            );
            let got: Vec<Decoded> = p
                .samples
                .iter()
                .map(|s| {
                    let names = p
                        .frames(s)
                        .iter()
                        .map(|f| f.function.unwrap().name.clone())
                        .collect();
                    (names, s.values.clone(), s.labels.clone())
                })
                .collect();
            let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            assert_eq!(
                got,
                vec![
                    (
                        v(&["leaf", "mid", "main"]),
                        vec![2, 20_000_000],
                        vec![("host".into(), "h1".into())]
                    ),
                    (
                        v(&["other", "main"]),
                        vec![1, 10_000_000],
                        vec![("host".into(), "h2".into())]
                    ),
                    (v(&["leaf", "mid", "main"]), vec![3, 30_000_000], vec![]),
                    (vec![], vec![1, 10_000_000], vec![]),
                ]
            );
        }
    }

    /// Files and lines reach the decoded frames; one function per (name,
    /// file), one location per line of it; no period type when not given.
    #[test]
    fn files_and_lines_are_written() {
        let mut w = PprofWriter::new(&[("alloc_space", "bytes")], ("", ""), 0);
        let f = |function, file, line| WriteFrame {
            function,
            file,
            line,
        };
        w.add_frames(&[f("leaf", "a.go", 7), f("main", "m.go", 3)], &[5], &[]);
        w.add_frames(&[f("leaf", "a.go", 9), f("main", "m.go", 3)], &[6], &[]);
        let p = decode(Path::new("x"), &w.encode(), &DecodeOptions::default()).unwrap();
        assert!(p.period_type.is_none());
        let got: Vec<Vec<(String, String, i64)>> = p
            .samples
            .iter()
            .map(|s| {
                p.frames(s)
                    .iter()
                    .map(|fr| {
                        let func = fr.function.unwrap();
                        (func.name.clone(), func.filename.clone(), fr.line)
                    })
                    .collect()
            })
            .collect();
        let t = |n: &str, f: &str, l| (n.to_string(), f.to_string(), l);
        assert_eq!(
            got,
            [
                vec![t("leaf", "a.go", 7), t("main", "m.go", 3)],
                vec![t("leaf", "a.go", 9), t("main", "m.go", 3)]
            ]
        );
        let raw = w.encode();
        let proto = Profile::decode(raw.as_slice()).unwrap();
        assert_eq!((proto.function.len(), proto.location.len()), (2, 3));
    }
}
