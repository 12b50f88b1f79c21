//! Cheap tracking on every frame, reconciled with late detections.
//!
//! The detector runs every few frames and its results arrive late: detections for frame `k`
//! come in while the tracker is already at frame `k + m`. The [`Tracker`] therefore does two
//! things, both synchronous and thread-free (only the pipeline knows about threads):
//!
//! * [`Tracker::step`] runs on **every** frame: each track's constant-velocity Kalman filter
//!   ([`motion`]) predicts where the object is, and a median-flow visual update on the
//!   grayscale plane ([`visual`]) measures where it went. Each track records its box per frame
//!   in a short history ([`assoc::History`]).
//! * [`Tracker::apply_detections`] takes detections made on an older frame `k`, associates them
//!   with the tracks' boxes *as they were at `k`* (IoU + Hungarian assignment, [`assoc`]), and
//!   carries each correction forward to the current frame: the offset between the detection
//!   and the track's box at `k` is applied to the track's current box. Each pair's IoU is
//!   weighed by how alike the detection's box and the track's object look (brightness bands,
//!   [`appearance`]), and a detection that looks clearly unlike a track's object is never
//!   paired with it: where people cross, a track otherwise takes whoever stands in its place.
//!
//! Lifecycle: an unmatched detection starts a *tentative* track; after `confirm_hits` matched
//! detections (or at once, for a fresh detection scoring at least `confirm_score`) it is
//! *confirmed*, gets the next id (1, 2, 3… without gaps — tentatives that
//! die never consume one) and a [`TrackEvent::Started`]. Confirmed tracks end after
//! `max_misses` detection rounds without a match, `max_age_frames` frames without any, when
//! they leave the frame or when the visual update keeps failing, with a
//! [`TrackEvent::Ended`]. Only confirmed tracks are reported. One exception to a new id: a
//! track confirmed right next to a confirmed track of the same (or a confusable) class that
//! went unmatched in a detection round is taken to be that track's object, found again after
//! its box drifted off: it continues that track's id, and neither gets an event.
//!
//! Boxes are in full-frame pixels throughout; the gray plane's `scale` converts for the
//! visual update.

pub mod appearance;
pub mod assoc;
pub mod cadence;
pub mod config;
pub mod motion;
pub mod visual;

pub use config::{KalmanConfig, TrackConfigError, TrackerConfig, VisualConfig};

use crate::frame::GrayImage;
use crate::geom::BBox;
use crate::vocab::{Detection, DetectionRound};
use appearance::{affinity, Appearance, DetectionLook};
use assoc::{Candidate, History};
use cadence::Cadence;
use motion::{BoxKalman, KalmanParams};
use visual::{MedianFlow, Pyramid};

/// A tracked object as users see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Track {
    /// Stable id, 1, 2, 3… in order of confirmation (0 only inside the tracker while
    /// tentative; never reported).
    pub id: u64,
    /// Class id of the detections (index into the model's labels).
    pub class_id: usize,
    /// Score of the latest matched reported detection (a weak detection that keeps the track,
    /// `continue_score`, does not change it).
    pub score: f32,
    /// Box in full-frame pixels at frame `seq`.
    pub bbox: BBox,
    /// Velocity of the box centre, full-frame pixels per frame.
    pub velocity: (f32, f32),
    /// The frame `bbox` is for (the tracker's current frame).
    pub seq: u64,
    /// The frame the track was started at.
    pub first_seq: u64,
    /// True when a detection was applied to the track at this frame `seq` (since it was
    /// stepped); the detection itself may have run on an earlier frame, `detected_seq`.
    pub detected: bool,
    /// The frame the latest detection matched to the track ran on.
    pub detected_seq: u64,
    /// Frames since the track started.
    pub age_frames: u64,
    /// Detections matched so far (the first one included).
    pub hits: u32,
    /// Consecutive detection rounds without a match.
    pub misses: u32,
    /// Frames since the frame of the last matched detection.
    pub frames_since_detection: u64,
    /// Whether the visual update succeeded on the latest frame.
    pub visual_ok: bool,
    /// Why the track ended; set only in [`TrackEvent::Ended`].
    pub end_reason: Option<EndReason>,
}

/// Why a track ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndReason {
    /// `max_misses` detection rounds in a row without a match.
    Missed,
    /// `max_age_frames` frames without a matched detection.
    Expired,
    /// Too little of the box is left inside the frame.
    LeftFrame,
    /// The visual update failed `max_visual_failures` frames in a row.
    LostVisually,
    /// [`Tracker::reset`] was called (e.g. the camera was lost) or the frame sequence restarted.
    Reset,
}

impl EndReason {
    /// A stable lower-case name for logs and the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Missed => "missed",
            EndReason::Expired => "expired",
            EndReason::LeftFrame => "left_frame",
            EndReason::LostVisually => "lost_visually",
            EndReason::Reset => "reset",
        }
    }
}

/// Something that happened to a confirmed track.
#[derive(Clone, Debug, PartialEq)]
pub enum TrackEvent {
    /// The track was confirmed (it has just got its id).
    Started(Track),
    /// The track ended; the track carries its last box and `end_reason`.
    Ended(Track),
}

/// What one call of [`Tracker::apply_detections`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// Detections matched to existing tracks.
    pub matched: usize,
    /// Detections that started tentative tracks.
    pub started: usize,
    /// Existing tracks that went unmatched.
    pub missed: usize,
    /// Detections skipped: a class not tracked, or an empty or non-finite box.
    pub ignored: usize,
    /// Tracks kept by a weak detection (below the reporting threshold) in the round.
    pub continued: usize,
}

/// A detection at most this many frames older than the tracker's frame may confirm a new
/// track on its own (`confirm_score`).
const FRESH_FRAMES: u64 = 1;
/// Detection rounds a tentative track may go unmatched before it is dropped: one miss is
/// forgiven, since weak detections of small, distant objects flicker from round to round.
const TENTATIVE_MISSES: u32 = 2;
/// A box is treated as possibly occluded when more than this fraction of its area lies under
/// another track's box.
const OCCLUSION_OVERLAP: f32 = 0.2;
/// Visual measurements farther than this many standard deviations from the motion model's
/// prediction are rejected as false matches (see [`BoxKalman::gate_distance`]).
const GATE: f32 = 6.0;
/// The same for possibly occluded tracks (the 95 % quantile of a 2-D Gaussian is 2.45 σ).
const OCCLUDED_GATE: f32 = 2.5;
/// A newly confirmed track continues a confirmed track that missed its object
/// (`Tracker::predecessor_of`) when its first detection was at most this far from that track's
/// box, in box widths (heights, vertically). Measured with the fidelity replay on the bundled
/// clip: 0.75 left more id switches at N = 5 (0.91 / 100 against 0.74), 1.5 changed nothing.
const HANDOVER_DISTANCE: f32 = 1.0;

/// Detections at most this many frames older than the latest frame have their look taken in
/// it.
const LOOK_LAG: u64 = 2;

/// The visual search covers this many standard deviations of the motion model's uncertainty
/// (at least `MIN_SEARCH_RADIUS` gray pixels, at most `visual.search_radius`).
const SEARCH_SIGMAS: f32 = 3.0;
const MIN_SEARCH_RADIUS: f32 = 2.0;

