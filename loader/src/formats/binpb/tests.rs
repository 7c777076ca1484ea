//! Tests of the `.binpb` reader, writer and dictionaries.

use std::collections::{BTreeMap, HashMap};
use std::io::{Cursor, Write};

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

const PATH: &str = "test.binpb";

fn header() -> ProcessInfo {
    ProcessInfo {
        process_short_name: "app".into(),
        process_full_path: "/usr/bin/app".into(),
        pid: 4242,
        start_timestamp: 1_700_000_000_000_000_000,
    }
}

fn summary(size: i64, active: i64, total_count: u64, total_bytes: u64) -> AllocSummary {
    AllocSummary {
        size,
        active,
        overhead: active * 8,
        total_count,
        total_bytes,
    }
}

/// A generated stream whose `total` is the sum of the latest value of every
/// trace, with incremental dictionaries, an undefined root trace 0, the
/// profiler's trace with an empty stack, and a module list.
fn generate(seed: u64, snapshots: usize) -> Vec<Snapshot> {
    const PROFILER: u32 = PROFILER_TRACE_BIT;
    let mut rng = StdRng::seed_from_u64(seed);
    let frame_pool: Vec<u64> = (0..40u64)
        .map(|i| 0x40_0000 + i * 0x1_0000 + 0x123)
        .collect();
    let stacks: Vec<Vec<u32>> = (0..12)
        .map(|_| {
            let depth = rng.gen_range(1..8);
            (0..depth).map(|_| rng.gen_range(0..40u32) + 1).collect()
        })
        .collect();
    let mut defined_frames = std::collections::HashSet::new();
    let mut defined_traces = std::collections::HashSet::new();
    let mut live: BTreeMap<u32, AllocSummary> = BTreeMap::new();
    let mut out = Vec::new();
    for n in 0..snapshots {
        let mut snap = Snapshot {
            timestamp: 1_700_000_000_000_000_000 + n as u64 * 1_000_000_000,
            ..Snapshot::default()
        };
        if n == 0 {
            live.insert(0, AllocSummary::default());
            snap.changed.push(TracedAllocSummary {
                trace_id: 0,
                actual: Some(AllocSummary::default()),
            });
            snap.loaded_so = vec![
                ElfInfo {
                    filename: "/proc/self/exe".into(),
                    addr: 0x40_0000,
                    segments: vec![Segment {
                        addr: 0,
                        size: 0x80_0000,
                    }],
                },
                ElfInfo {
                    filename: "/lib/x86_64-linux-gnu/libc.so.6".into(),
                    addr: 0x7f00_0000_0000,
                    segments: vec![
                        Segment {
                            addr: 0,
                            size: 0x2_8000,
                        },
                        Segment {
                            addr: 0x2_8000,
                            size: 0x19_0000,
                        },
                    ],
                },
            ];
        } else {
            let touched = rng.gen_range(0..5);
            for _ in 0..touched {
                let (trace_id, stack) = if rng.gen_bool(0.1) {
                    (PROFILER, Vec::new())
                } else {
                    let t = rng.gen_range(0..stacks.len());
                    (t as u32 + 1, stacks[t].clone())
                };
                if !stack.is_empty() && defined_traces.insert(trace_id) {
                    for &ptr_id in &stack {
                        if defined_frames.insert(ptr_id) {
                            snap.ptr_ids.push(StacktracePtr {
                                ptr_id,
                                ptr_addr: frame_pool[ptr_id as usize - 1],
                            });
                        }
                    }
                    snap.stacktraces.push(Stacktrace {
                        trace_id,
                        ptr_id: stack,
                    });
                }
                let value = live.entry(trace_id).or_default();
                let bytes: i64 = rng.gen_range(-4096..8192);
                if bytes >= 0 {
                    value.size += bytes;
                    value.active += 1;
                    value.total_count += 1;
                    value.total_bytes += bytes as u64;
                } else {
                    // Frees may briefly drive one trace negative.
                    value.size += bytes;
                    value.active -= 1;
                }
                value.overhead = value.active * 8;
                let value = *value;
                match snap.changed.iter_mut().find(|c| c.trace_id == trace_id) {
                    Some(c) => c.actual = Some(value),
                    None => snap.changed.push(TracedAllocSummary {
                        trace_id,
                        actual: Some(value),
                    }),
                }
            }
        }
        let total = live.values().fold(AllocSummary::default(), |acc, v| {
            summary(
                acc.size + v.size,
                acc.active + v.active,
                acc.total_count + v.total_count,
                acc.total_bytes + v.total_bytes,
            )
        });
        snap.total = Some(total);
        out.push(snap);
    }
    out
}

