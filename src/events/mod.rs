//! Events: the objects lookout announces. A confirmed track is still only a guess of the
//! model's; it becomes an **event** once it is a true positive by the rules of `[events]`:
//! a label worth telling about, a median detection score high enough over enough detections
//! (a lower one for an object that has moved: distant walkers score low, phantoms stay put),
//! big enough, not standing in a mask, and inside a required zone if any are named.
//!
//! One real object should be one event, even when the tracker splits it: when an event's track
//! is lost (missed detections, a failed visual lock), the event waits `rejoin_seconds` for a
//! new track of the same kind where the lost one was heading and that looks like it (the
//! brightness of its box, [`crate::track::appearance`]), and goes on with it under the same event id; a
//! track that duplicates a live event's box does not start another. So an event's `TRACK_ID`
//! may change during its life; its `EVENT_ID` does not.
//!
//! [`Events`] is synchronous and thread-free, fed once per frame with the tracker's confirmed
//! tracks and the tracks that ended ([`Events::update`]); what happened comes out of
//! [`Events::drain`] as [`EventRecord`]s (start, update, end).

pub mod config;
pub mod polygon;

use std::time::Duration;

pub use config::{EventsConfig, EventsConfigError, Rules, ZonesConfig, DEFAULT_LABELS};

use crate::frame::GrayImage;
use crate::geom::BBox;
use crate::track::appearance::Appearance;
use crate::track::{EndReason, Track};
use crate::vocab::labels;

/// The scores kept per track for the median (the latest ones).
const SCORE_HISTORY: usize = 32;
/// A track whose box overlaps a live event's box this much (IoU), or lies this much inside
/// it (its own area's share), is that object again — or someone beside it, who becomes an
/// event once they part (checked on every frame).
const DUPLICATE_IOU: f32 = 0.3;
const DUPLICATE_INSIDE: f32 = 0.7;
/// A lost event rejoins a new track whose centre is within this many of the lost box's
/// heights (widths, horizontally) of where the lost track was heading...
const REJOIN_DISTANCE: f32 = 1.0;
/// ... plus this many box heights per second it was lost (a walker covers about one body
/// height a second, whatever the distance to the camera).
const REJOIN_HEIGHTS_PER_SECOND: f32 = 1.2;
/// ... and whose height is within this factor of the lost box's.
const REJOIN_SIZE_RATIO: f32 = 2.0;
/// A new track whose look is less alike a lost event's than this is someone else.
const REJOIN_MIN_LOOK: f32 = 0.65;
/// A new track this alike a lost event's look may be found farther from where it was heading
/// (`REJOIN_ALIKE_DISTANCE` instead of `REJOIN_DISTANCE`): people lost in a crowd come out of
/// it off their line.
const REJOIN_ALIKE_LOOK: f32 = 0.85;
const REJOIN_ALIKE_DISTANCE: f32 = 2.5;
/// Between two lost events within reach, the look counts as this many box sizes of distance.
const REJOIN_LOOK_WEIGHT: f32 = 0.5;
/// A box this much covered by another track's box shows that other object too: its look is
/// not learnt.
const LOOK_MAX_COVERED: f32 = 0.2;
/// A track confirmed this long before an event was lost is another object that was already
/// there (a phantom on a post or a cone, someone standing): it does not continue the event.
const REJOIN_NOT_BEFORE: Duration = Duration::from_secs(2);
/// The lost track's velocity is followed for at most this many frames (beyond, it is a guess).
const REJOIN_PREDICT_FRAMES: f32 = 10.0;
/// A track whose box's bottom centre is this many box heights (the larger of its first box and
/// its box now: a box that only grows or shrinks has not moved) from where it was first seen
/// has moved: `min_score_moving` is enough for it.
const MOVED_HEIGHTS: f32 = 1.0;

/// An event as reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Event id: 1, 2, 3… in order of start, never reused in a process's life.
    pub id: u64,
    /// The track that carries the event now.
    pub track_id: u64,
    /// The label (the track's voted class).
    pub class_id: usize,
    /// The best detection score seen.
    pub score: f32,
    /// The latest detection score.
    pub last_score: f32,
    /// The latest box, frame pixels.
    pub bbox: BBox,
    /// The box when the best score was seen (where a snapshot is best taken).
    pub best_bbox: BBox,
    /// The zones the object is in now, in `[zones]` order.
    pub zones: Vec<String>,
    /// The frame of `bbox`.
    pub seq: u64,
    /// Seconds from the event's start to `bbox` (to when it was lost, once it ended).
    pub seconds: f64,
}