/// A track with everything the tracker keeps about it.
#[derive(Clone, Debug)]
struct TrackState {
    public: Track,
    confirmed: bool,
    /// The earliest detection frame this track may be associated with: the frame of its first
    /// detection (detections of older frames cannot be this object's).
    birth_seq: u64,
    kf: BoxKalman,
    history: History,
    visual_failures: u32,
    dead: Option<EndReason>,
    /// Summed detection scores per class (confusable classes share a track): the label is
    /// the class with the most.
    votes: Vec<(usize, f32)>,
    /// The latest detection applied to this track: (its frame, its index in that call).
    last_det: Option<(u64, usize)>,
    /// The track's id went on in a newly confirmed track (`Tracker::predecessor_of`): it is removed
    /// without a `TrackEvent::Ended`.
    handed_over: bool,
    /// What its object looks like: learned from the detections matched to it that no other
    /// detection covered ([`Appearance::learn`]).
    look: Option<Appearance>,
}

impl TrackState {
    /// Adds a detection's vote and relabels the track by the votes (the current label wins
    /// ties, so a label changes only when the vote flips).
    fn vote(&mut self, class_id: usize, score: f32) {
        match self.votes.iter_mut().find(|v| v.0 == class_id) {
            Some(v) => v.1 += score,
            None => self.votes.push((class_id, score)),
        }
        let current = self.public.class_id;
        let held = self
            .votes
            .iter()
            .find(|v| v.0 == current)
            .map_or(0.0, |v| v.1);
        if let Some(best) = self.votes.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
            if best.1 > held {
                self.public.class_id = best.0;
            }
        }
    }
}

/// The multi-object tracker. See the module documentation.
#[derive(Clone, Debug)]
pub struct Tracker {
    cfg: TrackerConfig,
    classes: Vec<usize>,
    kalman: KalmanParams,
    flow: MedianFlow,
    /// Pyramid of the previous frame, and scratch for the current one.
    prev: Pyramid,
    cur: Pyramid,
    prev_valid: bool,
    prev_scale: f32,
    /// Full-frame size of the latest frame, if its gray plane was usable.
    frame_size: Option<(f32, f32)>,
    seq: Option<u64>,
    tracks: Vec<TrackState>,
    /// Scratch: every track's box before the current step.
    boxes: Vec<BBox>,
    output: Vec<Track>,
    events: Vec<TrackEvent>,
    next_id: u64,
    /// How often and how late detections arrive (stretches `max_age_frames` on slow boards).
    cadence: Cadence,
}

