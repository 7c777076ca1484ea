//! Golden inputs not written by this crate: a MemHawk stream encoded by
//! hand, byte by byte, from the message table of
//! `shared/reference/binpb-format.md` (tag byte = field number << 3 | wire
//! type; varints written out; zstd frames built by hand per RFC 8878 with
//! one raw block), decoded by [`BinpbReader`] and checked value by value.
//! A wrong field number or type in `proto.rs` cannot pass here, unlike the
//! round trips through `BinpbWriter`. Covers every message and field, and
//! what real MemHawk output is observed to hold: trace 0 with all-zero
//! values and no stack, trace 0x80000000 with an empty stack, modules only
//! in the first snapshots, several modules sharing a path, a live value
//! briefly negative, and `total` equal to the replayed latest values.

use std::io::Cursor;
use std::path::Path;

use super::*;
use crate::symbolize::ModuleMap;

/// A length-delimited field: its tag byte, a one-byte length, the body.
fn ld(tag: u8, body: &[u8]) -> Vec<u8> {
    let len = u8::try_from(body.len()).expect("golden bodies are short");
    assert!(len < 0x80, "one-byte length varint");
    let mut out = vec![tag, len];
    out.extend_from_slice(body);
    out
}

/// One zstd frame holding `payload` as a single raw block (RFC 8878):
/// magic, Frame_Header_Descriptor 0x20 (single segment, 1-byte content
/// size, no checksum, no dictionary), Frame_Content_Size, then a 3-byte
/// little-endian block header (last block, raw, size << 3).
fn zstd_raw_frame(payload: &[u8]) -> Vec<u8> {
    let size = u8::try_from(payload.len()).expect("under 256 bytes");
    let block = 1u32 | (u32::from(size) << 3);
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x20, size];
    out.extend_from_slice(&block.to_le_bytes()[..3]);
    out.extend_from_slice(payload);
    out
}

/// A record: u64 big-endian length of the frame, then the frame.
fn record(payload: &[u8]) -> Vec<u8> {
    let frame = zstd_raw_frame(payload);
    let mut out = (frame.len() as u64).to_be_bytes().to_vec();
    out.extend(frame);
    out
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A reader of `bytes` (a file named `name`) with `options`, past its
/// header record.
fn past_header<'a>(
    bytes: &'a [u8],
    name: &str,
    options: crate::formats::binpb::reader::ReaderOptions,
) -> BinpbReader<Cursor<&'a [u8]>> {
    let mut reader = BinpbReader::with_options(Cursor::new(bytes), name, options);
    assert!(matches!(reader.next_record(), Ok(Some(Record::Header(_)))));
    reader
}

