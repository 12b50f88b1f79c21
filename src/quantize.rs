//! Floats to int8, as tract's `QuantizeLinear` rounds them: `round_half_even(x · scale) +
//! zero_point`, clamped to int8. Used by the preprocessing (an INT8 model's input, written
//! row by row) and by `detect::int8::quant` (the graph's other quantizations). tract rounds
//! each value with a general round-half-to-even (exponent test, sign test, signed-zero
//! fix-up), ≈ 9 NEON instructions per value on a Pi 5; here the rounding is the `± 2²³ ∓ 2²³`
//! trick without the parts that cannot change an int8 result: a value of 2²³ or more in
//! magnitude clamps to the same end of the int8 range either way, and a zero of either sign
//! is 0. `detect::int8::quant`'s tests compare it with tract's value by value.

/// 2²³: adding and subtracting it rounds an f32 of smaller magnitude to an integer, ties to
/// even (the default rounding of every IEEE operation).
const TOINT: f32 = 8_388_608.0;

/// One value quantized: `round_half_even(x · scale) + zero_point`, clamped to int8 — tract's
/// `quantize_linear_f32_i8` without the parts that cannot change an int8 result (a value of
/// 2²³ or more in magnitude clamps to the same end either way; a zero of either sign is 0).
#[inline(always)]
pub fn quantize_one(x: f32, scale: f32, zero_point: i32) -> i8 {
    let v = x * scale;
    let r = if v < 0.0 {
        v - TOINT + TOINT
    } else {
        v + TOINT - TOINT
    };
    (r as i32).wrapping_add(zero_point).clamp(-128, 127) as i8
}

/// Quantizes `src` into `dst` (same length): `round_half_even(x · scale) + zero_point`,
/// clamped to int8, as tract's `quantize_linear_f32_i8`. SSE2 on x86_64 (16 values a step),
/// [`quantize_portable`] elsewhere (a loop the compiler vectorizes with NEON) and for the tail.
pub fn quantize(src: &[f32], dst: &mut [i8], scale: f32, zero_point: i32) {
    let len = src.len().min(dst.len());
    #[cfg(target_arch = "x86_64")]
    {
        let n = len / 16 * 16;
        // SAFETY: `src` is readable and `dst` writable for `n` ≤ `len` elements (both slices
        // are at least `len` long), and they do not overlap (a shared and a unique borrow).
        unsafe { sse2::quantize(src.as_ptr(), dst.as_mut_ptr(), n, scale, zero_point) };
        quantize_portable(&src[n..len], &mut dst[n..len], scale, zero_point);
    }
    #[cfg(not(target_arch = "x86_64"))]
    quantize_portable(&src[..len], &mut dst[..len], scale, zero_point);
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::*;

    /// [`super::quantize_portable`] on `n` (a multiple of 16) values: `cvtps2dq` rounds half
    /// to even (the default MXCSR mode, which Rust code never changes), NaN is zeroed first
    /// (tract's `as i32` makes it 0) and values are clamped in float to ±2³⁰ first (past the
    /// int8 range after any i32 zero point, and where `cvtps2dq` saturates to the wrong end);
    /// the zero point is added in i32 with wrapping (as the portable `wrapping_add`), then the
    /// two saturating packs clamp to int8.
    ///
    /// # Safety
    /// `src .. + n` readable, `dst .. + n` writable, not overlapping; `n % 16 == 0`.
    pub(super) unsafe fn quantize(src: *const f32, dst: *mut i8, n: usize, scale: f32, zp: i32) {
        // SAFETY: every load reads 4 floats at `src + i + 4j` and the store writes 16 bytes at
        // `dst + i`, for i + 16 ≤ n: in bounds by the caller's contract; SSE2 is part of
        // x86_64; unaligned loads and stores.
        unsafe {
            let s = _mm_set1_ps(scale);
            let (lo, hi) = (_mm_set1_ps(-1_073_741_824.0), _mm_set1_ps(1_073_741_824.0));
            let z = _mm_set1_epi32(zp);
            let q = |p: *const f32| {
                let v = _mm_mul_ps(_mm_loadu_ps(p), s);
                let v = _mm_and_ps(v, _mm_cmpord_ps(v, v));
                let v = _mm_min_ps(_mm_max_ps(v, lo), hi);
                _mm_add_epi32(_mm_cvtps_epi32(v), z)
            };
            let mut i = 0;
            while i < n {
                let p = src.add(i);
                let ab = _mm_packs_epi32(q(p), q(p.add(4)));
                let cd = _mm_packs_epi32(q(p.add(8)), q(p.add(12)));
                _mm_storeu_si128(dst.add(i) as *mut __m128i, _mm_packs_epi16(ab, cd));
                i += 16;
            }
        }
    }
}

/// The bounds-checked twin of [`quantize`] (and its tail), in a form the compiler vectorizes.
pub fn quantize_portable(src: &[f32], dst: &mut [i8], scale: f32, zero_point: i32) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = quantize_one(x, scale, zero_point);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SIMD path against its portable twin: every length around the 16-value step from
    /// a few offsets, ties, the int8 range's ends, NaN and infinities.
    #[test]
    fn simd_equals_portable() {
        let mut xs: Vec<f32> = (-700..=700).map(|i| i as f32 * 0.25).collect();
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e30,
            -1e30,
        ]);
        for (scale, zp) in [(1.0f32, 0i32), (2.5, -7), (0.3, 4)] {
            for off in 0..3 {
                for len in [0, 1, 15, 16, 17, 31, 33, 100, xs.len() - off] {
                    let part = &xs[off..off + len];
                    let (mut a, mut b) = (vec![0i8; len], vec![0i8; len]);
                    quantize(part, &mut a, scale, zp);
                    quantize_portable(part, &mut b, scale, zp);
                    assert_eq!(a, b, "len {len} off {off} scale {scale} zp {zp}");
                }
            }
        }
    }
}
