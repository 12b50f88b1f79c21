//! Tracker behaviour on synthetic scenes: textured rectangles moving over a noisy background
//! on a 320×240 gray plane (scale 2, i.e. a 640×480 camera), with detections that arrive late.
//!
//! Everything here is deterministic (a fixed pseudo-random generator), needs no files, and
//! checks behaviour only; speed is measured in `benches/tracker.rs`.

use lookout::detect::BBox;
use lookout::frame::GrayImage;
use lookout::track::visual::{MedianFlow, Pyramid, VisualParams};
use lookout::track::{EndReason, Track, TrackEvent, Tracker, TrackerConfig};
use lookout::vocab::Detection;

const W: usize = 320;
const H: usize = 240;
const SCALE: f32 = 2.0;

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

/// A smooth random texture (bilinear upsampling of a coarse random grid, 4 px cells).
fn texture(w: usize, h: usize, seed: u64) -> Vec<u8> {
    let mut rng = Lcg(seed);
    let (cw, ch) = (w / 4 + 2, h / 4 + 2);
    let coarse: Vec<f32> = (0..cw * ch)
        .map(|_| (rng.next() % 220) as f32 + 20.0)
        .collect();
    let mut out = vec![0u8; w * h];
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32 / 4.0, y as f32 / 4.0);
            let (ix, iy) = (fx as usize, fy as usize);
            let (ax, ay) = (fx - ix as f32, fy - iy as f32);
            let v = (1.0 - ax) * (1.0 - ay) * coarse[iy * cw + ix]
                + ax * (1.0 - ay) * coarse[iy * cw + ix + 1]
                + (1.0 - ax) * ay * coarse[(iy + 1) * cw + ix]
                + ax * ay * coarse[(iy + 1) * cw + ix + 1];
            out[y * w + x] = v as u8;
        }
    }
    out
}

/// A textured rectangle at an integer gray-plane position.
struct Object {
    w: usize,
    h: usize,
    tex: Vec<u8>,
}

impl Object {
    fn new(w: usize, h: usize, seed: u64) -> Object {
        Object {
            w,
            h,
            tex: texture(w, h, seed),
        }
    }

    /// Its box in full-frame pixels when its top-left gray pixel is at `(x, y)`.
    fn frame_box(&self, x: i32, y: i32) -> BBox {
        BBox::new(
            x as f32 * SCALE,
            y as f32 * SCALE,
            (x + self.w as i32) as f32 * SCALE,
            (y + self.h as i32) as f32 * SCALE,
        )
    }
}

/// Renders objects (later ones on top) over fresh background noise (100..120).
fn render(objects: &[(&Object, i32, i32)], noise_seed: u64) -> GrayImage {
    let mut rng = Lcg(noise_seed);
    let mut data: Vec<u8> = (0..W * H).map(|_| 100 + (rng.next() % 21) as u8).collect();
    for (o, ox, oy) in objects {
        for y in 0..o.h {
            for x in 0..o.w {
                let (px, py) = (*ox + x as i32, *oy + y as i32);
                if px >= 0 && py >= 0 && (px as usize) < W && (py as usize) < H {
                    data[py as usize * W + px as usize] = o.tex[y * o.w + x];
                }
            }
        }
    }
    GrayImage {
        width: W as u32,
        height: H as u32,
        scale: SCALE,
        data,
    }
}

fn det(class_id: usize, bbox: BBox) -> Detection {
    Detection {
        class_id,
        score: 0.9,
        bbox,
    }
}

fn tracker(cfg: TrackerConfig) -> Tracker {
    Tracker::new(cfg).unwrap_or_else(|e| panic!("config: {e}"))
}

fn centre_error(a: &BBox, b: &BBox) -> f32 {
    let (ax, ay) = a.center();
    let (bx, by) = b.center();
    (ax - bx).hypot(ay - by)
}

fn by_id(tracks: &[Track], id: u64) -> &Track {
    tracks
        .iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("track {id} missing from {tracks:?}"))
}

