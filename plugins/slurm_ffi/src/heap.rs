//! A counting global allocator for the plugins: the bytes a plugin's Rust
//! code holds on the heap right now (requested sizes, all of its threads),
//! for the `debug` lines of the background passes and the scale bench.
//!
//! Each plugin crate installs its own [`CountingAlloc`] (a `cdylib` has its
//! own Rust allocator, so the count is that plugin's alone):
//! `#[cfg(not(test))] #[global_allocator] static A: CountingAlloc = CountingAlloc;`.
//! It forwards to [`std::alloc::System`] (glibc malloc, as before) and adds
//! two relaxed atomic operations per call.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

/// [`System`] with a count of the bytes allocated and not yet freed.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

fn add(n: isize) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    if n > 0 && now > PEAK.load(Relaxed) {
        PEAK.fetch_max(now, Relaxed);
    }
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            add(l.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            add(l.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        add(-(l.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let q = System.realloc(p, l, new_size);
        if !q.is_null() {
            add(new_size as isize - l.size() as isize);
        }
        q
    }
}

/// Bytes the plugin's Rust code holds now (0 where no [`CountingAlloc`] is installed).
pub fn live_bytes() -> usize {
    LIVE.load(Relaxed).max(0) as usize
}

/// The most bytes held at once since the plugin was loaded.
pub fn peak_bytes() -> usize {
    PEAK.load(Relaxed).max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_is_held_and_the_peak() {
        let a = CountingAlloc;
        let l = Layout::from_size_align(4096, 8).expect("layout");
        let before = LIVE.load(Relaxed);
        unsafe {
            let p = a.alloc(l);
            assert!(!p.is_null());
            assert_eq!(LIVE.load(Relaxed) - before, 4096);
            let q = a.realloc(p, l, 8192);
            assert!(!q.is_null());
            assert_eq!(LIVE.load(Relaxed) - before, 8192);
            assert!(peak_bytes() as isize >= before + 8192);
            a.dealloc(q, Layout::from_size_align(8192, 8).expect("layout"));
        }
        assert_eq!(LIVE.load(Relaxed), before);
    }
}