// Varints of the values used (little-endian base-128).
const TS0: [u8; 9] = [0x80, 0x80, 0xa8, 0xb1, 0xe3, 0x9f, 0xe7, 0xcb, 0x17]; // 1_700_000_000_000_000_000
const TS1: [u8; 9] = [0x80, 0x94, 0x93, 0x8e, 0xe7, 0x9f, 0xe7, 0xcb, 0x17]; // 1_700_000_001_000_000_000
const TS2: [u8; 9] = [0x80, 0xa8, 0xfe, 0xea, 0xea, 0x9f, 0xe7, 0xcb, 0x17]; // 1_700_000_002_000_000_000
const PROFILER: [u8; 5] = [0x80, 0x80, 0x80, 0x80, 0x08]; // 0x8000_0000
const MINUS_64: [u8; 10] = [0xc0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
const MAIN_BIAS: [u8; 7] = [0x80, 0x80, 0xd5, 0xaa, 0xd5, 0xaa, 0x15]; // 0x5555_5555_4000
const LIBC_BIAS: [u8; 7] = [0x80, 0x80, 0xe0, 0xbe, 0xff, 0xff, 0x1f]; // 0x7fff_f7d8_0000
const VDSO_BIAS: [u8; 7] = [0x80, 0xa0, 0xf0, 0xbf, 0xff, 0xff, 0x1f]; // 0x7fff_f7fc_1000
const FRAME_1: [u8; 7] = [0xe5, 0xa3, 0xd5, 0xaa, 0xd5, 0xaa, 0x15]; // 0x5555_5555_51e5
const FRAME_2: [u8; 7] = [0x80, 0xa6, 0xd5, 0xaa, 0xd5, 0xaa, 0x15]; // 0x5555_5555_5300
const FRAME_3: [u8; 7] = [0x8f, 0xbb, 0xea, 0xbe, 0xff, 0xff, 0x1f]; // 0x7fff_f7da_9d8f
const LIBC: &[u8] = b"/lib/x86_64-linux-gnu/libc.so.6";

fn header_payload() -> Vec<u8> {
    cat(&[
        &ld(0x0a, b"app"),          // processShortName (1, len)
        &ld(0x12, b"/usr/bin/app"), // processFullPath (2, len)
        &[0x18, 0x92, 0x21],        // pid (3, varint) 4242
        &[0x20],                    // startTimestamp (4, varint)
        &TS0,
    ])
}

/// The main program's module entry (empty filename, so field 1 is absent).
fn main_module() -> Vec<u8> {
    ld(
        0x2a, // loadedSo (5, len): ElfInfo
        &cat(&[
            &[0x10], // addr (2, varint)
            &MAIN_BIAS,
            &ld(0x1a, &[0x10, 0x80, 0x20]), // segments (3): {addr 0, size 0x1000}
            &ld(0x1a, &[0x08, 0x80, 0x20, 0x10, 0x80, 0x40]), // {0x1000, 0x2000}
        ]),
    )
}

fn snapshot0() -> Vec<u8> {
    cat(&[
        &[0x08], // timestamp (1, varint)
        &TS0,
        // changed (2): trace 0 (traceId absent = 0), actual present and empty.
        &ld(0x12, &ld(0x12, &[])),
        // changed (2): the profiler's trace, actual {8192, 2, 32, 2, 8192}.
        &ld(
            0x12,
            &cat(&[
                &[0x08],
                &PROFILER,
                &ld(
                    0x12,
                    &[
                        0x08, 0x80, 0x40, 0x10, 0x02, 0x18, 0x20, 0x20, 0x02, 0x28, 0x80, 0x40,
                    ],
                ),
            ]),
        ),
        // stacktraces (4): the profiler's trace with no frames.
        &ld(0x22, &cat(&[&[0x08], &PROFILER])),
        &main_module(),
        // The vdso.
        &ld(
            0x2a,
            &cat(&[
                &ld(0x0a, b"linux-vdso.so.1"),
                &[0x10],
                &VDSO_BIAS,
                &ld(0x1a, &[0x10, 0x80, 0x40]),
            ]),
        ),
        // libc twice: one path, two entries with different segments.
        &ld(
            0x2a,
            &cat(&[
                &ld(0x0a, LIBC),
                &[0x10],
                &LIBC_BIAS,
                &ld(0x1a, &[0x10, 0x80, 0x80, 0x0a]),
            ]),
        ),
        &ld(
            0x2a,
            &cat(&[
                &ld(0x0a, LIBC),
                &[0x10],
                &LIBC_BIAS,
                &ld(0x1a, &[0x08, 0x80, 0x80, 0x0a, 0x10, 0x80, 0xa0, 0x65]),
            ]),
        ),
        // total (7): {8192, 2, 32, 2, 8192}.
        &ld(
            0x3a,
            &[
                0x08, 0x80, 0x40, 0x10, 0x02, 0x18, 0x20, 0x20, 0x02, 0x28, 0x80, 0x40,
            ],
        ),
    ])
}

fn snapshot1() -> Vec<u8> {
    cat(&[
        &[0x08],
        &TS1,
        // ptrIds (3): StacktracePtr {ptrId (1), ptrAddr (2)}.
        &ld(0x1a, &cat(&[&[0x08, 0x01, 0x10], &FRAME_1])),
        &ld(0x1a, &cat(&[&[0x08, 0x02, 0x10], &FRAME_2])),
        &ld(0x1a, &cat(&[&[0x08, 0x03, 0x10], &FRAME_3])),
        // stacktraces (4): trace 1 with packed ptrId (2) [1, 2, 3], trace 2
        // with the same field unpacked [2, 3].
        &ld(0x22, &cat(&[&[0x08, 0x01], &ld(0x12, &[0x01, 0x02, 0x03])])),
        &ld(0x22, &[0x08, 0x02, 0x10, 0x02, 0x10, 0x03]),
        // changed: trace 1 {300, 1, 4, 1, 300}, trace 2 {4096, 1, 16, 1, 4096}.
        &ld(
            0x12,
            &cat(&[
                &[0x08, 0x01],
                &ld(
                    0x12,
                    &[
                        0x08, 0xac, 0x02, 0x10, 0x01, 0x18, 0x04, 0x20, 0x01, 0x28, 0xac, 0x02,
                    ],
                ),
            ]),
        ),
        &ld(
            0x12,
            &cat(&[
                &[0x08, 0x02],
                &ld(
                    0x12,
                    &[
                        0x08, 0x80, 0x20, 0x10, 0x01, 0x18, 0x10, 0x20, 0x01, 0x28, 0x80, 0x20,
                    ],
                ),
            ]),
        ),
        // The module list again (snapshot 1), the main program only.
        &main_module(),
        // process (6): a ProcessInfo with only pid set.
        &ld(0x32, &[0x18, 0x92, 0x21]),
        // total: {12588, 4, 52, 4, 12588}.
        &ld(
            0x3a,
            &[
                0x08, 0xac, 0x62, 0x10, 0x04, 0x18, 0x34, 0x20, 0x04, 0x28, 0xac, 0x62,
            ],
        ),
    ])
}

fn snapshot2() -> Vec<u8> {
    cat(&[
        &[0x08],
        &TS2,
        // changed: trace 2 freed on another thread: size -64, active and
        // overhead 0 (absent), cumulative values unchanged.
        &ld(
            0x12,
            &cat(&[
                &[0x08, 0x02],
                &ld(
                    0x12,
                    &cat(&[&[0x08], &MINUS_64, &[0x20, 0x01, 0x28, 0x80, 0x20]]),
                ),
            ]),
        ),
        // total: {8428, 3, 36, 4, 12588}.
        &ld(
            0x3a,
            &[
                0x08, 0xec, 0x41, 0x10, 0x03, 0x18, 0x24, 0x20, 0x04, 0x28, 0xac, 0x62,
            ],
        ),
    ])
}

fn golden_file() -> Vec<u8> {
    cat(&[
        &record(&header_payload()),
        &record(&snapshot0()),
        &record(&snapshot1()),
        &record(&snapshot2()),
    ])
}

fn sum(size: i64, active: i64, overhead: i64, total_count: u64, total_bytes: u64) -> AllocSummary {
    AllocSummary {
        size,
        active,
        overhead,
        total_count,
        total_bytes,
    }
}

#[test]
fn hand_built_zstd_frame_is_valid_zstd() {
    // The frame builder itself, checked by the zstd library.
    let payload = header_payload();
    let frame = zstd_raw_frame(&payload);
    assert_eq!(zstd::stream::decode_all(&frame[..]).unwrap(), payload);
}

#[test]
fn hand_encoded_stream_decodes_value_by_value() {
    let bytes = golden_file();
    let mut reader = BinpbReader::new(Cursor::new(&bytes[..]), "golden.binpb");
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().expect("valid golden stream") {
        records.push(r);
    }
    assert_eq!(reader.committed_offset(), bytes.len() as u64);
    assert!(!reader.tail().unwrap().is_torn());
    assert_eq!(records.len(), 4);

    let Record::Header(h) = &records[0] else {
        panic!("record 0 is the header: {:?}", records[0]);
    };
    assert_eq!(h.process_short_name, "app");
    assert_eq!(h.process_full_path, "/usr/bin/app");
    assert_eq!(h.pid, 4242);
    assert_eq!(h.start_timestamp, 1_700_000_000_000_000_000);

    let snaps: Vec<&Snapshot> = records[1..]
        .iter()
        .map(|r| match r {
            Record::Snapshot(s) => s,
            other => panic!("a snapshot: {other:?}"),
        })
        .collect();

    // Snapshot 0.
    let s0 = snaps[0];
    assert_eq!(s0.timestamp, 1_700_000_000_000_000_000);
    assert_eq!(s0.changed.len(), 2);
    assert_eq!(s0.changed[0].trace_id, 0);
    assert_eq!(s0.changed[0].actual, Some(AllocSummary::default()));
    assert_eq!(s0.changed[1].trace_id, 0x8000_0000);
    assert!(is_profiler_trace(s0.changed[1].trace_id));
    assert_eq!(s0.changed[1].actual, Some(sum(8192, 2, 32, 2, 8192)));
    assert!(s0.ptr_ids.is_empty());
    assert_eq!(s0.stacktraces.len(), 1);
    assert_eq!(s0.stacktraces[0].trace_id, 0x8000_0000);
    assert!(s0.stacktraces[0].ptr_id.is_empty());
    assert_eq!(s0.loaded_so.len(), 4);
    let m = &s0.loaded_so[0];
    assert_eq!(m.filename, "");
    assert_eq!(m.addr, 0x5555_5555_4000);
    assert_eq!(
        m.segments,
        vec![
            Segment {
                addr: 0,
                size: 0x1000
            },
            Segment {
                addr: 0x1000,
                size: 0x2000
            }
        ]
    );
    assert_eq!(s0.loaded_so[1].filename, "linux-vdso.so.1");
    assert_eq!(s0.loaded_so[1].addr, 0x7fff_f7fc_1000);
    assert_eq!(
        s0.loaded_so[1].segments,
        vec![Segment {
            addr: 0,
            size: 0x2000
        }]
    );
    for (entry, segment) in s0.loaded_so[2..].iter().zip([
        Segment {
            addr: 0,
            size: 0x28000,
        },
        Segment {
            addr: 0x28000,
            size: 0x19_5000,
        },
    ]) {
        assert_eq!(entry.filename, "/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(entry.addr, 0x7fff_f7d8_0000);
        assert_eq!(entry.segments, vec![segment]);
    }
    assert_eq!(s0.process, None);
    assert_eq!(s0.total, Some(sum(8192, 2, 32, 2, 8192)));

    // Snapshot 1.
    let s1 = snaps[1];
    assert_eq!(s1.timestamp, 1_700_000_001_000_000_000);
    assert_eq!(
        s1.ptr_ids,
        vec![
            StacktracePtr {
                ptr_id: 1,
                ptr_addr: 0x5555_5555_51e5
            },
            StacktracePtr {
                ptr_id: 2,
                ptr_addr: 0x5555_5555_5300
            },
            StacktracePtr {
                ptr_id: 3,
                ptr_addr: 0x7fff_f7da_9d8f
            },
        ]
    );
    assert_eq!(s1.stacktraces.len(), 2);
    assert_eq!(
        (s1.stacktraces[0].trace_id, &s1.stacktraces[0].ptr_id[..]),
        (1, &[1, 2, 3][..])
    );
    assert_eq!(
        (s1.stacktraces[1].trace_id, &s1.stacktraces[1].ptr_id[..]),
        (2, &[2, 3][..])
    );
    assert_eq!(
        s1.changed
            .iter()
            .map(|t| (t.trace_id, t.actual))
            .collect::<Vec<_>>(),
        vec![
            (1, Some(sum(300, 1, 4, 1, 300))),
            (2, Some(sum(4096, 1, 16, 1, 4096)))
        ]
    );
    assert_eq!(s1.loaded_so, vec![s0.loaded_so[0].clone()]);
    assert_eq!(
        s1.process,
        Some(ProcessInfo {
            pid: 4242,
            ..ProcessInfo::default()
        })
    );
    assert_eq!(s1.total, Some(sum(12588, 4, 52, 4, 12588)));

    // Snapshot 2: no modules, a briefly negative live size.
    let s2 = snaps[2];
    assert_eq!(s2.timestamp, 1_700_000_002_000_000_000);
    assert!(s2.loaded_so.is_empty() && s2.ptr_ids.is_empty() && s2.stacktraces.is_empty());
    assert_eq!(s2.changed.len(), 1);
    assert_eq!(s2.changed[0].trace_id, 2);
    assert_eq!(s2.changed[0].actual, Some(sum(-64, 0, 0, 1, 4096)));
    assert_eq!(s2.total, Some(sum(8428, 3, 36, 4, 12588)));

    // Dictionaries: leaf first; trace 0 (never defined) and the profiler's
    // trace have empty stacks.
    let dict = reader.dictionaries();
    assert_eq!(
        dict.resolve(1).collect::<Vec<_>>(),
        vec![0x5555_5555_51e5, 0x5555_5555_5300, 0x7fff_f7da_9d8f]
    );
    assert_eq!(
        dict.resolve(2).collect::<Vec<_>>(),
        vec![0x5555_5555_5300, 0x7fff_f7da_9d8f]
    );
    assert_eq!(dict.resolve(0).count(), 0);
    assert_eq!(dict.resolve(0x8000_0000).count(), 0);

    // Replaying the latest value per trace gives `total` at every snapshot.
    let mut latest: std::collections::BTreeMap<u32, AllocSummary> = Default::default();
    for s in &snaps {
        for t in &s.changed {
            latest.insert(t.trace_id, t.actual.unwrap_or_default());
        }
        let replayed = latest.values().fold(AllocSummary::default(), |a, v| {
            sum(
                a.size + v.size,
                a.active + v.active,
                a.overhead + v.overhead,
                a.total_count + v.total_count,
                a.total_bytes + v.total_bytes,
            )
        });
        assert_eq!(Some(replayed), s.total);
    }

    // The two libc entries sharing a path: an address in the second
    // entry's segment maps to libc at bias 0x7fff_f7d8_0000.
    let map = ModuleMap::new(
        &s0.loaded_so
            .iter()
            .map(super::profile::mapping)
            .collect::<Vec<_>>(),
        Some(Path::new("/usr/bin/app")),
    );
    let (module, rel) = map.lookup(0x7fff_f7da_9d8f).expect("in libc");
    assert_eq!(
        map.module(module).unwrap().filename,
        "/lib/x86_64-linux-gnu/libc.so.6"
    );
    assert_eq!(rel, 0x29d8f);
    let (module, rel) = map.lookup(0x5555_5555_51e5).expect("in the main program");
    assert_eq!(module, 0);
    assert_eq!(rel, 0x11e5);
}

#[test]
fn hand_encoded_old_variant_is_refused() {
    // No ProcessInfo header; AllocSummary numbered 2..6: size (2) 64,
    // active (3) 1, overhead (4) 8, totalCount (5) 1, totalBytes (6) 64.
    let old = cat(&[
        &[0x08],
        &TS0,
        &ld(
            0x12,
            &cat(&[
                &[0x08, 0x01],
                &ld(
                    0x12,
                    &[0x10, 0x40, 0x18, 0x01, 0x20, 0x08, 0x28, 0x01, 0x30, 0x40],
                ),
            ]),
        ),
        &ld(
            0x3a,
            &[0x10, 0x40, 0x18, 0x01, 0x20, 0x08, 0x28, 0x01, 0x30, 0x40],
        ),
    ]);
    let bytes = cat(&[&record(&old), &record(&old)]);
    let mut reader = BinpbReader::new(Cursor::new(&bytes[..]), "old.binpb");
    let err = reader
        .next_record()
        .expect_err("the old variant is refused");
    assert!(matches!(err, Error::OldVariant { offset: 0, .. }), "{err}");
    assert!(err.to_string().contains("old.binpb"), "{err}");
}

/// A snapshot record of many empty stack traces (2 bytes each on the wire,
/// a struct each decoded: a 6 KB file inflating to 64 MiB of them took
/// 2.2 GB) is refused before decoding, naming the record, once it holds
/// more entries than the limit; the header before it was read.
#[test]
fn a_snapshot_of_more_entries_than_the_limit_is_refused_before_decoding() {
    let traces: Vec<u8> = std::iter::repeat_n([0x22u8, 0], 100).flatten().collect();
    let bytes = cat(&[&record(&header_payload()), &record(&traces)]);
    let options = crate::formats::binpb::reader::ReaderOptions {
        max_entries: 99,
        ..Default::default()
    };
    let mut reader = past_header(&bytes, "bomb.binpb", options);
    let e = reader.next_record().unwrap_err().to_string();
    let at = record(&header_payload()).len();
    assert!(
        e.starts_with(&format!(
            "bomb.binpb: record at byte {at}: the snapshot holds 100 entries"
        )),
        "{e}"
    );
    assert!(e.contains("--max-entries") && !e.contains('\n'), "{e}");
    // At the limit it decodes.
    let options = crate::formats::binpb::reader::ReaderOptions {
        max_entries: 100,
        ..Default::default()
    };
    let mut reader = past_header(&bytes, "ok.binpb", options);
    assert!(reader.next_record().is_ok());
}

/// A snapshot's stack traces are limited in frames, in all and in one
/// trace, counted before decoding (a packed one-byte frame id is a word
/// decoded and a frame of a stack after); at the limits it decodes.
#[test]
fn a_snapshot_of_deeper_stacks_than_the_limits_is_refused_before_decoding() {
    // Two stack traces (field 4): traceId 1 with frame ids [1, 2, 3]
    // packed, traceId 2 with [1] unpacked; frame ids 1-3 (field 3).
    let mut snap = vec![
        0x22u8, 7, 0x08, 1, 0x12, 3, 1, 2, 3, 0x22, 4, 0x08, 2, 0x10, 1,
    ];
    for id in 1..=3u8 {
        snap.extend([0x1a, 4, 0x08, id, 0x10, 0x10 + id]);
    }
    let bytes = cat(&[&record(&header_payload()), &record(&snap)]);
    let read = |max_stack_frames, max_stack_depth| {
        let options = crate::formats::binpb::reader::ReaderOptions {
            max_stack_frames,
            max_stack_depth,
            ..Default::default()
        };
        let mut reader = past_header(&bytes, "deep.binpb", options);
        reader.next_record().map(|_| ()).map_err(|e| e.to_string())
    };
    assert_eq!(read(4, 3), Ok(()));
    let e = read(3, 3).unwrap_err();
    assert!(
        e.contains("hold 4 frames in all, more than the limit of 3")
            && e.contains("--max-stack-frames"),
        "{e}"
    );
    // The stream's dictionary counts: a second record defining the same
    // traces again is past 4 frames in all.
    let twice = cat(&[&record(&header_payload()), &record(&snap), &record(&snap)]);
    let options = crate::formats::binpb::reader::ReaderOptions {
        max_stack_frames: 7,
        ..Default::default()
    };
    let mut reader = past_header(&twice, "twice.binpb", options);
    assert!(reader.next_record().is_ok());
    let e = reader.next_record().unwrap_err().to_string();
    assert!(
        e.contains("defined up to this record hold 8 frames in all, more than the limit of 7"),
        "{e}"
    );
    let e = read(4, 2).unwrap_err();
    assert!(
        e.contains("a stack trace of this record holds 3 frames, more than the limit of 2")
            && e.contains("--max-stack-depth"),
        "{e}"
    );
}

/// A record whose zstd frame does not say its size (MemHawk's do; a
/// streamed `zstd` does not) decodes the same, through a first pass that
/// counts its size; over the limit it is refused by that pass, before
/// any output is kept.
#[test]
fn a_frame_without_its_content_size_decodes_and_is_held_to_the_limit() {
    let streamed = |payload: &[u8]| {
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, payload).unwrap();
        let frame = enc.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&frame).unwrap(),
            None
        );
        let mut out = (frame.len() as u64).to_be_bytes().to_vec();
        out.extend(frame);
        out
    };
    let bytes = streamed(&header_payload());
    let mut reader = BinpbReader::new(Cursor::new(&bytes[..]), "s.binpb");
    let Ok(Some(Record::Header(h))) = reader.next_record() else {
        panic!("a header");
    };
    assert_eq!(h.process_short_name, "app");
    let options = crate::formats::binpb::reader::ReaderOptions {
        max_decompressed_len: header_payload().len() as u64 - 1,
        ..Default::default()
    };
    let mut reader = BinpbReader::with_options(Cursor::new(&bytes[..]), "s.binpb", options);
    let e = reader.next_record().unwrap_err().to_string();
    assert!(e.contains("decompresses to more than the limit"), "{e}");
}

/// Folded text with a NUL in a name was told "its first bytes ... are no
/// length prefix": text but for a control byte now says so and where.
#[test]
fn text_with_a_control_byte_is_told_as_such() {
    let m = crate::formats::binpb::reader::sniff(b"main;fo\0");
    assert!(
        m.contains("looks like text") && m.contains("byte 00 at byte 7"),
        "{m}"
    );
    let m = crate::formats::binpb::reader::sniff(b"main;f\xff\xfe");
    assert!(m.contains("not UTF-8 at byte 6"), "{m}");
    let m = crate::formats::binpb::reader::sniff(&[0, 0, 0, 0, 0, 0, 0, 9]);
    assert!(m.contains("no length prefix"), "{m}");
    // Random bytes (from /dev/urandom) are mostly printable, but no text.
    for r in [
        &[0x31, 0xf7, 0x81, 0xb2, 0xd1, 0xf4, 0xb6, 0x08][..],
        &[0x21, 0xe3, 0x16, 0x04, 0xc2, 0x65, 0xa1, 0x75],
    ] {
        let m = crate::formats::binpb::reader::sniff(r);
        assert!(m.contains("no length prefix"), "{m}");
    }
}