#[test]
fn median_flow_follows_a_textured_square_for_20_frames() {
    let obj = Object::new(40, 40, 11);
    let cfg = TrackerConfig::default();
    let params = VisualParams {
        patch_size: cfg.visual.patch_size as usize,
        levels: VisualParams::levels_for(cfg.visual.patch_size as usize, cfg.visual.search_radius),
        grid: cfg.visual.grid as usize,
        max_fb_error: cfg.visual.max_fb_error,
        max_iterations: cfg.visual.max_iterations,
    };
    let mut flow = MedianFlow::new(params);
    let (mut prev, mut cur) = (Pyramid::new(), Pyramid::new());
    let pos = |t: i32| (40 + 3 * t, 60 + t);
    prev.build(&render(&[(&obj, pos(0).0, pos(0).1)], 0), params.levels, 11);
    // The box is only ever moved by the flow estimates (no motion model, zero guess).
    let mut bbox = BBox::new(40.0, 60.0, 80.0, 100.0);
    for t in 1..=20 {
        let (x, y) = pos(t);
        assert!(cur.build(&render(&[(&obj, x, y)], t as u64), params.levels, 11));
        let est = flow
            .estimate(&prev, &cur, &bbox, (0.0, 0.0), cfg.visual.search_radius)
            .unwrap_or_else(|| panic!("flow lost the square at frame {t}"));
        bbox = est.apply(&bbox);
        let truth = BBox::new(x as f32, y as f32, x as f32 + 40.0, y as f32 + 40.0);
        let err = centre_error(&bbox, &truth);
        assert!(err < 2.0, "frame {t}: error {err} px, box {bbox:?}");
        assert!((bbox.width() - 40.0).abs() < 2.0, "frame {t}: {bbox:?}");
        std::mem::swap(&mut prev, &mut cur);
    }
}

#[test]
fn tracker_follows_a_textured_square_between_detections() {
    let obj = Object::new(40, 40, 12);
    let mut tr = tracker(TrackerConfig {
        confirm_hits: 1,
        ..TrackerConfig::default()
    });
    let pos = |t: i32| (30 + 3 * t, 100 - t);
    tr.step(0, &render(&[(&obj, pos(0).0, pos(0).1)], 100));
    tr.apply_detections(0, &[det(0, obj.frame_box(pos(0).0, pos(0).1))]);
    for t in 1..=20 {
        let (x, y) = pos(t);
        let tracks = tr.step(t as u64, &render(&[(&obj, x, y)], 100 + t as u64));
        assert_eq!(tracks.len(), 1, "frame {t}");
        // 2 gray pixels = 4 full-frame pixels.
        let err = centre_error(&tracks[0].bbox, &obj.frame_box(x, y)) / SCALE;
        assert!(err < 2.0, "frame {t}: error {err} gray px, {:?}", tracks[0]);
        assert!(tracks[0].visual_ok, "frame {t}");
    }
    // By now the motion model knows the velocity: 6 and -2 full-frame px per frame.
    let (vx, vy) = tr.tracks().next().map(|t| t.velocity).unwrap_or_default();
    assert!(
        (vx - 6.0).abs() < 1.0 && (vy + 2.0).abs() < 1.0,
        "velocity {vx}, {vy}"
    );
}