/// What happened to an event.
#[derive(Clone, Debug, PartialEq)]
pub enum EventRecord {
    /// A track became an event.
    Start(Event),
    /// The event's label, zones or track changed.
    Update(Event),
    /// The object left, or was lost longer than `rejoin_seconds`.
    End(Event),
}

/// What is known about one confirmed track.
#[derive(Clone, Debug)]
struct Candidate {
    track_id: u64,
    first_at: Duration,
    /// The track's `hits` when last seen (a rise is a new detection).
    hits: u32,
    /// The latest detection scores.
    scores: Vec<f32>,
    /// The event this track carries.
    event: Option<u64>,
    /// Its box when first seen (where its object stood, and how tall it was).
    first_box: BBox,
    /// What its object looks like (learnt on detections).
    look: Option<Appearance>,
}

/// An event under way.
#[derive(Clone, Debug)]
struct Live {
    event: Event,
    started_at: Duration,
    /// Set while its track is lost: when, and the track's last velocity (px per frame).
    lost: Option<(Duration, (f32, f32))>,
    /// What its object looks like (its tracks' looks).
    look: Option<Appearance>,
}

/// The event rules at work. See the module documentation.
#[derive(Clone, Debug)]
pub struct Events {
    rules: Rules,
    candidates: Vec<Candidate>,
    live: Vec<Live>,
    records: Vec<EventRecord>,
    next_id: u64,
    started: u64,
}

impl Events {
    /// No events yet, under `rules`.
    pub fn new(rules: Rules) -> Events {
        Events {
            rules,
            candidates: Vec::new(),
            live: Vec::new(),
            records: Vec::new(),
            next_id: 1,
            started: 0,
        }
    }

    /// Events started so far.
    pub fn started(&self) -> u64 {
        self.started
    }

    /// What happened since the last call, in order.
    pub fn drain(&mut self) -> Vec<EventRecord> {
        std::mem::take(&mut self.records)
    }

    /// The event track `track_id` carries, if any.
    pub fn event_of(&self, track_id: u64) -> Option<u64> {
        self.candidates
            .iter()
            .find(|c| c.track_id == track_id)
            .and_then(|c| c.event)
    }

    /// Events whose object is in view now (not lost): id, class and box.
    pub fn in_view(&self) -> impl Iterator<Item = &Event> {
        self.live
            .iter()
            .filter(|l| l.lost.is_none())
            .map(|l| &l.event)
    }

    /// One frame: `tracks` are the tracker's confirmed tracks after frame `seq` (time `at`,
    /// frame `size` in pixels), `ended` the tracks that ended since the previous call.
    pub fn update(
        &mut self,
        seq: u64,
        at: Duration,
        size: (u32, u32),
        tracks: &[Track],
        ended: &[Track],
    ) {
        self.update_seen(seq, at, size, None, tracks, ended);
    }

    /// [`Events::update`] with the frame's gray plane, from which the look of each object a
    /// detection has just placed is learnt (so that a lost event is continued only by a track
    /// that looks like its object).
    pub fn update_seen(
        &mut self,
        seq: u64,
        at: Duration,
        size: (u32, u32),
        gray: Option<&GrayImage>,
        tracks: &[Track],
        ended: &[Track],
    ) {
        for t in ended {
            self.track_ended(t, at);
        }
        for t in tracks {
            let look = gray
                .filter(|_| t.detected && !covered(t, tracks))
                .and_then(|g| Appearance::of(g, &t.bbox));
            self.observe(t, seq, at, size, look);
        }
        self.expire(at);
    }

    /// New rules: every event under way ends (its end is in the next [`Events::drain`]); ids go
    /// on from where they were.
    pub fn reconfigure(&mut self, rules: Rules) {
        self.finish();
        self.rules = rules;
    }

    /// Ends every event (the run is over, or the tracks were started afresh).
    pub fn finish(&mut self) {
        self.candidates.clear();
        for l in std::mem::take(&mut self.live) {
            self.records.push(EventRecord::End(l.event));
        }
    }

