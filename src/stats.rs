//! Counters and latency histograms of the running pipeline, turned into a periodic report.
//!
//! The [`Window`]s (one per stats interval, one for the whole run) live on the publishing
//! (tracker) thread; the detector thread's timings reach them with each result, so nothing
//! here is shared between threads.

use std::time::Duration;

use hdrhistogram::Histogram;

/// A latency histogram in microseconds (1 µs .. 1 h, 3 significant digits).
#[derive(Clone, Debug)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        // Bounds are constants that hdrhistogram accepts; fall back to an auto-resizing one.
        let h = Histogram::new_with_bounds(1, 3_600_000_000, 3)
            .or_else(|_| Histogram::new(3))
            .unwrap_or_else(|_| unreachable_histogram());
        Latency(h)
    }
}

fn unreachable_histogram() -> Histogram<u64> {
    // `Histogram::new(3)` only fails for sigfig > 5; this is never reached.
    Histogram::new_with_max(2, 1).unwrap_or_else(|_| std::process::abort())
}

impl Latency {
    /// Records one duration.
    pub fn record(&mut self, d: Duration) {
        let us = d.as_micros().clamp(1, 3_600_000_000) as u64;
        self.0.saturating_record(us);
    }
    /// The `q` quantile (0..1) in milliseconds, 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.value_at_quantile(q) as f64 / 1000.0
        }
    }
    /// The largest recorded value in milliseconds.
    pub fn max_ms(&self) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.max() as f64 / 1000.0
        }
    }
    /// The sum of all samples in milliseconds (from the histogram's mean, so within its
    /// 3-significant-digit precision).
    pub fn sum_ms(&self) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.mean() * self.0.len() as f64 / 1000.0
        }
    }
    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.0.len()
    }
    /// Each distinct recorded value (µs, the middle of its 3-significant-digit bucket) with
    /// its count, in ascending order: a window's samples for another histogram's buckets.
    pub fn recorded_us(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter_recorded().map(|v| {
            (
                self.0.median_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
    }
    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Latency) {
        let _ = self.0.add(&other.0);
    }
    /// Forgets every sample.
    pub fn clear(&mut self) {
        self.0.reset();
    }
}

/// Counters and histograms of one reporting window (and, merged, of a whole run).
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// Frames the source delivered.
    pub captured: u64,
    /// Frames the tracker processed and published.
    pub processed: u64,
    /// Detections (model runs) completed.
    pub detections: u64,
    /// Detection requests skipped because the detector was still busy.
    pub detect_skipped: u64,
    /// Detections handed to the detector because `detect_every` frames had passed.
    pub detect_interval: u64,
    /// … because of motion outside the tracks (adaptive schedule).
    pub detect_motion: u64,
    /// … because a track needed fresh evidence (adaptive schedule).
    pub detect_uncertain: u64,
    /// … as the idle heartbeat (adaptive schedule).
    pub detect_idle: u64,
    /// Frames dropped: replaced in the newest-frame slot before the tracker took them, plus
    /// stale buffers the source discarded.
    pub dropped: u64,
    /// Damaged frames the source skipped (a torn or undecodable JPEG, a V4L2 buffer shorter
    /// than a frame or flagged as an error by the driver).
    pub corrupt: u64,
    /// Model time (preprocess excluded).
    pub model: Latency,
    /// Preprocessing time of detection frames.
    pub preprocess: Latency,
    /// Decode + NMS time.
    pub postprocess: Latency,
    /// Tracker time per frame (gray plane + step + reconciliation).
    pub track: Latency,
    /// The gray-plane part of `track`: frame → small gray image, including JPEG decoding of
    /// MJPEG frames.
    pub gray: Latency,
    /// Time the capture thread spent in `FrameSource::next` per delivered frame (a camera:
    /// mostly waiting for the frame; a file: reading it). Filled only in a run's total.
    pub capture: Latency,
    /// Frame age when its results were published.
    pub age: Latency,
    /// Lines of the tracks file that could not be written (full disk, read-only file
    /// system, …) and were dropped.
    pub tracks_lines_lost: u64,
    /// Wall time the window covers.
    pub elapsed: Duration,
}

