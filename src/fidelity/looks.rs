//! Zoomed looks, replayed: the model run on a tile of the frame (a part of it, at the model's
//! input size, so its objects are larger for the model than in a whole-frame detection) on
//! frames between full detections. [`record_looks`] runs the model on every tile of every
//! frame once; [`LookPlanner`] picks, frame by frame, whether a look is due and which tile;
//! [`super::replay::simulate_with_looks`] hands the tile's detections to the tracker
//! ([`crate::track::Tracker::apply_look`]).

use std::time::{Duration, Instant};

use super::RecordError;
use crate::config::Config;
use crate::detect::Detector;
use crate::geom::BBox;
use crate::preprocess::{self, Scratch};
use crate::track::Tracker;
use crate::vocab::DetectionRound;

/// Neighbouring tiles overlap by at least this many frame pixels, so that an object on a seam
/// is whole in one of them.
pub const MIN_OVERLAP: u32 = 48;

/// A detection within this many pixels of a tile's edge inside the frame was cut by it, and
/// is dropped (the neighbouring tile sees it whole).
const CUT_EDGE: f32 = 2.0;

/// Tracks under this many pixels tall draw targeted looks ([`LookPlanner`]).
pub const SMALL_TRACK: f32 = 64.0;

/// The tiles of a `frame` covered by `tile`-sized parts, spread evenly with at least
/// [`MIN_OVERLAP`] between neighbours, row by row (one tile when the tile covers the frame).
pub fn tiles(frame: (u32, u32), tile: (u32, u32)) -> Vec<BBox> {
    let axis = |full: u32, part: u32| -> Vec<f32> {
        let part = part.min(full);
        if part >= full {
            return vec![0.0];
        }
        let step = part.saturating_sub(MIN_OVERLAP).max(1);
        let n = (full - part).div_ceil(step) + 1;
        (0..n)
            .map(|i| ((full - part) as f32 * i as f32 / (n - 1) as f32).round())
            .collect()
    };
    let (tw, th) = (tile.0.min(frame.0) as f32, tile.1.min(frame.1) as f32);
    let mut out = Vec::new();
    for y in axis(frame.1, tile.1) {
        for x in axis(frame.0, tile.0) {
            out.push(BBox::new(x, y, x + tw, y + th));
        }
    }
    out
}

/// Every tile's detections on every frame of a source.
#[derive(Clone, Debug, Default)]
pub struct LookRecording {
    /// The tiles, in frame pixels.
    pub tiles: Vec<BBox>,
    /// By frame, by tile: the detections (frame pixels; those the tile's inner edges cut
    /// dropped).
    pub rounds: Vec<Vec<DetectionRound>>,
    /// Tile → tensor, model and decoding, summed over every look.
    pub look_time: Duration,
    /// The model's input size for a tile.
    pub input: (u32, u32),
}

impl LookRecording {
    /// Mean time of one look.
    pub fn look_ms(&self) -> f64 {
        let n: usize = self.rounds.iter().map(Vec::len).sum();
        self.look_time.as_secs_f64() * 1e3 / n.max(1) as f64
    }
}

/// Runs `det` (loaded at the tile's input size) on each `tile`-sized part of every frame of
/// `spec` (at most `max_frames`); `cfg`'s thresholds, resize mode and label filter apply.
pub fn record_looks(
    det: &Detector,
    cfg: &Config,
    spec: &str,
    tile: (u32, u32),
    max_frames: Option<usize>,
) -> Result<LookRecording, RecordError> {
    let src_err = RecordError::of_source(spec);
    let mut src = super::open_recording(spec)?;
    let labels = cfg.label_filter();
    let floor = cfg.detection_floor();
    let (iw, ih) = (det.info().input_w, det.info().input_h);
    let mut input = det.new_input();
    let mut scratch = Scratch::default();
    // The model's outputs, reused from frame to frame as the daemon's detector does.
    let mut raw = crate::detect::RawOutputs::default();
    let mut rec = LookRecording {
        input: (iw, ih),
        ..LookRecording::default()
    };
    let mut crop = Vec::new();
    while let Some(frame) = src.next().map_err(&src_err)? {
        if max_frames.is_some_and(|m| rec.rounds.len() >= m) {
            break;
        }
        let frame_err = |e: preprocess::PreprocessError| RecordError::Frame {
            seq: frame.seq,
            message: e.to_string(),
        };
        if rec.tiles.is_empty() {
            rec.tiles = tiles((frame.width, frame.height), tile);
        }
        let rgb = preprocess::frame_to_rgb(&frame, &mut scratch).map_err(frame_err)?;
        let frame_box = BBox::new(0.0, 0.0, frame.width as f32, frame.height as f32);
        let mut rounds = Vec::with_capacity(rec.tiles.len());
        for t in &rec.tiles {
            let t0 = Instant::now();
            let (x0, y0) = (t.x0 as usize, t.y0 as usize);
            let (w, h) = (t.width() as usize, t.height() as usize);
            crop.clear();
            for row in rgb.chunks_exact(frame.width as usize * 3).skip(y0).take(h) {
                crop.extend_from_slice(&row[x0 * 3..(x0 + w) * 3]);
            }
            let map = preprocess::rgb_to_input(
                &crop,
                w as u32,
                h as u32,
                iw,
                ih,
                cfg.model.resize,
                &mut input,
            )
            .map_err(frame_err)?;
            det.run_input_into(&input, &mut raw)?;
            let mut round = det.detect_round(&raw, &map, floor, labels.as_deref());
            for list in [&mut round.reported, &mut round.weak] {
                for d in list.iter_mut() {
                    d.bbox = BBox::new(
                        d.bbox.x0 + t.x0,
                        d.bbox.y0 + t.y0,
                        d.bbox.x1 + t.x0,
                        d.bbox.y1 + t.y0,
                    );
                }
                list.retain(|d| !cut(&d.bbox, t, &frame_box));
            }
            rec.look_time += t0.elapsed();
            rounds.push(round);
        }
        rec.rounds.push(rounds);
    }
    Ok(rec)
}

