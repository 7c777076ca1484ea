//! The executable's allocator: large buffers in transparent huge pages.
//!
//! A UDF call on a large input spends much of its time on memory it
//! touches once (the decoded input, the stack index and its partition
//! buffer): every first touch of a 4 KiB page is a page fault, and the
//! tree builder reads the input's frames at scattered offsets, a TLB miss
//! each. With 2 MiB pages most of both go away (the top-1000 tree of the
//! `udf` bench's `topn` input: 15,400 page faults become 4,000, the rest
//! being the small allocations, the binary and the libraries).
//! Linux hands out such pages only for memory that asks for them
//! (`madvise(MADV_HUGEPAGE)`, Debian's default THP mode) and only in
//! 2 MiB-aligned ranges, which `malloc`'s own large chunks are not.
//!
//! So an allocation of at least [`LARGE`] bytes is its own 2 MiB-aligned
//! mapping (length rounded up to 2 MiB) marked for huge pages; growing it
//! extends the mapping in place when the addresses after it are free, else
//! moves its pages to a new aligned range (`mremap`, no copy). Everything
//! smaller goes to the system allocator. Where the kernel has no huge page
//! to give (fragmented memory, THP disabled), the same mappings simply use
//! 4 KiB pages.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations of at least this many bytes get their own mapping.
pub const LARGE: usize = 4 << 20;
const HUGE: usize = 2 << 20;

/// The allocator; install it with `#[global_allocator]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HugePageAlloc;

fn round_up(n: usize) -> usize {
    (n + HUGE - 1) & !(HUGE - 1)
}

fn large(layout: &Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= HUGE
}

/// A fresh 2 MiB-aligned range of `len` bytes (a multiple of 2 MiB), not
/// yet marked; null when the address space is exhausted.
fn reserve(len: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing touches no existing memory.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len + HUGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    let raw = raw as usize;
    let start = round_up(raw);
    // SAFETY: both ranges lie in the mapping just made and nothing uses
    // them: the slack before the aligned start and after its end.
    unsafe {
        if start > raw {
            libc::munmap(raw as *mut libc::c_void, start - raw);
        }
        let end = start + len;
        let raw_end = raw + len + HUGE;
        if raw_end > end {
            libc::munmap(end as *mut libc::c_void, raw_end - end);
        }
    }
    start as *mut u8
}

fn advise(p: *mut u8, len: usize) {
    // SAFETY: a hint on a range this allocator mapped; failure (no THP in
    // this kernel) leaves ordinary pages, which is fine.
    unsafe {
        libc::madvise(p.cast(), len, libc::MADV_HUGEPAGE);
    }
}

// SAFETY: large blocks are whole private mappings, aligned to 2 MiB (so to
// any alignment up to it), never shared between blocks; the rest is the
// system allocator's.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !large(&layout) {
            // SAFETY: the caller's layout contract, passed on.
            return unsafe { System.alloc(layout) };
        }
        let len = round_up(layout.size());
        let p = reserve(len);
        if !p.is_null() {
            advise(p, len);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !large(&layout) {
            // SAFETY: the caller's layout contract, passed on.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // A fresh anonymous mapping reads as zeros: writing them would only
        // touch every page.
        // SAFETY: as `alloc`.
        unsafe { self.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !large(&layout) {
            // SAFETY: `ptr` came from the system allocator with `layout`.
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: `ptr` is a mapping of this length made by `alloc`.
        unsafe {
            libc::munmap(ptr.cast(), round_up(layout.size()));
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY (whole body): the caller's contract: `ptr` is a live block
        // of `layout`, `new_size` is non-zero and valid for its alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (large(&layout), large(&new_layout)) {
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            (false, true) | (true, false) => {
                let q = unsafe { self.alloc(new_layout) };
                if !q.is_null() {
                    let n = layout.size().min(new_size);
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, q, n);
                        self.dealloc(ptr, layout);
                    }
                }
                q
            }
            (true, true) => {
                let (old, new) = (round_up(layout.size()), round_up(new_size));
                if new <= old {
                    if new < old {
                        unsafe { libc::munmap(ptr.add(new).cast(), old - new) };
                    }
                    return ptr;
                }
                // In place when the addresses after the block are free.
                let p = unsafe { libc::mremap(ptr.cast(), old, new, 0) };
                if p != libc::MAP_FAILED {
                    advise(ptr, new);
                    return ptr;
                }
                // Else its pages move (no copy) to a new aligned range.
                let dst = reserve(new);
                if dst.is_null() {
                    return dst;
                }
                let p = unsafe {
                    libc::mremap(
                        ptr.cast(),
                        old,
                        new,
                        libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                        dst.cast::<libc::c_void>(),
                    )
                };
                if p == libc::MAP_FAILED {
                    unsafe { libc::munmap(dst.cast(), new) };
                    return std::ptr::null_mut();
                }
                advise(dst, new);
                dst
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks keep their bytes through every size change (small to large,
    /// growing in place or moved, shrinking, back to small) and large ones
    /// are 2 MiB-aligned.
    #[test]
    fn blocks_keep_their_bytes_through_reallocation() {
        let a = HugePageAlloc;
        let fill = |p: *mut u8, n: usize| {
            for i in (0..n).step_by(4093) {
                // SAFETY: `i < n`, inside the block.
                unsafe { *p.add(i) = (i % 251) as u8 };
            }
        };
        let check = |p: *mut u8, n: usize| {
            for i in (0..n).step_by(4093) {
                // SAFETY: as in `fill`.
                assert_eq!(unsafe { *p.add(i) }, (i % 251) as u8, "byte {i}");
            }
        };
        let sizes = [
            100_000,
            LARGE,
            LARGE + 1,
            3 * LARGE,
            40 << 20,
            5 << 20,
            200_000,
        ];
        let mut layout = Layout::from_size_align(sizes[0], 8).unwrap();
        // SAFETY: a non-zero layout.
        let mut p = unsafe { a.alloc(layout) };
        assert!(!p.is_null());
        fill(p, layout.size());
        // A second large block in the way of growing in place.
        let blocker = Layout::from_size_align(LARGE, 8).unwrap();
        // SAFETY: as above.
        let b = unsafe { a.alloc(blocker) };
        for &n in &sizes[1..] {
            let keep = layout.size().min(n);
            // SAFETY: `p` is a live block of `layout`; `n` is non-zero.
            p = unsafe { a.realloc(p, layout, n) };
            assert!(!p.is_null());
            check(p, keep);
            layout = Layout::from_size_align(n, 8).unwrap();
            if n >= LARGE {
                assert_eq!(p as usize % HUGE, 0, "{n}-byte block not aligned");
            }
            fill(p, n);
        }
        // SAFETY: both are live blocks of these layouts.
        unsafe {
            a.dealloc(p, layout);
            a.dealloc(b, blocker);
        }
        // A zeroed large block reads as zeros.
        let z = Layout::from_size_align(LARGE, 64).unwrap();
        // SAFETY: a non-zero layout.
        let q = unsafe { a.alloc_zeroed(z) };
        // SAFETY: `q` is a live block of `z`.
        assert!(unsafe { std::slice::from_raw_parts(q, z.size()) }
            .iter()
            .all(|&x| x == 0));
        // SAFETY: as above.
        unsafe { a.dealloc(q, z) };
    }
}
