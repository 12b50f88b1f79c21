//! Output tensors kept from one inference to the next: [`Recycler`].
//!
//! An inference makes and drops a few dozen activation tensors, most of them 128 KiB to
//! 1.4 MiB. lookout keeps glibc from holding freed memory (every block of 128 KiB or more is
//! mapped on its own and unmapped when freed: `memory::limit_allocator`), so a new tensor is
//! mapped, faulted in page by page and zeroed by the kernel on every inference — thousands
//! of page faults per inference. A [`Recycler`] installed in a plan state (its turn-shared
//! resources) keeps the tensors lookout's ops hand back; when that state runs again, an op
//! asking for an output of a type and size whose kept tensor nobody holds any more gets that
//! tensor (zeroed, unless the op writes every element) instead of a new one. What it keeps is bounded by the tensors one
//! inference has alive at once, stays put between inferences, and is freed with the state (a
//! reload's old model frees all of it).

use std::sync::{Arc, Mutex};

use tract_onnx::prelude::*;
use tract_onnx::tract_core::plan::EvalContext;

/// True when the environment asks for new output tensors at every inference
/// (`LOOKOUT_INT8_RECYCLE=off`; for before/after comparisons with one binary).
pub(crate) fn recycling_off() -> bool {
    std::env::var("LOOKOUT_INT8_RECYCLE").is_ok_and(|v| v == "off")
}

/// The output tensors of lookout's ops in one plan state, reused from one inference to the
/// next (see the module documentation). Install one in a state's turn-shared resources
/// (`state.turn_state.shared.insert(Recycler::default())`), call [`Recycler::end_turn`]
/// after each run.
#[derive(Debug, Default)]
pub struct Recycler {
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    /// The tensors handed out, each with the turn it was last handed out in.
    tensors: Vec<(Arc<Tensor>, u64)>,
    /// The current turn.
    turn: u64,
}

impl Recycler {
    /// A kept tensor of type `dt` and `shape.iter().product()` values that nobody else holds,
    /// taken out of the kept list; `None` when there is none.
    fn take_idle(&self, dt: DatumType, len: usize) -> Option<Arc<Tensor>> {
        let mut kept = self.kept.lock().ok()?;
        let ix = kept.tensors.iter().position(|(t, _)| {
            t.datum_type() == dt && t.len() == len && Arc::strong_count(t) == 1
        })?;
        Some(kept.tensors.swap_remove(ix).0)
    }

    /// Keeps `t` (handed out in this turn) for a later turn.
    fn keep(&self, t: Arc<Tensor>) {
        if let Ok(mut kept) = self.kept.lock() {
            let turn = kept.turn;
            kept.tensors.push((t, turn));
        }
    }

    /// Ends a turn: drops the kept tensors this turn did not hand out (those of a shape the
    /// state no longer makes), so that what is kept never outgrows one inference's needs.
    pub fn end_turn(&self) {
        if let Ok(mut kept) = self.kept.lock() {
            let turn = kept.turn;
            kept.tensors.retain(|(_, used)| *used == turn);
            kept.turn += 1;
        }
    }

    /// How many tensors are kept, and their bytes.
    pub(crate) fn kept(&self) -> (usize, usize) {
        self.kept.lock().map_or((0, 0), |kept| {
            let bytes = kept
                .tensors
                .iter()
                .map(|(t, _)| t.len() * t.datum_type().size_of());
            (kept.tensors.len(), bytes.sum())
        })
    }
}

/// An op's output of type `dt` and `shape`, zeroed, then written by `write` (with its result):
/// a kept tensor when the plan state running the op (`ctx`) has a [`Recycler`] holding an idle
/// one of this type and size, else a new one — the same values either way.
pub(crate) fn output<R>(
    ctx: &EvalContext,
    dt: DatumType,
    shape: &[usize],
    write: impl FnOnce(&mut Tensor) -> TractResult<R>,
) -> TractResult<(TValue, R)> {
    output_as(ctx, dt, shape, true, write)
}

/// Like [`output`] for an op whose `write` sets every element: a kept tensor is handed to it
/// with the values of its last use instead of zeroed (a new one is still zeroed). Values only,
/// never memory safety, depend on the promise; the detector's tests compare every output of
/// photo after photo with a fresh detector's, so an element left unwritten would show.
pub(crate) fn output_whole<R>(
    ctx: &EvalContext,
    dt: DatumType,
    shape: &[usize],
    write: impl FnOnce(&mut Tensor) -> TractResult<R>,
) -> TractResult<(TValue, R)> {
    output_as(ctx, dt, shape, false, write)
}

