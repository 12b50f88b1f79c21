//! What lookout tells the world about objects: track start/end events in the journal,
//! optionally one JSON line per processed frame (`--tracks-out FILE`), and the one JSON form
//! of a detection ([`DetectionOut`]) that `lookout detect --json`, the tracks file and the
//! golden data (`models/golden/detections.json`) share.
//!
//! Journal field names (`LOOKOUT_EVENT`, `TRACK_ID`, `LABEL`, `SCORE`, `BOX`) and the JSON
//! keys (`label`, `class_id`, `score`, `box`; `seq`, `captured_at_ms`, `tracks`, `id`,
//! `detected`) are an interface: dashboards run `journalctl -o json | jq` against them.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::detect::{self, Detection};
use crate::geom::BBox;

/// One detection on the wire: an object of `lookout detect --json`
/// (`{"label":…,"class_id":…,"score":…,"box":[x0,y0,x1,y1]}`), the object part of a track in
/// the tracks file (without `class_id`), and an entry of the golden data
/// (`models/golden/detections.json`, read back by the self-check and the tests).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct DetectionOut {
    /// COCO label.
    pub label: String,
    /// Index into the label list; left out of the tracks file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_id: Option<usize>,
    /// Confidence 0..1.
    pub score: f32,
    /// `[x0, y0, x1, y1]` in pixels (image, frame or model input: the context says which).
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
}

impl DetectionOut {
    /// `lookout detect --json`'s form of a detection: with its class id, the score rounded to
    /// 4 decimals and the box to 0.1 px.
    pub fn of_detection(d: &Detection) -> DetectionOut {
        DetectionOut {
            label: detect::label(d.class_id),
            class_id: Some(d.class_id),
            score: round_to(d.score, 1e4),
            bbox: round_box(&d.bbox),
        }
    }

    /// A track's form in the tracks file: no class id, the score rounded to 3 decimals and the
    /// box to 0.1 px.
    pub fn of_track(class_id: usize, score: f32, bbox: &BBox) -> DetectionOut {
        DetectionOut {
            label: detect::label(class_id),
            class_id: None,
            score: round_to(score, 1e3),
            bbox: round_box(bbox),
        }
    }

    /// The box as a [`BBox`].
    pub fn to_bbox(&self) -> BBox {
        let [x0, y0, x1, y1] = self.bbox;
        BBox::new(x0, y0, x1, y1)
    }
}

/// One object in a frame, as written to the tracks file:
/// `{"id":…,"label":…,"score":…,"box":[…],"detected":…,"detected_seq":…}`.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct TrackOut {
    /// Stable track id.
    pub id: u64,
    /// Label, score of the last detection that matched the track, and the box in frame pixels.
    #[serde(flatten)]
    pub object: DetectionOut,
    /// True on the line where a detection's correction was applied to the box (in a live run
    /// that detection ran on an earlier frame: see `detected_seq`).
    pub detected: bool,
    /// The frame the latest detection matched to this track ran on: the age of the evidence
    /// behind the box is `seq − detected_seq` frames.
    pub detected_seq: u64,
}

/// One processed frame, as written to the tracks file.
#[derive(Serialize, Debug, Clone)]
pub struct FrameOut {
    /// Frame sequence number.
    pub seq: u64,
    /// Capture time in ms on the monotonic clock.
    pub captured_at_ms: f64,
    /// Objects in this frame.
    pub tracks: Vec<TrackOut>,
}

fn round_to(v: f32, scale: f32) -> f32 {
    (v * scale).round() / scale
}

fn round_box(b: &BBox) -> [f32; 4] {
    b.to_array().map(|v| round_to(v, 10.0))
}

/// Builds the output record of one track.
pub fn track_out(
    id: u64,
    class_id: usize,
    score: f32,
    bbox: &BBox,
    detected: bool,
    detected_seq: u64,
) -> TrackOut {
    TrackOut {
        id,
        object: DetectionOut::of_track(class_id, score, bbox),
        detected,
        detected_seq,
    }
}

/// Logs a track's start as a journal entry.
pub fn log_track_start(t: &TrackOut) {
    let o = &t.object;
    let bx = journal_box(o);
    log::info!(
        LOOKOUT_EVENT = "track_start", TRACK_ID = t.id, LABEL = o.label.as_str(), SCORE = format!("{:.3}", o.score).as_str(), BOX = bx.as_str();
        "track {} started: {} {:.2} at [{}]", t.id, o.label, o.score, bx
    );
}