impl Tracker {
    /// A tracker with no tracks. Fails if the configuration does not validate.
    pub fn new(cfg: TrackerConfig) -> Result<Tracker, TrackConfigError> {
        cfg.validate()?;
        let classes = cfg.class_ids()?;
        Ok(Tracker {
            kalman: cfg.kalman_params(),
            flow: MedianFlow::new(cfg.visual_params()),
            classes,
            cfg,
            prev: Pyramid::new(),
            cur: Pyramid::new(),
            prev_valid: false,
            prev_scale: 0.0,
            frame_size: None,
            seq: None,
            tracks: Vec::new(),
            boxes: Vec::new(),
            output: Vec::new(),
            events: Vec::new(),
            next_id: 1,
            cadence: Cadence::default(),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &TrackerConfig {
        &self.cfg
    }

    /// The latest frame stepped, if any since the start or the last reset.
    pub fn seq(&self) -> Option<u64> {
        self.seq
    }

    /// Confirmed tracks, by id.
    pub fn tracks(&self) -> impl Iterator<Item = &Track> {
        self.output.iter()
    }

    /// Confirmed tracks, by id, as a slice.
    pub fn confirmed(&self) -> &[Track] {
        &self.output
    }

    /// True when a fresh detection would help now: a track's visual update failed on the
    /// latest frame, or a tentative track waits for confirmation.
    pub fn needs_detection(&self) -> bool {
        self.tracks
            .iter()
            .any(|t| !t.confirmed || (self.cfg.visual.enabled && t.visual_failures > 0))
    }

    /// The boxes of every live track at the current frame, tentative ones included (what
    /// motion inside them is explained by).
    pub fn all_boxes(&self) -> impl Iterator<Item = BBox> + '_ {
        self.tracks.iter().map(|t| t.public.bbox)
    }

    /// True when a confirmed track needs fresh evidence soon: its visual update failed on the
    /// latest frame (the adaptive schedule's `Uncertain` cause). Tentative tracks do not count:
    /// a confident detection confirms at once (`confirm_score`), and the weak ones that stay
    /// tentative asked for detections every few frames without gaining coverage (measured
    /// with the fidelity replay on the bundled clip).
    pub fn uncertain(&self) -> bool {
        self.cfg.visual.enabled
            && self
                .tracks
                .iter()
                .any(|t| t.confirmed && t.visual_failures > 0)
    }

    /// Events since the last call, in order.
    pub fn drain_events(&mut self) -> Vec<TrackEvent> {
        std::mem::take(&mut self.events)
    }

    /// Advances every track to frame `seq` using the grayscale plane `gray` of that frame, and
    /// returns the confirmed tracks (by id).
    ///
    /// A frame with an unusable gray plane (empty, size not matching its data, bad scale)
    /// still advances the tracks by their motion model. A `seq` not after the previous one
    /// means the source restarted: every track ends ([`EndReason::Reset`]) first. The same
    /// `seq` twice is ignored.
    pub fn step(&mut self, seq: u64, gray: &GrayImage) -> &[Track] {
        let dt = match self.seq {
            Some(last) if seq == last => return &self.output,
            Some(last) if seq < last => {
                self.reset();
                1
            }
            Some(last) => seq - last,
            None => 1,
        };
        self.seq = Some(seq);

        let scale = gray.scale;
        let scale_ok = scale.is_finite() && scale > 0.0;
        let patch = self.cfg.visual.patch_size as usize;
        let levels = self.flow.params().levels;
        let valid = scale_ok && self.cur.build(gray, levels, patch + 2);
        self.frame_size = valid.then_some((gray.width as f32 * scale, gray.height as f32 * scale));
        let can_flow = self.cfg.visual.enabled
            && valid
            && self.prev_valid
            && self.prev.size() == self.cur.size()
            && self.prev_scale == scale;

        let max_scale = self.cfg.visual.max_scale_change;
        let search_radius = self.cfg.visual.search_radius;
        let visual_noise = self.cfg.kalman.visual_noise;
        let max_age = self.max_age_frames();
        self.boxes.clear();
        self.boxes.extend(self.tracks.iter().map(|t| t.kf.bbox()));
        for (i, t) in self.tracks.iter_mut().enumerate() {
            let before = self.boxes[i];
            // A box largely covered by another track's may be occluded by it, and its points
            // would then follow the occluder: trust such a measurement only close to the
            // prediction, and do not count its failures.
            let overlapped =
                self.boxes.iter().enumerate().any(|(j, other)| {
                    j != i && overlap_fraction(&before, other) > OCCLUSION_OVERLAP
                });
            t.kf.predict(dt as f32);
            let predicted = t.kf.bbox();
            t.public.visual_ok = false;
            if can_flow {
                let (bx, by) = before.center();
                let (px, py) = predicted.center();
                let guess = ((px - bx) / scale, (py - by) / scale);
                let gray_box = scale_box(&before, 1.0 / scale);
                // Search as far as the motion model is unsure (3 σ), in gray pixels.
                let radius = (SEARCH_SIGMAS * t.kf.innovation_std(visual_noise) / scale)
                    .max(MIN_SEARCH_RADIUS)
                    .min(search_radius);
                let est = self
                    .flow
                    .estimate(&self.prev, &self.cur, &gray_box, guess, radius);
                let gate = if overlapped { OCCLUDED_GATE } else { GATE };
                let measured = est
                    .filter(|e| e.scale <= max_scale && e.scale >= 1.0 / max_scale)
                    .map(|e| scale_box(&e.apply(&gray_box), scale))
                    .filter(|m| t.kf.gate_distance(m, visual_noise) <= gate);
                match measured {
                    Some(m) => {
                        t.kf.correct(&m, visual_noise);
                        t.visual_failures = 0;
                        t.public.visual_ok = true;
                    }
                    None if overlapped => {}
                    None => t.visual_failures += 1,
                }
            }
            let p = &mut t.public;
            p.bbox = t.kf.bbox();
            p.velocity = t.kf.velocity();
            p.seq = seq;
            p.detected = false;
            p.age_frames = seq.saturating_sub(p.first_seq);
            p.frames_since_detection = p.frames_since_detection.saturating_add(dt);
            t.history.push(seq, p.bbox);

            if let Some((fw, fh)) = self.frame_size {
                if visible_fraction(&p.bbox, fw, fh) < self.cfg.min_visible {
                    t.dead = Some(EndReason::LeftFrame);
                    continue;
                }
            }
            if t.visual_failures >= self.cfg.max_visual_failures {
                t.dead = Some(EndReason::LostVisually);
            } else if p.frames_since_detection > max_age {
                t.dead = Some(EndReason::Expired);
            }
        }

        // The current frame becomes the previous one (swap buffers, no copy).
        std::mem::swap(&mut self.prev, &mut self.cur);
        self.prev_valid = valid;
        self.prev_scale = scale;
        self.bury_dead();
        self.rebuild_output();
        &self.output
    }

    /// Applies detections made on frame `det_seq` (boxes in full-frame pixels), which may be
    /// older than the current frame. Detections of classes not in `classes` are ignored.
    ///
    /// Tracks are matched by their boxes at `det_seq` (tracks started from a later frame are
    /// not candidates); a matched track is moved by the offset between the detection and its
    /// box at `det_seq`, carried forward to its current box, and takes the detection's score.
    /// Unmatched detections start tentative tracks at the detection's box; unmatched
    /// candidate tracks count a miss.
    pub fn apply_detections(&mut self, det_seq: u64, dets: &[Detection]) -> ApplyOutcome {
        self.apply_round(det_seq, dets, &[], None)
    }

    /// [`Tracker::apply_detections`] with the round's weak detections too: those the model
    /// scored at or below its reporting threshold but at least `continue_score` (see
    /// [`DetectionRound::split`]). After the reported detections are matched, a confirmed
    /// track left unmatched may be corrected by a weak detection of its object (IoU ≥
    /// `iou_threshold`), which then counts as its match for the round; weak detections never
    /// start, confirm or report a track.
    pub fn apply_detection_round(&mut self, det_seq: u64, round: &DetectionRound) -> ApplyOutcome {
        self.apply_round(det_seq, &round.reported, &round.weak, None)
    }

    /// A *look*: a detection round made on the part `region` of frame `det_seq` (boxes in
    /// full-frame pixels), not on the whole frame. Only the tracks whose box at `det_seq`
    /// lies mostly inside `region` ([`LOOK_INSIDE`] of its area) are candidates, so a track
    /// elsewhere neither matches nor counts a miss; the round's detections match, correct,
    /// continue and start tracks as in [`Tracker::apply_detection_round`]. A look does not
    /// count as a detection round for the cadence that sets how long a track may go
    /// undetected. The caller drops the detections the region's edge cut.
    pub fn apply_look(
        &mut self,
        det_seq: u64,
        round: &DetectionRound,
        region: &BBox,
    ) -> ApplyOutcome {
        self.apply_round(det_seq, &round.reported, &round.weak, Some(region))
    }

    /// [`Tracker::apply_detection_round`] on the round's two lists, limited to the tracks in
    /// `region` when it is a look.
    fn apply_round(
        &mut self,
        det_seq: u64,
        dets: &[Detection],
        weak: &[Detection],
        region: Option<&BBox>,
    ) -> ApplyOutcome {
        let now = self.seq.unwrap_or(det_seq);
        if region.is_none() {
            self.cadence.observe(det_seq, now);
        }
        let mut outcome = ApplyOutcome::default();
        let usable: Vec<bool> = dets
            .iter()
            .map(|d| {
                box_is_valid(&d.bbox)
                    && (self.classes.is_empty() || self.classes.binary_search(&d.class_id).is_ok())
            })
            .collect();
        outcome.ignored += usable.iter().filter(|u| !**u).count();
        let primary = duplicates(dets, &usable);
        let det_cands = detection_candidates(dets, &usable, &primary);
        let (track_idx, track_cands) = self.candidates_at(det_seq, region);
        let dets_only: Vec<Candidate> = det_cands.iter().map(|c| c.1).collect();
        let det_looks = self.looks_of(det_seq, &det_cands);
        let pairs = assoc::assign_with(
            &track_cands,
            &dets_only,
            self.cfg.iou_threshold,
            |ci, di| affinity(self.tracks[track_idx[ci]].look.as_ref(), &det_looks[di]),
        );

        let mut track_matched = vec![false; track_idx.len()];
        let mut det_matched = vec![false; det_cands.len()];
        for &(ci, di) in &pairs {
            track_matched[ci] = true;
            det_matched[di] = true;
            let det = &dets[det_cands[di].0];
            self.correct(track_idx[ci], track_cands[ci].bbox, det, det_seq, now);
            let t = &mut self.tracks[track_idx[ci]];
            t.vote(det.class_id, det.score);
            t.last_det = Some((det_seq, det_cands[di].0));
            if let DetectionLook::Clear(look) = &det_looks[di] {
                Appearance::fold(&mut t.look, look);
            }
            outcome.matched += 1;
        }
        for (ci, wi) in self.weak_pairs(dets, weak, &track_idx, &track_cands, &track_matched) {
            track_matched[ci] = true;
            let det = &weak[wi];
            // The track keeps the score of its last reported detection: what users see never
            // falls below the model's threshold.
            let score = self.tracks[track_idx[ci]].public.score;
            self.correct(track_idx[ci], track_cands[ci].bbox, det, det_seq, now);
            let t = &mut self.tracks[track_idx[ci]];
            t.public.score = score;
            t.vote(det.class_id, det.score);
            outcome.continued += 1;
        }
        for (ci, matched) in track_matched.iter().enumerate() {
            if !*matched {
                self.count_miss(track_idx[ci]);
                outcome.missed += 1;
            }
        }
        for (di, matched) in det_matched.iter().enumerate() {
            if !*matched {
                let i = det_cands[di].0;
                let look = match &det_looks[di] {
                    DetectionLook::Clear(look) => Some(look.clone()),
                    _ => None,
                };
                self.start_tentative(&dets[i], det_seq, now, look);
                if let Some(t) = self.tracks.last_mut() {
                    t.last_det = Some((det_seq, i));
                }
                outcome.started += 1;
            }
        }
        // A duplicate (same object, confusable class) votes for the track its primary went to.
        for (i, p) in primary.iter().enumerate() {
            let Some(p) = *p else { continue };
            if let Some(t) = self
                .tracks
                .iter_mut()
                .find(|t| t.last_det == Some((det_seq, p)))
            {
                t.vote(dets[i].class_id, dets[i].score);
            }
        }
        self.confirm(now);
        self.bury_dead();
        self.rebuild_output();
        outcome
    }

    /// The second stage of a detection round: confirmed candidate tracks that no reported
    /// detection matched, paired with the round's weak detections (the same assignment,
    /// gated at [`WEAK_IOU`]) as `(candidate index, weak index)`. A weak detection that boxes
    /// the same object as a reported one (IoU ≥ [`DUPLICATE_IOU`], any class) is not used:
    /// that object has its detection already.
    fn weak_pairs(
        &self,
        dets: &[Detection],
        weak: &[Detection],
        track_idx: &[usize],
        track_cands: &[Candidate],
        track_matched: &[bool],
    ) -> Vec<(usize, usize)> {
        let open: Vec<usize> = (0..track_idx.len())
            .filter(|&ci| !track_matched[ci] && self.tracks[track_idx[ci]].confirmed)
            .collect();
        if open.is_empty() || weak.is_empty() {
            return Vec::new();
        }
        let usable: Vec<bool> = weak
            .iter()
            .map(|w| {
                box_is_valid(&w.bbox)
                    && (self.classes.is_empty() || self.classes.binary_search(&w.class_id).is_ok())
                    && !dets.iter().any(|d| d.bbox.iou(&w.bbox) >= DUPLICATE_IOU)
            })
            .collect();
        let primary = duplicates(weak, &usable);
        let weak_cands = detection_candidates(weak, &usable, &primary);
        let open_cands: Vec<Candidate> = open.iter().map(|&ci| track_cands[ci]).collect();
        let weak_only: Vec<Candidate> = weak_cands.iter().map(|c| c.1).collect();
        assoc::assign(&open_cands, &weak_only, WEAK_IOU)
            .into_iter()
            .map(|(oi, wi)| (open[oi], weak_cands[wi].0))
            .collect()
    }

    /// The look of each detection candidate, taken in the latest frame's gray plane (the
    /// pyramid's base, no copy) when the detections are at most [`LOOK_LAG`] frames older
    /// than it, so their boxes have not moved much since.
    fn looks_of(&self, det_seq: u64, cands: &[(usize, Candidate)]) -> Vec<DetectionLook> {
        let lag = self.seq.map_or(u64::MAX, |now| now.saturating_sub(det_seq));
        let base = self
            .prev
            .base()
            .filter(|_| self.prev_valid && lag <= LOOK_LAG);
        let Some((data, w, h)) = base else {
            return vec![DetectionLook::Unknown; cands.len()];
        };
        cands
            .iter()
            .map(|&(i, c)| {
                let Some(look) = Appearance::of_plane(data, w, h, self.prev_scale, &c.bbox) else {
                    return DetectionLook::Unknown;
                };
                let covered = cands.iter().any(|&(j, o)| {
                    j != i && overlap_fraction(&c.bbox, &o.bbox) > OCCLUSION_OVERLAP
                });
                if covered {
                    DetectionLook::Covered(look)
                } else {
                    DetectionLook::Clear(look)
                }
            })
            .collect()
    }

    /// The tracks that existed at `det_seq` (indices into `self.tracks`) and their boxes then.
    /// With a look's `region`, only those mostly inside it ([`LOOK_INSIDE`]).
    fn candidates_at(&self, det_seq: u64, region: Option<&BBox>) -> (Vec<usize>, Vec<Candidate>) {
        let mut track_idx = Vec::with_capacity(self.tracks.len());
        let mut track_cands = Vec::with_capacity(self.tracks.len());
        for (i, t) in self.tracks.iter().enumerate() {
            if t.birth_seq > det_seq {
                continue;
            }
            if let Some(bbox) = t.history.at(det_seq) {
                if region.is_some_and(|r| bbox.share_inside(r) < LOOK_INSIDE) {
                    continue;
                }
                track_idx.push(i);
                track_cands.push(Candidate {
                    bbox,
                    class_id: t.public.class_id,
                });
            }
        }
        (track_idx, track_cands)
    }

    /// Corrects track `ti`, whose box at `det_seq` was `then`, with the detection `det` made
    /// on that frame: the offset carried to its current box, the detection's score taken.
    fn correct(&mut self, ti: usize, then: BBox, det: &Detection, det_seq: u64, now: u64) {
        let detection_noise = self.cfg.kalman.detection_noise;
        let t = &mut self.tracks[ti];
        let current = t.kf.bbox();
        // The detection relative to where the track was at det_seq, applied to now.
        let target = if det_seq >= now {
            det.bbox
        } else {
            carry(&current, &then, &det.bbox)
        };
        t.kf.anchor(&target, detection_noise);
        // The box takes the detection's size and keeps it until the visual update measures a
        // change (fidelity replay of four clips: N = 5 covered 0.2 points more, and less on no
        // clip at either precision; small, within the replay's noise).
        t.kf.stop_size_change();
        let corrected = t.kf.bbox();
        // Keep the history consistent with the correction, so a later detection of a frame
        // after det_seq is not corrected twice.
        t.history
            .map_from(det_seq, |b| carry(b, &current, &corrected));
        t.visual_failures = 0;
        let p = &mut t.public;
        p.bbox = corrected;
        p.velocity = t.kf.velocity();
        p.score = det.score;
        p.hits = p.hits.saturating_add(1);
        p.misses = 0;
        p.frames_since_detection = p.frames_since_detection.min(now.saturating_sub(det_seq));
        p.detected = true;
        p.detected_seq = p.detected_seq.max(det_seq);
    }

    /// Track `ti` was a candidate but no detection matched it: a tentative track dies at its
    /// second miss in a row ([`TENTATIVE_MISSES`]), a confirmed one after `max_misses`.
    fn count_miss(&mut self, ti: usize) {
        let t = &mut self.tracks[ti];
        t.public.misses = t.public.misses.saturating_add(1);
        if (!t.confirmed && t.public.misses >= TENTATIVE_MISSES)
            || t.public.misses >= self.cfg.max_misses
        {
            t.dead = Some(EndReason::Missed);
        }
    }

    /// Starts a tentative track (no id yet) at an unmatched detection's box.
    fn start_tentative(
        &mut self,
        det: &Detection,
        det_seq: u64,
        now: u64,
        look: Option<Appearance>,
    ) {
        let mut history = History::new(self.cfg.history_len);
        history.push(det_seq, det.bbox);
        history.push(now, det.bbox);
        self.tracks.push(TrackState {
            public: Track {
                id: 0,
                class_id: det.class_id,
                score: det.score,
                bbox: det.bbox,
                velocity: (0.0, 0.0),
                seq: now,
                first_seq: now,
                detected: true,
                detected_seq: det_seq,
                age_frames: 0,
                hits: 1,
                misses: 0,
                frames_since_detection: now.saturating_sub(det_seq),
                visual_ok: false,
                end_reason: None,
            },
            confirmed: false,
            birth_seq: det_seq,
            kf: BoxKalman::new(&det.bbox, self.kalman, self.cfg.kalman.detection_noise),
            history,
            visual_failures: 0,
            dead: None,
            votes: vec![(det.class_id, det.score)],
            last_det: None,
            handed_over: false,
            look,
        });
    }

    /// Confirms the tentative tracks with enough hits, or with a fresh, confident detection,
    /// in track order (oldest first), so ids follow the order tracks were started. A track
    /// that takes over from a confirmed one that lost its object (`Tracker::predecessor_of`) keeps
    /// that one's id, and no event is emitted for either.
    fn confirm(&mut self, now: u64) {
        for i in 0..self.tracks.len() {
            let t = &self.tracks[i];
            // A confident detection confirms at once only if it is fresh: the box of a late
            // one is where a new object *was*, and nothing yet says where it went.
            let fresh = now.saturating_sub(t.birth_seq) <= FRESH_FRAMES;
            let sure = t.public.hits >= self.cfg.confirm_hits
                || (fresh && t.public.score >= self.cfg.confirm_score);
            if t.confirmed || t.dead.is_some() || !sure {
                continue;
            }
            match self.predecessor_of(i) {
                Some(j) => self.hand_over(j, i),
                None => {
                    let t = &mut self.tracks[i];
                    t.public.id = self.next_id;
                    self.next_id += 1;
                    self.events.push(TrackEvent::Started(t.public.clone()));
                }
            }
            self.tracks[i].confirmed = true;
        }
    }

    /// The confirmed track whose object the tentative track `i` most likely is: one of a
    /// confusable class that went unmatched in a detection round since its last match (its
    /// box drifted off the object, or the object was hidden), and whose box at the frame of
    /// `i`'s first detection was within `HANDOVER_DISTANCE` of that detection (the closest,
    /// if several). A new id there would be an id switch: the old track would die of its
    /// misses a round later.
    fn predecessor_of(&self, i: usize) -> Option<usize> {
        let t = &self.tracks[i];
        let born = t.history.at(t.birth_seq)?;
        let mut best: Option<(f32, usize)> = None;
        for (j, o) in self.tracks.iter().enumerate() {
            let eligible = j != i
                && o.confirmed
                && o.dead.is_none()
                && o.public.misses >= 1
                && crate::vocab::labels::confusable(o.public.class_id, t.public.class_id);
            if !eligible {
                continue;
            }
            let Some(then) = o.history.at(t.birth_seq) else {
                continue;
            };
            let d = relative_distance(&then, &born);
            if d <= HANDOVER_DISTANCE && best.is_none_or(|b| d < b.0) {
                best = Some((d, j));
            }
        }
        best.map(|b| b.1)
    }

    /// Track `to` (being confirmed) continues track `from`: it takes `from`'s id and start,
    /// and `from` ends silently.
    fn hand_over(&mut self, from: usize, to: usize) {
        let old = &mut self.tracks[from];
        old.dead = Some(EndReason::Missed);
        old.handed_over = true;
        let (id, first_seq) = (old.public.id, old.public.first_seq);
        let new = &mut self.tracks[to];
        new.public.id = id;
        new.public.first_seq = first_seq;
    }

    /// Ends every track (with [`TrackEvent::Ended`], reason [`EndReason::Reset`], for the
    /// confirmed ones) and forgets the previous frame. Ids keep counting up.
    pub fn reset(&mut self) {
        for t in &mut self.tracks {
            t.dead = Some(EndReason::Reset);
        }
        self.bury_dead();
        self.prev_valid = false;
        self.frame_size = None;
        self.seq = None;
        self.output.clear();
        self.cadence = Cadence::default();
    }

    /// The frames a track may currently go without a matched detection: `max_age_frames`, or
    /// 1.5 detection cycles (gap + lateness) when the detector is slower than that.
    pub fn max_age_frames(&self) -> u64 {
        self.cadence.max_age(self.cfg.max_age_frames)
    }

    /// Removes dead tracks, emitting `Ended` for the confirmed ones.
    fn bury_dead(&mut self) {
        let events = &mut self.events;
        self.tracks.retain_mut(|t| match t.dead {
            None => true,
            Some(reason) => {
                if t.confirmed && !t.handed_over {
                    let mut last = t.public.clone();
                    last.end_reason = Some(reason);
                    events.push(TrackEvent::Ended(last));
                }
                false
            }
        });
    }

    fn rebuild_output(&mut self) {
        self.output.clear();
        self.output.extend(
            self.tracks
                .iter()
                .filter(|t| t.confirmed)
                .map(|t| t.public.clone()),
        );
        self.output.sort_unstable_by_key(|t| t.id);
    }
}

/// The detections that may be matched, with their index in `dets`: usable ones (a valid box,
/// a class of interest) that are not a duplicate of a better one.
fn detection_candidates(
    dets: &[Detection],
    usable: &[bool],
    primary: &[Option<usize>],
) -> Vec<(usize, Candidate)> {
    dets.iter()
        .enumerate()
        .filter(|(i, _)| usable[*i] && primary[*i].is_none())
        .map(|(i, d)| {
            (
                i,
                Candidate {
                    bbox: d.bbox,
                    class_id: d.class_id,
                },
            )
        })
        .collect()
}

/// Smallest IoU between a weak detection and an unmatched track's box for the detection to
/// keep the track: stricter than `iou_threshold`, since a weak box near a track is as often a
/// neighbour's or a fragment's. Fidelity replay of seven 200-frame clips (INT8 and FP32, N = 5
/// and adaptive; docs/tracking.md): at 0.3 (the association's own gate) weak
/// detections raised id switches by 27–56 %; at 0.6, 0.7 and 0.8 they kept them level or
/// lower, 0.7 with the most consistent gains.
const WEAK_IOU: f32 = 0.7;

/// Two detections of confusable classes this much overlapping are one object.
const DUPLICATE_IOU: f32 = 0.6;

/// A look ([`Tracker::apply_look`]) is about the tracks with at least this share of their box
/// inside its region.
pub const LOOK_INSIDE: f32 = 0.7;

/// For each usable detection, the index of a better-scoring usable detection of another,
/// confusable class that boxes the same object (IoU ≥ 0.6), if any: the
/// detector's NMS is per class, so a parked car often comes back as `car` *and* `truck`.
/// The tracker makes one track of them; the fidelity reference counts them as one object.
pub fn duplicates(dets: &[Detection], usable: &[bool]) -> Vec<Option<usize>> {
    let mut order: Vec<usize> = (0..dets.len()).filter(|&i| usable[i]).collect();
    order.sort_by(|&a, &b| dets[b].score.total_cmp(&dets[a].score));
    let mut primary = vec![None; dets.len()];
    for (k, &i) in order.iter().enumerate() {
        primary[i] = order[..k].iter().copied().find(|&j| {
            primary[j].is_none()
                && dets[j].class_id != dets[i].class_id
                && crate::vocab::labels::confusable(dets[j].class_id, dets[i].class_id)
                && dets[j].bbox.iou(&dets[i].bbox) >= DUPLICATE_IOU
        });
    }
    primary
}

/// `b` scaled about the origin (converts between frame and gray pixels).
fn scale_box(b: &BBox, s: f32) -> BBox {
    BBox::new(b.x0 * s, b.y0 * s, b.x1 * s, b.y1 * s)
}

/// `b` moved by the centre offset from `from` to `to`, and resized by their size ratios.
fn carry(b: &BBox, from: &BBox, to: &BBox) -> BBox {
    let (bx, by) = b.center();
    let (fx, fy) = from.center();
    let (tx, ty) = to.center();
    let ratio = |num: f32, den: f32| if den > 0.0 { num / den } else { 1.0 };
    let hw = 0.5 * b.width() * ratio(to.width(), from.width());
    let hh = 0.5 * b.height() * ratio(to.height(), from.height());
    let (cx, cy) = (bx + tx - fx, by + ty - fy);
    BBox::new(cx - hw, cy - hh, cx + hw, cy + hh)
}

/// How far `a` is from `b` in units of `b`'s size: the larger of the centre offsets over
/// `b`'s width and height; infinite when their sizes (square roots of the areas) differ by
/// 1.5× or more.
fn relative_distance(a: &BBox, b: &BBox) -> f32 {
    let (ax, ay) = a.center();
    let (bx, by) = b.center();
    let ratio = (a.area() / b.area().max(1e-6)).sqrt();
    if !(ratio > 1.0 / 1.5 && ratio < 1.5) {
        return f32::INFINITY;
    }
    ((ax - bx).abs() / b.width().max(1.0)).max((ay - by).abs() / b.height().max(1.0))
}

/// Fraction of `b`'s area covered by `other`.
fn overlap_fraction(b: &BBox, other: &BBox) -> f32 {
    let area = b.area();
    if area <= 0.0 {
        return 0.0;
    }
    let ix = (b.x1.min(other.x1) - b.x0.max(other.x0)).max(0.0);
    let iy = (b.y1.min(other.y1) - b.y0.max(other.y0)).max(0.0);
    ix * iy / area
}

/// Fraction of `b`'s area inside `[0, w] × [0, h]`.
fn visible_fraction(b: &BBox, w: f32, h: f32) -> f32 {
    overlap_fraction(b, &BBox::new(0.0, 0.0, w, h))
}

fn box_is_valid(b: &BBox) -> bool {
    b.to_array().iter().all(|v| v.is_finite()) && b.x1 > b.x0 && b.y1 > b.y0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(x: f32, y: f32, class_id: usize) -> Detection {
        Detection {
            class_id,
            score: 0.8,
            bbox: BBox::new(x, y, x + 40.0, y + 80.0),
        }
    }

    fn flat(seq_scale: f32) -> GrayImage {
        GrayImage {
            width: 320,
            height: 240,
            scale: seq_scale,
            data: vec![90; 320 * 240],
        }
    }

    fn no_visual() -> TrackerConfig {
        TrackerConfig {
            visual: VisualConfig {
                enabled: false,
                ..VisualConfig::default()
            },
            ..TrackerConfig::default()
        }
    }

    #[test]
    fn ten_thousand_frames_with_detections_grow_nothing() {
        let cfg = no_visual();
        let history_len = cfg.history_len;
        let mut tr = Tracker::new(cfg).unwrap();
        let gray = flat(2.0);
        let mut rng = 12345u64;
        let mut at_warm_up = None;
        let mut max_tracks = 0;
        for seq in 0..10_000u64 {
            tr.step(seq, &gray);
            if seq % 3 == 0 {
                // Four objects walking and wrapping around, plus two spurious detections;
                // the detections come back two frames late.
                let mut dets: Vec<Detection> = (0..4)
                    .map(|i| {
                        let x = ((seq * (i + 1)) % 500) as f32;
                        det(x, 40.0 * i as f32, i as usize)
                    })
                    .collect();
                for _ in 0..2 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    dets.push(det((rng % 560) as f32, (rng >> 20) as f32 % 380.0, 2));
                }
                tr.apply_detections(seq.saturating_sub(2), &dets);
            }
            let _ = tr.drain_events(); // as the scheduler does after every frame
            max_tracks = max_tracks.max(tr.tracks.len());
            for t in &tr.tracks {
                assert!(t.history.len() <= history_len, "history at {seq}");
                assert!(t.votes.len() <= 80, "one vote per class at most");
            }
            let sizes = (
                tr.tracks.capacity(),
                tr.boxes.capacity(),
                tr.output.capacity(),
                tr.events.capacity(),
            );
            if seq == 1_000 {
                at_warm_up = Some(sizes);
            }
            if seq > 1_000 {
                // Amortised growth doubles a vector: anything that grows keeps doubling.
                let w = at_warm_up.unwrap();
                assert!(
                    sizes.0 <= 2 * w.0.max(8)
                        && sizes.1 <= 2 * w.1.max(8)
                        && sizes.2 <= 2 * w.2.max(8)
                        && sizes.3 <= 2 * w.3.max(8),
                    "at {seq}: {sizes:?} vs {w:?} at frame 1000"
                );
            }
        }
        assert!(max_tracks >= 4, "the objects were tracked: {max_tracks}");
        assert!(max_tracks < 40, "dead tracks are removed: {max_tracks}");
    }

    #[test]
    fn carry_moves_and_resizes() {
        let cur = BBox::new(10.0, 10.0, 20.0, 30.0);
        let then = BBox::new(0.0, 0.0, 10.0, 20.0);
        let det = BBox::new(2.0, 1.0, 12.0, 21.0);
        assert_eq!(carry(&cur, &then, &det), BBox::new(12.0, 11.0, 22.0, 31.0));
        let bigger = BBox::new(0.0, 0.0, 20.0, 40.0);
        assert_eq!(
            carry(&cur, &then, &bigger),
            BBox::new(10.0, 10.0, 30.0, 50.0)
        );
    }

    #[test]
    fn visible_fraction_of_boxes() {
        assert_eq!(
            visible_fraction(&BBox::new(0.0, 0.0, 10.0, 10.0), 100.0, 100.0),
            1.0
        );
        assert_eq!(
            visible_fraction(&BBox::new(-5.0, 0.0, 5.0, 10.0), 100.0, 100.0),
            0.5
        );
        assert_eq!(
            visible_fraction(&BBox::new(200.0, 0.0, 210.0, 10.0), 100.0, 100.0),
            0.0
        );
    }

    #[test]
    fn class_filter_and_bad_boxes_are_ignored() {
        let cfg = TrackerConfig {
            classes: vec!["person".into()],
            ..no_visual()
        };
        let mut tr = Tracker::new(cfg).unwrap_or_else(|e| panic!("{e}"));
        tr.step(1, &flat(2.0));
        let mut bad = det(10.0, 10.0, 0);
        bad.bbox.x1 = f32::NAN;
        let out = tr.apply_detections(1, &[det(10.0, 10.0, 0), det(200.0, 10.0, 2), bad]);
        assert_eq!(
            out,
            ApplyOutcome {
                matched: 0,
                started: 1,
                missed: 0,
                ignored: 2,
                continued: 0,
            }
        );
    }

    #[test]
    fn a_detector_slower_than_max_age_still_confirms_and_keeps_tracks() {
        // A parked car scored 0.4 (two hits needed); the model takes 190 frames (5 s at
        // 40 fps: a loaded machine, or a Pi Zero 2 W at a high frame rate) and runs back to
        // back; max_age_frames stays at its default of 60.
        let mut tr = Tracker::new(no_visual()).unwrap_or_else(|e| panic!("{e}"));
        let mut car = det(300.0, 100.0, 2);
        car.score = 0.4;
        let mut events = Vec::new();
        for seq in 0..2_000u64 {
            tr.step(seq, &flat(2.0));
            if seq >= 190 && (seq - 190) % 200 == 0 {
                tr.apply_detections(seq - 190, std::slice::from_ref(&car));
            }
            events.extend(tr.drain_events());
        }
        let started = events
            .iter()
            .filter(|e| matches!(e, TrackEvent::Started(_)))
            .count();
        let ended: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, TrackEvent::Ended(_)))
            .collect();
        assert_eq!(started, 1, "{events:?}");
        assert!(ended.is_empty(), "the car is never given up: {ended:?}");
        assert!(tr.max_age_frames() > 390, "{}", tr.max_age_frames());
        // The detector stalls: the track is given up after about 1.5 detection cycles.
        let mut end = None;
        for seq in 2_000..4_000u64 {
            tr.step(seq, &flat(2.0));
            if tr.drain_events().iter().any(
                |e| matches!(e, TrackEvent::Ended(t) if t.end_reason == Some(EndReason::Expired)),
            ) {
                end = Some(seq);
                break;
            }
        }
        let end = end.expect("a stalled detector ends the track");
        assert!(end < 2_700, "ended at {end}");
    }

    #[test]
    fn tentatives_that_die_do_not_consume_ids() {
        let cfg = TrackerConfig {
            confirm_score: 1.1, // confirmation by hits only
            ..no_visual()
        };
        let mut tr = Tracker::new(cfg).unwrap_or_else(|e| panic!("{e}"));
        tr.step(1, &flat(2.0));
        tr.apply_detections(1, &[det(10.0, 10.0, 0)]); // tentative, will die
        tr.step(2, &flat(2.0));
        tr.apply_detections(2, &[det(300.0, 100.0, 0)]); // first missed once, second tentative
        tr.step(3, &flat(2.0));
        tr.apply_detections(3, &[det(300.0, 100.0, 0)]); // first dies, second confirmed
        let ids: Vec<u64> = tr.tracks().map(|t| t.id).collect();
        assert_eq!(ids, vec![1]);
        let events = tr.drain_events();
        assert!(matches!(events.as_slice(), [TrackEvent::Started(t)] if t.id == 1));
    }

    /// A tracker (no visual update, `max_misses` 3) with one confirmed person at frame 0.
    fn one_person_tracked_patiently() -> Tracker {
        let cfg = TrackerConfig {
            max_misses: 3,
            ..no_visual()
        };
        let mut tr = Tracker::new(cfg).unwrap_or_else(|e| panic!("{e}"));
        tr.step(0, &flat(2.0));
        tr.apply_detections(0, &[det(100.0, 100.0, 0)]);
        tr
    }

    /// A 320×240 plane (scale 2: a 640×480 frame) of brightness 128 with figures: each
    /// `(frame x0, frame x1, brightness)` painted over frame rows 100..180.
    fn figures(painted: &[(f32, f32, u8)]) -> GrayImage {
        let mut g = flat(2.0);
        g.data.fill(128);
        for &(x0, x1, v) in painted {
            for y in 50..90 {
                for x in (x0 / 2.0) as usize..(x1 / 2.0) as usize {
                    g.data[y * 320 + x] = v;
                }
            }
        }
        g
    }

    /// Where track 1, of a dark figure at x 100..140, is after a round with a light figure's
    /// detection at x 86 (the better overlap) and a dark figure's at x 118.
    fn where_the_dark_track_goes(light_is_dark: bool) -> f32 {
        let mut tr = Tracker::new(no_visual()).unwrap_or_else(|e| panic!("{e}"));
        tr.step(0, &figures(&[(100.0, 140.0, 30)]));
        tr.apply_detections(0, &[det(100.0, 100.0, 0)]);
        let a = if light_is_dark { 30 } else { 220 };
        tr.step(1, &figures(&[(86.0, 118.0, a), (126.0, 158.0, 30)]));
        // IoU with the track's box: 0.48 and 0.38; the two boxes cover each other by 0.2 only,
        // so each detection's look is its own figure's.
        let out = tr.apply_detections(1, &[det(86.0, 100.0, 0), det(118.0, 100.0, 0)]);
        assert_eq!((out.matched, out.started), (1, 1));
        let x0 = tr
            .tracks()
            .find(|t| t.id == 1)
            .map_or(f32::NAN, |t| t.bbox.x0);
        x0
    }

    #[test]
    fn a_track_is_not_paired_with_a_detection_of_another_look() {
        // Both figures dark: the better overlap wins.
        assert_eq!(where_the_dark_track_goes(true), 86.0);
        // The better overlap is a light figure now: the track keeps to the dark one.
        assert_eq!(where_the_dark_track_goes(false), 118.0);
        // A light figure exactly where the dark one's track is, alone: not its object (the
        // detection starts a track of its own; the dark track counts a miss).
        let mut tr = Tracker::new(no_visual()).unwrap_or_else(|e| panic!("{e}"));
        tr.step(0, &figures(&[(100.0, 140.0, 30)]));
        tr.apply_detections(0, &[det(100.0, 100.0, 0)]);
        tr.step(1, &figures(&[(100.0, 140.0, 220)]));
        let out = tr.apply_detections(1, &[det(100.0, 100.0, 0)]);
        assert_eq!((out.matched, out.started, out.missed), (0, 1, 1));
    }

    #[test]
    fn a_new_track_next_to_one_that_lost_its_object_keeps_that_id() {
        let mut tr = one_person_tracked_patiently();
        assert_eq!(tr.tracks().map(|t| t.id).collect::<Vec<_>>(), vec![1]);
        // The object is found 30 px (0.75 box widths) off the track's box: too little overlap
        // to match (IoU 0.14), so the track misses and a new one starts there, confirmed at
        // once by its score. It continues the old track's id, and nothing starts or ends.
        tr.step(1, &flat(2.0));
        let out = tr.apply_detections(1, &[det(130.0, 100.0, 0), det(400.0, 300.0, 0)]);
        assert_eq!((out.matched, out.started, out.missed), (0, 2, 1));
        let tracks: Vec<&Track> = tr.tracks().collect();
        assert_eq!(tracks.len(), 2, "{tracks:?}");
        assert_eq!((tracks[0].id, tracks[0].bbox.x0), (1, 130.0));
        // Far from any track: a new object, a new id.
        assert_eq!((tracks[1].id, tracks[1].bbox.x0), (2, 400.0));
        let events = tr.drain_events();
        let ids: Vec<(bool, u64)> = events
            .iter()
            .map(|e| match e {
                TrackEvent::Started(t) => (true, t.id),
                TrackEvent::Ended(t) => (false, t.id),
            })
            .collect();
        assert_eq!(ids, vec![(true, 1), (true, 2)]);
    }

    fn weak(x: f32, y: f32, class_id: usize) -> Detection {
        Detection {
            score: 0.2,
            ..det(x, y, class_id)
        }
    }

    #[test]
    fn a_look_is_about_the_tracks_in_its_region_only() {
        // Two people: one at x = 100, one at x = 400. A look at the left part of the frame
        // that finds nobody counts a miss for the left one only; one that finds a newcomer
        // there starts a track, and the right person's track is left as it was.
        let mut tr = one_person_tracked_patiently();
        tr.step(1, &flat(2.0));
        tr.apply_detections(1, &[det(100.0, 100.0, 0), det(400.0, 100.0, 0)]);
        tr.step(2, &flat(2.0));
        tr.apply_detections(2, &[det(100.0, 100.0, 0), det(400.0, 100.0, 0)]);
        assert_eq!(tr.tracks().count(), 2);
        let left = BBox::new(0.0, 0.0, 352.0, 288.0);
        tr.step(3, &flat(2.0));
        let out = tr.apply_look(3, &DetectionRound::default(), &left);
        assert_eq!((out.matched, out.missed, out.started), (0, 1, 0));
        let misses: Vec<u32> = tr.tracks().map(|t| t.misses).collect();
        assert_eq!(misses, vec![1, 0]);
        tr.step(4, &flat(2.0));
        let round = DetectionRound {
            reported: vec![det(100.0, 100.0, 0), det(200.0, 150.0, 0)],
            weak: Vec::new(),
        };
        let out = tr.apply_look(4, &round, &left);
        assert_eq!((out.matched, out.missed, out.started), (1, 0, 1));
        // The same empty round over the whole frame misses both.
        tr.step(5, &flat(2.0));
        let out = tr.apply_detection_round(5, &DetectionRound::default());
        assert_eq!(out.missed, 3);
    }

    #[test]
    fn weak_detections_keep_confirmed_tracks_but_start_nothing() {
        // The person's score dips below the threshold for two rounds: the weak detections
        // hold the track (no miss, box corrected), where without them it would count misses.
        let mut tr = one_person_tracked_patiently();
        let mut plain = one_person_tracked_patiently();
        for seq in 1..=2u64 {
            tr.step(seq, &flat(2.0));
            plain.step(seq, &flat(2.0));
            let x = 100.0 + 4.0 * seq as f32;
            let out = tr.apply_round(seq, &[], &[weak(x, 100.0, 0)], None);
            assert_eq!((out.matched, out.continued, out.missed), (0, 1, 0));
            let out = plain.apply_detections(seq, &[]);
            assert_eq!(out.missed, 1);
        }
        let t = tr.tracks().next().cloned();
        assert_eq!(t.as_ref().map(|t| (t.id, t.misses)), Some((1, 0)));
        assert!(t.is_some_and(|t| t.bbox.x0 > 104.0 && t.detected_seq == 2 && t.score == 0.8));
        assert_eq!(plain.tracks().next().map(|t| t.misses), Some(2));
        // A weak detection where nothing is tracked starts no track, tentative or not.
        tr.step(3, &flat(2.0));
        let out = tr.apply_round(3, &[det(108.0, 100.0, 0)], &[weak(400.0, 300.0, 0)], None);
        assert_eq!((out.matched, out.started, out.continued), (1, 0, 0));
        assert_eq!(tr.tracks.len(), 1);
    }

    #[test]
    fn a_weak_duplicate_of_a_reported_detection_is_not_used() {
        // Two people overlapping (IoU 0.74); the model reports one and, nearly on its box, a
        // weak second box. That box is the reported person's, so the other track, which it
        // overlaps at IoU 0.86, gets nothing from it.
        let mut tr = one_person_tracked_patiently();
        for seq in 1..=2 {
            tr.step(seq, &flat(2.0));
            tr.apply_detections(seq, &[det(100.0, 100.0, 0), det(106.0, 100.0, 0)]);
        }
        assert_eq!(tr.tracks().count(), 2);
        tr.step(3, &flat(2.0));
        let out = tr.apply_round(3, &[det(100.0, 100.0, 0)], &[weak(103.0, 100.0, 0)], None);
        assert_eq!((out.matched, out.continued, out.missed), (1, 0, 1));
        // Alone, the same weak box keeps the other track.
        tr.step(4, &flat(2.0));
        let out = tr.apply_round(4, &[], &[weak(106.0, 100.0, 0)], None);
        assert_eq!(out.continued, 1);
    }

    #[test]
    fn a_new_track_of_another_class_gets_its_own_id() {
        let mut tr = one_person_tracked_patiently();
        tr.step(1, &flat(2.0));
        // A car (class 2) where the person's track missed: not the person.
        tr.apply_detections(1, &[det(130.0, 100.0, 2)]);
        let ids: Vec<u64> = tr.tracks().map(|t| t.id).collect();
        assert_eq!(ids, vec![1, 2]);
        assert_eq!(tr.tracks().next().map(|t| t.misses), Some(1));
    }

    #[test]
    fn one_object_called_by_confusable_names_keeps_one_track_and_its_voted_label() {
        // COCO ids: 2 car, 7 truck, 15 cat, 16 dog, 14 bird, 0 person.
        for (first, then, other) in [(2, 7, 0), (15, 16, 0), (16, 14, 0)] {
            let mut tr = Tracker::new(no_visual()).unwrap_or_else(|e| panic!("{e}"));
            tr.step(0, &flat(2.0));
            tr.apply_detections(0, &[det(100.0, 100.0, first)]);
            tr.step(1, &flat(2.0));
            tr.apply_detections(1, &[det(100.0, 100.0, then)]);
            // One track; the first label keeps a tie of votes.
            let tracks: Vec<(u64, usize)> = tr.tracks().map(|t| (t.id, t.class_id)).collect();
            assert_eq!(tracks, vec![(1, first)], "{first} then {then}");
            tr.step(2, &flat(2.0));
            tr.apply_detections(2, &[det(100.0, 100.0, then)]);
            let tracks: Vec<(u64, usize)> = tr.tracks().map(|t| (t.id, t.class_id)).collect();
            assert_eq!(tracks, vec![(1, then)], "the vote flipped to {then}");
            // A person in the same place is not that object.
            tr.step(3, &flat(2.0));
            let out = tr.apply_detections(3, &[det(100.0, 100.0, other)]);
            assert_eq!((out.matched, out.started), (0, 1), "{then} then {other}");
        }
        assert!(!crate::vocab::labels::confusable(0, 14));
        assert!(!crate::vocab::labels::confusable(2, 16));
    }

    #[test]
    fn restarted_sequence_resets() {
        let mut tr = Tracker::new(TrackerConfig {
            confirm_hits: 1,
            ..no_visual()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        tr.step(10, &flat(2.0));
        tr.apply_detections(10, &[det(10.0, 10.0, 0)]);
        assert_eq!(tr.tracks().count(), 1);
        assert!(tr.step(10, &flat(2.0)).len() == 1);
        assert!(tr.step(3, &flat(2.0)).is_empty());
        let events = tr.drain_events();
        assert!(
            matches!(events.as_slice(), [TrackEvent::Started(_), TrackEvent::Ended(t)]
            if t.end_reason == Some(EndReason::Reset))
        );
    }

    #[test]
    fn bad_gray_planes_do_not_panic() {
        let mut tr = Tracker::new(TrackerConfig {
            confirm_hits: 1,
            ..TrackerConfig::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        tr.apply_detections(0, &[det(10.0, 10.0, 0)]);
        let bad = [
            GrayImage::default(),
            GrayImage {
                width: 10,
                height: 10,
                scale: 1.0,
                data: vec![1; 3],
            },
            GrayImage {
                scale: f32::NAN,
                ..flat(1.0)
            },
        ];
        for (i, g) in bad.iter().enumerate() {
            tr.step(i as u64 + 1, g);
        }
        assert_eq!(tr.tracks().count(), 1);
        // A usable but tiny plane: the box is outside this frame, so the track ends.
        let tiny = GrayImage {
            width: 4,
            height: 4,
            scale: 2.0,
            data: vec![1; 16],
        };
        tr.step(10, &tiny);
        assert_eq!(tr.tracks().count(), 0);
        let ended = tr.drain_events().into_iter().find_map(|e| match e {
            TrackEvent::Ended(t) => t.end_reason,
            TrackEvent::Started(_) => None,
        });
        assert_eq!(ended, Some(EndReason::LeftFrame));
    }
}
