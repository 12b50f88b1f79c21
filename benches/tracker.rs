//! Cost of the tracker: one `step` with 10 tracked objects on a 320×240 gray plane (the
//! budget is 1 ms per frame), the same with no objects (pyramid only), and one late
//! `apply_detections` associating 10 detections with 10 tracks, and the step plus the
//! adaptive schedule's decision (motion grid) per frame, and the step plus the event rules.
//!
//! The scene: ten textured rectangles (24×40 gray px, person-sized at scale 2) over a noisy
//! background, each moving back and forth at 1–2 px per frame. The motion is periodic, so a
//! precomputed cycle of frames can be replayed for ever with increasing sequence numbers.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use lookout::detect::BBox;
use lookout::events::{Events, EventsConfig, Rules, ZonesConfig};
use lookout::frame::GrayImage;
use lookout::schedule::{Cause, Planner, PlannerConfig, ScheduleKind};
use lookout::track::{Tracker, TrackerConfig};
use lookout::vocab::Detection;
use std::time::Duration;

const W: usize = 320;
const H: usize = 240;
const SCALE: f32 = 2.0;
const OBJECTS: usize = 10;
const OBJ_W: usize = 24;
const OBJ_H: usize = 40;
/// Frames in one period of the motion (out for half, back for half).
const PERIOD: usize = 20;

/// Deterministic pseudo-random numbers (64-bit LCG).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

/// A smooth random texture (bilinear upsampling of a coarse random grid).
fn texture(seed: u64) -> Vec<u8> {
    let mut rng = Lcg(seed);
    let (cw, ch) = (OBJ_W / 4 + 2, OBJ_H / 4 + 2);
    let coarse: Vec<f32> = (0..cw * ch)
        .map(|_| (rng.next() % 220) as f32 + 20.0)
        .collect();
    let mut out = vec![0u8; OBJ_W * OBJ_H];
    for y in 0..OBJ_H {
        for x in 0..OBJ_W {
            let (fx, fy) = (x as f32 / 4.0, y as f32 / 4.0);
            let (ix, iy) = (fx as usize, fy as usize);
            let (ax, ay) = (fx - ix as f32, fy - iy as f32);
            let v = (1.0 - ax) * (1.0 - ay) * coarse[iy * cw + ix]
                + ax * (1.0 - ay) * coarse[iy * cw + ix + 1]
                + (1.0 - ax) * ay * coarse[(iy + 1) * cw + ix]
                + ax * ay * coarse[(iy + 1) * cw + ix + 1];
            out[y * OBJ_W + x] = v as u8;
        }
    }
    out
}

/// Top-left gray position of object `i` at frame `t`.
fn position(i: usize, t: usize) -> (usize, usize) {
    let phase = t % PERIOD;
    let tri = if phase <= PERIOD / 2 {
        phase
    } else {
        PERIOD - phase
    };
    let speed = 1 + i % 2;
    let x = (i % 5) * 64 + 4 + speed * tri;
    let y = 40 + (i / 5) * 110 + (i % 3) * tri / 2;
    (x, y)
}

fn frame_box(i: usize, t: usize) -> BBox {
    let (x, y) = position(i, t);
    BBox::new(
        x as f32 * SCALE,
        y as f32 * SCALE,
        (x + OBJ_W) as f32 * SCALE,
        (y + OBJ_H) as f32 * SCALE,
    )
}

/// One period of frames.
fn frames() -> Vec<GrayImage> {
    let textures: Vec<Vec<u8>> = (0..OBJECTS).map(|i| texture(100 + i as u64)).collect();
    (0..PERIOD)
        .map(|t| {
            let mut rng = Lcg(t as u64);
            let mut data: Vec<u8> = (0..W * H).map(|_| 100 + (rng.next() % 21) as u8).collect();
            for (i, tex) in textures.iter().enumerate() {
                let (ox, oy) = position(i, t);
                for y in 0..OBJ_H {
                    let row = &mut data[(oy + y) * W + ox..][..OBJ_W];
                    row.copy_from_slice(&tex[y * OBJ_W..][..OBJ_W]);
                }
            }
            GrayImage {
                width: W as u32,
                height: H as u32,
                scale: SCALE,
                data,
            }
        })
        .collect()
}

fn detections(t: usize) -> Vec<Detection> {
    (0..OBJECTS)
        .map(|i| Detection {
            class_id: 0,
            score: 0.9,
            bbox: frame_box(i, t),
        })
        .collect()
}