/// Logs a track's end as a journal entry.
pub fn log_track_end(t: &TrackOut, frames: u64) {
    let o = &t.object;
    let bx = journal_box(o);
    log::info!(
        LOOKOUT_EVENT = "track_end", TRACK_ID = t.id, LABEL = o.label.as_str(), SCORE = format!("{:.3}", o.score).as_str(), BOX = bx.as_str(), TRACK_FRAMES = frames;
        "track {} ended: {} after {} frame(s), last at [{}]", t.id, o.label, frames, bx
    );
}

/// The journal's `BOX` field: `x0,y0,x1,y1` in whole pixels.
fn journal_box(o: &DetectionOut) -> String {
    let [x0, y0, x1, y1] = o.bbox;
    format!("{x0:.0},{y0:.0},{x1:.0},{y1:.0}")
}

/// Errors of the tracks file.
#[derive(Debug, thiserror::Error)]
#[error("tracks file {path}: {source}")]
pub struct TracksFileError {
    /// The file.
    pub path: PathBuf,
    /// What failed.
    pub source: std::io::Error,
}

/// A JSON Lines writer, one line per processed frame, flushed at each stats report and at
/// the end so a crash loses at most a few seconds.
pub struct TracksWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl TracksWriter {
    /// Creates (truncates) the file.
    pub fn create(path: &Path) -> Result<TracksWriter, TracksFileError> {
        let f = File::create(path).map_err(|source| TracksFileError {
            path: path.into(),
            source,
        })?;
        Ok(TracksWriter {
            path: path.into(),
            out: BufWriter::new(f),
        })
    }

    /// Appends one frame.
    pub fn write(&mut self, frame: &FrameOut) -> Result<(), TracksFileError> {
        let err = |source| TracksFileError {
            path: self.path.clone(),
            source,
        };
        serde_json::to_writer(&mut self.out, frame).map_err(|e| err(e.into()))?;
        self.out.write_all(b"\n").map_err(err)
    }

    /// Flushes buffered lines to the file.
    pub fn flush(&mut self) -> Result<(), TracksFileError> {
        self.out.flush().map_err(|source| TracksFileError {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_file_lines_are_valid_json_with_the_documented_keys() {
        let p = std::env::temp_dir().join(format!("lookout-tracks-{}.jsonl", std::process::id()));
        let mut w = TracksWriter::create(&p).unwrap();
        let t = track_out(7, 0, 0.8123, &BBox::new(1.04, 2.0, 30.0, 40.0), true, 5);
        w.write(&FrameOut {
            seq: 3,
            captured_at_ms: 12.5,
            tracks: vec![t],
        })
        .unwrap();
        w.flush().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(v["seq"], 3);
        assert_eq!(v["tracks"][0]["id"], 7);
        assert_eq!(v["tracks"][0]["label"], "person");
        assert_eq!(v["tracks"][0]["detected"], true);
        assert_eq!(v["tracks"][0]["detected_seq"], 5);
        assert_eq!(v["tracks"][0]["box"][0], 1.0);
        // The exact bytes: key order, rounding, no class_id.
        assert_eq!(
            text,
            "{\"seq\":3,\"captured_at_ms\":12.5,\"tracks\":[{\"id\":7,\"label\":\"person\",\"score\":0.812,\"box\":[1.0,2.0,30.0,40.0],\"detected\":true,\"detected_seq\":5}]}\n"
        );
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn detect_json_keeps_its_keys_and_rounding() {
        let d = Detection {
            class_id: 15,
            score: 0.441_055,
            bbox: BBox::new(0.234, 0.0, 414.401, 412.727),
        };
        assert_eq!(
            serde_json::to_string(&DetectionOut::of_detection(&d)).unwrap(),
            "{\"label\":\"cat\",\"class_id\":15,\"score\":0.4411,\"box\":[0.2,0.0,414.4,412.7]}"
        );
    }

    #[test]
    fn golden_data_parses_as_detections() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/golden/detections.json");
        let all: std::collections::BTreeMap<
            String,
            std::collections::BTreeMap<String, Vec<DetectionOut>>,
        > = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let chelsea = &all["nanodet-g-416-fp32.onnx"]["chelsea"];
        assert_eq!(chelsea[1].label, "cat");
        assert_eq!(chelsea[1].class_id, Some(15));
        assert_eq!(
            chelsea[1].to_bbox().to_array(),
            [0.235, 0.0, 414.401, 412.727]
        );
        assert!(all.values().flat_map(|m| m.values()).all(|v| v
            .iter()
            .all(|d| d.class_id.is_some_and(|c| detect::label(c) == d.label))));
    }
}
