//! Float loops compiled a second time with AVX2, taken at run time on x86_64 CPUs that have
//! it.
//!
//! lookout's x86_64 build targets the baseline instruction set, so the compiler vectorizes
//! plain loops with 4-lane SSE2. The float loops of the ops around the convolutions (the
//! feature pyramid's upsample-adds and average pools) then take about a sixth of an INT8
//! inference on x86. [`run`] calls a loop inside a function compiled with AVX2 enabled, where
//! the compiler vectorizes the same code 8 lanes wide (and gathers a pool's table lookups).
//! Everything the loop calls must be inlined into it (`#[inline(always)]` down to the
//! innermost loop) to be compiled there; what is not runs as before.
//!
//! Both copies give the same bits: AVX2 changes no float semantics, and Rust never contracts
//! a multiply and an add into a fused multiply-add. Each op's tests compare the two copies
//! ([`portable`] calls the loop as it is). On other architectures [`run`] is [`portable`]
//! (64-bit ARM's baseline already has 128-bit NEON, the width its cores compute at).

/// Calls `f`, compiled with AVX2 where this x86_64 CPU has it (the result is the same).
#[inline(always)]
pub fn run<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked on the line above.
        return unsafe { avx2::call(f) };
    }
    portable(f)
}

/// Calls `f` as compiled for the build's baseline: [`run`]'s twin for tests.
#[inline(always)]
pub fn portable<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    /// Calls `f`, inlined into this function and so compiled with AVX2.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn call<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_and_portable_give_the_same_sums() {
        let xs: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
        let sum = |xs: &[f32]| {
            let mut acc = [0.0f32; 8];
            for (k, x) in xs.iter().enumerate() {
                acc[k % 8] += x * 0.5 + 1.0;
            }
            acc
        };
        let a = run(|| sum(&xs));
        let b = portable(|| sum(&xs));
        assert_eq!(a.map(f32::to_bits), b.map(f32::to_bits));
    }
}
