//! Making the tensors lookout's ops hand back: owning a vector of one-byte values
//! ([`byte_tensor`]) or written in place ([`tensor_filled`]), typed as the op's output.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::plan::EvalContext;

/// A tensor of the 1-byte type `dt` and shape `shape` that owns `values` (no copy): how the
/// ops here hand back what they wrote. An error when the sizes do not fit.
pub(crate) fn byte_tensor<T: Datum>(
    shape: &[usize],
    values: Vec<T>,
    dt: DatumType,
) -> TractResult<Tensor> {
    anyhow::ensure!(
        std::mem::size_of::<T>() == 1 && dt.size_of() == 1,
        "a 1-byte tensor expected, got {dt:?}"
    );
    let mut t = tract_ndarray::ArrayD::from_shape_vec(shape, values)?.into_tensor();
    retype_bytes(&mut t, dt);
    Ok(t)
}

/// Gives `t`, whose one-byte values its maker wrote as values of the one-byte type `dt`
/// (from an input of that type, or quantized into it), the type `dt`. Callers check that
/// both types are one byte.
fn retype_bytes(t: &mut Tensor, dt: DatumType) {
    debug_assert!(t.datum_type().size_of() == 1 && dt.size_of() == 1);
    if t.datum_type() != dt {
        // SAFETY: both types are one byte (checked by every caller), and the bytes are
        // values of `dt`: every caller writes them from an input of that type or quantizes
        // into it.
        unsafe { t.set_datum_type(dt) };
    }
}

/// A tensor of `shape` and type `dt` whose elements `fill` writes in place, as values of `T`
/// (`dt` itself, or the type a quantized `dt` quantizes, such as `i8` for an int8 type); with
/// `fill`'s verdict. The tensor is zeroed and never copied (a vector turned into a tensor is
/// copied once more, on the calling thread alone, which at 2 threads is a serial pass over
/// every output of the op), and it is one the plan state running the op (`ctx`) kept from an
/// earlier inference when it can be ([`recycle`](super::recycle)).
pub(crate) fn tensor_filled<T: Datum>(
    ctx: &EvalContext,
    shape: &[usize],
    dt: DatumType,
    fill: impl FnOnce(&mut [T]) -> bool,
) -> TractResult<(TValue, bool)> {
    anyhow::ensure!(
        T::datum_type() == dt.unquantized(),
        "a tensor of {dt:?} cannot be written as {:?}",
        T::datum_type()
    );
    super::recycle::output(ctx, dt, shape, |t| {
        Ok(fill(t.try_as_plain_ram_mut()?.as_slice_mut::<T>()?))
    })
}
