//! The largest value each model output can carry, read from the ONNX graph.
//!
//! An INT8 model that quantizes *after* its last float op caps what the decoder can see: a
//! `Sigmoid → QuantizeLinear → DequantizeLinear` chain in front of `cls_s` cannot give a score
//! above `127 × scale` (s8). Such a file can have ceilings of 0.29–0.82, so that a
//! medium-sized object never passes the 0.35 threshold. This module walks back
//! from each output through shape-only ops and `Sigmoid` to the nearest quantized tensor and
//! reports the largest value that tensor can hold, pushed forward through the sigmoids: the
//! model-load log warns when a score output cannot reach 0.99, and the INT8 accuracy gate
//! (`tests/int8_gate.rs`) asserts it for every shipped file.

use tract_onnx::pb::{GraphProto, NodeProto, TensorProto};
use tract_onnx::prelude::Framework;

/// The ceiling of one model output.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputCeiling {
    /// Output name (`cls_8`, `reg_8`, …).
    pub output: String,
    /// The largest value the output can carry; `None` when no quantization limits it.
    pub max: Option<f32>,
    /// The node whose quantized range sets the ceiling (empty when `max` is `None`).
    pub set_by: String,
}

impl OutputCeiling {
    /// The largest score a class-score output can carry: `max`, or 1.0 when unlimited.
    pub fn max_score(&self) -> f32 {
        self.max.map_or(1.0, |m| m.min(1.0))
    }
}

/// Ops that only move values: the walk goes through them unchanged.
const PASS_THROUGH: [&str; 8] = [
    "Transpose",
    "Reshape",
    "Split",
    "Flatten",
    "Identity",
    "Squeeze",
    "Unsqueeze",
    "QuantizeLinear",
];

/// The ceilings of the graph's outputs, in output order, from the bytes of an ONNX file.
///
/// # Errors
/// The bytes are not an ONNX model (the parser's message).
pub fn output_ceilings(onnx_bytes: &[u8]) -> Result<Vec<OutputCeiling>, String> {
    let proto = tract_onnx::onnx()
        .proto_model_for_read(&mut &onnx_bytes[..])
        .map_err(|e| format!("{e}"))?;
    Ok(proto.graph.as_ref().map(graph_ceilings).unwrap_or_default())
}

/// The ceilings of the outputs of one graph.
pub fn graph_ceilings(g: &GraphProto) -> Vec<OutputCeiling> {
    g.output
        .iter()
        .map(|o| {
            let (max, set_by) = walk_back(g, &o.name);
            OutputCeiling {
                output: o.name.clone(),
                max,
                set_by,
            }
        })
        .collect()
}

fn walk_back(g: &GraphProto, output: &str) -> (Option<f32>, String) {
    let mut tensor = output.to_string();
    let mut sigmoids = 0;
    // A graph is acyclic; the bound only guards against a malformed file.
    for _ in 0..g.node.len() {
        let Some(node) = g.node.iter().find(|n| n.output.contains(&tensor)) else {
            return (None, String::new());
        };
        let range_max = match node.op_type.as_str() {
            "DequantizeLinear" => quantized_max(g, node, 1, 2),
            "QLinearConv" => quantized_max(g, node, 6, 7),
            "QLinearMatMul" => quantized_max(g, node, 6, 7),
            "Sigmoid" => {
                sigmoids += 1;
                None
            }
            op if PASS_THROUGH.contains(&op) => None,
            // Any other op computes in float: nothing quantized limits this output.
            _ => return (None, String::new()),
        };
        if let Some(mut m) = range_max {
            for _ in 0..sigmoids {
                m = 1.0 / (1.0 + (-m).exp());
            }
            let who = if node.name.is_empty() {
                node.op_type.clone()
            } else {
                format!("{} {}", node.op_type, node.name)
            };
            return (Some(m), who);
        }
        match node.input.first() {
            Some(i) => tensor = i.clone(),
            None => return (None, String::new()),
        }
    }
    (None, String::new())
}

/// `(q_max − zero_point) × scale` of a quantized tensor whose scale and zero point are the
/// node's inputs `scale_at` and `zp_at` (a missing zero point means u8 0, as in ONNX).
fn quantized_max(g: &GraphProto, node: &NodeProto, scale_at: usize, zp_at: usize) -> Option<f32> {
    let scale = node.input.get(scale_at).and_then(|n| initializer(g, n))?;
    let scale = scalar_f32(scale)?;
    let (q_max, zp) = match node.input.get(zp_at).filter(|n| !n.is_empty()) {
        Some(name) => {
            let zp = initializer(g, name)?;
            let signed = zp.data_type == 3; // INT8
            let v = scalar_int(zp)?;
            (if signed { 127.0 } else { 255.0 }, v as f32)
        }
        None => (255.0, 0.0),
    };
    Some((q_max - zp) * scale)
}

