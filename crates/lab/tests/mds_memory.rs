//! The MDS's memory per chunk, measured from the allocator (§4.5: "on average 23 bytes of data
//! per chunk"): a counting global allocator, an MDS with 10^6 and with 4.6 × 10^6 one-megabyte
//! chunks (the paper's up-shift experiment had 4.6 million), the live heap bytes before and
//! after, per chunk. Fails if it grows past the paper's figure; prints the MDS's own estimate
//! (from the sizes of its records) beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The paper's figure.
const PAPER_BYTES_PER_CHUNK: f64 = 23.0;

#[test]
fn the_mds_holds_a_chunk_in_fewer_bytes_than_the_papers() {
    // One test in this binary: nothing else allocates meanwhile.
    for chunks in [1_000_000u64, 4_600_000] {
        let before = LIVE.load(Ordering::SeqCst);
        let mds = cordillera_lab::sierra::mds_with_chunks(chunks).unwrap();
        let after = LIVE.load(Ordering::SeqCst);
        let estimate = mds.state_size();
        assert_eq!(estimate.chunks, chunks);
        let measured = (after - before) as f64 / chunks as f64;
        println!(
            "MDS memory: {chunks} chunks: {measured:.2} B per chunk from the allocator ({:.1} MB in all); the MDS's own estimate {:.2} B; the paper 23 B",
            (after - before) as f64 / 1e6,
            estimate.bytes_per_chunk
        );
        assert!(measured > 0.0, "the allocator saw the MDS's memory");
        assert!(
            measured <= PAPER_BYTES_PER_CHUNK,
            "{measured:.2} B per chunk, more than the paper's 23"
        );
        // The figure `/metrics` and `lab sierra` report is the allocator's, within 5 %.
        assert!(
            (estimate.bytes_per_chunk - measured).abs() <= 0.05 * measured,
            "estimate {:.2} B against {measured:.2} B measured",
            estimate.bytes_per_chunk
        );
        drop(mds);
    }
}
