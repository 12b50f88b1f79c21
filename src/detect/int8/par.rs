//! Elementwise work split over the model's threads: an op's output cut into chunks that the
//! tract executor's pool fills side by side, when there is a pool and enough work.

use rayon::prelude::*;
use tract_linalg::multithread::{current_tract_executor, Executor};

/// Below this many bytes of output an op stays on the calling thread: waking the pool would
/// cost about what it saves.
pub const PARALLEL_MIN_BYTES: usize = 64 * 1024;

/// Chunks per thread: a few, so that one slow chunk does not leave the other threads idle.
const CHUNKS_PER_THREAD: usize = 4;

/// Calls `f(first, chunk)` for `out` cut into chunks of whole `unit`s (`first`: the index of
/// the chunk's first element in `out`), on the model's threads when the executor has several
/// and `out` holds at least [`PARALLEL_MIN_BYTES`]; else once, on all of `out`. True when every
/// call returned true.
pub fn for_chunks<T, F>(out: &mut [T], unit: usize, f: F) -> bool
where
    T: Send,
    F: Fn(usize, &mut [T]) -> bool + Sync,
{
    let unit = unit.max(1);
    let bytes = std::mem::size_of_val(out);
    match current_tract_executor() {
        Executor::MultiThread(pool)
            if pool.current_num_threads() > 1
                && bytes >= PARALLEL_MIN_BYTES
                && out.len() >= 2 * unit =>
        {
            let units = out.len().div_ceil(unit);
            let chunks = (pool.current_num_threads() * CHUNKS_PER_THREAD).min(units);
            let len = units.div_ceil(chunks) * unit;
            pool.install(|| {
                out.par_chunks_mut(len)
                    .enumerate()
                    .all(|(i, chunk)| f(i * len, chunk))
            })
        }
        _ => f(0, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_linalg::multithread::multithread_tract_scope;

    /// Every element is visited once with its right index, in whole units, on one thread and
    /// on two, below and above the size threshold; a false from any chunk is reported.
    #[test]
    fn visits_every_element_once_in_whole_units() {
        for threads in [1, 2] {
            let executor = if threads == 1 {
                Executor::SingleThread
            } else {
                Executor::multithread(threads)
            };
            multithread_tract_scope(executor, || {
                for (n, unit) in [
                    (10usize, 3usize),
                    (PARALLEL_MIN_BYTES + 7, 13),
                    (300_001, 1),
                ] {
                    let mut v = vec![usize::MAX; n];
                    let calls = std::sync::atomic::AtomicUsize::new(0);
                    let ok = for_chunks(&mut v, unit, |first, chunk| {
                        calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        assert_eq!(first % unit, 0);
                        assert!(chunk.len() % unit == 0 || first + chunk.len() == n);
                        for (i, x) in chunk.iter_mut().enumerate() {
                            *x = first + i;
                        }
                        true
                    });
                    assert!(ok);
                    assert!(v.iter().enumerate().all(|(i, &x)| x == i), "n {n}");
                    let calls = calls.into_inner();
                    if threads == 1 || n < PARALLEL_MIN_BYTES {
                        assert_eq!(calls, 1, "n {n}, {threads} thread(s)");
                    } else {
                        assert!(calls > 1, "n {n}: not split");
                    }
                    let refused = for_chunks(&mut v, unit, |first, _| first == 0);
                    assert_eq!(refused, calls == 1, "n {n}");
                }
            });
        }
    }
}