    fn track_ended(&mut self, t: &Track, at: Duration) {
        let Some(pos) = self.candidates.iter().position(|c| c.track_id == t.id) else {
            return;
        };
        let cand = self.candidates.swap_remove(pos);
        let Some(id) = cand.event else { return };
        let Some(i) = self.live.iter().position(|l| l.event.id == id) else {
            return;
        };
        let gone = matches!(t.end_reason, Some(EndReason::LeftFrame | EndReason::Reset));
        if gone || self.rules.rejoin_seconds <= 0.0 {
            let l = self.live.swap_remove(i);
            self.records.push(EventRecord::End(l.event));
        } else {
            self.live[i].lost = Some((at, t.velocity));
        }
    }

    fn observe(
        &mut self,
        t: &Track,
        seq: u64,
        at: Duration,
        size: (u32, u32),
        look: Option<Appearance>,
    ) {
        let ci = match self.candidates.iter().position(|c| c.track_id == t.id) {
            Some(i) => i,
            None => {
                self.candidates.push(Candidate {
                    track_id: t.id,
                    first_at: at,
                    hits: 0,
                    scores: Vec::new(),
                    event: None,
                    first_box: t.bbox,
                    look: None,
                });
                self.candidates.len() - 1
            }
        };
        let c = &mut self.candidates[ci];
        if t.hits > c.hits {
            c.hits = t.hits;
            if c.scores.len() == SCORE_HISTORY {
                c.scores.remove(0);
            }
            c.scores.push(t.score);
        }
        if let Some(new) = &look {
            Appearance::fold(&mut c.look, new);
        }
        let zones = zones_at(&self.rules, &t.bbox, size);
        if let Some(id) = c.event {
            self.carry(id, t, seq, at, zones, look);
            return;
        }
        let now = look.as_ref().or(self.candidates[ci].look.as_ref());
        let since = self.candidates[ci].first_at;
        if let Some(id) = self.rejoin(t, now, seq, at, since) {
            self.candidates[ci].event = Some(id);
            self.carry(id, t, seq, at, zones, look);
            return;
        }
        if self.qualifies(&self.candidates[ci], t, at, size, &zones) && !self.duplicate(t) {
            let id = self.next_id;
            self.next_id += 1;
            self.started += 1;
            self.candidates[ci].event = Some(id);
            let event = Event {
                id,
                track_id: t.id,
                class_id: t.class_id,
                score: self.candidates[ci]
                    .scores
                    .iter()
                    .copied()
                    .fold(t.score, f32::max),
                last_score: t.score,
                bbox: t.bbox,
                best_bbox: t.bbox,
                zones,
                seq,
                seconds: 0.0,
            };
            self.records.push(EventRecord::Start(event.clone()));
            self.live.push(Live {
                event,
                started_at: at,
                lost: None,
                look: self.candidates[ci].look.clone(),
            });
        }
    }

    /// The event goes on with track `t` at frame `seq` (time `at`): its box, best score, label,
    /// zones and seconds so far; an update when the label, the zones or the track changed.
    fn carry(
        &mut self,
        id: u64,
        t: &Track,
        seq: u64,
        at: Duration,
        zones: Vec<String>,
        look: Option<Appearance>,
    ) {
        let Some(l) = self.live.iter_mut().find(|l| l.event.id == id) else {
            return;
        };
        if let Some(new) = &look {
            Appearance::fold(&mut l.look, new);
        }
        let e = &mut l.event;
        let changed = e.class_id != t.class_id || e.zones != zones || e.track_id != t.id;
        if t.score > e.score {
            e.score = t.score;
            e.best_bbox = t.bbox;
        }
        e.last_score = t.score;
        e.track_id = t.id;
        e.class_id = t.class_id;
        e.zones = zones;
        e.bbox = t.bbox;
        e.seq = seq;
        e.seconds = at.saturating_sub(l.started_at).as_secs_f64();
        l.lost = None;
        if changed {
            self.records.push(EventRecord::Update(e.clone()));
        }
    }