/// Writes a stream; returns the bytes and the offset of every record.
fn write(header: &ProcessInfo, snapshots: &[Snapshot]) -> (Vec<u8>, Vec<u64>) {
    let mut writer = BinpbWriter::new(Vec::new(), header).unwrap();
    let mut offsets = vec![0];
    for snap in snapshots {
        offsets.push(writer.write_snapshot(snap).unwrap());
    }
    assert_eq!(writer.offset(), writer.get_ref().len() as u64);
    (writer.into_inner(), offsets)
}

/// Frames raw payload bytes (not necessarily a valid message).
fn raw_record(payload: &[u8]) -> Vec<u8> {
    let compressed = zstd::bulk::compress(payload, 3).unwrap();
    let mut out = (compressed.len() as u64).to_be_bytes().to_vec();
    out.extend_from_slice(&compressed);
    out
}

struct Outcome {
    records: Vec<Record>,
    error: Option<Error>,
    tail: Option<Tail>,
    committed: u64,
}

fn read_all(bytes: &[u8]) -> Outcome {
    read_all_with(bytes, ReaderOptions::default())
}

fn read_all_with(bytes: &[u8], options: ReaderOptions) -> Outcome {
    let mut reader = BinpbReader::with_options(Cursor::new(bytes), PATH, options);
    let mut records = Vec::new();
    let mut error = None;
    for item in reader.by_ref() {
        match item {
            Ok(r) => records.push(r),
            Err(e) => error = Some(e),
        }
    }
    assert!(reader.next().is_none(), "iterator must stay ended");
    Outcome {
        records,
        error,
        tail: reader.tail(),
        committed: reader.committed_offset(),
    }
}

fn expected_records(header: &ProcessInfo, snapshots: &[Snapshot]) -> Vec<Record> {
    std::iter::once(Record::Header(header.clone()))
        .chain(snapshots.iter().cloned().map(Record::Snapshot))
        .collect()
}

#[test]
fn round_trip() {
    let snaps = generate(1, 30);
    let (bytes, _) = write(&header(), &snaps);
    let out = read_all(&bytes);
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.records, expected_records(&header(), &snaps));
    assert_eq!(
        out.tail,
        Some(Tail::Clean {
            offset: bytes.len() as u64
        })
    );
    assert_eq!(out.committed, bytes.len() as u64);
}

#[test]
fn dictionaries_resolve_leaf_first() {
    let snaps = generate(2, 40);
    let (bytes, _) = write(&header(), &snaps);
    let mut reader = BinpbReader::new(Cursor::new(&bytes), PATH);
    while reader.next_record().unwrap().is_some() {}
    let dict = reader.dictionaries();
    let mut expected_frames = HashMap::new();
    for snap in &snaps {
        for p in &snap.ptr_ids {
            expected_frames.insert(p.ptr_id, p.ptr_addr);
        }
    }
    assert_eq!(dict.frame_count(), expected_frames.len());
    for snap in &snaps {
        for t in &snap.stacktraces {
            let addrs: Vec<u64> = dict.resolve(t.trace_id).collect();
            let want: Vec<u64> = t.ptr_id.iter().map(|p| expected_frames[p]).collect();
            assert_eq!(addrs, want);
            assert_eq!(dict.trace_frames(t.trace_id), Some(&t.ptr_id[..]));
        }
    }
    // Trace 0 and the profiler's trace have no stack: the process root.
    assert_eq!(dict.resolve(0).len(), 0);
    assert_eq!(dict.resolve(PROFILER_TRACE_BIT).len(), 0);
    assert!(is_profiler_trace(0x8000_0000));
    assert!(!is_profiler_trace(7));
}

