//! `lookout bench --sweep fidelity`'s tables: one row per schedule (coverage, id switches, cost),
//! where the misses are, and the scores against a ground truth.

use std::fmt::Write as _;

use crate::bench;

/// The fidelity sweep as a Markdown table (one row per schedule) with what its words mean.
pub fn render_fidelity(f: &bench::FidelityReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "lockstep: every frame is tracked and each detection a schedule asks for is applied before the next frame (a live run gets it a few frames later)."
    );
    let _ = writeln!(
        o,
        "reference: the model's detections on every frame ({} in {} frames); covered = a confirmed track of the same or a confusable class at IoU ≥ 0.5; id switches are counted against the N = 1 tracks (CLEAR MOT: a track still on its object at IoU ≥ 0.5 keeps it).",
        f.reference_detections, f.frames
    );
    o.push('\n');
    let _ = writeln!(
        o,
        "| schedule | coverage of every-frame detections | id switches / 100 track-frames | detections / frame | detections by cause | CPU ms / frame | CPU vs N=1 |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    for r in &f.rows {
        let c = &r.causes;
        let _ = writeln!(
            o,
            "| {} | {:.1} % ({}/{}) | {:.2} ({} in {}) | {:.2} | {} | {:.1} | {:.2} |",
            schedule_name(r),
            100.0 * r.coverage,
            r.covered,
            f.reference_detections,
            r.id_switches_per_100,
            r.id_switches,
            r.matched_track_frames,
            r.detections_per_frame,
            if r.schedule == "fixed" {
                format!("{} every {}", c.interval, r.detect_every)
            } else {
                format!(
                    "{} motion, {} uncertain, {} interval, {} idle",
                    c.motion, c.uncertain, c.interval, c.idle
                )
            },
            r.cpu_ms_per_frame,
            r.cpu_vs_n1
        );
    }
    let _ = writeln!(
        o,
        "(CPU ms / frame: gray plane + tracker as replayed + {:.1} ms per detection × detections per frame; adaptive idle heartbeat {} s)",
        f.detect_ms, f.idle_detect_interval_s
    );
    o.push('\n');
    render_misses(&mut o, f);
    render_truth(&mut o, f);
    o
}

/// The rows' events, and their scores against the ground truth of `--truth`.
fn render_truth(o: &mut String, f: &bench::FidelityReport) {
    let Some(file) = &f.truth_file else {
        let events: Vec<String> = f
            .rows
            .iter()
            .map(|r| format!("{} {}", schedule_name(r), r.events))
            .collect();
        let _ = writeln!(
            o,
            "\nevents started: {} (score them against a ground truth with --truth FILE)",
            events.join(", ")
        );
        return;
    };
    let _ = writeln!(
        o,
        "\nagainst the ground truth {file}: an event is about the true object its box was on most often (IoU ≥ 0.3); missed = an object seen ≥ 2 s and ≥ 20 px tall that no event's box was ever on."
    );
    truth_header(o, "schedule");
    for r in &f.rows {
        let Some(t) = &r.truth else { continue };
        let _ = writeln!(o, "| {} | {} |", schedule_name(r), truth_cells(t));
    }
    let _ = writeln!(
        o,
        "\nsplits, misses and false events by id (truth ids; event ids as in the replay; JSON: truth.objects_detail):"
    );
    for r in &f.rows {
        let Some(t) = &r.truth else { continue };
        let _ = writeln!(o, "  {}: {}", schedule_name(r), object_notes(t));
    }
}

/// The objects of `t` that got more than one event or none they needed, and the false
/// events: `object 3: events 4, 9; object 7: missed; false: 12`.
fn object_notes(t: &bench::report::TruthScores) -> String {
    let join = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let mut notes: Vec<String> = t
        .objects_detail
        .iter()
        .filter_map(|ob| {
            if ob.to_find && ob.first_event_frame.is_none() {
                Some(format!("object {}: missed", ob.id))
            } else if ob.events.len() > 1 {
                Some(format!("object {}: events {}", ob.id, join(&ob.events)))
            } else {
                None
            }
        })
        .collect();
    if !t.false_event_ids.is_empty() {
        notes.push(format!("false: {}", join(&t.false_event_ids)));
    }
    if notes.is_empty() {
        "one event per object, none missed, none false".to_string()
    } else {
        notes.join("; ")
    }
}