    /// A lost event that new track `t` (look `look`, when known; confirmed since `since`)
    /// continues: a track not already there well before the event was lost, of the same kind
    /// of object, about the same size, near where the lost track was heading, and — when both
    /// looks are known — alike enough. A look very much alike reaches farther. The nearest
    /// one wins, a more alike look counting as nearer.
    fn rejoin(
        &self,
        t: &Track,
        look: Option<&Appearance>,
        seq: u64,
        at: Duration,
        since: Duration,
    ) -> Option<u64> {
        let (cx, cy) = t.bbox.center();
        self.live
            .iter()
            .filter_map(|l| {
                let (lost_at, v) = l.lost?;
                let e = &l.event;
                if since + REJOIN_NOT_BEFORE < lost_at {
                    return None;
                }
                if !labels::confusable(e.class_id, t.class_id) {
                    return None;
                }
                let ratio = t.bbox.height().max(1.0) / e.bbox.height().max(1.0);
                if !(1.0 / REJOIN_SIZE_RATIO..=REJOIN_SIZE_RATIO).contains(&ratio) {
                    return None;
                }
                let sim = match (look, l.look.as_ref()) {
                    (Some(a), Some(b)) => Some(a.similarity(b)),
                    _ => None,
                };
                if sim.is_some_and(|s| s < REJOIN_MIN_LOOK) {
                    return None;
                }
                let reach = if sim.is_some_and(|s| s >= REJOIN_ALIKE_LOOK) {
                    REJOIN_ALIKE_DISTANCE
                } else {
                    REJOIN_DISTANCE
                };
                let frames = (seq.saturating_sub(e.seq) as f32).min(REJOIN_PREDICT_FRAMES);
                let (ex, ey) = e.bbox.center();
                let (px, py) = (ex + v.0 * frames, ey + v.1 * frames);
                let h = e.bbox.height().max(1.0);
                let away = at.saturating_sub(lost_at).as_secs_f32() * REJOIN_HEIGHTS_PER_SECOND * h;
                let dx = ((cx - px).abs() - away).max(0.0) / e.bbox.width().max(1.0);
                let dy = ((cy - py).abs() - away).max(0.0) / h;
                let d = dx.hypot(dy) - REJOIN_LOOK_WEIGHT * sim.unwrap_or(0.0);
                (dx <= reach && dy <= reach).then_some((d, e.id))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, id)| id)
    }

    /// Whether track `t` has become a true positive by the rules.
    fn qualifies(
        &self,
        c: &Candidate,
        t: &Track,
        at: Duration,
        size: (u32, u32),
        zones: &[String],
    ) -> bool {
        let r = &self.rules;
        r.allows(t.class_id)
            && t.hits >= r.min_detections
            && scored(r, c, t)
            && at.saturating_sub(c.first_at).as_secs_f64() >= r.min_seconds
            && t.bbox.height() >= r.min_height_of(t.class_id)
            && !masked(r, &t.bbox, size)
            && (r.required.is_empty()
                || r.required
                    .iter()
                    .any(|&i| zones.iter().any(|z| *z == r.zones[i].0)))
    }

    /// Whether track `t`'s box is a live event's object again (another track on it).
    fn duplicate(&self, t: &Track) -> bool {
        self.live.iter().any(|l| {
            l.lost.is_none()
                && labels::confusable(l.event.class_id, t.class_id)
                && (l.event.bbox.iou(&t.bbox) >= DUPLICATE_IOU
                    || inside(&t.bbox, &l.event.bbox) >= DUPLICATE_INSIDE)
        })
    }

    /// Ends the lost events that waited `rejoin_seconds`.
    fn expire(&mut self, at: Duration) {
        let wait = Duration::from_secs_f64(self.rules.rejoin_seconds);
        let mut i = 0;
        while i < self.live.len() {
            match self.live[i].lost {
                Some((lost_at, _)) if at.saturating_sub(lost_at) >= wait => {
                    let mut l = self.live.swap_remove(i);
                    l.event.seconds = lost_at.saturating_sub(l.started_at).as_secs_f64();
                    self.records.push(EventRecord::End(l.event));
                }
                _ => i += 1,
            }
        }
    }
}

/// Whether track `t`'s detection scores are high enough: a median of `min_score`, or of
/// `min_score_moving` once its object has moved [`MOVED_HEIGHTS`] box heights.
fn scored(r: &Rules, c: &Candidate, t: &Track) -> bool {
    let m = median(&c.scores);
    if m >= r.min_score {
        return true;
    }
    let ((x, y), (x0, y0)) = (foot_px(&t.bbox), foot_px(&c.first_box));
    let tall = t.bbox.height().max(c.first_box.height()).max(1.0);
    m >= r.min_score_moving && (x - x0).hypot(y - y0) >= MOVED_HEIGHTS * tall
}

/// Where an object stands in frame pixels: the bottom centre of its box.
fn foot_px(b: &BBox) -> (f32, f32) {
    (b.center().0, b.y1)
}

