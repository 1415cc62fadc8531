//! `O_DIRECT` write buffers: aligned to the device's memory alignment, kept between writes so
//! that a multi-megabyte transfer does not fault in and clear fresh pages every time.

use std::sync::Mutex;

use super::{DIRECT_MEMORY_ALIGN, MAX_BATCH_BYTES};

/// Aligned buffers of [`MAX_BATCH_BYTES`] kept between writes (at most [`POOLED_BUFFERS`]).
#[derive(Default)]
pub(super) struct BufferPool {
    pub(super) free: Mutex<Vec<AlignedBuffer>>,
}

/// Buffers kept by a pool: the writes in flight at once, at most.
const POOLED_BUFFERS: usize = 8;

impl BufferPool {
    /// A buffer of at least `len` bytes.
    pub(super) fn take(&self, len: usize) -> AlignedBuffer {
        if len <= MAX_BATCH_BYTES {
            if let Some(buffer) = self.free.lock().expect("buffer pool").pop() {
                return buffer;
            }
            return AlignedBuffer::new(MAX_BATCH_BYTES);
        }
        AlignedBuffer::new(len)
    }

    pub(super) fn give_back(&self, buffer: AlignedBuffer) {
        if buffer.layout.size() == MAX_BATCH_BYTES {
            let mut free = self.free.lock().expect("buffer pool");
            if free.len() < POOLED_BUFFERS {
                free.push(buffer);
            }
        }
    }
}

/// A zeroed heap buffer aligned for `O_DIRECT`.
pub(super) struct AlignedBuffer {
    pointer: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl AlignedBuffer {
    fn new(len: usize) -> AlignedBuffer {
        let layout = std::alloc::Layout::from_size_align(len.max(1), DIRECT_MEMORY_ALIGN)
            .expect("buffer layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let pointer =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuffer { pointer, layout }
    }

    pub(super) fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is `len` initialized (zeroed) bytes owned by this buffer.
        unsafe { std::slice::from_raw_parts_mut(self.pointer.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.pointer.as_ptr(), self.layout) }
    }
}

// SAFETY: the buffer owns its allocation exclusively.
unsafe impl Send for AlignedBuffer {}
