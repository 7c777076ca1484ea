//! MemHawk `.binpb` in the neutral model: [`Binpb`] is the format
//! (detection, opening), and [`BinpbReader`] is its
//! [`ProfileReader`], turning records into [`Event`]s and `ElfInfo` module
//! entries into [`Mapping`]s.

use std::fs::File;
use std::io::{Read, Seek};
use std::path::Path;

use super::proto::{is_profiler_trace, AllocSummary, ElfInfo, ProcessInfo, Snapshot};
use super::reader::{BinpbReader, Record};
use crate::formats::{Error, Format, ProfileFormat, ProfileReader, ReadOptions, Sniff};
use crate::model::{Batch, Event, Frame, Mapping, Source, Symbol, ValueSemantics, ValueType};

/// The label of the stack that holds the profiler's own allocations (the
/// traces with bit 31 set): one frame of that name.
pub const PROFILER_LABEL: &str = "[memhawk]";

/// MemHawk's five values of a trace, in the order of [`AllocSummary`]'s
/// fields and of every [`Batch`] this reader gives. The first three are
/// live (gauges), the last two cumulative since the process started.
pub const VALUE_TYPES: &[ValueType; 5] = &[
    ValueType::fixed("memory", "inuse_space", "bytes"),
    ValueType::fixed("memory", "inuse_objects", "count"),
    ValueType::fixed("memory", "overhead", "bytes"),
    ValueType::fixed("memory", "alloc_objects", "count"),
    ValueType::fixed("memory", "alloc_space", "bytes"),
];

/// The MemHawk `.binpb` format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Binpb;

impl ProfileFormat for Binpb {
    fn name(&self) -> &'static str {
        "binpb"
    }

    fn sniff(&self, first: &[u8]) -> Sniff {
        // A stream starts with the big-endian length of its first record,
        // far below 2^56: its first byte is 0.
        match first.first() {
            None => Sniff::Unsure,
            Some(0) if first.len() < 8 => Sniff::Unsure,
            Some(0) => Sniff::Yes,
            Some(_) => Sniff::No,
        }
    }

    fn open(
        &self,
        file: File,
        path: &Path,
        options: &ReadOptions,
    ) -> Result<Box<dyn ProfileReader>, Error> {
        Ok(Box::new(BinpbReader::from_file(file, path, options.binpb)?))
    }
}

/// The model's mapping of one MemHawk module entry: its segments
/// (`bias + p_vaddr .. + p_memsz`, empty ones dropped, a start that
/// overflows dropped, ends clamped at `u64::MAX`).
#[must_use]
pub fn mapping(elf: &ElfInfo) -> Mapping {
    Mapping {
        path: elf.filename.clone(),
        build_id: None,
        bias: elf.addr,
        ranges: elf
            .segments
            .iter()
            .filter(|seg| seg.size > 0)
            .filter_map(|seg| {
                let start = elf.addr.checked_add(seg.addr)?;
                Some(start..start.saturating_add(seg.size))
            })
            .collect(),
        file_offset: 0,
    }
}

/// The model's source of a MemHawk header: identified by process name, pid
/// and start time.
#[must_use]
pub fn source(info: &ProcessInfo) -> Source {
    Source {
        identity: vec![
            info.process_short_name.as_bytes().to_vec(),
            info.pid.to_le_bytes().to_vec(),
            info.start_timestamp.to_le_bytes().to_vec(),
        ],
        pid: info.pid,
        name: info.process_short_name.clone(),
        main_path: info.process_full_path.clone(),
        start_ns: info.start_timestamp,
        labels: Vec::new(),
        period: 0,
        period_type: String::new(),
        legacy_identity: Vec::new(),
    }
}

fn values(a: &AllocSummary) -> [i64; 5] {
    [
        a.size,
        a.active,
        a.overhead,
        a.total_count as i64,
        a.total_bytes as i64,
    ]
}

