//! pprof behind the format traits: [`Pprof`] (detection and opening) and
//! [`PprofReader`], which gives a decoded profile as model events: one
//! [`Source`] (identity: the file's bytes; period and period type), then
//! one [`Batch`] at the profile's `time_nanos` over its `duration_nanos`,
//! with the mappings, one stack key per distinct location list and each
//! sample's string and numeric labels.
//!
//! Frames: every line of a location is a [`Frame::Symbol`] (inlined lines
//! expanded, innermost first, as `go tool pprof` names them); a location
//! without a named function is a [`Frame::Address`] that the loader's
//! symbolizer resolves through the mappings (or labels `module+0xOFFSET`).
//!
//! Value types: each sample type is one, `kind` the period type's type when
//! the profile has one (`cpu`, `space`, `contentions`), else the sample
//! type's; the stored profile type is `sample:unit`.

use super::{decode_seeing, PprofProfile};
use crate::formats::{Error, Format, ProfileFormat, ProfileReader, ReadOptions, Sniff};
use crate::model::{
    Batch, Event, Frame, Label, Mapping, NumLabel, SampleLabels, Source, Symbol, ValueSemantics,
    ValueType,
};
use crate::storage::rows::stable_hash;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The pprof format (`profile.proto`, gzipped, zstd or raw).
#[derive(Debug, Clone, Copy, Default)]
pub struct Pprof;

impl ProfileFormat for Pprof {
    fn name(&self) -> &'static str {
        "pprof"
    }

    fn sniff(&self, first: &[u8]) -> Sniff {
        sniff(first)
    }

    fn open(
        &self,
        file: File,
        path: &Path,
        options: &ReadOptions,
    ) -> Result<Box<dyn ProfileReader>, Error> {
        let limit = options.pprof.max_decompressed_bytes;
        let io = |cause| super::Error::Io {
            path: path.to_path_buf(),
            cause,
        };
        let mut bytes = Vec::new();
        file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
        if bytes.len() as u64 > limit {
            return Err(super::Error::TooLarge {
                path: path.to_path_buf(),
                limit,
                after: "",
            }
            .into());
        }
        // `--time`/`--duration` win over the file's own and join its
        // identity (as the text formats' options do), so the same file
        // dated otherwise is another profile, not "already stored".
        let (time, duration) = (options.pprof.time_ns, options.pprof.duration_ns);
        let extra: Vec<String> = [("time", time), ("duration", duration)]
            .iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
            .collect();
        let id_of = |content: &[u8]| {
            let mut id: Vec<&[u8]> = vec![content];
            id.extend(extra.iter().map(String::as_bytes));
            stable_hash(&id)
        };
        // The id hashes the profile as decompressed: a gzipped and a raw
        // copy are one profile (they were two, stored twice).
        let mut content_id = 0;
        let mut compressed = false;
        let mut profile = decode_seeing(path, &bytes, &options.pprof, |content| {
            content_id = id_of(content);
            compressed = !std::ptr::eq(content, bytes.as_slice());
        })?;
        if let Some(t) = time {
            profile.time_nanos = i64::try_from(t).unwrap_or(i64::MAX);
        }
        if let Some(d) = duration {
            profile.duration_nanos = i64::try_from(d).unwrap_or(i64::MAX);
        }
        // Builds before id scheme 2 hashed the file's bytes as they were:
        // a compressed file's old id, for a database holding their pprof
        // profiles ([`ReadOptions::legacy_pprof_identity`]).
        let legacy = (compressed && options.legacy_pprof_identity).then(|| id_of(&bytes));
        Ok(Box::new(
            PprofReader::new(&profile, content_id, bytes.len() as u64).with_legacy_id(legacy),
        ))
    }
}

