//! The one way every lookout op that stands in for one of tract's runs: its own kernel when
//! it handles the inputs, tract's op (kept inside it) otherwise, so an unexpected shape or
//! type is still computed, only slower.

use tract_onnx::tract_core::internal::*;

/// `fast` on the inputs, or, when it returns `None` (not a case it handles), `tract_op` on
/// them. Errors of `fast` are errors of the op.
pub(super) fn eval_or_tract_op<O: EvalOp, V: Into<TValue>>(
    tract_op: &O,
    ctx: &EvalContext,
    inputs: TVec<TValue>,
    fast: impl FnOnce(&[TValue]) -> TractResult<Option<V>>,
) -> TractResult<TVec<TValue>> {
    if let Some(t) = fast(&inputs)? {
        return Ok(tvec!(t.into()));
    }
    tract_op.eval(ctx, inputs)
}
