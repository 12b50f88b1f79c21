//! `FastLut`: stands in for tract's 8-bit `LookupTable` (the INT8 graphs' LeakyReLU, one per
//! convolution). tract copies the input into a new tensor and then looks every byte up with
//! a scalar loop (its only lookup kernel on every architecture). This looks up in place when
//! the input is not shared, else straight into the output, and on aarch64 16 bytes at a time
//! with NEON table lookups (`tbl`/`tbx` over four 64-byte quarters of the table); on x86_64
//! CPUs with AVX-512 VBMI 64 bytes at a time (two `vpermi2b` and a blend).

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
use tract_onnx::tract_core::ops::quant::LookupTable;

/// The op that replaces one `LookupTable` on an 8-bit tensor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastLut {
    /// The 256 output bytes, indexed by the input byte (an `i8` by its bit pattern, as tract).
    table: Vec<u8>,
    /// The output's type (the input's: a lookup keeps the type and its quantization).
    dt: DatumType,
}

impl FastLut {
    /// The replacement for `op` on an input of fact `input`, when `op` is a 256-entry
    /// `LookupTable` on a 1-byte type.
    pub fn for_op(op: &ElementWiseOp, input: &TypedFact) -> Option<Self> {
        let lut = op.0.downcast_ref::<LookupTable>()?;
        let table = lut.table.table();
        let dt = input.datum_type;
        let out = op.0.output_type(dt).unwrap_or(dt);
        (table.len() == 256 && dt.size_of() == 1 && out == dt && op.1.is_none_or(|d| d == dt)).then(
            || FastLut {
                table: table.to_vec(),
                dt,
            },
        )
    }

    /// The 256 output bytes, indexed by the input byte.
    pub fn table(&self) -> Option<&[u8; 256]> {
        self.table.as_slice().try_into().ok()
    }

    /// The type of the bytes looked up (and of the output).
    pub fn datum_type(&self) -> DatumType {
        self.dt
    }
}