/// Whether `first` starts a pprof profile: gzip's magic (what Go,
/// pprof-rs and async-profiler write), or a raw `Profile` message: every
/// field within the bytes given is a field of `Profile` with its wire type,
/// a complete `sample_type` / `period_type` decodes as a `ValueType` of
/// varints and a complete string is UTF-8, and at least two fields are
/// complete (one when the bytes are the whole file). MemHawk's big-endian
/// length prefix starts with a zero byte (field 0); text formats start with
/// bytes that are no such field or soon break one.
///
/// A gzip stream is pprof when what its first bytes decompress to is (so a
/// gzipped MemHawk stream is left to MemHawk's reader, which says it is
/// gzip-compressed); too little to tell is [`Sniff::Unsure`].
#[must_use]
pub fn sniff(first: &[u8]) -> Sniff {
    if first.starts_with(&[0x1f, 0x8b]) {
        // The deflate data of a cut gzip stream: a streaming decoder gives
        // what the bytes hold (the `Read` decoders fail on the cut instead).
        // A few bytes out of a dynamic Huffman block can be less than two
        // whole fields: that is too little to tell, not "no" (a valid
        // profile was refused as not pprof, then read as MemHawk's).
        let out = gunzip_prefix(first);
        return match sniff_raw(&out, false) {
            Sniff::No if out.len() < 2 => Sniff::Unsure,
            s => s,
        };
    }
    if first.is_empty() || first == [0x1f] {
        return Sniff::Unsure;
    }
    // Text is no raw profile: a profile's `ValueType`s start with the
    // control byte 0x08 and its string table with `""` (0x32 0x00); `hi\n`
    // parsed as one varint field, so a tiny text file was "not a pprof
    // profile" instead of text no format claims.
    if first
        .iter()
        .all(|&b| (b >= 0x20 && b != 0x7f) || b"\t\r\n".contains(&b))
    {
        return Sniff::No;
    }
    match sniff_raw(first, first.len() < crate::formats::SNIFF_LEN) {
        // 64 bytes of a raw profile hold two fields, except after a
        // single long field: other formats are asked first.
        Sniff::Unsure => Sniff::No,
        s => s,
    }
}

