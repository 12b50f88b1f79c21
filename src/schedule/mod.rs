//! When to run the detector: every N frames (`fixed`), or when the scene asks for it
//! (`adaptive`).
//!
//! [`Planner::decide`] is called once per frame, after the tracker stepped it, and says whether
//! this frame should go to the detector and why ([`Cause`]). The pipeline's scheduler and the
//! fidelity replay (`fidelity::replay`) use the same planner, so what the fidelity table
//! measures is what the daemon does.
//!
//! The adaptive rules, in order:
//! 1. **Motion** outside every track's box (grown by a margin) and in a new place — not next
//!    to motion the last detection already looked at ([`MotionReport::new_outside`]):
//!    something new may be there; asked for as soon as `min_gap` frames have passed since the
//!    last detection. Motion the tracks do not explain that stays where the last detection
//!    saw it (a crowd not tracked, leaves) does not ask again. Motion that detections keep
//!    finding nothing in (a tree in the wind, a screen) backs off: each such motion-caused
//!    detection doubles the gap motion must wait, up to the idle interval's.
//! 2. **Uncertain** tracks: a tentative track waiting for its confirming detection, a failed
//!    visual update, a box touching the frame's edge, a fast change of size; after `min_gap`
//!    frames too.
//! 3. **Interval**: while anything is tracked and something moves, at most `every` frames pass
//!    between detections (the fixed schedule's N).
//! 4. **Idle**: nothing moving: the detector runs only as a heartbeat — every `idle_interval`
//!    of time when nothing is tracked (a still object that motion cannot reveal is found
//!    then), and at least every `max_age_frames / 2` frames while still objects are tracked
//!    (a parked car, a person standing), so that their tracks do not expire.
//!
//! The fixed schedule asks every `every` frames ([`Cause::Interval`]), the first frame
//! included. Either way the pipeline hands the request to the detector only if it is idle
//! (busy ⇒ skipped; the next frame asks again).

pub mod motion;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::frame::GrayImage;
use crate::geom::BBox;
use crate::track::Tracker;
use motion::{MotionGrid, MotionParams, MotionReport};

/// `[pipeline] schedule`: how detections are scheduled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// Motion, uncertain tracks and a heartbeat ask for detections; `detect_every` is the
    /// longest gap while anything is tracked.
    Adaptive,
    /// A detection every `detect_every` frames.
    #[default]
    Fixed,
}

impl ScheduleKind {
    /// The name used in the configuration file and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleKind::Adaptive => "adaptive",
            ScheduleKind::Fixed => "fixed",
        }
    }
}

/// Why a detection was asked for (the journal's `DETECT_*` counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// `detect_every` frames passed (the fixed schedule, or the adaptive one's longest gap).
    Interval,
    /// Motion outside the tracks' boxes.
    Motion,
    /// A track needs fresh evidence.
    Uncertain,
    /// Nothing tracked, nothing moving: the heartbeat.
    Idle,
}

/// Settings of a [`Planner`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlannerConfig {
    /// Fixed or adaptive.
    pub kind: ScheduleKind,
    /// Fixed: the interval. Adaptive: the longest gap while anything is tracked.
    pub every: u32,
    /// Adaptive: the heartbeat while nothing is tracked and nothing moves.
    pub idle_interval: Duration,
    /// Adaptive: the fewest frames between two detections asked for by motion or uncertainty
    /// (default 3).
    pub min_gap: u32,
    /// Adaptive: moving cells (of 8×8 gray pixels) outside the tracks, in new places, that
    /// make a detection worth asking for (default 8: about a walking person's legs and arms
    /// at 30–60 px tall; fewer asked for a detection every `min_gap` frames in a busy street
    /// for little coverage — the fidelity replay of the bundled clip, docs/tracking.md).
    pub min_motion_cells: usize,
    /// Adaptive: track boxes are grown by this fraction of their size on each side before
    /// they explain motion (a walking person's limbs and the box's lag).
    pub box_margin: f32,
    /// Adaptive: the motion measure.
    pub motion: MotionParams,
}

impl PlannerConfig {
    /// The defaults for `kind`, `every` and `idle_interval`.
    pub fn new(kind: ScheduleKind, every: u32, idle_interval: Duration) -> PlannerConfig {
        PlannerConfig {
            kind,
            every: every.max(1),
            idle_interval,
            min_gap: 3,
            min_motion_cells: 8,
            box_margin: 0.25,
            motion: MotionParams::default(),
        }
    }
}