fn initializer<'g>(g: &'g GraphProto, name: &str) -> Option<&'g TensorProto> {
    g.initializer.iter().find(|t| t.name == name)
}

/// A one-element FLOAT tensor's value.
fn scalar_f32(t: &TensorProto) -> Option<f32> {
    if t.data_type != 1 {
        return None;
    }
    if let Some(v) = t.float_data.first() {
        return Some(*v);
    }
    let b = t.raw_data.get(..4)?;
    Some(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// A one-element INT8 / UINT8 tensor's value.
fn scalar_int(t: &TensorProto) -> Option<i32> {
    if let Some(v) = t.int32_data.first() {
        return Some(*v);
    }
    let b = *t.raw_data.first()?;
    Some(if t.data_type == 3 {
        b as i8 as i32
    } else {
        b as i32
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::ValueInfoProto;

    fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            name: format!("{op}_{output}"),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            ..NodeProto::default()
        }
    }

    fn f32_init(name: &str, v: f32) -> TensorProto {
        TensorProto {
            name: name.into(),
            data_type: 1,
            raw_data: v.to_le_bytes().to_vec(),
            ..TensorProto::default()
        }
    }

    fn i8_init(name: &str, v: i8) -> TensorProto {
        TensorProto {
            name: name.into(),
            data_type: 3,
            int32_data: vec![v as i32],
            ..TensorProto::default()
        }
    }

    fn graph(nodes: Vec<NodeProto>, inits: Vec<TensorProto>, outputs: &[&str]) -> GraphProto {
        GraphProto {
            node: nodes,
            initializer: inits,
            output: outputs
                .iter()
                .map(|o| ValueInfoProto {
                    name: o.to_string(),
                    ..ValueInfoProto::default()
                })
                .collect(),
            ..GraphProto::default()
        }
    }

    #[test]
    fn a_quantized_sigmoid_output_is_capped_at_127_times_its_scale() {
        // A quantized sigmoid output: logits (int8) → DQ → Sigmoid → Q → DQ → cls.
        let g = graph(
            vec![
                node("DequantizeLinear", &["logits_q", "s_in", "zp"], "logits"),
                node("Sigmoid", &["logits"], "score"),
                node("QuantizeLinear", &["score", "s_out", "zp"], "score_q"),
                node("DequantizeLinear", &["score_q", "s_out", "zp"], "cls_16"),
            ],
            vec![
                f32_init("s_in", 0.067),
                f32_init("s_out", 0.002_263_79),
                i8_init("zp", 0),
            ],
            &["cls_16"],
        );
        let c = graph_ceilings(&g);
        assert_eq!(c.len(), 1);
        let m = c[0].max.unwrap();
        assert!((m - 0.2875).abs() < 1e-3, "{m}");
        assert!(c[0].set_by.contains("DequantizeLinear"), "{:?}", c[0]);
    }

    #[test]
    fn a_float_sigmoid_on_dequantized_logits_can_reach_almost_one() {
        let g = graph(
            vec![
                node("DequantizeLinear", &["logits_q", "s_in", "zp"], "logits"),
                node("Split", &["logits"], "cls_logits"),
                node("Sigmoid", &["cls_logits"], "score"),
                node("Reshape", &["score", "shape"], "r"),
                node("Transpose", &["r"], "cls_8"),
            ],
            vec![f32_init("s_in", 0.0756), i8_init("zp", 0)],
            &["cls_8"],
        );
        let m = graph_ceilings(&g)[0].max.unwrap();
        // sigmoid(127 × 0.0756 = 9.6) = 0.99993
        assert!(m > 0.9999 && m < 1.0, "{m}");
    }

    #[test]
    fn float_outputs_have_no_ceiling_and_a_u8_range_uses_255_minus_zero_point() {
        let g = graph(
            vec![
                node("Conv", &["x", "w"], "logits"),
                node("Sigmoid", &["logits"], "cls_32"),
                node("DequantizeLinear", &["q", "s"], "reg_32"),
            ],
            vec![f32_init("s", 0.01)],
            &["cls_32", "reg_32"],
        );
        let c = graph_ceilings(&g);
        assert_eq!(c[0].max, None);
        assert_eq!(c[0].max_score(), 1.0);
        assert!((c[1].max.unwrap() - 2.55).abs() < 1e-5);
    }
}