impl Window {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Window) {
        self.captured += other.captured;
        self.processed += other.processed;
        self.detections += other.detections;
        self.detect_skipped += other.detect_skipped;
        self.detect_interval += other.detect_interval;
        self.detect_motion += other.detect_motion;
        self.detect_uncertain += other.detect_uncertain;
        self.detect_idle += other.detect_idle;
        self.dropped += other.dropped;
        self.corrupt += other.corrupt;
        self.model.merge(&other.model);
        self.preprocess.merge(&other.preprocess);
        self.postprocess.merge(&other.postprocess);
        self.track.merge(&other.track);
        self.gray.merge(&other.gray);
        self.capture.merge(&other.capture);
        self.age.merge(&other.age);
        self.tracks_lines_lost += other.tracks_lines_lost;
        self.elapsed += other.elapsed;
    }

    fn rate(&self, n: u64) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            n as f64 / s
        } else {
            0.0
        }
    }

    /// The figures of this window, rounded for people.
    pub fn report(&self, tracks: usize) -> Report {
        let r1 = |x: f64| (x * 10.0).round() / 10.0;
        let r2 = |x: f64| (x * 100.0).round() / 100.0;
        Report {
            fps: r1(self.rate(self.processed)),
            capture_fps: r1(self.rate(self.captured)),
            detect_fps: r2(self.rate(self.detections)),
            model_time_ms: r1(self.model.quantile_ms(0.5)),
            model_time_p95_ms: r1(self.model.quantile_ms(0.95)),
            model_time_max_ms: r1(self.model.max_ms()),
            track_time_ms: r2(self.track.quantile_ms(0.5)),
            frame_age_ms: r1(self.age.quantile_ms(0.5)),
            frame_age_p95_ms: r1(self.age.quantile_ms(0.95)),
            frames_dropped: self.dropped,
            frames_corrupt: self.corrupt,
            detect_motion: self.detect_motion,
            detect_uncertain: self.detect_uncertain,
            detect_interval: self.detect_interval,
            detect_idle: self.detect_idle,
            tracks_lines_lost: self.tracks_lines_lost,
            tracks,
        }
    }
}

/// The periodic stats line: these names become the journal fields (`FPS`, `DETECT_FPS`, …).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Report {
    /// Processed (published) frames per second.
    pub fps: f64,
    /// Frames per second delivered by the source.
    pub capture_fps: f64,
    /// Model runs per second.
    pub detect_fps: f64,
    /// Model time p50.
    pub model_time_ms: f64,
    /// Model time p95.
    pub model_time_p95_ms: f64,
    /// Model time max.
    pub model_time_max_ms: f64,
    /// Tracker time per frame p50.
    pub track_time_ms: f64,
    /// Frame age p50 (capture → results published).
    pub frame_age_ms: f64,
    /// Frame age p95.
    pub frame_age_p95_ms: f64,
    /// Frames dropped in the window.
    pub frames_dropped: u64,
    /// Damaged frames skipped in the window.
    pub frames_corrupt: u64,
    /// Detections asked for by motion outside the tracks in the window.
    pub detect_motion: u64,
    /// Detections asked for by uncertain tracks.
    pub detect_uncertain: u64,
    /// Detections asked for because `detect_every` frames had passed.
    pub detect_interval: u64,
    /// Heartbeat detections while idle.
    pub detect_idle: u64,
    /// Lines of the tracks file dropped in the window because they could not be written.
    pub tracks_lines_lost: u64,
    /// Confirmed tracks now.
    pub tracks: usize,
}

impl Report {
    /// Logs the report as one journal entry with the stable fields of the stats event and
    /// `CAMERA=camera`.
    pub fn log(&self, camera: &str) {
        use JournalField as F;
        log_event(
            module_path!(),
            "stats",
            Some(camera),
            &[
                F::Fps(self.fps),
                F::CaptureFps(self.capture_fps),
                F::DetectFps(self.detect_fps),
                F::ModelTimeMs(self.model_time_ms),
                F::ModelTimeP95Ms(self.model_time_p95_ms),
                F::ModelTimeMaxMs(self.model_time_max_ms),
                F::TrackTimeMs(self.track_time_ms),
                F::FrameAgeMs(self.frame_age_ms),
                F::FrameAgeP95Ms(self.frame_age_p95_ms),
                F::FramesDropped(self.frames_dropped),
                F::FramesCorrupt(self.frames_corrupt),
                F::DetectMotion(self.detect_motion),
                F::DetectUncertain(self.detect_uncertain),
                F::DetectInterval(self.detect_interval),
                F::DetectIdle(self.detect_idle),
                F::TracksLinesLost(self.tracks_lines_lost),
                F::Tracks(self.tracks as u64),
            ],
            format_args!(
                "{:.1} fps (capture {:.1}), detect {:.2}/s, model {:.1} ms p50 / {:.1} ms p95, track {:.2} ms, frame age {:.0} ms p50 / {:.0} ms p95, {} dropped, {} track(s){}",
                self.fps, self.capture_fps, self.detect_fps, self.model_time_ms, self.model_time_p95_ms,
                self.track_time_ms, self.frame_age_ms, self.frame_age_p95_ms, self.frames_dropped, self.tracks,
                match self.frames_corrupt {
                    0 => String::new(),
                    n => format!(", {n} damaged frame(s) skipped"),
                }
            ),
        );
    }
}