/// Decides, frame by frame, whether to detect. See the module documentation.
#[derive(Clone, Debug)]
pub struct Planner {
    cfg: PlannerConfig,
    grid: MotionGrid,
    /// Frames since the last detection handed out (starts full: the first frame detects).
    since: u64,
    /// When the last detection was handed out.
    last_at: Option<Duration>,
    /// Frames motion must wait since the last detection (doubles while motion finds nothing).
    motion_gap: u64,
    /// The cause of the last detection handed out, until its result is applied.
    outstanding: Option<Cause>,
    /// The latest frame's motion.
    last_motion: MotionReport,
    boxes: Vec<BBox>,
}

impl Planner {
    /// A planner that asks for a detection on the first frame.
    pub fn new(cfg: PlannerConfig) -> Planner {
        Planner {
            grid: MotionGrid::new(cfg.motion),
            since: u64::MAX / 2,
            last_at: None,
            motion_gap: u64::from(cfg.min_gap.max(1)),
            outstanding: None,
            last_motion: MotionReport::default(),
            boxes: Vec::new(),
            cfg,
        }
    }

    /// The settings.
    pub fn config(&self) -> &PlannerConfig {
        &self.cfg
    }

    /// The latest frame's motion (adaptive only; zero for fixed).
    pub fn motion(&self) -> MotionReport {
        self.last_motion
    }

    /// Whether the frame whose gray plane is `gray`, just stepped by `tracker`, at time `now`,
    /// should go to the detector, and why. Call [`Planner::handed_out`] when it did.
    pub fn decide(&mut self, gray: &GrayImage, tracker: &Tracker, now: Duration) -> Option<Cause> {
        self.since = self.since.saturating_add(1);
        if self.cfg.kind == ScheduleKind::Fixed {
            return (self.since >= u64::from(self.cfg.every)).then_some(Cause::Interval);
        }
        self.grid.update(gray);
        let margin = self.cfg.box_margin;
        self.boxes.clear();
        self.boxes
            .extend(tracker.all_boxes().map(|b| grow(&b, margin)));
        self.last_motion = self.grid.report(&self.boxes);
        if self.last_at.is_none() {
            return Some(Cause::Interval);
        }
        let gap = u64::from(self.cfg.min_gap.max(1));
        if self.last_motion.new_outside >= self.cfg.min_motion_cells
            && self.since >= self.motion_gap
        {
            return Some(Cause::Motion);
        }
        if self.since >= gap && tracker.uncertain() {
            return Some(Cause::Uncertain);
        }
        let idle_for = self
            .last_at
            .map_or(Duration::MAX, |t| now.saturating_sub(t));
        if self.boxes.is_empty() {
            return (idle_for >= self.cfg.idle_interval).then_some(Cause::Idle);
        }
        if self.last_motion.moving > 0 {
            return (self.since >= u64::from(self.cfg.every)).then_some(Cause::Interval);
        }
        // Tracked but nothing moves (a parked car, a person standing still): the heartbeat,
        // often enough that no track expires for want of detections.
        let still_gap = u64::from(tracker.config().max_age_frames / 2).max(1);
        (self.since >= still_gap || idle_for >= self.cfg.idle_interval).then_some(Cause::Idle)
    }

    /// The frame went to the detector for `cause` at `now`.
    pub fn handed_out(&mut self, cause: Cause, now: Duration) {
        if self.cfg.kind == ScheduleKind::Adaptive {
            self.grid.remember(&self.boxes);
        }
        self.since = 0;
        self.last_at = Some(now);
        self.outstanding = Some(cause);
    }

    /// A detection's result was applied to the tracker and started `started` new tracks. A
    /// motion-caused detection that found nothing new makes motion wait twice as long next
    /// time; one that did (or any other cause's detection finding something) resets the wait.
    pub fn applied(&mut self, started: usize) {
        let base = u64::from(self.cfg.min_gap.max(1));
        match self.outstanding.take() {
            Some(Cause::Motion) if started == 0 => {
                let cap = (u64::from(self.cfg.every) * 4).max(base);
                self.motion_gap = (self.motion_gap * 2).min(cap);
            }
            _ if started > 0 => self.motion_gap = base,
            _ => {}
        }
    }
}

/// `b` grown by `margin` of its size on each side.
fn grow(b: &BBox, margin: f32) -> BBox {
    let (dx, dy) = (b.width() * margin, b.height() * margin);
    BBox::new(b.x0 - dx, b.y0 - dy, b.x1 + dx, b.y1 + dy)
}