/// Whether track `t`'s box is partly covered by another of `tracks` (its look would mix two
/// objects).
fn covered(t: &Track, tracks: &[Track]) -> bool {
    tracks
        .iter()
        .any(|o| o.id != t.id && inside(&t.bbox, &o.bbox) > LOOK_MAX_COVERED)
}

/// The share of `a`'s area that lies inside `b`.
fn inside(a: &BBox, b: &BBox) -> f32 {
    let w = (a.x1.min(b.x1) - a.x0.max(b.x0)).max(0.0);
    let h = (a.y1.min(b.y1) - a.y0.max(b.y0)).max(0.0);
    w * h / a.area().max(1e-6)
}

/// The median of `v` (0 when empty).
fn median(v: &[f32]) -> f32 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f32::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Where an object stands: the bottom centre of its box, in frame fractions.
fn foot(b: &BBox, size: (u32, u32)) -> (f32, f32) {
    let (w, h) = (size.0.max(1) as f32, size.1.max(1) as f32);
    let (x, y) = foot_px(b);
    ((x / w).clamp(0.0, 1.0), (y / h).clamp(0.0, 1.0))
}

fn masked(r: &Rules, b: &BBox, size: (u32, u32)) -> bool {
    let (x, y) = foot(b, size);
    r.masks.iter().any(|m| m.contains(x, y))
}

