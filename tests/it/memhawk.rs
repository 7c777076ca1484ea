//! A minimal MemHawk `.binpb` decoder written from
//! `shared/reference/binpb-format.md` alone, for the tests' oracles: it
//! shares no code with `flamehouse::formats::binpb` (no `prost`, no `proto.rs`, no
//! reader or dictionaries), only the `zstd` library for decompression, so a
//! wrong field number or framing rule in the library cannot be restated
//! here. It reads whole, complete files and panics on anything else.

use std::collections::HashMap;
use std::path::Path;

/// size, active, overhead, totalCount, totalBytes.
pub type Values = [i64; 5];

#[derive(Debug, Clone, Default)]
pub struct Header {
    pub short_name: String,
    pub full_path: String,
    pub pid: u32,
    pub start_timestamp: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Module {
    pub filename: String,
    pub bias: u64,
    /// (p_vaddr, p_memsz)
    pub segments: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub timestamp: u64,
    /// (traceId, values); a missing `actual` is all zeros.
    pub changed: Vec<(u32, Values)>,
    pub ptr_ids: Vec<(u32, u64)>,
    /// (traceId, frame ids leaf first)
    pub stacktraces: Vec<(u32, Vec<u32>)>,
    pub loaded_so: Vec<Module>,
    pub total: Option<Values>,
}

/// A decoded file: the header, the snapshots with each record's byte range
/// (start of its length prefix, end), and the dictionaries.
#[derive(Debug, Clone, Default)]
pub struct File {
    pub header: Header,
    pub header_end: u64,
    pub snapshots: Vec<(Snapshot, u64, u64)>,
    pub frames: HashMap<u32, u64>,
    pub traces: HashMap<u32, Vec<u32>>,
}

impl File {
    /// A trace's frame addresses, leaf first; empty when undefined.
    pub fn stack(&self, trace_id: u32) -> Vec<u64> {
        self.traces.get(&trace_id).map_or_else(Vec::new, |ids| {
            ids.iter()
                .map(|id| *self.frames.get(id).expect("frame id defined"))
                .collect()
        })
    }
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = buf[*pos];
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return out;
        }
    }
    panic!("varint longer than 10 bytes");
}

/// The (field number, value) pairs of one message, in order.
fn fields(buf: &[u8]) -> Vec<(u64, Value<'_>)> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos);
        let value = match key & 7 {
            0 => Value::Varint(varint(buf, &mut pos)),
            2 => {
                let len = varint(buf, &mut pos) as usize;
                pos += len;
                Value::Bytes(&buf[pos - len..pos])
            }
            1 => {
                pos += 8;
                continue;
            }
            5 => {
                pos += 4;
                continue;
            }
            t => panic!("wire type {t}"),
        };
        out.push((key >> 3, value));
    }
    out
}

fn string(v: &Value<'_>) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8(b.to_vec()).expect("utf-8"),
        Value::Varint(_) => panic!("string expected"),
    }
}

fn num(v: &Value<'_>) -> u64 {
    match v {
        Value::Varint(n) => *n,
        Value::Bytes(_) => panic!("varint expected"),
    }
}

fn bytes<'a>(v: &Value<'a>) -> &'a [u8] {
    match v {
        Value::Bytes(b) => b,
        Value::Varint(_) => panic!("message expected"),
    }
}

fn values(buf: &[u8]) -> Values {
    let mut out = [0i64; 5];
    for (field, v) in fields(buf) {
        if (1..=5).contains(&field) {
            // int64 / uint64: the varint's two's-complement bits.
            out[field as usize - 1] = num(&v) as i64;
        }
    }
    out
}

fn header(buf: &[u8]) -> Header {
    let mut h = Header::default();
    for (field, v) in fields(buf) {
        match field {
            1 => h.short_name = string(&v),
            2 => h.full_path = string(&v),
            3 => h.pid = num(&v) as u32,
            4 => h.start_timestamp = num(&v),
            _ => {}
        }
    }
    h
}

fn snapshot(buf: &[u8]) -> Snapshot {
    let mut s = Snapshot::default();
    for (field, v) in fields(buf) {
        match field {
            1 => s.timestamp = num(&v),
            2 => {
                let (mut id, mut vals) = (0u32, [0i64; 5]);
                for (f, x) in fields(bytes(&v)) {
                    match f {
                        1 => id = num(&x) as u32,
                        2 => vals = values(bytes(&x)),
                        _ => {}
                    }
                }
                s.changed.push((id, vals));
            }
            3 => {
                let (mut id, mut addr) = (0u32, 0u64);
                for (f, x) in fields(bytes(&v)) {
                    match f {
                        1 => id = num(&x) as u32,
                        2 => addr = num(&x),
                        _ => {}
                    }
                }
                s.ptr_ids.push((id, addr));
            }
            4 => {
                let (mut id, mut ptrs) = (0u32, Vec::new());
                for (f, x) in fields(bytes(&v)) {
                    match (f, x) {
                        (1, x) => id = num(&x) as u32,
                        // Packed or not.
                        (2, Value::Varint(n)) => ptrs.push(n as u32),
                        (2, Value::Bytes(b)) => {
                            let mut pos = 0;
                            while pos < b.len() {
                                ptrs.push(varint(b, &mut pos) as u32);
                            }
                        }
                        _ => {}
                    }
                }
                s.stacktraces.push((id, ptrs));
            }
            5 => {
                let mut m = Module::default();
                for (f, x) in fields(bytes(&v)) {
                    match f {
                        1 => m.filename = string(&x),
                        2 => m.bias = num(&x),
                        3 => {
                            let mut seg = (0, 0);
                            for (g, y) in fields(bytes(&x)) {
                                match g {
                                    1 => seg.0 = num(&y),
                                    2 => seg.1 = num(&y),
                                    _ => {}
                                }
                            }
                            m.segments.push(seg);
                        }
                        _ => {}
                    }
                }
                s.loaded_so.push(m);
            }
            7 => s.total = Some(values(bytes(&v))),
            _ => {}
        }
    }
    s
}

/// Decodes a complete file: record 0 the header, then snapshots; each
/// record a u64 big-endian length and one zstd frame.
pub fn read(path: &Path) -> File {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut file = File::default();
    let mut pos = 0usize;
    let mut first = true;
    while pos < data.len() {
        let start = pos;
        let len = u64::from_be_bytes(data[pos..pos + 8].try_into().unwrap()) as usize;
        pos += 8 + len;
        assert!(
            pos <= data.len(),
            "{}: record at {start} cut",
            path.display()
        );
        let payload = zstd::stream::decode_all(&data[start + 8..pos]).expect("a zstd frame");
        if first {
            file.header = header(&payload);
            file.header_end = pos as u64;
            first = false;
            continue;
        }
        let s = snapshot(&payload);
        for &(id, addr) in &s.ptr_ids {
            assert!(
                file.frames.insert(id, addr).is_none(),
                "frame {id} redefined"
            );
        }
        for (id, ptrs) in &s.stacktraces {
            assert!(
                file.traces.insert(*id, ptrs.clone()).is_none(),
                "trace {id} redefined"
            );
        }
        file.snapshots.push((s, start as u64, pos as u64));
    }
    file
}