/// [`output`] (`zero` set) or [`output_whole`].
fn output_as<R>(
    ctx: &EvalContext,
    dt: DatumType,
    shape: &[usize],
    zero: bool,
    write: impl FnOnce(&mut Tensor) -> TractResult<R>,
) -> TractResult<(TValue, R)> {
    let Some(recycler) = ctx.shared.and_then(|s| s.get::<Recycler>()) else {
        let mut t = Tensor::zero_dt(dt, shape)?;
        let r = write(&mut t)?;
        return Ok((t.into_tvalue(), r));
    };
    let len = shape.iter().product();
    let (mut arc, kept) = match recycler.take_idle(dt, len) {
        Some(arc) => (arc, true),
        None => (Arc::new(Tensor::zero_dt(dt, shape)?), false),
    };
    // The tensor taken is held by nobody else (checked under the lock, and the plan only
    // gets a clone of it below), and a new one is ours alone.
    let Some(t) = Arc::get_mut(&mut arc) else {
        anyhow::bail!("a kept output tensor is still in use");
    };
    if t.shape() != shape {
        t.set_shape(shape)?;
    }
    if kept && zero {
        t.as_bytes_mut().fill(0);
    }
    let r = write(t)?;
    recycler.keep(arc.clone());
    Ok((TValue::from_const(arc), r))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use tract_onnx::tract_core::plan::TurnShared;

    /// A plan state's shared resources holding a [`Recycler`] (for the ops' tests).
    pub(crate) fn with_recycler() -> TurnShared {
        let mut shared = TurnShared::new();
        shared.insert(Recycler::default());
        shared
    }

    /// An evaluation context whose plan state shares `shared`.
    pub(crate) fn context(shared: &TurnShared) -> EvalContext<'_> {
        let mut ctx = EvalContext::out_of_plan();
        ctx.shared = Some(shared);
        ctx
    }

    fn floats(t: &Tensor) -> Vec<f32> {
        t.as_bytes()
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }

    fn write_ones(t: &mut Tensor) -> TractResult<usize> {
        let mut view = t.try_as_plain_ram_mut()?;
        let s = view.as_slice_mut::<f32>()?;
        s[0] = 1.0;
        Ok(s.len())
    }

    #[test]
    fn a_tensor_nobody_holds_is_handed_out_again_zeroed_and_reshaped() {
        let mut shared = TurnShared::new();
        shared.insert(Recycler::default());
        let ctx = context(&shared);
        let (a, n) = output(&ctx, f32::datum_type(), &[2, 3], write_ones).unwrap();
        assert_eq!(n, 6);
        let first = a.as_bytes().as_ptr();
        drop(a);
        let (b, _) = output(&ctx, f32::datum_type(), &[3, 2], |t| {
            assert!(t.as_bytes().iter().all(|v| *v == 0), "not zeroed");
            Ok(())
        })
        .unwrap();
        assert_eq!(
            b.as_bytes().as_ptr(),
            first,
            "the idle tensor was not reused"
        );
        assert_eq!(b.shape(), &[3, 2]);
    }

    #[test]
    fn a_tensor_still_held_or_of_another_type_is_not_reused() {
        let mut shared = TurnShared::new();
        shared.insert(Recycler::default());
        let ctx = context(&shared);
        let (a, _) = output(&ctx, f32::datum_type(), &[4], write_ones).unwrap();
        let (b, _) = output(&ctx, f32::datum_type(), &[4], |_| Ok(())).unwrap();
        assert_ne!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr());
        assert_eq!(floats(&a)[0], 1.0, "a held tensor was overwritten");
        drop(b);
        let (c, _) = output(&ctx, i32::datum_type(), &[4], |_| Ok(())).unwrap();
        assert_eq!(c.datum_type(), i32::datum_type());
        let kept = shared.get::<Recycler>().unwrap().kept();
        assert_eq!(kept, (3, 48));
    }

    #[test]
    fn a_turn_drops_what_it_did_not_use() {
        let mut shared = TurnShared::new();
        shared.insert(Recycler::default());
        let ctx = context(&shared);
        let recycler = shared.get::<Recycler>().unwrap();
        drop(output(&ctx, f32::datum_type(), &[8], |_| Ok(())).unwrap());
        drop(output(&ctx, f32::datum_type(), &[16], |_| Ok(())).unwrap());
        recycler.end_turn();
        assert_eq!(recycler.kept().0, 2);
        drop(output(&ctx, f32::datum_type(), &[16], |_| Ok(())).unwrap());
        recycler.end_turn();
        assert_eq!(recycler.kept(), (1, 64));
    }

    #[test]
    fn without_a_recycler_outputs_are_new() {
        let ctx = EvalContext::out_of_plan();
        let (a, _) = output(&ctx, f32::datum_type(), &[2], write_ones).unwrap();
        assert_eq!(floats(&a), [1.0, 0.0]);
    }
}