/// The model's batch of a snapshot: each changed trace (its id as the
/// stack key) with its absolute values as of the snapshot.
#[must_use]
pub fn batch(snap: &Snapshot) -> Batch {
    let mut b = Batch {
        time_ns: snap.timestamp,
        duration_ns: 0,
        mappings: (!snap.loaded_so.is_empty())
            .then(|| snap.loaded_so.iter().map(mapping).collect()),
        stacks: Vec::with_capacity(snap.changed.len()),
        values: Vec::with_capacity(snap.changed.len() * 5),
        total: snap.total.as_ref().map(|t| values(t).to_vec()),
        sample_labels: Vec::new(),
        label_sets: Vec::new(),
    };
    for t in &snap.changed {
        b.stacks.push(u64::from(t.trace_id));
        b.values
            .extend_from_slice(&values(&t.actual.unwrap_or_default()));
    }
    b
}

impl<R: Read + Seek> ProfileReader for BinpbReader<R> {
    fn format(&self) -> Format {
        Format::Binpb
    }

    fn value_types(&self) -> &[ValueType] {
        VALUE_TYPES
    }

    fn semantics(&self) -> ValueSemantics {
        ValueSemantics::AsOfSnapshot
    }

    fn next_event(&mut self) -> Result<Option<Event>, Error> {
        Ok(self.next_record()?.map(|r| match r {
            Record::Header(info) => Event::Source(source(&info)),
            Record::Snapshot(snap) => Event::Batch(batch(&snap)),
        }))
    }

    fn stack(&self, key: u64, out: &mut Vec<Frame>) {
        out.clear();
        let id = key as u32;
        if is_profiler_trace(id) {
            out.push(Frame::Symbol(Symbol {
                function: PROFILER_LABEL.to_string(),
                ..Symbol::default()
            }));
        } else {
            out.extend(self.dictionaries().resolve(id).map(Frame::Address));
        }
    }

    fn committed_offset(&self) -> u64 {
        BinpbReader::committed_offset(self)
    }

    fn torn(&self) -> bool {
        self.tail().is_some_and(|t| t.is_torn())
    }

    fn rewind_to_committed(&mut self) -> Result<(), Error> {
        Ok(BinpbReader::rewind_to_committed(self)?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::{Segment, TracedAllocSummary};
    use super::*;

    #[test]
    fn module_segments_become_absolute_ranges() {
        let elf = ElfInfo {
            filename: "/lib/libc.so.6".into(),
            addr: 0x7f00_0000_0000,
            segments: vec![
                Segment {
                    addr: 0x1000,
                    size: 0x200,
                },
                // Empty: dropped.
                Segment {
                    addr: 0x5000,
                    size: 0,
                },
                // Start overflows: dropped.
                Segment {
                    addr: u64::MAX,
                    size: 1,
                },
            ],
        };
        let m = mapping(&elf);
        assert_eq!(m.path, "/lib/libc.so.6");
        assert_eq!(m.bias, 0x7f00_0000_0000);
        assert_eq!(m.ranges, vec![0x7f00_0000_1000..0x7f00_0000_1200]);
        // End clamped.
        let high = ElfInfo {
            filename: String::new(),
            addr: u64::MAX - 10,
            segments: vec![Segment { addr: 5, size: 100 }],
        };
        assert_eq!(mapping(&high).ranges, vec![u64::MAX - 5..u64::MAX]);
    }

    #[test]
    fn a_snapshot_gives_each_changed_trace_with_its_five_values() {
        let snap = Snapshot {
            timestamp: 7,
            changed: vec![
                TracedAllocSummary {
                    trace_id: 3,
                    actual: Some(AllocSummary {
                        size: -1,
                        active: 2,
                        overhead: 3,
                        total_count: 4,
                        total_bytes: 5,
                    }),
                },
                TracedAllocSummary {
                    trace_id: 1 << 31,
                    actual: None,
                },
            ],
            ..Snapshot::default()
        };
        let b = batch(&snap);
        assert_eq!(b.time_ns, 7);
        assert_eq!(b.stacks, vec![3, 1 << 31]);
        assert_eq!(b.values, vec![-1, 2, 3, 4, 5, 0, 0, 0, 0, 0]);
        assert_eq!(b.mappings, None);
        assert_eq!(b.total, None);
    }
}