/// Two squares side by side moving right so fast that after three frames the left one sits
/// where the right one was. Detections of frame k applied at k+3 must be matched by where the
/// tracks were at k; matching by current positions would hand the right square's detection to
/// the left square's track.
#[test]
fn late_detections_match_tracks_by_their_positions_at_the_detection_frame() {
    let a = Object::new(32, 32, 21);
    let b = Object::new(32, 32, 22);
    let pos_a = |t: i32| (20 + 12 * t, 100);
    let pos_b = |t: i32| (60 + 12 * t, 100);
    let frame = |t: i32| {
        render(
            &[(&a, pos_a(t).0, pos_a(t).1), (&b, pos_b(t).0, pos_b(t).1)],
            1000 + t as u64,
        )
    };
    let dets = |t: i32| {
        vec![
            det(0, a.frame_box(pos_a(t).0, pos_a(t).1)),
            det(0, b.frame_box(pos_b(t).0, pos_b(t).1)),
        ]
    };
    let mut tr = tracker(TrackerConfig::default());
    for t in 0..=9 {
        tr.step(t as u64, &frame(t));
        match t {
            // Birth from frame 0 (on time), confirmation from frame 3 (on time).
            0 | 3 => {
                tr.apply_detections(t as u64, &dets(t));
            }
            // Frame 6's detections arrive at frame 9.
            9 => {
                let late = dets(6);
                let current: Vec<BBox> = tr.tracks().map(|t| t.bbox).collect();
                // The trap is real: by current positions, B's detection overlaps A's track.
                assert!(late[1].bbox.iou(&current[0]) > 0.5);
                assert!(late[1].bbox.iou(&current[1]) < 0.1);
                let out = tr.apply_detections(6, &late);
                assert_eq!((out.matched, out.started, out.missed), (2, 0, 0));
            }
            _ => {}
        }
    }
    let tracks: Vec<Track> = tr.tracks().cloned().collect();
    assert_eq!(tracks.len(), 2);
    let (ta, tb) = (by_id(&tracks, 1), by_id(&tracks, 2));
    assert!(
        centre_error(&ta.bbox, &a.frame_box(pos_a(9).0, pos_a(9).1)) < 6.0,
        "{ta:?}"
    );
    assert!(
        centre_error(&tb.bbox, &b.frame_box(pos_b(9).0, pos_b(9).1)) < 6.0,
        "{tb:?}"
    );
    assert_eq!((ta.hits, tb.hits), (3, 3));
    // Applied at frame 9 (so `detected` on frame 9's line), made on frame 6.
    assert!(ta.detected && tb.detected);
    assert_eq!((ta.detected_seq, tb.detected_seq), (6, 6));
}

#[test]
fn tracks_are_born_after_confirm_hits_and_die_after_max_misses() {
    let obj = Object::new(30, 50, 31);
    let (x, y) = (100, 80);
    let bbox = obj.frame_box(x, y);
    let mut tr = tracker(TrackerConfig {
        confirm_hits: 2,
        confirm_score: 1.1, // off: confirmation by hits alone
        max_misses: 2,
        ..TrackerConfig::default()
    });
    let detect_every = 5;
    let mut started_at = None;
    let mut ended = None;
    for seq in 0..=30u64 {
        tr.step(seq, &render(&[(&obj, x, y)], seq));
        if seq % detect_every == 0 {
            // Detected at 0 and 5, then never again.
            let dets = if seq <= 5 { vec![det(0, bbox)] } else { vec![] };
            tr.apply_detections(seq, &dets);
        }
        for e in tr.drain_events() {
            match e {
                TrackEvent::Started(t) => {
                    assert!(started_at.is_none(), "started twice");
                    assert_eq!(t.id, 1);
                    assert_eq!(t.hits, 2);
                    started_at = Some(seq);
                }
                TrackEvent::Ended(t) => {
                    assert!(ended.is_none(), "ended twice");
                    ended = Some((seq, t));
                }
            }
        }
        let reported = tr.tracks().count();
        match seq {
            0..=4 => assert_eq!(reported, 0, "tentative track reported at {seq}"),
            5..=14 => assert_eq!(reported, 1, "confirmed track missing at {seq}"),
            _ => assert_eq!(reported, 0, "dead track reported at {seq}"),
        }
    }
    assert_eq!(started_at, Some(5));
    let (seq, last) = ended.unwrap_or_else(|| panic!("no Ended event"));
    // Missed at 10 and 15: two rounds.
    assert_eq!(seq, 15);
    assert_eq!(last.id, 1);
    assert_eq!(last.end_reason, Some(EndReason::Missed));
    assert_eq!(last.misses, 2);
    assert!(centre_error(&last.bbox, &bbox) < 3.0, "{last:?}");
}