/// Whether `file` is one zstd-compressed pprof profile (libdatadog, so
/// ddtrace's Python profiler, writes them): [`sniff`]'s 64 bytes are not
/// enough, zstd emitting nothing before a whole block, so this reads up to
/// one block (at most 128 KiB) and sniffs what it decompresses to. Never
/// moves the file's position; `false` for anything else, a MemHawk record
/// without its length prefix (a bare zstd frame too) included.
#[must_use]
pub fn zstd_file_is_pprof(file: &File) -> bool {
    use std::os::unix::fs::FileExt;
    // Frame header (at most 18 bytes) + block header (3) + a block.
    const WINDOW: usize = (128 << 10) + 32;
    let mut buf = vec![0u8; WINDOW];
    let mut got = 0;
    while got < WINDOW {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    if !buf[..got].starts_with(&super::ZSTD_MAGIC) {
        return false;
    }
    let Ok(mut d) = zstd::stream::read::Decoder::with_buffer(&buf[..got]) else {
        return false;
    };
    // More than SNIFF_LEN: libdatadog writes samples first, and one
    // sample's message can outgrow 64 bytes (two whole fields are wanted).
    let mut out = [0u8; 4096];
    let mut n = 0;
    // A window that cuts the stream ends in an error after what it holds.
    while n < out.len() {
        match d.read(&mut out[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    n > 0 && sniff_raw(&out[..n], n < out.len()) == Sniff::Yes
}

/// What the first bytes of a gzip stream decompress to (empty when its
/// header is cut or bad).
fn gunzip_prefix(b: &[u8]) -> Vec<u8> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    if b.len() < 10 || b[2] != 8 {
        return Vec::new();
    }
    let flags = b[3];
    let mut pos = 10;
    if flags & FEXTRA != 0 {
        let Some(x) = b.get(pos..pos + 2) else {
            return Vec::new();
        };
        pos += 2 + usize::from(u16::from_le_bytes([x[0], x[1]]));
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            match b.get(pos..).and_then(|r| r.iter().position(|&c| c == 0)) {
                Some(z) => pos += z + 1,
                None => return Vec::new(),
            }
        }
    }
    if flags & FHCRC != 0 {
        pos += 2;
    }
    let Some(body) = b.get(pos..) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(256);
    let mut d = flate2::Decompress::new(false);
    let _ = d.decompress_vec(body, &mut out, flate2::FlushDecompress::None);
    out
}

/// [`sniff`] of protobuf bytes; `whole`: they are the whole file.
fn sniff_raw(first: &[u8], whole: bool) -> Sniff {
    use crate::formats::wire::varint;
    fn value_type(body: &[u8]) -> bool {
        let mut p = 0;
        while p < body.len() {
            match varint(body, &mut p) {
                Some(8 | 16) if varint(body, &mut p).is_some() => {}
                _ => return false,
            }
        }
        true
    }
    let mut pos = 0;
    let mut complete = 0;
    while pos < first.len() {
        let Some(key) = varint(first, &mut pos) else {
            break; // cut by the window
        };
        let (field, wire) = (key >> 3, key & 7);
        let ok = match field {
            1..=6 | 11 => wire == 2,
            7..=10 | 12 | 14 => wire == 0,
            13 => wire == 0 || wire == 2,
            _ => false,
        };
        if !ok {
            return Sniff::No;
        }
        if wire == 0 {
            if varint(first, &mut pos).is_none() {
                break;
            }
        } else {
            let Some(len) = varint(first, &mut pos) else {
                break;
            };
            let end = pos.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
            if end > first.len() {
                break;
            }
            let body = &first[pos..end];
            let good = match field {
                1 | 11 => len <= 22 && value_type(body),
                6 => std::str::from_utf8(body).is_ok(),
                _ => true,
            };
            if !good {
                return Sniff::No;
            }
            pos = end;
        }
        complete += 1;
    }
    if complete >= 2 || (whole && pos >= first.len() && complete >= 1) {
        Sniff::Yes
    } else if !whole {
        // Every field seen fits a profile; the window ended first.
        Sniff::Unsure
    } else {
        Sniff::No
    }
}

/// An open pprof profile, as events.
#[derive(Debug)]
pub struct PprofReader {
    types: Vec<ValueType>,
    events: std::vec::IntoIter<Event>,
    /// Each location's frames once (a location's lines expand the same in
    /// every stack), and the stacks as indexes into them: a deep stack
    /// costs 4 bytes a frame, not a copy of its names.
    frames: Vec<Frame>,
    stacks: Vec<Vec<u32>>,
    end: u64,
}

fn basename(path: &str) -> Option<String> {
    (!path.is_empty()).then(|| {
        Path::new(path)
            .file_name()
            .map_or_else(|| path.to_string(), |f| f.to_string_lossy().into_owned())
    })
}

impl PprofReader {
    /// The reader with `legacy` as its source's legacy identity
    /// ([`Source::legacy_identity`]): the id an earlier build gave the file.
    #[must_use]
    pub fn with_legacy_id(mut self, legacy: Option<u64>) -> Self {
        let Some(id) = legacy else { return self };
        let mut events: Vec<Event> = self.events.collect();
        for e in &mut events {
            if let Event::Source(s) = e {
                s.legacy_identity = vec![b"pprof".to_vec(), id.to_le_bytes().to_vec()];
            }
        }
        self.events = events.into_iter();
        self
    }

    /// The events of a decoded profile; `content_id` identifies the file's
    /// bytes (the source identity), `len` is its length.
    #[must_use]
    pub fn new(p: &PprofProfile, content_id: u64, len: u64) -> Self {
        let kind = p.period_type.as_ref().map(|t| t.kind.clone());
        let types = p
            .sample_types
            .iter()
            .map(|t| ValueType::named(kind.as_deref().unwrap_or(&t.kind), &t.kind, &t.unit))
            .collect();
        let source = Source {
            identity: vec![b"pprof".to_vec(), content_id.to_le_bytes().to_vec()],
            main_path: p
                .mappings
                .first()
                .map(|m| m.filename.clone())
                .unwrap_or_default(),
            period: p.period,
            period_type: p
                .period_type
                .as_ref()
                .map(|t| format!("{}:{}", t.kind, t.unit))
                .unwrap_or_default(),
            ..Source::default()
        };
        let mappings = p
            .mappings
            .iter()
            .map(|m| Mapping {
                path: m.filename.clone(),
                build_id: (!m.build_id.is_empty()).then(|| m.build_id.clone()),
                bias: m.memory_start.wrapping_sub(m.file_offset),
                ranges: if m.memory_limit > m.memory_start {
                    // One range: the mapping's.
                    #[allow(clippy::single_range_in_vec_init)]
                    let r = vec![m.memory_start..m.memory_limit];
                    r
                } else {
                    Vec::new()
                },
                file_offset: m.file_offset,
            })
            .collect();
        let mut frames: Vec<Frame> = Vec::new();
        // The first of a location's frames in `frames`, and how many.
        let mut of_location: Vec<Option<(u32, u32)>> = vec![None; p.locations.len()];
        let mut stacks: Vec<Vec<u32>> = Vec::new();
        let mut expanded = Vec::new();
        // Fx: these maps are hashed once per sample (SipHash showed in
        // profiles of loads of many small files).
        let mut stack_index: rustc_hash::FxHashMap<&[usize], u64> = Default::default();
        // Looked up by the sample's own label lists: a set repeated by many
        // samples is built once.
        type SetKey<'a> = (&'a [(String, String)], &'a [super::NumLabel]);
        let mut set_index: rustc_hash::FxHashMap<SetKey<'_>, u32> = Default::default();
        let mut batch = Batch {
            time_ns: u64::try_from(p.time_nanos).unwrap_or(0),
            duration_ns: u64::try_from(p.duration_nanos).unwrap_or(0),
            mappings: Some(mappings),
            ..Batch::default()
        };
        let any_labels = p
            .samples
            .iter()
            .any(|s| !s.labels.is_empty() || !s.num_labels.is_empty());
        for s in &p.samples {
            let key = *stack_index
                .entry(s.locations.as_slice())
                .or_insert_with(|| {
                    let mut stack = Vec::new();
                    for &li in &s.locations {
                        let (first, n) = *of_location[li].get_or_insert_with(|| {
                            expanded.clear();
                            p.location_frames(li, &mut expanded);
                            let first = frames.len() as u32;
                            frames.extend(expanded.iter().map(|f| match f.function {
                                Some(func) if !func.name.is_empty() => Frame::Symbol(Symbol {
                                    function: func.name.clone(),
                                    file:
                                        (!func.filename.is_empty()).then(|| func.filename.clone()),
                                    line: u32::try_from(f.line).ok().filter(|&l| l > 0),
                                    module:
                                        p.mapping(f.location).and_then(|m| basename(&m.filename)),
                                }),
                                _ => Frame::Address(f.location.address),
                            }));
                            (first, frames.len() as u32 - first)
                        });
                        stack.extend(first..first + n);
                    }
                    stacks.push(stack);
                    stacks.len() as u64 - 1
                });
            batch.stacks.push(key);
            batch.values.extend_from_slice(&s.values);
            if any_labels {
                let next = set_index.len() as u32;
                let i = *set_index
                    .entry((s.labels.as_slice(), s.num_labels.as_slice()))
                    .or_insert_with(|| {
                        batch.label_sets.push(SampleLabels {
                            labels: s
                                .labels
                                .iter()
                                .map(|(k, v)| Label {
                                    key: k.clone(),
                                    value: v.clone(),
                                })
                                .collect(),
                            num_labels: s
                                .num_labels
                                .iter()
                                .map(|n| NumLabel {
                                    key: n.key.clone(),
                                    value: n.value,
                                    unit: n.unit.clone(),
                                })
                                .collect(),
                        });
                        next
                    });
                batch.sample_labels.push(i);
            }
        }
        PprofReader {
            types,
            events: vec![Event::Source(source), Event::Batch(batch)].into_iter(),
            frames,
            stacks,
            end: len,
        }
    }
}

impl ProfileReader for PprofReader {
    fn format(&self) -> Format {
        Format::Pprof
    }

    fn value_types(&self) -> &[ValueType] {
        &self.types
    }

    fn semantics(&self) -> ValueSemantics {
        ValueSemantics::Additive
    }

    fn next_event(&mut self) -> Result<Option<Event>, Error> {
        Ok(self.events.next())
    }

    fn stack(&self, key: u64, out: &mut Vec<Frame>) {
        out.clear();
        if let Some(ids) = self.stacks.get(key as usize) {
            out.extend(ids.iter().map(|&i| self.frames[i as usize].clone()));
        }
    }

    fn stack_refs<'a>(&'a self, key: u64, out: &mut Vec<&'a Frame>) -> bool {
        out.clear();
        if let Some(ids) = self.stacks.get(key as usize) {
            out.extend(ids.iter().map(|&i| &self.frames[i as usize]));
        }
        true
    }

    fn committed_offset(&self) -> u64 {
        self.end
    }

    fn torn(&self) -> bool {
        false
    }

    fn rewind_to_committed(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff_takes_gzip_and_raw_profiles_and_refuses_other_bytes() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/continuous/pprof");
        let raw = std::fs::read(dir.join("cpu.pb")).unwrap();
        assert_eq!(sniff(&raw[..64]), Sniff::Yes);
        // 64 bytes of Go's gzip hold only deflate's Huffman tables: too
        // little to tell, and no other format claims gzip, so pprof it is.
        let gz = std::fs::read(dir.join("cpu.pb.gz")).unwrap();
        assert_ne!(sniff(&gz[..64]), Sniff::No);
        assert_eq!(crate::formats::detect(&gz[..64]), Some(Format::Pprof));
        // MemHawk's length prefix, text formats, zstd, JSON.
        for other in [
            &[0u8, 0, 0, 0, 0, 0, 0, 12, 0x28][..],
            b"main;foo;bar 12\n",
            b"burn 1234 [000] 1.0: cpu-clock:\n",
            b"Attaching 1 probe...\n@[\n",
            b"{\"type\": \"map\"}",
            &[0x28, 0xb5, 0x2f, 0xfd],
            b"\n  main+12\n",
            b"\n",
        ] {
            assert_eq!(sniff(other), Sniff::No, "{other:?}");
        }
        // A gzipped MemHawk stream is not pprof (its reader says "gzip").
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &[0, 0, 0, 0, 0, 0, 0, 12, 0x28, 0xb5, 0x2f, 0xfd])
            .unwrap();
        let memhawk = gz.finish().unwrap();
        assert_eq!(sniff(&memhawk), Sniff::No);
        // Cut to the sniffed length, with a file name in the header (as
        // `gzip -c FILE` writes it): still told apart.
        let mut gz = flate2::GzBuilder::new()
            .filename("profile.binpb")
            .write(Vec::new(), flate2::Compression::default());
        let noise: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
        std::io::Write::write_all(&mut gz, &[0, 0, 0, 0, 0, 0, 0x10, 0]).unwrap();
        std::io::Write::write_all(&mut gz, &noise).unwrap();
        let memhawk = gz.finish().unwrap();
        assert_eq!(sniff(&memhawk[..64]), Sniff::No);
    }

    /// A gzipped profile whose first 64 bytes inflate to one whole field
    /// and the start of a long one (a deep first sample) is too little to
    /// tell, not "no": such a valid profile was refused as not pprof and
    /// then read as MemHawk's (only `--format pprof` loaded it).
    #[test]
    fn a_gzip_prefix_cut_inside_a_long_field_is_unsure() {
        let mut w =
            crate::formats::pprof::write::PprofWriter::new(&[("samples", "count")], ("", ""), 0);
        let frames: Vec<String> = (0..300).map(|i| format!("com/example/F{i}.m")).collect();
        let names: Vec<&str> = frames.iter().map(String::as_str).collect();
        w.add_sample(&names, &[3], &[]);
        let raw = w.encode();
        // Stored deflate blocks: 64 bytes of the file are about 49 of the
        // profile: sample_type whole, then the 300-location sample cut.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
        std::io::Write::write_all(&mut gz, &raw).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(sniff_raw(&gunzip_prefix(&gz[..64]), false), Sniff::Unsure);
        assert_eq!(sniff(&gz[..64]), Sniff::Unsure);
        assert_eq!(crate::formats::detect(&gz[..64]), Some(Format::Pprof));
        let p = crate::formats::pprof::decode(
            Path::new("deep.pb.gz"),
            &gz,
            &crate::formats::pprof::DecodeOptions::default(),
        )
        .unwrap();
        assert_eq!(p.samples.len(), 1);
    }
}
