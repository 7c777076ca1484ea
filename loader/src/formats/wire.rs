//! Protobuf wire-level counting, before a message is decoded: how many
//! entries (fields) a message holds, itself and one level down. A decoded
//! entry costs far more memory than its bytes on the wire (an empty
//! repeated sub-message is 2 bytes there and a struct of vectors, ~100
//! bytes, decoded), so the byte limits alone do not bound memory: a 6 KB
//! MemHawk record inflating to 64 MiB of empty stack traces took 2.2 GB,
//! a 65 KB pprof of empty samples 3.9 GB. The readers count first and
//! refuse a message over their entry limit, naming it.

/// Default entry limit of one pprof profile or one MemHawk snapshot
/// record: 8 Mi entries (samples, locations, lines, labels, functions,
/// strings, ...; ~1 GB decoded at worst). Real profiles hold far fewer: a
/// Java allocation profile of a million stacks, about 3 M.
pub const DEFAULT_MAX_ENTRIES: u64 = 8 << 20;

/// The number of fields of the message `buf` plus, for each
/// length-delimited field whose number `message` says is a sub-message
/// (and that is well-formed), its own fields (one level: a pprof sample's
/// labels, a location's lines, a snapshot's stack traces' entries). A
/// packed scalar array or a string counts as one field (its memory is
/// bounded by its bytes; a string's bytes may read as fields, so only the
/// fields the schema says are messages are looked into). Counting stops at
/// the first malformed field, whose error the decoder reports.
#[must_use]
pub fn count_entries(buf: &[u8], message: impl Fn(u64) -> bool) -> u64 {
    let mut n = 0;
    walk(buf, |field, sub| {
        n += 1;
        if let Some(sub) = sub.filter(|_| message(field)) {
            let mut inner = 0;
            if walk(sub, |_, _| inner += 1) {
                n += inner;
            }
        }
    });
    n
}

/// Default of the most stack frames of one profile, all stacks counted
/// ([`count_nested_varints`] for pprof: its samples' location ids): 64 Mi,
/// ~1 GB on their way to the engine at worst. A real profile holds far
/// fewer: a million samples of depth 50 is 50 M.
pub const DEFAULT_MAX_STACK_FRAMES: u64 = 64 << 20;

/// Default of the most frames of one stack: 1 Mi. Profilers stop far
/// below (Go and `perf` at 128 frames, async-profiler at 2048), so only a
/// broken or hostile file passes it, yet a runaway recursion of 100,000
/// frames is stored whole; one stack of 60 M frames took 8 GB.
pub const DEFAULT_MAX_STACK_DEPTH: u64 = 1 << 20;

/// What [`count_nested_varints`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Nested {
    /// The values in all.
    pub total: u64,
    /// The most in one sub-message.
    pub most: u64,
}

/// The values of the varint field `inner` (packed or not) in every
/// `outer` sub-message of `buf`: a pprof profile's samples' location ids
/// (fields 2 and 1). [`count_entries`] counts a packed array once, as its
/// bytes bound it; but a one-byte id on the wire is a word decoded and a
/// frame of a stack after, so the stacks' depths are limited on their own.
/// Counting stops at the first malformed field.
#[must_use]
pub fn count_nested_varints(buf: &[u8], outer: u64, inner: u64) -> Nested {
    let mut n = Nested::default();
    walk(buf, |field, sub| {
        if field != outer {
            return;
        }
        if let Some(sub) = sub {
            let mut here = 0;
            walk(sub, |field, payload| {
                if field == inner {
                    here += match payload {
                        // Packed: one value ends at each byte under 0x80.
                        Some(p) => p.iter().filter(|&&b| b < 0x80).count() as u64,
                        None => 1,
                    };
                }
            });
            n.total += here;
            n.most = n.most.max(here);
        }
    });
    n
}

