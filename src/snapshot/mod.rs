//! Snapshots: for each event, its best moment — the highest-scoring detection, preferring
//! one not cut by the frame's edge — as a JPEG around the object with its box drawn,
//! published (retained) on MQTT and optionally kept on disk.
//!
//! The choice is made on the tracker thread (a few comparisons per event per detection
//! round, [`Snapshots::detected`]); decoding the frame, cropping, drawing and encoding happen
//! on a thread of its own (`lookout-snapshot`) behind a queue of [`QUEUE`] jobs: when it is
//! full the oldest job is dropped and counted. A failure is counted and logged, never fatal.

pub mod config;
pub mod picture;
pub mod store;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use config::SnapshotsConfig;

use crate::events::Event;
use crate::frame::{monotonic_now, Frame};
use crate::geom::BBox;
use crate::logging::RateLimit;
use crate::mqtt::{payload::label_level, Mqtt};
use crate::notify::{Counters, Outlet};
use crate::vocab::{labels, Detection};
use picture::Style;

/// Jobs waiting for the encoder at most.
pub const QUEUE: usize = 4;
/// A better picture of an event replaces the last one at most this often.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// A detection is the event's object when their boxes overlap this much (IoU).
const MATCH_IOU: f32 = 0.3;
/// What is remembered of an event out of view goes after this long.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// A box within this many pixels of the frame's edge is cut by it.
const EDGE_PX: f32 = 2.0;

/// What makes one picture better than another (Frigate's rule, in spirit): a box not cut by
/// the frame's edge beats one that is; otherwise a score 0.05 higher or an area 10 % larger.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// The detection's score.
    pub score: f32,
    /// Its box's area in pixels.
    pub area: f32,
    /// Whether the box touches the frame's edge.
    pub edge: bool,
}

impl Candidate {
    /// Whether `self` is a better picture than `best`.
    pub fn better_than(&self, best: &Candidate) -> bool {
        match (self.edge, best.edge) {
            (false, true) => true,
            (true, false) => false,
            _ => self.score > best.score + 0.05 || self.area > best.area * 1.1,
        }
    }
}

/// One picture to make.
struct Job {
    camera: String,
    event: u64,
    label: String,
    frame: Arc<Frame>,
    bbox: BBox,
    score: f32,
    /// Wall-clock time of the frame.
    frame_time: f64,
    /// Wall-clock start of the event (the file's name).
    start_secs: u64,
}

/// What the tracker thread remembers per event.
#[derive(Clone, Copy)]
struct Best {
    candidate: Candidate,
    taken_at: Duration,
    start_secs: u64,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    stop: bool,
}

/// The snapshot outlet (see the module documentation).
pub struct Snapshots {
    cfg: SnapshotsConfig,
    mqtt: Option<Arc<Mqtt>>,
    counters: Arc<Counters>,
    /// Per camera and event number.
    best: Mutex<HashMap<(String, u64), Best>>,
    queue: Arc<(Mutex<Queue>, Condvar)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Snapshots {
    /// Starts the encoder thread. `mqtt`: where pictures are published (none: only `dir`).
    pub fn start(
        cfg: &SnapshotsConfig,
        mqtt: Option<Arc<Mqtt>>,
        counters: Arc<Counters>,
    ) -> Result<Arc<Snapshots>, String> {
        let s = Arc::new(Snapshots {
            cfg: cfg.clone(),
            mqtt,
            counters,
            best: Mutex::new(HashMap::new()),
            queue: Arc::new((Mutex::new(Queue::default()), Condvar::new())),
        });
        let worker = s.clone();
        std::thread::Builder::new()
            .name("lookout-snapshot".into())
            .spawn(move || worker.work())
            .map_err(|e| format!("cannot start lookout-snapshot: {e}"))?;
        Ok(s)
    }

    /// Ends the encoder thread once its queue is empty.
    pub fn stop(&self) {
        lock(&self.queue.0).stop = true;
        self.queue.1.notify_all();
    }

    fn style(&self) -> Style {
        Style {
            crop: self.cfg.crop,
            bounding_box: self.cfg.bounding_box,
            height: self.cfg.height,
            quality: self.cfg.quality,
        }
    }

    fn submit(&self, job: Job) {
        let (m, cv) = &*self.queue;
        let mut q = lock(m);
        q.jobs.push_back(job);
        let mut dropped = 0;
        while q.jobs.len() > QUEUE {
            q.jobs.pop_front();
            dropped += 1;
        }
        drop(q);
        cv.notify_all();
        if dropped > 0 {
            self.counters
                .snapshots_failed
                .fetch_add(dropped, Ordering::Relaxed);
        }
    }

    /// The encoder thread.
    fn work(&self) {
        let mut scratch = crate::preprocess::Scratch::default();
        let mut warn = RateLimit::per_minute();
        loop {
            let job = {
                let (m, cv) = &*self.queue;
                let mut q = lock(m);
                loop {
                    if let Some(j) = q.jobs.pop_front() {
                        break j;
                    }
                    if q.stop {
                        return;
                    }
                    q = cv
                        .wait_timeout(q, Duration::from_millis(500))
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0);
                }
            };
            if let Err(e) = self.make(&job, &mut scratch) {
                self.counters
                    .snapshots_failed
                    .fetch_add(1, Ordering::Relaxed);
                if let Some(held) = warn.hit(monotonic_now()) {
                    log::warn!(
                        LOOKOUT_EVENT = "snapshot_failed";
                        "snapshot of {} event {} not made: {e}{}",
                        job.camera,
                        job.event,
                        if held.count > 0 { format!(" ({} more failures held back)", held.count) } else { String::new() }
                    );
                }
            }
        }
    }