/// The numeric fields of the `stats` and `summary` journal events, each with its figure: the
/// one place their names are spelled (`journalctl LOOKOUT_EVENT=stats` shows them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JournalField {
    /// `FPS`: processed frames per second.
    Fps(f64),
    /// `CAPTURE_FPS`: frames per second the source delivered.
    CaptureFps(f64),
    /// `DETECT_FPS`: model runs per second.
    DetectFps(f64),
    /// `MODEL_TIME_MS`: model time p50.
    ModelTimeMs(f64),
    /// `MODEL_TIME_P95_MS`: model time p95.
    ModelTimeP95Ms(f64),
    /// `MODEL_TIME_MAX_MS`: model time max.
    ModelTimeMaxMs(f64),
    /// `TRACK_TIME_MS`: tracker time per frame p50.
    TrackTimeMs(f64),
    /// `FRAME_AGE_MS`: frame age p50.
    FrameAgeMs(f64),
    /// `FRAME_AGE_P95_MS`: frame age p95.
    FrameAgeP95Ms(f64),
    /// `FRAMES_DROPPED`: frames dropped.
    FramesDropped(u64),
    /// `FRAMES_CORRUPT`: damaged frames skipped.
    FramesCorrupt(u64),
    /// `DETECT_MOTION`: detections asked for by motion.
    DetectMotion(u64),
    /// `DETECT_UNCERTAIN`: detections asked for by uncertain tracks.
    DetectUncertain(u64),
    /// `DETECT_INTERVAL`: detections asked for by `detect_every`.
    DetectInterval(u64),
    /// `DETECT_IDLE`: heartbeat detections while idle.
    DetectIdle(u64),
    /// `TRACKS_LINES_LOST`: tracks file lines that could not be written.
    TracksLinesLost(u64),
    /// `TRACKS`: confirmed tracks now (stats) or tracks seen (summary).
    Tracks(u64),
    /// `EVENTS`: events started (summary).
    Events(u64),
    /// `FRAMES`: frames processed by the run.
    Frames(u64),
}

impl JournalField {
    /// The field's journal name.
    pub fn name(&self) -> &'static str {
        match self {
            JournalField::Fps(_) => "FPS",
            JournalField::CaptureFps(_) => "CAPTURE_FPS",
            JournalField::DetectFps(_) => "DETECT_FPS",
            JournalField::ModelTimeMs(_) => "MODEL_TIME_MS",
            JournalField::ModelTimeP95Ms(_) => "MODEL_TIME_P95_MS",
            JournalField::ModelTimeMaxMs(_) => "MODEL_TIME_MAX_MS",
            JournalField::TrackTimeMs(_) => "TRACK_TIME_MS",
            JournalField::FrameAgeMs(_) => "FRAME_AGE_MS",
            JournalField::FrameAgeP95Ms(_) => "FRAME_AGE_P95_MS",
            JournalField::FramesDropped(_) => "FRAMES_DROPPED",
            JournalField::FramesCorrupt(_) => "FRAMES_CORRUPT",
            JournalField::DetectMotion(_) => "DETECT_MOTION",
            JournalField::DetectUncertain(_) => "DETECT_UNCERTAIN",
            JournalField::DetectInterval(_) => "DETECT_INTERVAL",
            JournalField::DetectIdle(_) => "DETECT_IDLE",
            JournalField::TracksLinesLost(_) => "TRACKS_LINES_LOST",
            JournalField::Tracks(_) => "TRACKS",
            JournalField::Events(_) => "EVENTS",
            JournalField::Frames(_) => "FRAMES",
        }
    }

    /// The field's figure, as the journal gets it.
    fn value(&self) -> log::kv::Value<'static> {
        use log::kv::Value;
        match *self {
            JournalField::Fps(x)
            | JournalField::CaptureFps(x)
            | JournalField::DetectFps(x)
            | JournalField::ModelTimeMs(x)
            | JournalField::ModelTimeP95Ms(x)
            | JournalField::ModelTimeMaxMs(x)
            | JournalField::TrackTimeMs(x)
            | JournalField::FrameAgeMs(x)
            | JournalField::FrameAgeP95Ms(x) => Value::from(x),
            JournalField::FramesDropped(n)
            | JournalField::FramesCorrupt(n)
            | JournalField::DetectMotion(n)
            | JournalField::DetectUncertain(n)
            | JournalField::DetectInterval(n)
            | JournalField::DetectIdle(n)
            | JournalField::TracksLinesLost(n)
            | JournalField::Tracks(n)
            | JournalField::Events(n)
            | JournalField::Frames(n) => Value::from(n),
        }
    }
}