#[test]
fn ids_stay_stable_for_two_crossing_objects_over_50_frames() {
    let a = Object::new(36, 60, 41);
    let b = Object::new(36, 60, 42);
    // A walks right, B walks left, on different rows: at the crossing 60 % of B is hidden
    // behind A and their boxes have IoU ≈ 0.43, above the association threshold.
    let pos_a = |t: i32| (40 + 4 * t, 80);
    let pos_b = |t: i32| (250 - 4 * t, 104);
    let truth = |t: i32| {
        [
            a.frame_box(pos_a(t).0, pos_a(t).1),
            b.frame_box(pos_b(t).0, pos_b(t).1),
        ]
    };
    let mut tr = tracker(TrackerConfig::default());
    let (detect_every, delay) = (5, 2);
    let mut id_a = None;
    let mut id_b = None;
    for t in 0..50 {
        let img = render(
            &[(&b, pos_b(t).0, pos_b(t).1), (&a, pos_a(t).0, pos_a(t).1)],
            5000 + t as u64,
        );
        tr.step(t as u64, &img);
        if t >= delay && (t - delay) % detect_every == 0 {
            let k = t - delay;
            let [ba, bb] = truth(k);
            tr.apply_detections(k as u64, &[det(0, ba), det(0, bb)]);
        }
        let tracks: Vec<Track> = tr.tracks().cloned().collect();
        let [ba, bb] = truth(t);
        for track in &tracks {
            let (ea, eb) = (
                centre_error(&track.bbox, &ba),
                centre_error(&track.bbox, &bb),
            );
            let (slot, which) = if ea < eb {
                (&mut id_a, "A")
            } else {
                (&mut id_b, "B")
            };
            assert!(
                ea.min(eb) < 12.0,
                "frame {t}: track {} is {} px from {which}",
                track.id,
                ea.min(eb)
            );
            match slot {
                None => *slot = Some(track.id),
                Some(id) => assert_eq!(*id, track.id, "frame {t}: {which} changed id"),
            }
        }
        if t >= 10 {
            assert_eq!(tracks.len(), 2, "frame {t}: {tracks:?}");
        }
    }
    assert_eq!((id_a, id_b), (Some(1), Some(2)));
    let events = tr.drain_events();
    assert_eq!(events.len(), 2, "only the two starts: {events:?}");
}

#[test]
fn detected_marks_the_frame_a_detection_is_applied_on() {
    let obj = Object::new(40, 40, 51);
    let (x, y) = (150, 100);
    let bbox = obj.frame_box(x, y);
    let mut tr = tracker(TrackerConfig {
        confirm_hits: 1,
        ..TrackerConfig::default()
    });
    let img = |seq: u64| render(&[(&obj, x, y)], seq);
    tr.step(0, &img(0));
    tr.apply_detections(0, &[det(0, bbox)]);
    assert!(tr.tracks().all(|t| t.detected));
    assert_eq!(tr.tracks().count(), 1);
    assert!(tr.step(1, &img(1)).iter().all(|t| !t.detected));
    tr.step(2, &img(2));
    // Detections for an older frame: applied now (detected on this frame's line), made on 1.
    tr.apply_detections(1, &[det(0, bbox)]);
    assert!(tr
        .tracks()
        .all(|t| t.detected && t.detected_seq == 1 && t.hits == 2));
    tr.step(3, &img(3));
    tr.apply_detections(3, &[det(0, bbox)]);
    assert!(tr.tracks().all(|t| t.detected && t.hits == 3));
    assert!(tr.step(4, &img(4)).iter().all(|t| !t.detected));
}

#[test]
fn reset_ends_every_confirmed_track() {
    let obj = Object::new(40, 40, 61);
    let mut tr = tracker(TrackerConfig {
        confirm_hits: 1,
        ..TrackerConfig::default()
    });
    tr.step(0, &render(&[(&obj, 10, 10), (&obj, 200, 100)], 0));
    tr.apply_detections(
        0,
        &[
            det(0, obj.frame_box(10, 10)),
            det(2, obj.frame_box(200, 100)),
        ],
    );
    assert_eq!(tr.drain_events().len(), 2);
    tr.reset();
    let ended: Vec<(u64, Option<EndReason>)> = tr
        .drain_events()
        .into_iter()
        .filter_map(|e| match e {
            TrackEvent::Ended(t) => Some((t.id, t.end_reason)),
            TrackEvent::Started(_) => None,
        })
        .collect();
    assert_eq!(
        ended,
        vec![(1, Some(EndReason::Reset)), (2, Some(EndReason::Reset))]
    );
    assert_eq!(tr.tracks().count(), 0);
    assert_eq!(tr.seq(), None);
    // Ids keep counting after a reset.
    tr.step(0, &render(&[(&obj, 10, 10)], 1));
    tr.apply_detections(0, &[det(0, obj.frame_box(10, 10))]);
    assert_eq!(tr.tracks().map(|t| t.id).collect::<Vec<_>>(), vec![3]);
}