#[test]
fn dictionary_apply_is_atomic_and_checks_redefinition() {
    let mut dict = Dictionaries::new();
    let first = Snapshot {
        ptr_ids: vec![StacktracePtr {
            ptr_id: 1,
            ptr_addr: 0x10,
        }],
        stacktraces: vec![Stacktrace {
            trace_id: 5,
            ptr_id: vec![1, 1],
        }],
        ..Snapshot::default()
    };
    dict.apply(&first).unwrap();
    // Repeating a definition identically is fine.
    dict.apply(&first).unwrap();
    let before = dict.clone();
    let bad = Snapshot {
        ptr_ids: vec![StacktracePtr {
            ptr_id: 2,
            ptr_addr: 0x20,
        }],
        stacktraces: vec![Stacktrace {
            trace_id: 6,
            ptr_id: vec![2, 3],
        }],
        ..Snapshot::default()
    };
    assert_eq!(
        dict.apply(&bad),
        Err(DictionaryError::UndefinedFrame {
            trace_id: 6,
            ptr_id: 3
        })
    );
    assert_eq!(dict, before, "a refused snapshot adds nothing");
    let redefined = Snapshot {
        ptr_ids: vec![StacktracePtr {
            ptr_id: 1,
            ptr_addr: 0x11,
        }],
        ..Snapshot::default()
    };
    assert!(matches!(
        dict.apply(&redefined),
        Err(DictionaryError::FrameRedefined { ptr_id: 1, .. })
    ));
    let retraced = Snapshot {
        stacktraces: vec![Stacktrace {
            trace_id: 5,
            ptr_id: vec![1],
        }],
        ..Snapshot::default()
    };
    assert_eq!(
        dict.apply(&retraced),
        Err(DictionaryError::TraceRedefined { trace_id: 5 })
    );
}

#[test]
fn torn_tail_at_every_cut_of_the_last_record() {
    let snaps = generate(3, 6);
    let (bytes, offsets) = write(&header(), &snaps);
    let last = *offsets.last().unwrap();
    let expected = expected_records(&header(), &snaps[..snaps.len() - 1]);
    for cut in last..bytes.len() as u64 {
        let out = read_all(&bytes[..cut as usize]);
        assert!(out.error.is_none(), "cut {cut}: {:?}", out.error);
        assert_eq!(out.records, expected, "cut {cut}");
        let want = if cut == last {
            Tail::Clean { offset: last }
        } else {
            Tail::Torn {
                offset: last,
                available: cut - last,
            }
        };
        assert_eq!(out.tail, Some(want), "cut {cut}");
        assert_eq!(out.committed, last);
    }
}

#[test]
fn torn_header_is_not_an_error() {
    let (bytes, offsets) = write(&header(), &[]);
    assert_eq!(offsets, [0]);
    for cut in 1..bytes.len() {
        let out = read_all(&bytes[..cut]);
        assert!(out.error.is_none(), "cut {cut}: {:?}", out.error);
        assert!(out.records.is_empty());
        assert_eq!(
            out.tail,
            Some(Tail::Torn {
                offset: 0,
                available: cut as u64
            })
        );
    }
    let empty = read_all(&[]);
    assert!(empty.records.is_empty() && empty.error.is_none());
    assert_eq!(empty.tail, Some(Tail::Clean { offset: 0 }));
}