/// The header of a truth-scores table whose first column is `first`.
fn truth_header(o: &mut String, first: &str) {
    let _ = writeln!(
        o,
        "\n| {first} | true objects | events | events per object (max) | false events | missed | time to event p50 / p90 | box recall / precision | IDF1 |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
}

/// A truth-scores table row after its first cell.
fn truth_cells(t: &bench::report::TruthScores) -> String {
    let secs = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1} s"));
    format!(
        "{} | {} | {:.2} ({}) | {} ({:.1} %) | {} of {} | {} / {} | {:.2} / {:.2} | {:.2}",
        t.objects,
        t.events,
        t.events_per_object,
        t.events_per_object_max,
        t.false_events,
        100.0 * t.false_event_share,
        t.missed,
        t.objects_to_find,
        secs(t.time_to_event_p50_s),
        secs(t.time_to_event_p90_s),
        t.recall,
        t.precision,
        t.idf1
    )
}

/// A timed run's cameras scored against their ground truths (`--truth` without a sweep).
pub fn render_run_truth(o: &mut String, run: &bench::RunFigures) {
    if run.cameras.iter().all(|c| c.truth.is_none()) {
        return;
    }
    let _ = writeln!(
        o,
        "\nwhat each camera's run found, against its ground truth (frames it skipped count as frames with no track):"
    );
    truth_header(o, "camera (ground truth)");
    for c in &run.cameras {
        if let (Some(t), Some(file)) = (&c.truth, &c.truth_file) {
            let _ = writeln!(o, "| {} ({file}) | {} |", c.name, truth_cells(t));
        }
    }
}

/// A fidelity row's schedule as the tables name it: `N = 5`, `adaptive (≤ 5)`.
fn schedule_name(r: &bench::FidelityRow) -> String {
    match r.schedule.as_str() {
        "fixed" => format!("N = {}", r.detect_every),
        s => format!("{s} (≤ {})", r.detect_every),
    }
}

/// The fidelity rows' uncovered reference detections by what the last detection saw.
fn render_misses(o: &mut String, f: &bench::FidelityReport) {
    let _ = writeln!(
        o,
        "where the misses are — by what the last detection at or before the missed frame saw of the object (the same object: IoU ≥ 0.3):"
    );
    let _ = writeln!(
        o,
        "| schedule | missed | not reported by it (new, or missed by the model then) | seen by it only below the threshold | reported by it; no track's box on it now | reported by it; the model's box jumped on this frame (a track is where it was before and after) | a track on it with another label | on a detection frame |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    for r in f
        .rows
        .iter()
        .filter(|r| r.detect_every > 1 || r.schedule != "fixed")
    {
        let m = &r.misses;
        let missed = f.reference_detections.saturating_sub(r.covered);
        let share = |n: u64| {
            if missed == 0 {
                format!("{n}")
            } else {
                format!("{n} ({:.0} %)", 100.0 * n as f64 / missed as f64)
            }
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            schedule_name(r),
            missed,
            share(m.unreported),
            share(m.weak),
            share(m.moved),
            share(m.jumped),
            share(m.label),
            share(m.at_detection)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{ObjectEvents, TruthScores};

    fn object(id: u64, events: Vec<u64>, first: Option<u64>) -> ObjectEvents {
        ObjectEvents {
            id,
            first_frame: 1,
            scored_frames: 40,
            tallest_px: 80.0,
            to_find: true,
            events,
            first_event_frame: first,
        }
    }

    #[test]
    fn object_notes_name_splits_misses_and_false_events() {
        let mut t = TruthScores {
            objects_detail: vec![
                object(1, vec![2], Some(3)),
                object(2, vec![4, 9], Some(5)),
                // An event was on it for a while but about another object: not missed.
                object(3, Vec::new(), Some(12)),
                object(4, Vec::new(), None),
                ObjectEvents {
                    to_find: false,
                    ..object(5, Vec::new(), None)
                },
            ],
            false_event_ids: vec![7],
            ..TruthScores::default()
        };
        assert_eq!(
            object_notes(&t),
            "object 2: events 4, 9; object 4: missed; false: 7"
        );
        t.objects_detail.truncate(1);
        t.false_event_ids.clear();
        assert_eq!(
            object_notes(&t),
            "one event per object, none missed, none false"
        );
    }
}