/// A tracker following all ten objects, stepped through two periods; returns it and the
/// next sequence number. Panics if the scene does not keep ten healthy tracks, since the
/// numbers would then not measure what they claim to.
fn warmed_up(frames: &[GrayImage]) -> (Tracker, u64) {
    let cfg = TrackerConfig {
        confirm_hits: 1,
        max_misses: 1000,
        max_age_frames: 1_000_000,
        ..TrackerConfig::default()
    };
    let mut tracker = Tracker::new(cfg).unwrap_or_else(|e| panic!("bench config: {e}"));
    tracker.step(0, &frames[0]);
    tracker.apply_detections(0, &detections(0));
    for seq in 1..(2 * PERIOD as u64) {
        tracker.step(seq, &frames[seq as usize % PERIOD]);
    }
    let healthy = tracker.tracks().filter(|t| t.visual_ok).count();
    assert_eq!(healthy, OBJECTS, "the bench scene lost objects");
    (tracker, 2 * PERIOD as u64)
}

fn bench_step(c: &mut Criterion) {
    let frames = frames();
    let (mut tracker, mut seq) = warmed_up(&frames);
    c.bench_function("track_step_10_objects_320x240", |b| {
        b.iter(|| {
            let n = tracker
                .step(seq, black_box(&frames[seq as usize % PERIOD]))
                .len();
            seq += 1;
            n
        })
    });
    // Still following everything after however many iterations criterion ran.
    assert_eq!(tracker.tracks().filter(|t| t.visual_ok).count(), OBJECTS);

    // The adaptive schedule's per-frame work on top: motion grid + decision (the budget of
    // tracker + motion is 1 ms per frame).
    let (mut tracker, mut seq) = warmed_up(&frames);
    let plan = PlannerConfig::new(ScheduleKind::Adaptive, 5, Duration::from_secs(10));
    let mut planner = Planner::new(plan);
    planner.handed_out(Cause::Interval, Duration::ZERO);
    c.bench_function("track_step_and_plan_10_objects_320x240", |b| {
        b.iter(|| {
            let gray = black_box(&frames[seq as usize % PERIOD]);
            tracker.step(seq, gray);
            let due = planner.decide(gray, &tracker, Duration::from_millis(100 * seq));
            seq += 1;
            due
        })
    });

    // The event rules on top (defaults, one zone and one mask to test against): what the
    // tracker thread does per frame besides the step (the budget of tracker + events is 1 ms).
    // Every track counts as just detected, so every object's look is taken on every frame
    // (a live run takes them only on detection frames).
    let (mut tracker, mut seq) = warmed_up(&frames);
    // One detection per track in this scene: with `min_detections = 1` all ten are events.
    let cfg: EventsConfig =
        toml::from_str("min_detections = 1\nmasks = [[[0.0, 0.0], [1.0, 0.0], [1.0, 0.05]]]\n")
            .unwrap_or_else(|e| panic!("{e}"));
    let zones: ZonesConfig =
        toml::from_str("lawn = [[0.0, 0.5], [1.0, 0.5], [1.0, 1.0], [0.0, 1.0]]\n")
            .unwrap_or_else(|e| panic!("{e}"));
    let mut events = Events::new(Rules::new(&cfg, &zones).unwrap_or_else(|e| panic!("{e:?}")));
    let size = ((W as f32 * SCALE) as u32, (H as f32 * SCALE) as u32);
    let mut seen = Vec::new();
    let mut ran = 0u64;
    c.bench_function("track_step_and_events_10_objects_320x240", |b| {
        b.iter(|| {
            ran += 1;
            let gray = black_box(&frames[seq as usize % PERIOD]);
            tracker.step(seq, gray);
            let at = Duration::from_millis(100 * seq);
            seen.clear();
            seen.extend(tracker.confirmed().iter().cloned().map(|mut t| {
                t.detected = true;
                t
            }));
            events.update_seen(seq, at, size, Some(gray), &seen, &[]);
            seq += 1;
            events.drain().len()
        })
    });
    // (A filter that leaves this case out runs none of its frames.)
    if ran > 0 {
        assert_eq!(
            events.in_view().count(),
            OBJECTS,
            "every object is an event"
        );
    }

    let mut empty = Tracker::new(TrackerConfig::default()).unwrap_or_else(|e| panic!("{e}"));
    let mut seq = 0u64;
    c.bench_function("track_step_0_objects_320x240", |b| {
        b.iter(|| {
            let n = empty
                .step(seq, black_box(&frames[seq as usize % PERIOD]))
                .len();
            seq += 1;
            n
        })
    });
}

fn bench_apply(c: &mut Criterion) {
    let frames = frames();
    let (tracker, seq) = warmed_up(&frames);
    // Detections of three frames ago, as they would arrive from the detector thread.
    let det_seq = seq - 1 - 3;
    let dets = detections(det_seq as usize % PERIOD);
    c.bench_function("track_apply_detections_10x10_late", |b| {
        b.iter_batched(
            || tracker.clone(),
            |mut t| {
                let out = t.apply_detections(det_seq, black_box(&dets));
                assert_eq!(out.matched, OBJECTS);
                t
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench_step, bench_apply);
criterion_main!(benches);