/// An event's fields as the log record's key-values: `LOOKOUT_EVENT` first, then `CAMERA`
/// (when given), then `fields`.
struct EventFields<'a> {
    event: &'static str,
    camera: Option<&'a str>,
    fields: &'a [JournalField],
}

impl log::kv::Source for EventFields<'_> {
    fn visit<'kvs>(
        &'kvs self,
        visitor: &mut dyn log::kv::VisitSource<'kvs>,
    ) -> Result<(), log::kv::Error> {
        visitor.visit_pair(
            log::kv::Key::from_str("LOOKOUT_EVENT"),
            log::kv::Value::from(self.event),
        )?;
        if let Some(c) = self.camera {
            visitor.visit_pair(log::kv::Key::from_str("CAMERA"), log::kv::Value::from(c))?;
        }
        for f in self.fields {
            visitor.visit_pair(log::kv::Key::from_str(f.name()), f.value())?;
        }
        Ok(())
    }

    fn count(&self) -> usize {
        1 + usize::from(self.camera.is_some()) + self.fields.len()
    }
}

/// Logs one info-level journal entry of event `event` (`LOOKOUT_EVENT`) of `camera`
/// (`CAMERA`, when given) with `fields` and `message`, as `log::info!` at the caller would
/// (`target`: the caller's `module_path!()`).
#[track_caller]
pub fn log_event(
    target: &'static str,
    event: &'static str,
    camera: Option<&str>,
    fields: &[JournalField],
    message: std::fmt::Arguments<'_>,
) {
    let level = log::Level::Info;
    if level > log::STATIC_MAX_LEVEL || level > log::max_level() {
        return;
    }
    let at = std::panic::Location::caller();
    let kvs = EventFields {
        event,
        camera,
        fields,
    };
    log::logger().log(
        &log::Record::builder()
            .args(message)
            .level(level)
            .target(target)
            .module_path_static(Some(target))
            .file_static(Some(at.file()))
            .line(Some(at.line()))
            .key_values(&kvs)
            .build(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_values_come_with_their_counts() {
        let mut l = Latency::default();
        for ms in [5, 5, 5, 120] {
            l.record(Duration::from_millis(ms));
        }
        let v: Vec<(u64, u64)> = l.recorded_us().collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].1, 3);
        assert!(v[0].0.abs_diff(5_000) <= 5, "{v:?}");
        assert_eq!(v[1].1, 1);
        assert!(v[1].0.abs_diff(120_000) <= 120, "{v:?}");
    }

    #[test]
    fn quantiles_and_rates() {
        let mut w = Window::default();
        for ms in 1..=100 {
            w.model.record(Duration::from_millis(ms));
        }
        w.processed = 50;
        w.detections = 10;
        w.elapsed = Duration::from_secs(5);
        let r = w.report(3);
        assert_eq!(r.fps, 10.0);
        assert_eq!(r.detect_fps, 2.0);
        assert!((r.model_time_ms - 50.0).abs() < 0.2, "{}", r.model_time_ms);
        assert!((r.model_time_p95_ms - 95.0).abs() < 0.2);
        assert_eq!(r.tracks, 3);
    }

    #[test]
    fn empty_window_reports_zeros() {
        let r = Window::default().report(0);
        assert_eq!((r.fps, r.model_time_ms, r.frame_age_ms), (0.0, 0.0, 0.0));
    }

    #[test]
    fn a_runs_histograms_are_fixed_size_however_long_it_runs() {
        let slots = |l: &Latency| l.0.distinct_values();
        let mut total = Window::default();
        let empty = slots(&total.age);
        // 1000 windows of 30 frames, with durations from 0 to far beyond an hour.
        for w in 0..1_000u64 {
            let mut window = Window::default();
            for i in 0..30u64 {
                window.age.record(Duration::from_micros(
                    (w * 7_919 + i * 104_729) % 5_000_000_000,
                ));
            }
            window.age.record(Duration::from_secs(100_000));
            total.merge(&window);
        }
        assert_eq!(total.age.count(), 1_000 * 31);
        assert_eq!(
            slots(&total.age),
            empty,
            "bounded 1 µs .. 1 h: never resized"
        );
    }

    #[test]
    fn merge_adds_counts_and_samples() {
        let mut a = Window {
            processed: 2,
            ..Default::default()
        };
        a.track.record(Duration::from_micros(500));
        let mut b = Window {
            processed: 3,
            ..Default::default()
        };
        b.track.record(Duration::from_micros(700));
        a.merge(&b);
        assert_eq!(a.processed, 5);
        assert_eq!(a.track.count(), 2);
    }
}
