//! `lookout bench --sweep input-size`'s table: one row per input size — its cost, what the
//! model finds by object height and what it invents, and the events against the truth.

use std::fmt::Write as _;

use crate::bench::report::{HeightRecall, InputSizeReport, TruthScores};

/// The input-size sweep as a Markdown table with what its words mean.
pub fn render_input_size(r: &InputSizeReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "the model file declares {}x{}; input_size = \"auto\" gives {}x{} for these {}x{} frames.",
        r.declared[0], r.declared[1], r.auto[0], r.auto[1], r.frame_width, r.frame_height
    );
    o.push('\n');
    let _ = writeln!(
        o,
        "| input | scale | padding | model ms | × {}x{} | recall < 24 px | 24–48 px | > 48 px | all | false boxes / frame | events / object (fixed, adaptive) | missed | false events |",
        r.declared[0], r.declared[1]
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &r.rows {
        let mark = if [row.width, row.height] == r.auto {
            " (auto)"
        } else {
            ""
        };
        let d = row.detections.as_ref();
        let (f, a) = (row.events_fixed.as_ref(), row.events_adaptive.as_ref());
        let _ = writeln!(
            o,
            "| {}x{}{mark} | {:.3} | {:.0} % | {:.1} | {:.2} | {} | {} | {} | {} | {} | {}, {} | {} | {} |",
            row.width,
            row.height,
            row.scale,
            100.0 * row.padding,
            row.model_ms,
            row.model_vs_declared,
            recall(d.map(|d| &d.small)),
            recall(d.map(|d| &d.middle)),
            recall(d.map(|d| &d.large)),
            recall(d.map(|d| &d.all)),
            d.map_or("–".into(), |d| format!("{:.2}", d.false_boxes_per_frame)),
            per_object(f),
            per_object(a),
            pair(f, a, |t| format!("{}/{}", t.missed, t.objects_to_find)),
            pair(f, a, |t| t.false_events.to_string()),
        );
    }
    let _ = writeln!(
        o,
        "(model ms: the network alone, median of {} interleaved rounds on the same frames; recall: scored true boxes a reported detection matches at IoU ≥ 0.5, by the true box's height in the frame; false boxes: reported detections of the event labels on no true box; events: the configured fixed interval and the adaptive schedule replayed from each size's recording)",
        r.timing_rounds
    );
    o
}

fn recall(h: Option<&HeightRecall>) -> String {
    match h {
        Some(HeightRecall {
            boxes,
            found,
            recall: Some(r),
        }) => format!("{:.1} % ({found}/{boxes})", 100.0 * r),
        Some(_) => "no boxes".into(),
        None => "–".into(),
    }
}

fn per_object(t: Option<&TruthScores>) -> String {
    t.map_or("–".into(), |t| format!("{:.2}", t.events_per_object))
}

fn pair(
    f: Option<&TruthScores>,
    a: Option<&TruthScores>,
    show: impl Fn(&TruthScores) -> String,
) -> String {
    match (f, a) {
        (Some(f), Some(a)) => format!("{}, {}", show(f), show(a)),
        _ => "–".into(),
    }
}