#[test]
fn live_follower_resumes_after_torn_tail() {
    let snaps = generate(4, 8);
    let (bytes, offsets) = write(&header(), &snaps);
    let path = std::env::temp_dir().join(format!(
        "flamehouse-binpb-live-{}.binpb",
        std::process::id()
    ));
    let clean = offsets[3] as usize;
    let split = offsets[5] as usize + 7;
    std::fs::write(&path, &bytes[..clean]).unwrap();

    let mut reader = BinpbReader::open(&path).unwrap();
    let mut got = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        got.push(r);
    }
    assert_eq!(got.len(), 3);
    assert_eq!(reader.tail(), Some(Tail::Clean { offset: offsets[3] }));
    // After a clean end the reader reads on once the file has grown.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(&bytes[clean..split]).unwrap();
    drop(file);
    while let Some(r) = reader.next_record().unwrap() {
        got.push(r);
    }
    assert_eq!(got.len(), 5);
    assert_eq!(
        reader.tail(),
        Some(Tail::Torn {
            offset: offsets[5],
            available: 7
        })
    );
    // Still torn until rewound.
    assert!(reader.next_record().unwrap().is_none());

    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(&bytes[split..]).unwrap();
    drop(file);
    reader.rewind_to_committed().unwrap();
    while let Some(r) = reader.next_record().unwrap() {
        got.push(r);
    }
    std::fs::remove_file(&path).unwrap();
    assert_eq!(got, expected_records(&header(), &snaps));
    assert_eq!(
        reader.tail(),
        Some(Tail::Clean {
            offset: bytes.len() as u64
        })
    );
    assert_eq!(reader.snapshots_read(), snaps.len() as u64);
}

/// Reads `bytes` where the record at `offsets[bad]` is damaged: everything
/// before it must be yielded and the error must name that record.
fn assert_fails_at(bytes: &[u8], offsets: &[u64], bad: usize, expected: &[Record]) -> Error {
    let out = read_all(bytes);
    let err = out.error.expect("expected an error");
    assert_eq!(err.offset(), Some(offsets[bad]), "{err}");
    assert_eq!(err.path(), std::path::Path::new(PATH));
    assert_eq!(out.records, expected[..bad]);
    assert_eq!(out.tail, None);
    assert_eq!(out.committed, offsets[bad]);
    err
}

#[test]
fn corrupt_middle_record_payload() {
    let snaps = generate(5, 6);
    let (bytes, offsets) = write(&header(), &snaps);
    let expected = expected_records(&header(), &snaps);
    let mid = 3;
    let start = offsets[mid] as usize;
    let end = offsets[mid + 1] as usize;

    // The zstd magic number.
    let mut damaged = bytes.clone();
    damaged[start + 8] ^= 0xff;
    let err = assert_fails_at(&damaged, &offsets, mid, &expected);
    assert!(matches!(err, Error::Zstd { .. }), "{err}");

    // A byte inside the compressed block (caught by the frame checksum).
    let mut damaged = bytes.clone();
    damaged[(start + 8 + end) / 2] ^= 0x55;
    assert_fails_at(&damaged, &offsets, mid, &expected);

    // Every single-byte flip in the record: an error at this record, or (for
    // the few frame-header bits that do not change the content) no harm.
    let mut errors = 0;
    for i in start..end {
        let mut damaged = bytes.clone();
        damaged[i] ^= 0x10;
        let out = read_all(&damaged);
        match out.error {
            Some(err) => {
                errors += 1;
                assert_eq!(err.offset(), Some(offsets[mid]), "flip at {i}: {err}");
                assert_eq!(out.records, expected[..mid], "flip at {i}");
            }
            None => assert_eq!(out.records, expected, "flip at {i}"),
        }
    }
    assert!(
        errors > (end - start) * 3 / 4,
        "{errors} of {}",
        end - start
    );
}

