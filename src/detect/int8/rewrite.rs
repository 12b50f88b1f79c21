//! Rewriting a typed model: a node replaced by one of lookout's ops.

use tract_onnx::prelude::*;

/// Replaces each node `id` by `op` reading only `source`, then drops what no longer runs;
/// returns how many nodes were replaced.
pub(super) fn replace_reading<O: TypedOp>(
    model: &mut TypedModel,
    replacements: Vec<(usize, OutletId, O)>,
) -> TractResult<usize> {
    let n = replacements.len();
    for (id, source, op) in replacements {
        let node = model.node(id);
        TypedModelPatch::replace_single_op(model, node, &[source], op)?.apply(model)?;
    }
    if n > 0 {
        *model = std::mem::take(model).into_compact()?;
    }
    Ok(n)
}