/// True when `b` touches an edge of `tile` that lies inside the frame (so the tile's edge,
/// not the object's, may have ended the box).
fn cut(b: &BBox, tile: &BBox, frame: &BBox) -> bool {
    (tile.x0 > frame.x0 && b.x0 <= tile.x0 + CUT_EDGE)
        || (tile.y0 > frame.y0 && b.y0 <= tile.y0 + CUT_EDGE)
        || (tile.x1 < frame.x1 && b.x1 >= tile.x1 - CUT_EDGE)
        || (tile.y1 < frame.y1 && b.y1 >= tile.y1 - CUT_EDGE)
}

/// How the tile of a look is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookChoice {
    /// Every tile in turn.
    RoundRobin,
    /// Every other look the tile holding the most tracks under [`SMALL_TRACK`] pixels tall
    /// (tentative ones too), the others in turn.
    Targeted,
}

/// When a look is due and on which tile: a look `gap` frames after the last detection or
/// look, never on a detection frame.
#[derive(Clone, Debug)]
pub struct LookPlanner {
    gap: u32,
    choice: LookChoice,
    since: u32,
    looks: u64,
    last_looked: Vec<u64>,
}

impl LookPlanner {
    /// A planner of looks every `gap` frames (≥ 1) after a detection or a look.
    pub fn new(gap: u32, choice: LookChoice) -> Self {
        LookPlanner {
            gap: gap.max(1),
            choice,
            since: 0,
            looks: 0,
            last_looked: Vec::new(),
        }
    }

    /// A full detection ran on this frame.
    pub fn detected(&mut self) {
        self.since = 0;
    }

    /// On a frame without a detection: the tile to look at, if a look is due.
    pub fn decide(&mut self, t: &Tracker, tiles: &[BBox]) -> Option<usize> {
        self.since += 1;
        if self.since < self.gap || tiles.is_empty() {
            return None;
        }
        self.since = 0;
        self.looks += 1;
        self.last_looked.resize(tiles.len(), 0);
        let oldest = |v: &[u64]| (0..v.len()).min_by_key(|&i| v[i]).unwrap_or(0);
        let pick = match self.choice {
            LookChoice::Targeted if self.looks % 2 == 1 => {
                let small: Vec<usize> = tiles
                    .iter()
                    .map(|tile| {
                        t.all_boxes()
                            .filter(|b| b.height() < SMALL_TRACK && b.share_inside(tile) >= 0.7)
                            .count()
                    })
                    .collect();
                let best = small.iter().copied().max().unwrap_or(0);
                if best == 0 {
                    oldest(&self.last_looked)
                } else {
                    (0..tiles.len())
                        .filter(|&i| small[i] == best)
                        .min_by_key(|&i| self.last_looked[i])
                        .unwrap_or(0)
                }
            }
            _ => oldest(&self.last_looked),
        };
        self.last_looked[pick] = self.looks;
        Some(pick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_the_frame_with_overlap() {
        let t = tiles((640, 480), (352, 288));
        assert_eq!(t.len(), 4);
        assert_eq!(t[0], BBox::new(0.0, 0.0, 352.0, 288.0));
        assert_eq!(t[3], BBox::new(288.0, 192.0, 640.0, 480.0));
        let t = tiles((640, 480), (320, 240));
        // 320 − 48 = 272 per step: 3 columns, 3 rows.
        assert_eq!(t.len(), 9);
        assert_eq!(tiles((640, 480), (640, 480)).len(), 1);
        assert_eq!(
            tiles((640, 480), (800, 600)),
            vec![BBox::new(0.0, 0.0, 640.0, 480.0)]
        );
    }

    #[test]
    fn boxes_on_inner_edges_are_cut() {
        let frame = BBox::new(0.0, 0.0, 640.0, 480.0);
        let tile = BBox::new(288.0, 0.0, 640.0, 288.0);
        assert!(cut(&BBox::new(289.0, 10.0, 300.0, 50.0), &tile, &frame));
        assert!(cut(&BBox::new(400.0, 250.0, 420.0, 287.0), &tile, &frame));
        // The frame's own edges do not cut.
        assert!(!cut(&BBox::new(600.0, 0.0, 640.0, 50.0), &tile, &frame));
        assert!(!cut(&BBox::new(300.0, 10.0, 320.0, 50.0), &tile, &frame));
    }
}