/// Looks every byte of `buf` up in `table`, in place.
pub fn lookup_in_place(buf: &mut [u8], table: &[u8; 256]) {
    #[cfg(target_arch = "aarch64")]
    {
        let n = buf.len() / 16 * 16;
        let ptr = buf.as_mut_ptr();
        // SAFETY: `ptr` is valid for reads and writes of `n` ≤ `buf.len()` bytes; each
        // 16-byte block is read before it is written, so source and destination may be one.
        unsafe { neon::lookup(ptr, ptr, n, table) };
        lookup_in_place_portable(&mut buf[n..], table);
    }
    #[cfg(target_arch = "x86_64")]
    {
        let n = if vbmi::available() { buf.len() } else { 0 };
        let ptr = buf.as_mut_ptr();
        if n > 0 {
            // SAFETY: the CPU has AVX-512 F/BW/VBMI (checked: `n` is 0 otherwise, and the
            // function is not entered, as its first instructions are AVX-512 ones); `ptr` is
            // valid for reads and writes of `n` = `buf.len()` bytes; each 64-byte block is
            // read before it is written.
            unsafe { vbmi::lookup(ptr, ptr, n, table) };
        }
        lookup_in_place_portable(&mut buf[n..], table);
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    lookup_in_place_portable(buf, table);
}

/// Looks every byte of `src` up in `table` into `dst` (of the same length).
pub fn lookup_into(src: &[u8], dst: &mut [u8], table: &[u8; 256]) {
    let len = src.len().min(dst.len());
    #[cfg(target_arch = "aarch64")]
    {
        let n = len / 16 * 16;
        // SAFETY: both pointers are valid for `n` ≤ `len` bytes, `src` for reads and `dst`
        // for writes, and they do not overlap (a shared and a unique borrow).
        unsafe { neon::lookup(src.as_ptr(), dst.as_mut_ptr(), n, table) };
        lookup_into_portable(&src[n..len], &mut dst[n..len], table);
    }
    #[cfg(target_arch = "x86_64")]
    {
        let n = if vbmi::available() { len } else { 0 };
        if n > 0 {
            // SAFETY: the CPU has AVX-512 F/BW/VBMI (checked: `n` is 0 otherwise, and the
            // function is not entered); both pointers are valid for `n` ≤ `len` bytes, `src`
            // for reads and `dst` for writes, and they do not overlap (a shared and a unique
            // borrow).
            unsafe { vbmi::lookup(src.as_ptr(), dst.as_mut_ptr(), n, table) };
        }
        lookup_into_portable(&src[n..len], &mut dst[n..len], table);
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    lookup_into_portable(&src[..len], &mut dst[..len], table);
}

/// The bounds-checked twin of [`lookup_in_place`] (and its tail).
pub fn lookup_in_place_portable(buf: &mut [u8], table: &[u8; 256]) {
    for v in buf {
        *v = table[*v as usize];
    }
}

/// The bounds-checked twin of [`lookup_into`] (and its tail).
pub fn lookup_into_portable(src: &[u8], dst: &mut [u8], table: &[u8; 256]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = table[*s as usize];
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    /// Looks `n` bytes (a multiple of 16) from `src` up in `table` into `dst`.
    ///
    /// # Safety
    /// `src` must be valid for reads and `dst` for writes of `n` bytes; they may be equal
    /// but must not otherwise overlap.
    pub unsafe fn lookup(src: *const u8, dst: *mut u8, n: usize, table: &[u8; 256]) {
        // SAFETY: NEON is part of the aarch64 baseline; the table loads read 4 × 64 bytes of
        // the 256-byte table; the block loads and stores stay within the `n` bytes the caller
        // vouches for, and each block is loaded before it is stored.
        unsafe {
            let t = table.as_ptr();
            let (q0, q1, q2, q3) = (
                vld1q_u8_x4(t),
                vld1q_u8_x4(t.add(64)),
                vld1q_u8_x4(t.add(128)),
                vld1q_u8_x4(t.add(192)),
            );
            let k64 = vdupq_n_u8(64);
            let mut i = 0;
            while i + 16 <= n {
                let x0 = vld1q_u8(src.add(i));
                // `tbl` gives 0 for an index ≥ 64, `tbx` keeps what is there: each quarter
                // answers the indices in its 64-byte range.
                let x1 = vsubq_u8(x0, k64);
                let x2 = vsubq_u8(x1, k64);
                let x3 = vsubq_u8(x2, k64);
                let mut r = vqtbl4q_u8(q0, x0);
                r = vqtbx4q_u8(r, q1, x1);
                r = vqtbx4q_u8(r, q2, x2);
                r = vqtbx4q_u8(r, q3, x3);
                vst1q_u8(dst.add(i), r);
                i += 16;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod vbmi {
    use std::arch::x86_64::*;

    /// Whether this CPU has the AVX-512 byte permutes the lookup uses (Ice Lake, Sapphire
    /// Rapids, Zen 4 and later); else the portable loop runs.
    pub fn available() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi")
    }

    /// Looks `n` bytes from `src` up in `table` into `dst`: two `vpermi2b` over the table's
    /// halves (each answers an index's low 7 bits), then a blend by the index's top bit; the
    /// last `n % 64` bytes by a masked load and store.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VBMI ([`available`]); `src` must be valid for reads
    /// and `dst` for writes of `n` bytes; they may be equal but must not otherwise overlap.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub unsafe fn lookup(src: *const u8, dst: *mut u8, n: usize, table: &[u8; 256]) {
        // SAFETY: the table loads read 4 × 64 bytes of the 256-byte table; the block loads
        // and stores stay within the `n` bytes the caller vouches for, each block loaded
        // before it is stored; the tail's masked load and store touch only the `n % 64`
        // bytes left (masked-off bytes are neither read nor written, and do not fault);
        // unaligned loads and stores.
        unsafe {
            let t = table.as_ptr() as *const __m512i;
            let (t0, t1, t2, t3) = (
                _mm512_loadu_si512(t),
                _mm512_loadu_si512(t.add(1)),
                _mm512_loadu_si512(t.add(2)),
                _mm512_loadu_si512(t.add(3)),
            );
            let mut i = 0;
            while i + 64 <= n {
                let x = _mm512_loadu_si512(src.add(i) as *const __m512i);
                let lo = _mm512_permutex2var_epi8(t0, x, t1);
                let hi = _mm512_permutex2var_epi8(t2, x, t3);
                let r = _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi);
                _mm512_storeu_si512(dst.add(i) as *mut __m512i, r);
                i += 64;
            }
            if i < n {
                let mask: __mmask64 = (1u64 << (n - i)) - 1;
                let x = _mm512_maskz_loadu_epi8(mask, src.add(i) as *const i8);
                let lo = _mm512_permutex2var_epi8(t0, x, t1);
                let hi = _mm512_permutex2var_epi8(t2, x, t3);
                let r = _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi);
                _mm512_mask_storeu_epi8(dst.add(i) as *mut i8, mask, r);
            }
        }
    }
}

impl Op for FastLut {
    fn name(&self) -> StaticName {
        "FastLut".into()
    }

    op_as_typed_op!();
}

impl EvalOp for FastLut {
    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let (Some(table), [input]) = (self.table(), &*inputs) else {
            bail!("FastLut takes one input and a 256-byte table");
        };
        if input.datum_type() != self.dt {
            bail!(
                "FastLut was built for {:?}, got {:?}",
                self.dt,
                input.datum_type()
            );
        }
        let Some(input) = inputs.into_iter().next() else {
            bail!("FastLut takes one input");
        };
        if input.is_exclusive() {
            // Nothing else holds the input: its storage becomes the output, looked up in place.
            let mut t = input.into_tensor();
            super::par::for_chunks(t.as_bytes_mut(), 1, |_, chunk| {
                lookup_in_place(chunk, table);
                true
            });
            return Ok(tvec!(t.into_tvalue()));
        }
        let src = input.as_bytes();
        let mut out = vec![0u8; src.len()];
        super::par::for_chunks(&mut out, 1, |first, chunk| {
            lookup_into(&src[first..first + chunk.len()], chunk, table);
            true
        });
        Ok(tvec!(super::tensors::byte_tensor(
            input.shape(),
            out,
            self.dt
        )?
        .into_tvalue()))
    }

    op_out_of_plan!();
}

impl TypedOp for FastLut {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let Some(input) = inputs.first() else {
            bail!("FastLut takes one input");
        };
        Ok(tvec!(input.without_value()))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> [u8; 256] {
        let mut t = [0u8; 256];
        for (i, v) in t.iter_mut().enumerate() {
            *v = (i as u8).wrapping_mul(167).wrapping_add(13);
        }
        t
    }

    /// The SIMD path against its portable twin, in place and out of place, on every byte
    /// value and lengths that leave every tail size.
    #[test]
    fn simd_and_portable_agree() {
        let t = table();
        for len in [
            0usize, 1, 15, 16, 17, 31, 63, 64, 65, 127, 128, 256, 1000, 4099,
        ] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 + i / 256) as u8).collect();
            let mut want = src.clone();
            lookup_in_place_portable(&mut want, &t);
            let mut got = src.clone();
            lookup_in_place(&mut got, &t);
            assert_eq!(got, want, "in place, {len}");
            let mut out = vec![0u8; len];
            lookup_into(&src, &mut out, &t);
            assert_eq!(out, want, "into, {len}");
        }
    }

    /// Against tract's own `LookupTable` op, on an int8 tensor holding every value.
    #[test]
    fn equals_tract_lookup_table() {
        let t = table();
        let lut = LookupTable {
            table: tract_onnx::tract_core::tract_linalg::routines::lut_u8(&t).unwrap(),
        };
        let op = ElementWiseOp(Box::new(lut), None);
        let fact = i8::fact([2, 300]);
        let ours = FastLut::for_op(&op, &fact).expect("taken");
        let data: Vec<i8> = (0..600).map(|i| (i * 13 % 256) as u8 as i8).collect();
        let x = Tensor::from_shape(&[2, 300], &data).unwrap();
        let ctx = EvalContext::out_of_plan();
        let want = op.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
        let got = ours.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
        let shared = x.into_tvalue();
        let got_shared = ours.eval(&ctx, tvec!(shared.clone())).unwrap();
        let bytes = |v: &TValue| -> Vec<i8> {
            v.to_plain_array_view::<i8>()
                .unwrap()
                .iter()
                .copied()
                .collect()
        };
        assert_eq!(bytes(&want[0]), bytes(&got[0]));
        assert_eq!(bytes(&want[0]), bytes(&got_shared[0]));
        assert_eq!(bytes(&shared), data, "a shared input is left as it was");
    }
}