#[test]
fn bad_protobuf_in_valid_zstd() {
    let snaps = generate(6, 3);
    let (bytes, offsets) = write(&header(), &snaps);
    let expected = expected_records(&header(), &snaps);
    let mut damaged = bytes[..offsets[2] as usize].to_vec();
    // Field 1 with wire type 2 but a length running past the end.
    damaged.extend(raw_record(&[0x0a, 0x7f, 0x01]));
    damaged.extend_from_slice(&bytes[offsets[3] as usize..]);
    let err = assert_fails_at(&damaged, &offsets, 2, &expected);
    assert!(
        matches!(
            err,
            Error::Protobuf {
                message: "Snapshot",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn bad_length_prefix_in_middle_record() {
    let snaps = generate(7, 6);
    let (bytes, offsets) = write(&header(), &snaps);
    let expected = expected_records(&header(), &snaps);
    let mid = 2;
    let at = offsets[mid] as usize;
    let len = u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
    let with_len = |n: u64| {
        let mut b = bytes.clone();
        b[at..at + 8].copy_from_slice(&n.to_be_bytes());
        b
    };

    let err = assert_fails_at(&with_len(u64::MAX), &offsets, mid, &expected);
    assert!(matches!(err, Error::RecordTooLarge { .. }), "{err}");
    let err = assert_fails_at(&with_len(0), &offsets, mid, &expected);
    assert!(matches!(err, Error::Framing { .. }), "{err}");
    let err = assert_fails_at(&with_len(len + 1), &offsets, mid, &expected);
    assert!(matches!(err, Error::Framing { .. }), "{err}");
    let err = assert_fails_at(&with_len(len - 1), &offsets, mid, &expected);
    assert!(matches!(err, Error::Framing { .. }), "{err}");
    // Running past the end of the file looks torn, but the frame ends early:
    // that is corruption, not a live tail.
    let err = assert_fails_at(
        &with_len(len + bytes.len() as u64),
        &offsets,
        mid,
        &expected,
    );
    assert!(matches!(err, Error::Framing { .. }), "{err}");

    // A smaller limit turns a normal record into an error, not a truncation.
    let options = ReaderOptions {
        max_record_len: len - 1,
        ..ReaderOptions::default()
    };
    let big = (0..snaps.len())
        .map(|i| offsets[i + 1] - offsets[i] - 8)
        .position(|l| l > options.max_record_len);
    let out = read_all_with(&bytes, options);
    let err = out.error.expect("limit must be enforced");
    assert!(matches!(err, Error::RecordTooLarge { .. }), "{err}");
    assert_eq!(err.offset(), Some(offsets[big.unwrap()]));
}

#[test]
fn decompressed_limit_is_an_error() {
    let snaps = generate(8, 4);
    let (bytes, _) = write(&header(), &snaps);
    let options = ReaderOptions {
        max_decompressed_len: 16,
        ..ReaderOptions::default()
    };
    let out = read_all_with(&bytes, options);
    assert!(
        matches!(out.error, Some(Error::DecompressedTooLarge { max: 16, .. })),
        "{:?}",
        out.error
    );
}

#[test]
fn undefined_frame_is_an_error_but_undefined_trace_is_root() {
    let good = Snapshot {
        changed: vec![
            TracedAllocSummary {
                trace_id: 0,
                actual: Some(AllocSummary::default()),
            },
            TracedAllocSummary {
                trace_id: 99,
                actual: Some(summary(10, 1, 1, 10)),
            },
        ],
        total: Some(summary(10, 1, 1, 10)),
        ..Snapshot::default()
    };
    let bad = Snapshot {
        stacktraces: vec![Stacktrace {
            trace_id: 3,
            ptr_id: vec![77],
        }],
        ..Snapshot::default()
    };
    let (bytes, offsets) = write(&header(), &[good.clone(), bad]);
    let out = read_all(&bytes);
    let err = out.error.expect("undefined frame");
    assert_eq!(err.offset(), Some(offsets[2]));
    assert!(matches!(
        err,
        Error::Dictionary {
            cause: DictionaryError::UndefinedFrame {
                trace_id: 3,
                ptr_id: 77
            },
            ..
        }
    ));
    assert_eq!(out.records, expected_records(&header(), &[good]));
}

/// The older variant's AllocSummary (fields 2..6).
#[derive(Clone, PartialEq, ::prost::Message)]
struct OldAllocSummary {
    #[prost(int64, tag = "2")]
    size: i64,
    #[prost(int64, tag = "3")]
    active: i64,
    #[prost(int64, tag = "4")]
    overhead: i64,
    #[prost(uint64, tag = "5")]
    total_count: u64,
    #[prost(uint64, tag = "6")]
    total_bytes: u64,
}

#[derive(Clone, PartialEq, ::prost::Message)]
struct OldTraced {
    #[prost(uint32, tag = "1")]
    trace_id: u32,
    #[prost(message, optional, tag = "2")]
    actual: Option<OldAllocSummary>,
}

#[derive(Clone, PartialEq, ::prost::Message)]
struct OldSnapshot {
    #[prost(uint64, tag = "1")]
    timestamp: u64,
    #[prost(message, repeated, tag = "2")]
    changed: Vec<OldTraced>,
    #[prost(message, repeated, tag = "3")]
    ptr_ids: Vec<StacktracePtr>,
    #[prost(message, repeated, tag = "4")]
    stacktraces: Vec<Stacktrace>,
    #[prost(message, repeated, tag = "5")]
    loaded_so: Vec<ElfInfo>,
    #[prost(message, optional, tag = "7")]
    total: Option<OldAllocSummary>,
}

fn old_snapshot(timestamp: u64) -> OldSnapshot {
    let value = OldAllocSummary {
        size: 64,
        active: 1,
        overhead: 8,
        total_count: 1,
        total_bytes: 64,
    };
    OldSnapshot {
        timestamp,
        changed: vec![OldTraced {
            trace_id: 1,
            actual: Some(value.clone()),
        }],
        ptr_ids: vec![StacktracePtr {
            ptr_id: 1,
            ptr_addr: 0x1234,
        }],
        stacktraces: vec![Stacktrace {
            trace_id: 1,
            ptr_id: vec![1],
        }],
        loaded_so: vec![],
        total: Some(value),
    }
}

#[test]
fn old_variant_is_refused() {
    // A realistic old file, and degenerate first snapshots (no timestamp; only
    // `changed`, whose bytes happen to be valid UTF-8).
    let only_changed = OldSnapshot {
        changed: vec![OldTraced {
            trace_id: 1,
            actual: Some(OldAllocSummary {
                size: 5,
                ..OldAllocSummary::default()
            }),
        }],
        ..OldSnapshot::default()
    };
    for first in [
        old_snapshot(1_700_000_000_000_000_000),
        old_snapshot(0),
        only_changed,
    ] {
        let mut bytes = encode_record(&first, 3).unwrap();
        bytes.extend(encode_record(&old_snapshot(1_700_000_001_000_000_000), 3).unwrap());
        let out = read_all(&bytes);
        let err = out.error.expect("old variant must be refused");
        assert!(matches!(err, Error::OldVariant { offset: 0, .. }), "{err}");
        assert!(out.records.is_empty());
        let msg = err.to_string();
        assert!(
            msg.contains("older MemHawk format") && msg.contains(PATH),
            "{msg}"
        );
    }
}

#[test]
fn header_check_accepts_partial_headers_and_refuses_garbage() {
    // Only a pid (everything else default) is still a header.
    let minimal = ProcessInfo {
        pid: 7,
        ..ProcessInfo::default()
    };
    let (bytes, _) = write(&minimal, &[]);
    let out = read_all(&bytes);
    assert!(out.error.is_none());
    assert_eq!(out.records, [Record::Header(minimal)]);

    // An all-default header is an empty message: refused.
    let (bytes, _) = write(&ProcessInfo::default(), &[]);
    let err = read_all(&bytes).error.expect("empty header");
    assert!(matches!(err, Error::BadHeader { offset: 0, .. }), "{err}");

    // Not protobuf at all.
    let err = read_all(&raw_record(&[0xff, 0xff, 0xff])).error.unwrap();
    assert!(matches!(err, Error::BadHeader { .. }), "{err}");

    // Header-shaped but with invalid UTF-8 in the name.
    let err = read_all(&raw_record(&[0x0a, 0x02, 0xff, 0xfe, 0x18, 0x07]))
        .error
        .unwrap();
    assert!(
        matches!(
            err,
            Error::Protobuf {
                message: "ProcessInfo",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn error_display_is_one_line_with_path_and_offset() {
    let snaps = generate(9, 3);
    let (mut bytes, offsets) = write(&header(), &snaps);
    let at = offsets[2] as usize + 8;
    bytes[at] ^= 0xff;
    let err = read_all(&bytes).error.unwrap();
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    assert!(msg.starts_with(PATH), "{msg}");
    assert!(msg.contains(&format!("byte {}", offsets[2])), "{msg}");
    assert!(std::error::Error::source(&err).is_none());

    let err = BinpbReader::open("/nonexistent/flamehouse.binpb").unwrap_err();
    assert!(matches!(err, Error::Open { .. }));
    assert!(err
        .to_string()
        .starts_with("/nonexistent/flamehouse.binpb: cannot open"));
}

/// Replaying the latest absolute value of every trace reproduces `total` at
/// every snapshot.
#[test]
fn replay_reproduces_totals() {
    for seed in 0..8 {
        let snaps = generate(seed, 60);
        let (bytes, _) = write(&header(), &snaps);
        let mut latest: HashMap<u32, AllocSummary> = HashMap::new();
        let mut reader = BinpbReader::new(Cursor::new(&bytes), PATH);
        let mut seen = 0;
        while let Some(record) = reader.next_record().unwrap() {
            let Record::Snapshot(snap) = record else {
                continue;
            };
            for c in &snap.changed {
                latest.insert(c.trace_id, c.actual.unwrap_or_default());
            }
            let size: i64 = latest.values().map(|v| v.size).sum();
            let active: i64 = latest.values().map(|v| v.active).sum();
            let total_bytes: u64 = latest.values().map(|v| v.total_bytes).sum();
            let total = snap.total.unwrap();
            assert_eq!(size, total.size, "seed {seed} snapshot {seen}");
            assert_eq!(active, total.active);
            assert_eq!(total_bytes, total.total_bytes);
            seen += 1;
        }
        assert_eq!(seen, snaps.len());
    }
}

fn valid_file() -> Vec<u8> {
    write(&header(), &generate(10, 5)).0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let out = read_all(&bytes);
        prop_assert!(out.error.is_some() || out.tail.is_some());
    }

    #[test]
    fn arbitrary_payloads_never_panic(
        header in proptest::collection::vec(any::<u8>(), 0..64),
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = raw_record(&header);
        bytes.extend(raw_record(&body));
        let _ = read_all(&bytes);
    }

    #[test]
    fn damaged_valid_files_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = valid_file();
        for (at, mask) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        let len = cut.index(bytes.len() + 1);
        let out = read_all(&bytes[..len]);
        // Whatever happened, what was yielded is a prefix of the records.
        prop_assert!(out.records.len() <= 6);
        if let Some(err) = out.error {
            // A damaged first byte makes the file no length-prefixed stream
            // at all: that error is about the whole file, not one record.
            let whole_file = matches!(err, Error::NotBinpb { .. });
            prop_assert!(err.offset().is_some() || whole_file);
            prop_assert!(!err.to_string().contains('\n'));
        }
    }

    #[test]
    fn writer_reader_round_trip(seed in any::<u64>(), n in 0usize..20) {
        let snaps = generate(seed, n);
        let (bytes, _) = write(&header(), &snaps);
        let out = read_all(&bytes);
        prop_assert!(out.error.is_none());
        prop_assert_eq!(out.records, expected_records(&header(), &snaps));
    }
}

/// A file that is something else says what it looks like (it used to be
/// read as a length prefix: "length prefix 2272919271507955307 exceeds the
/// limit"), naming the file; a real stream's first byte is 0.
#[test]
fn other_kinds_of_file_are_named_not_misread() {
    let (stream, _) = write(&header(), &generate(1, 2));
    assert_eq!(stream[0], 0);
    let bare_zstd = zstd::encode_all(&stream[8..], 3).unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3],
            "gzip-compressed",
        ),
        (bare_zstd, "bare zstd frame"),
        (
            b"level\tlabel\tvalue\n0\ttotal".to_vec(),
            "looks like text (starts with \"level\\tla\")",
        ),
        (b"hi\n".to_vec(), "looks like text (starts with \"hi\\n\")"),
        (
            vec![0xff, 0xfe, 0x00, 0x01],
            "first bytes ff fe 00 01 are no length prefix",
        ),
    ];
    for (bytes, want) in cases {
        let mut r = BinpbReader::new(Cursor::new(&bytes), "/p/profile.binpb");
        let e = r.next_record().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::NotBinpb { .. }), "{msg}");
        assert!(
            msg.starts_with("/p/profile.binpb: not a MemHawk .binpb stream: ")
                && msg.contains(want),
            "{msg}"
        );
    }
    let dir = std::env::temp_dir();
    let e = BinpbReader::open(&dir).unwrap_err().to_string();
    assert!(
        e.contains(&dir.display().to_string()) && e.contains("is a directory"),
        "{e}"
    );
}
