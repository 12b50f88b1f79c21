//! What lookout tells the world about objects: track start/end events in the journal, and
//! optionally one JSON line per processed frame (`--tracks-out FILE`).
//!
//! Journal field names (`LOOKOUT_EVENT`, `TRACK_ID`, `LABEL`, `SCORE`, `BOX`) are an
//! interface: dashboards run `journalctl -o json | jq` against them.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::detect;
use crate::geom::BBox;

/// One object in a frame, as written to the tracks file.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct TrackOut {
    /// Stable track id.
    pub id: u64,
    /// COCO label.
    pub label: String,
    /// Score of the last detection that matched the track.
    pub score: f32,
    /// `[x0, y0, x1, y1]` in frame pixels.
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
    /// True when a detection on this very frame produced or corrected the box.
    pub detected: bool,
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

fn round_box(b: &BBox) -> [f32; 4] {
    b.to_array().map(|v| (v * 10.0).round() / 10.0)
}

/// Builds the output record of one track.
pub fn track_out(id: u64, class_id: usize, score: f32, bbox: &BBox, detected: bool) -> TrackOut {
    TrackOut {
        id,
        label: detect::label(class_id),
        score: (score * 1000.0).round() / 1000.0,
        bbox: round_box(bbox),
        detected,
    }
}

/// Logs a track's start as a journal entry.
pub fn log_track_start(t: &TrackOut) {
    let bx = format!(
        "{:.0},{:.0},{:.0},{:.0}",
        t.bbox[0], t.bbox[1], t.bbox[2], t.bbox[3]
    );
    log::info!(
        LOOKOUT_EVENT = "track_start", TRACK_ID = t.id, LABEL = t.label.as_str(), SCORE = format!("{:.3}", t.score).as_str(), BOX = bx.as_str();
        "track {} started: {} {:.2} at [{}]", t.id, t.label, t.score, bx
    );
}

/// Logs a track's end as a journal entry.
pub fn log_track_end(t: &TrackOut, frames: u64) {
    let bx = format!(
        "{:.0},{:.0},{:.0},{:.0}",
        t.bbox[0], t.bbox[1], t.bbox[2], t.bbox[3]
    );
    log::info!(
        LOOKOUT_EVENT = "track_end", TRACK_ID = t.id, LABEL = t.label.as_str(), SCORE = format!("{:.3}", t.score).as_str(), BOX = bx.as_str(), TRACK_FRAMES = frames;
        "track {} ended: {} after {} frame(s), last at [{}]", t.id, t.label, frames, bx
    );
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
        let t = track_out(7, 0, 0.8123, &BBox::new(1.04, 2.0, 30.0, 40.0), true);
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
        assert_eq!(v["tracks"][0]["box"][0], 1.0);
        let _ = std::fs::remove_file(p);
    }
}