/// The zones an object with box `b` stands in.
fn zones_at(r: &Rules, b: &BBox, size: (u32, u32)) -> Vec<String> {
    if r.zones.is_empty() {
        return Vec::new();
    }
    let (x, y) = foot(b, size);
    r.zones
        .iter()
        .filter(|(_, p)| p.contains(x, y))
        .map(|(n, _)| n.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: (u32, u32) = (640, 480);

    fn track(id: u64, class_id: usize, score: f32, hits: u32, bbox: BBox) -> Track {
        Track {
            id,
            class_id,
            score,
            bbox,
            velocity: (0.0, 0.0),
            seq: 0,
            first_seq: 0,
            detected: true,
            detected_seq: 0,
            age_frames: 0,
            hits,
            misses: 0,
            frames_since_detection: 0,
            visual_ok: true,
            end_reason: None,
        }
    }

    fn ended(mut t: Track, why: EndReason) -> Track {
        t.end_reason = Some(why);
        t
    }

    fn at(frame: u64) -> Duration {
        Duration::from_millis(100 * frame)
    }

    fn events(cfg: EventsConfig, zones: ZonesConfig) -> Events {
        Events::new(Rules::new(&cfg, &zones).unwrap_or_else(|e| panic!("{e:?}")))
    }

    fn person(id: u64, hits: u32, x: f32) -> Track {
        track(id, 0, 0.8, hits, BBox::new(x, 100.0, x + 40.0, 200.0))
    }

    fn starts(r: &[EventRecord]) -> Vec<u64> {
        r.iter()
            .filter_map(|r| match r {
                EventRecord::Start(e) => Some(e.id),
                _ => None,
            })
            .collect()
    }

    fn ends(r: &[EventRecord]) -> Vec<u64> {
        r.iter()
            .filter_map(|r| match r {
                EventRecord::End(e) => Some(e.id),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_confident_person_becomes_one_event_after_two_detections_and_ends_when_it_leaves() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        ev.update(0, at(0), SIZE, &[person(1, 1, 100.0)], &[]);
        assert!(ev.drain().is_empty(), "one detection is not enough");
        ev.update(5, at(5), SIZE, &[person(1, 2, 110.0)], &[]);
        let r = ev.drain();
        assert_eq!(starts(&r), vec![1]);
        assert_eq!(ev.event_of(1), Some(1));
        ev.update(20, at(20), SIZE, &[person(1, 3, 300.0)], &[]);
        assert!(ev.drain().is_empty());
        ev.update(
            6,
            at(6),
            SIZE,
            &[],
            &[ended(person(1, 2, 600.0), EndReason::LeftFrame)],
        );
        let r = ev.drain();
        assert_eq!(ends(&r), vec![1], "an object that left ends at once");
        assert!(
            matches!(r.first(), Some(EventRecord::End(e)) if (e.seconds - 1.5).abs() < 1e-9),
            "it lasted from frame 5 to frame 20: {r:?}"
        );
        assert_eq!(ev.started(), 1);
    }

    #[test]
    fn phantoms_do_not_become_events() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        let sky = BBox::new(0.0, 1.0, 561.0, 237.0);
        for k in 0..50u32 {
            // An airplane is not a default label; a person scoring 0.4 that stays put is below
            // min_score.
            let plane = track(1, 4, 0.9, k + 1, sky);
            let weak = track(2, 0, 0.4, k + 1, BBox::new(300.0, 300.0, 330.0, 380.0));
            ev.update(u64::from(k), at(u64::from(k)), SIZE, &[plane, weak], &[]);
        }
        assert!(ev.drain().is_empty());
        assert_eq!(ev.started(), 0);
    }

    #[test]
    fn the_median_score_decides_not_one_lucky_detection() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        let b = BBox::new(300.0, 300.0, 330.0, 380.0);
        // 0.6 once, then 0.36 and 0.4: the median (0.48, then 0.4) stays under 0.5.
        for (k, s) in [0.6f32, 0.36, 0.4].iter().enumerate() {
            let t = track(1, 16, *s, k as u32 + 1, b);
            ev.update(k as u64 * 5, at(k as u64 * 5), SIZE, &[t], &[]);
        }
        assert_eq!(ev.started(), 0);
    }

    #[test]
    fn a_distant_walker_scoring_under_min_score_becomes_an_event_once_it_has_moved() {
        // A 40-px person at 0.42 walks 5 px per detection: one box height after 8 rounds.
        let walker = |k: u32, x: f32| track(1, 0, 0.42, k + 1, BBox::new(x, 50.0, x + 16.0, 90.0));
        let run = |cfg: EventsConfig| {
            let mut ev = events(cfg, ZonesConfig::new());
            let mut first = None;
            for k in 0..20u32 {
                let x = 100.0 + 5.0 * k as f32;
                ev.update(
                    u64::from(k) * 5,
                    at(u64::from(k) * 5),
                    SIZE,
                    &[walker(k, x)],
                    &[],
                );
                if first.is_none() && !starts(&ev.drain()).is_empty() {
                    first = Some(k);
                }
            }
            first
        };
        assert_eq!(
            run(EventsConfig::default()),
            Some(8),
            "40 px moved at round 8"
        );
        for (floor, why) in [
            (0.5, "min_score_moving = min_score: the plain rule alone"),
            (0.45, "0.42 is under a 0.45 floor however far it walks"),
        ] {
            let cfg = EventsConfig {
                min_score_moving: floor,
                ..EventsConfig::default()
            };
            assert_eq!(run(cfg), None, "{why}");
        }

        // A phantom on a sign whose box takes in the post below it every other round (the first
        // too): its bottom edge jumps 40 px, twice the sign's 20-px height, but it has not moved.
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        for k in 0..20u32 {
            let y1 = if k % 2 == 0 { 110.0 } else { 70.0 };
            let t = track(1, 0, 0.42, k + 1, BBox::new(300.0, 50.0, 316.0, y1));
            ev.update(u64::from(k) * 5, at(u64::from(k) * 5), SIZE, &[t], &[]);
        }
        assert_eq!(
            ev.started(),
            0,
            "a box that only grows and shrinks stays put"
        );
    }

    #[test]
    fn a_lost_person_found_again_nearby_keeps_the_event_and_a_stranger_does_not() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        let mut p = person(1, 2, 100.0);
        p.velocity = (2.0, 0.0);
        ev.update(0, at(0), SIZE, &[p.clone()], &[]);
        assert_eq!(starts(&ev.drain()), vec![1]);
        // Track 1 is lost; 10 frames later track 2 appears where it was heading (100 + 2 × 10).
        ev.update(3, at(3), SIZE, &[], &[ended(p, EndReason::Missed)]);
        assert!(ev.drain().is_empty(), "a lost event waits");
        ev.update(10, at(10), SIZE, &[person(2, 1, 125.0)], &[]);
        let r = ev.drain();
        assert!(starts(&r).is_empty(), "{r:?}");
        assert_eq!(ev.event_of(2), Some(1), "the new track carries event 1");
        assert!(matches!(r.first(), Some(EventRecord::Update(e)) if e.track_id == 2));
        // A person far away is someone else.
        ev.update(
            11,
            at(11),
            SIZE,
            &[person(2, 1, 126.0), person(3, 2, 500.0)],
            &[],
        );
        assert_eq!(starts(&ev.drain()), vec![2]);
        // Both lost; nobody comes back: each ends after rejoin_seconds (3 s = 30 frames).
        ev.update(
            12,
            at(12),
            SIZE,
            &[],
            &[
                ended(person(2, 3, 126.0), EndReason::LostVisually),
                ended(person(3, 2, 500.0), EndReason::Missed),
            ],
        );
        ev.update(30, at(30), SIZE, &[], &[]);
        assert!(ev.drain().is_empty());
        ev.update(42, at(42), SIZE, &[], &[]);
        let mut e = ends(&ev.drain());
        e.sort_unstable();
        assert_eq!(e, vec![1, 2]);
    }

    /// A 160×120 gray plane (scale 4) of mid-gray with a dark figure where `dark` is and a
    /// light one where `light` is (frame pixels).
    fn scene(dark: &BBox, light: &BBox) -> GrayImage {
        let (w, h) = (160usize, 120usize);
        let mut data = vec![128u8; w * h];
        for (b, v) in [(dark, 20u8), (light, 235u8)] {
            for y in (b.y0 / 4.0) as usize..(b.y1 / 4.0) as usize {
                for x in (b.x0 / 4.0) as usize..(b.x1 / 4.0) as usize {
                    data[y * w + x] = v;
                }
            }
        }
        GrayImage {
            width: w as u32,
            height: h as u32,
            scale: 4.0,
            data,
        }
    }

    #[test]
    fn a_lost_event_goes_on_with_the_track_that_looks_like_its_object() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        // Two people side by side: a dark coat (track 1) and a light one (track 2).
        let mut dark = person(1, 2, 100.0);
        let mut light = person(2, 2, 300.0);
        dark.velocity = (2.0, 0.0);
        light.velocity = (-2.0, 0.0);
        let g = scene(&dark.bbox, &light.bbox);
        ev.update_seen(
            0,
            at(0),
            SIZE,
            Some(&g),
            &[dark.clone(), light.clone()],
            &[],
        );
        assert_eq!(starts(&ev.drain()), vec![1, 2]);
        // Both are lost where they crossed; two new tracks come out, the light coat on the
        // left (nearer where the dark one was heading).
        ev.update(
            3,
            at(3),
            SIZE,
            &[],
            &[
                ended(dark, EndReason::Missed),
                ended(light, EndReason::Missed),
            ],
        );
        let (a, b) = (person(3, 1, 140.0), person(4, 1, 260.0));
        let g = scene(&b.bbox, &a.bbox);
        ev.update_seen(8, at(8), SIZE, Some(&g), &[a, b], &[]);
        assert!(starts(&ev.drain()).is_empty());
        assert_eq!(ev.event_of(3), Some(2), "the light coat keeps its event");
        assert_eq!(ev.event_of(4), Some(1), "the dark coat keeps its event");
    }

    #[test]
    fn a_lost_event_is_not_continued_by_someone_who_looks_different() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        let dark = person(1, 2, 100.0);
        let far = BBox::new(600.0, 0.0, 640.0, 100.0);
        ev.update_seen(
            0,
            at(0),
            SIZE,
            Some(&scene(&dark.bbox, &far)),
            std::slice::from_ref(&dark),
            &[],
        );
        assert_eq!(starts(&ev.drain()), vec![1]);
        ev.update(2, at(2), SIZE, &[], &[ended(dark, EndReason::Missed)]);
        // A light coat right where the dark one was lost is someone else: a new event.
        let light = person(2, 2, 104.0);
        let g = scene(&far, &light.bbox);
        ev.update_seen(4, at(4), SIZE, Some(&g), &[light], &[]);
        assert_eq!(starts(&ev.drain()), vec![2]);
        assert_eq!(ev.event_of(2), Some(2));
    }

    #[test]
    fn a_lost_event_is_not_continued_by_a_track_that_was_there_all_along() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        // A weak phantom (a post, median 0.4: never an event) stands at x = 140 from the start.
        let post = |hits| track(9, 0, 0.4, hits, BBox::new(140.0, 100.0, 180.0, 200.0));
        for k in 0..30u64 {
            ev.update(k, at(k), SIZE, &[post(k as u32 + 1)], &[]);
        }
        // A person walks past it and is lost right beside it.
        let mut p = person(1, 2, 100.0);
        p.velocity = (2.0, 0.0);
        ev.update(30, at(30), SIZE, &[post(31), p.clone()], &[]);
        assert_eq!(starts(&ev.drain()), vec![1]);
        ev.update(
            31,
            at(31),
            SIZE,
            &[post(32)],
            &[ended(p, EndReason::Missed)],
        );
        ev.update(32, at(32), SIZE, &[post(33)], &[]);
        assert_eq!(
            ev.event_of(9),
            None,
            "the post does not carry the person's event"
        );
        // A new track where the person went does.
        ev.update(33, at(33), SIZE, &[post(34), person(2, 1, 120.0)], &[]);
        assert_eq!(ev.event_of(2), Some(1));
    }

    #[test]
    fn a_second_track_on_an_events_object_does_not_start_another_event() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        ev.update(0, at(0), SIZE, &[person(1, 2, 100.0)], &[]);
        ev.update(
            5,
            at(5),
            SIZE,
            &[person(1, 3, 100.0), person(2, 2, 104.0)],
            &[],
        );
        assert_eq!(ev.started(), 1);
    }

    #[test]
    fn masks_silence_and_zones_are_reported_and_required() {
        // Left half masked; zone "door" is the bottom right quarter.
        let cfg: EventsConfig =
            toml::from_str("masks = [[[0.0, 0.0], [0.5, 0.0], [0.5, 1.0], [0.0, 1.0]]]\n")
                .unwrap_or_else(|e| panic!("{e}"));
        let zones: ZonesConfig =
            toml::from_str("door = [[0.5, 0.5], [1.0, 0.5], [1.0, 1.0], [0.5, 1.0]]\n")
                .unwrap_or_else(|e| panic!("{e}"));
        let mut ev = events(cfg.clone(), zones.clone());
        let left = track(1, 0, 0.9, 5, BBox::new(100.0, 100.0, 140.0, 400.0));
        let right = track(2, 0, 0.9, 5, BBox::new(400.0, 100.0, 440.0, 400.0));
        ev.update(0, at(0), SIZE, &[left.clone(), right.clone()], &[]);
        let r = ev.drain();
        assert_eq!(starts(&r), vec![1]);
        assert!(
            matches!(r.first(), Some(EventRecord::Start(e)) if e.track_id == 2 && e.zones == ["door"])
        );
        // Walking up out of the zone is an update.
        let mut up = right.clone();
        up.bbox = BBox::new(400.0, 0.0, 440.0, 200.0);
        ev.update(1, at(1), SIZE, &[up.clone()], &[]);
        assert!(matches!(ev.drain().first(), Some(EventRecord::Update(e)) if e.zones.is_empty()));

        // With the zone required, the object outside it is no event.
        let need = EventsConfig {
            zones: vec!["door".into()],
            masks: Vec::new(),
            ..cfg
        };
        let mut ev = events(need, zones);
        let mut up3 = up;
        up3.id = 3;
        ev.update(0, at(0), SIZE, &[up3], &[]);
        assert_eq!(ev.started(), 0);
    }

    #[test]
    fn min_height_and_min_seconds_hold_back_small_and_fleeting_objects() {
        let cfg: EventsConfig = toml::from_str("min_seconds = 1.0\n[min_height]\nperson = 120\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let mut ev = events(cfg, ZonesConfig::new());
        let small = track(1, 0, 0.9, 5, BBox::new(0.0, 0.0, 20.0, 100.0));
        let tall = track(2, 0, 0.9, 5, BBox::new(300.0, 0.0, 360.0, 200.0));
        ev.update(0, at(0), SIZE, &[small.clone(), tall.clone()], &[]);
        ev.update(5, at(5), SIZE, &[small.clone(), tall.clone()], &[]);
        assert_eq!(ev.started(), 0, "tracked 0.5 s");
        ev.update(10, at(10), SIZE, &[small, tall], &[]);
        assert_eq!(ev.event_of(2), Some(1));
        assert_eq!(ev.started(), 1);
    }

    #[test]
    fn ten_thousand_frames_of_passing_objects_keep_nothing_behind() {
        let mut ev = events(EventsConfig::default(), ZonesConfig::new());
        for k in 0..10_000u64 {
            let id = k / 10 + 1;
            let t = person(id, (k % 10) as u32 + 1, 100.0);
            if k % 10 == 9 {
                ev.update(k, at(k), SIZE, &[], &[ended(t, EndReason::LeftFrame)]);
            } else {
                ev.update(k, at(k), SIZE, &[t], &[]);
            }
            ev.drain();
        }
        assert_eq!(ev.started(), 1000);
        assert!(ev.candidates.is_empty() && ev.live.is_empty());
    }
}
