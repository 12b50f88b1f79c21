//! The model's input tensor: written from the preprocessing's buffer (or from floats) into
//! the tensor kept from the previous inference, so that no new tensor of 0.5–2 MB is mapped
//! and faulted in at every inference (`memory::limit_allocator` maps every block of 128 KiB
//! or more on its own).

use std::sync::Arc;

use tract_onnx::prelude::*;

use super::{int8, DetectError, Detector};
use crate::preprocess::{self, ModelInput};

impl Detector {
    /// [`Detector::new_input`] holding `floats` (quantized for a model that takes int8, as
    /// the preprocessing would have written them).
    pub fn input_from_floats(&self, floats: &[f32]) -> ModelInput {
        match self.input_quant {
            Some(q) => ModelInput::I8(quantized(floats, q.quant), q.quant),
            None => ModelInput::F32(floats.to_vec()),
        }
    }

    /// The model's input tensor from floats: as they are, or quantized for an int8 input.
    pub(super) fn float_tensor(&self, input: &[f32]) -> Result<Arc<Tensor>, DetectError> {
        match self.input_quant {
            None => self.input_filled(f32::datum_type(), |t| {
                copy_into(t.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?, input)
            }),
            Some(q) => self.input_filled(q.dt, |t| {
                let mut plain = t.try_as_plain_ram_mut()?;
                let bytes = plain.as_slice_mut::<i8>()?;
                anyhow::ensure!(
                    bytes.len() == input.len(),
                    "input of {} values",
                    input.len()
                );
                int8::quant::quantize(input, bytes, q.quant.scale, q.quant.zero_point);
                Ok(())
            }),
        }
    }

    /// The model's input tensor of type `dt` written by `fill`: the one kept from the previous
    /// inference when nobody holds it any more (the plan drops its copy at the end of a run),
    /// else a new one. The same values either way.
    fn input_filled(
        &self,
        dt: DatumType,
        fill: impl FnOnce(&mut Tensor) -> TractResult<()>,
    ) -> Result<Arc<Tensor>, DetectError> {
        let shape = [1, 3, self.info.input_h as usize, self.info.input_w as usize];
        let kept = self.kept_input.lock().ok().and_then(|mut k| k.take());
        // Reusable: of this type and shape, and held by nobody else (no weak references exist).
        let reusable = |t: &Arc<Tensor>| {
            t.datum_type() == dt && t.shape() == shape && Arc::strong_count(t) == 1
        };
        let mut arc = match kept.filter(reusable) {
            Some(t) => t,
            None => Arc::new(Tensor::zero_dt(dt, &shape).map_err(|e| self.run_err(e))?),
        };
        let t =
            Arc::get_mut(&mut arc).ok_or_else(|| self.run_err(anyhow::anyhow!("input in use")))?;
        fill(t).map_err(|e| self.run_err(e))?;
        Ok(arc)
    }

    /// The model's input tensor from a [`ModelInput`]; int8 values for a float model are an
    /// error (a buffer made for another model).
    pub(super) fn input_tensor(&self, input: &ModelInput) -> Result<Arc<Tensor>, DetectError> {
        match (input, self.input_quant) {
            (ModelInput::F32(v), _) => self.float_tensor(v),
            (ModelInput::I8(v, q), Some(want)) if *q == want.quant => self
                .input_filled(want.dt, |t| {
                    copy_into(t.try_as_plain_ram_mut()?.as_slice_mut::<i8>()?, v)
                }),
            (ModelInput::I8(..), _) => Err(DetectError::Run {
                model: self.info.name.clone(),
                reason: "an int8 input tensor quantized for another model (make it with \
                         Detector::new_input)"
                    .into(),
            }),
        }
    }
}

/// `floats` quantized as the preprocessing writes an int8 model's input.
fn quantized(floats: &[f32], q: preprocess::Quantization) -> Vec<i8> {
    let mut bytes = vec![0i8; floats.len()];
    int8::quant::quantize(floats, &mut bytes, q.scale, q.zero_point);
    bytes
}

/// `src` into `dst`, which must be as long.
fn copy_into<T: Copy>(dst: &mut [T], src: &[T]) -> TractResult<()> {
    anyhow::ensure!(
        dst.len() == src.len(),
        "input of {} values, {} expected",
        src.len(),
        dst.len()
    );
    dst.copy_from_slice(src);
    Ok(())
}