/// Calls `f` for each field of `buf` (its number, and its payload when
/// length-delimited); whether the whole buffer was well-formed fields.
fn walk(buf: &[u8], mut f: impl FnMut(u64, Option<&[u8]>)) -> bool {
    let mut i = 0;
    while i < buf.len() {
        let Some(key) = varint(buf, &mut i) else {
            return false;
        };
        if key >> 3 == 0 {
            return false;
        }
        match key & 7 {
            0 => {
                if varint(buf, &mut i).is_none() {
                    return false;
                }
                f(key >> 3, None);
            }
            1 | 5 => {
                let w = if key & 7 == 1 { 8 } else { 4 };
                if buf.len() - i < w {
                    return false;
                }
                i += w;
                f(key >> 3, None);
            }
            2 => {
                let Some(len) = varint(buf, &mut i) else {
                    return false;
                };
                let Some(end) = usize::try_from(len)
                    .ok()
                    .and_then(|l| i.checked_add(l))
                    .filter(|&e| e <= buf.len())
                else {
                    return false;
                };
                f(key >> 3, Some(&buf[i..end]));
                i = end;
            }
            _ => return false,
        }
    }
    true
}

/// The base-128 varint at `buf[*i]`, `*i` moved past it; `None` when
/// the buffer ends inside it or it runs past 64 bits.
#[must_use]
pub fn varint(buf: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*i)?;
        *i += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Why [`varint`] found no varint at `buf[i]`: the buffer ends inside it
/// (`truncated`), or it runs past the 10 bytes of 64 bits (`overlong`).
#[must_use]
pub fn varint_fault(buf: &[u8], i: usize) -> &'static str {
    match buf
        .get(i..)
        .and_then(|b| b.iter().take(10).position(|&x| x < 0x80))
    {
        None if buf.len().saturating_sub(i) >= 10 => "overlong varint (past 64 bits)",
        _ => "truncated varint",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_counted_one_level_down() {
        // Two empty sub-messages (field 2), a varint (field 1).
        let all = |_| true;
        assert_eq!(count_entries(&[0x12, 0, 0x12, 0, 0x08, 5], all), 3);
        // One sub-message holding three varints: 1 + 3.
        let three = [0x12, 6, 0x08, 1, 0x08, 2, 0x08, 3];
        assert_eq!(count_entries(&three, all), 4);
        // The same bytes in a field that is no message (a string of
        // `x`, 0x78, reads as fields) count once.
        assert_eq!(count_entries(&three, |f| f != 2), 1);
        // A string that is not a message counts once.
        assert_eq!(count_entries(&[0x32, 2, 0xff, 0xff], all), 1);
        // Malformed: counting stops, the decoder will say why.
        assert_eq!(count_entries(&[0x12, 0, 0x12, 9], all), 1);
        // 64 KiB of empty stack traces: 32 Ki entries.
        let bomb: Vec<u8> = std::iter::repeat_n([0x22u8, 0], 32 << 10)
            .flatten()
            .collect();
        assert_eq!(count_entries(&bomb, all), 32 << 10);
    }

    #[test]
    fn a_varint_is_told_truncated_or_overlong() {
        assert_eq!(varint_fault(&[0x80, 0x80], 0), "truncated varint");
        assert_eq!(
            varint_fault(&[0xff; 11], 0),
            "overlong varint (past 64 bits)"
        );
        assert_eq!(varint_fault(&[0, 0xff, 0xff], 1), "truncated varint");
    }

    #[test]
    fn nested_varints_are_counted_packed_or_not() {
        // Field 2 holding field 1 packed [1, 300, 2] (300 takes 2 bytes),
        // then field 2 holding field 1 unpacked twice and field 3 once.
        let buf = [
            0x12, 6, 0x0a, 4, 1, 0xac, 0x02, 2, //
            0x12, 6, 0x08, 7, 0x08, 8, 0x18, 9, //
            0x0a, 3, 0x0a, 1, 5, // field 1 outer: not counted
        ];
        let n = |total, most| Nested { total, most };
        assert_eq!(count_nested_varints(&buf, 2, 1), n(5, 3));
        assert_eq!(count_nested_varints(&buf, 2, 3), n(1, 1));
        assert_eq!(count_nested_varints(&buf, 1, 1), n(1, 1));
        // Malformed outer: counting stops there.
        assert_eq!(
            count_nested_varints(&[0x12, 2, 0x08, 1, 0x12, 9], 2, 1),
            n(1, 1)
        );
    }
}