    fn make(&self, job: &Job, scratch: &mut crate::preprocess::Scratch) -> Result<(), String> {
        let f = &job.frame;
        let rgb = crate::preprocess::frame_to_rgb(f, scratch).map_err(|e| e.to_string())?;
        let jpeg = picture::render(&rgb, f.width, f.height, &job.bbox, &self.style())?;
        self.counters.snapshots.fetch_add(1, Ordering::Relaxed);
        if !self.cfg.dir.is_empty() {
            let bounds = store::Bounds {
                max_files: self.cfg.max_files,
                max_bytes: (self.cfg.max_mb * 1e6) as u64,
                max_age: (self.cfg.max_days > 0.0)
                    .then(|| Duration::from_secs_f64(self.cfg.max_days * 86_400.0)),
            };
            let name = store::file_name(&job.camera, job.start_secs, job.event, &job.label);
            store::save(
                &PathBuf::from(&self.cfg.dir),
                &name,
                &jpeg,
                &job.camera,
                &bounds,
            )
            .map_err(|e| format!("{}: {e}", self.cfg.dir))?;
        }
        if let Some(mqtt) = &self.mqtt {
            mqtt.snapshot(
                &job.camera,
                job.event,
                &job.label,
                jpeg,
                job.frame_time,
                job.bbox,
                job.score,
            );
        }
        Ok(())
    }
}

/// The detection of `reported` that is event `e`'s object, if any.
fn matching<'a>(e: &Event, reported: &'a [Detection]) -> Option<&'a Detection> {
    reported
        .iter()
        .filter(|d| labels::confusable(d.class_id, e.class_id) || d.class_id == e.class_id)
        .map(|d| (d, d.bbox.iou(&e.bbox)))
        .filter(|(_, iou)| *iou >= MATCH_IOU)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(d, _)| d)
}

impl Outlet for Snapshots {
    fn detected(
        &self,
        camera: &str,
        frame: &Arc<Frame>,
        reported: &[Detection],
        in_view: &[Event],
    ) {
        let now = monotonic_now();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let frame_time = wall - now.saturating_sub(frame.captured_at).as_secs_f64();
        let (w, h) = (frame.width as f32, frame.height as f32);
        let mut best = lock(&self.best);
        // An event out of view may come back (rejoined): its entry stays a while. Other
        // cameras' entries are theirs to keep.
        best.retain(|(c, id), b| {
            c != camera
                || in_view.iter().any(|e| e.id == *id)
                || now.saturating_sub(b.taken_at) < FORGET_AFTER
        });
        for e in in_view {
            let Some(d) = matching(e, reported) else {
                continue;
            };
            let b = d.bbox;
            let c = Candidate {
                score: d.score,
                area: (b.x1 - b.x0) * (b.y1 - b.y0),
                edge: b.x0 <= EDGE_PX
                    || b.y0 <= EDGE_PX
                    || b.x1 >= w - EDGE_PX
                    || b.y1 >= h - EDGE_PX,
            };
            let key = (camera.to_string(), e.id);
            let start_secs = best.get(&key).map(|x| x.start_secs).unwrap_or(wall as u64);
            let due = match best.get(&key) {
                None => true,
                Some(x) => {
                    c.better_than(&x.candidate) && now.saturating_sub(x.taken_at) >= MIN_INTERVAL
                }
            };
            if !due {
                continue;
            }
            best.insert(
                key,
                Best {
                    candidate: c,
                    taken_at: now,
                    start_secs,
                },
            );
            self.submit(Job {
                camera: camera.to_string(),
                event: e.id,
                label: label_level(e.class_id),
                frame: frame.clone(),
                bbox: b,
                score: d.score,
                frame_time,
                start_secs,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_uncut_box_beats_a_cut_one_then_score_or_area_decide() {
        let c = |score, area, edge| Candidate { score, area, edge };
        assert!(c(0.5, 100.0, false).better_than(&c(0.9, 900.0, true)));
        assert!(!c(0.9, 900.0, true).better_than(&c(0.5, 100.0, false)));
        assert!(c(0.56, 100.0, false).better_than(&c(0.5, 100.0, false)));
        assert!(!c(0.54, 105.0, false).better_than(&c(0.5, 100.0, false)));
        assert!(c(0.5, 111.0, false).better_than(&c(0.5, 100.0, false)));
    }
}
