//! The metric families lookout exports, how a stats window advances them, and their
//! rendering in the Prometheus text format (version 0.0.4). docs/metrics.md lists them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use super::histogram::Buckets;
use crate::notify::Counters;
use crate::stats::{Latency, Report, Window};

/// Model time buckets (seconds): a Pi 5 runs the 416 model in ~50 ms, a Pi Zero 2 in ~1 s.
const MODEL_BOUNDS: &[f64] = &[
    0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0,
];
/// Frame age buckets (seconds): capture to results published.
const AGE_BOUNDS: &[f64] = &[
    0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0,
];
/// Tracker time per frame buckets (seconds).
const TRACK_BOUNDS: &[f64] = &[0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1];

/// Why a detection was handed to the model (`schedule::Cause`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    cause: &'static str,
}

/// An object's label (COCO name).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabel {
    label: String,
}

/// The build's facts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    arch: &'static str,
}

/// Where the CPU temperature is read (millidegrees Celsius), when the machine has it.
const THERMAL_ZONE: &str = "/sys/class/thermal/thermal_zone0/temp";

/// Every exported family, and the registry that renders them.
pub struct Families {
    registry: Registry,
    frames_processed: Counter,
    frames_captured: Counter,
    frames_dropped: Counter,
    frames_corrupt: Counter,
    detections: Family<CauseLabel, Counter>,
    detections_skipped: Counter,
    events: Family<ObjectLabel, Counter>,
    tracks: Gauge,
    tracks_lines_lost: Counter,
    model: Buckets,
    frame_age: Buckets,
    track: Buckets,
    mqtt_sent: Counter,
    mqtt_dropped: Counter,
    mqtt_connected: Gauge,
    snapshots: Counter,
    snapshots_failed: Counter,
    cpu: Counter<f64, AtomicU64>,
    rss: Gauge,
    temperature: Option<Gauge<f64, AtomicU64>>,
    /// What was last read from the outlets' [`Counters`] and the process CPU clock (the
    /// counters above advance by the difference).
    last: Mutex<Last>,
}

#[derive(Default)]
struct Last {
    mqtt_sent: u64,
    mqtt_dropped: u64,
    snapshots: u64,
    snapshots_failed: u64,
    cpu_seconds: f64,
}

/// The causes of a detection, as they are labelled.
const CAUSES: [&str; 4] = ["interval", "motion", "uncertain", "idle"];

impl Families {
    /// All families at zero (the CPU temperature only where the machine reports one).
    pub fn new() -> Families {
        let mut f = Families {
            registry: Registry::default(),
            frames_processed: Counter::default(),
            frames_captured: Counter::default(),
            frames_dropped: Counter::default(),
            frames_corrupt: Counter::default(),
            detections: Family::default(),
            detections_skipped: Counter::default(),
            events: Family::default(),
            tracks: Gauge::default(),
            tracks_lines_lost: Counter::default(),
            model: Buckets::new(MODEL_BOUNDS),
            frame_age: Buckets::new(AGE_BOUNDS),
            track: Buckets::new(TRACK_BOUNDS),
            mqtt_sent: Counter::default(),
            mqtt_dropped: Counter::default(),
            mqtt_connected: Gauge::default(),
            snapshots: Counter::default(),
            snapshots_failed: Counter::default(),
            cpu: Counter::default(),
            rss: Gauge::default(),
            temperature: read_temperature().map(|_| Gauge::default()),
            last: Mutex::new(Last::default()),
        };
        for cause in CAUSES {
            // Every cause is there from the start, at 0 (a rate needs the series before its
            // first increment).
            let _ = f.detections.get_or_create(&CauseLabel { cause });
        }
        f.register();
        f
    }

    fn register(&mut self) {
        let r = self.registry.sub_registry_with_prefix("lookout");
        r.register(
            "build",
            "The running lookout: version and CPU architecture (value 1)",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                arch: std::env::consts::ARCH,
            }),
        );
        let counters = [
            ("frames_processed", "Frames tracked and published (the journal's FPS counts these)", &self.frames_processed),
            ("frames_captured", "Frames the source delivered", &self.frames_captured),
            ("frames_dropped", "Frames dropped: replaced before the tracker took them, or stale buffers the source discarded", &self.frames_dropped),
            ("frames_corrupt", "Damaged frames skipped (torn or undecodable JPEG, short or flagged V4L2 buffer)", &self.frames_corrupt),
            ("detections_skipped", "Detections asked for while the model was still busy (not run)", &self.detections_skipped),
            ("tracks_lines_lost", "Lines of the tracks file that could not be written", &self.tracks_lines_lost),
            ("mqtt_messages_sent", "MQTT messages handed to the broker's connection", &self.mqtt_sent),
            ("mqtt_messages_dropped", "MQTT messages dropped (queue full or broker away)", &self.mqtt_dropped),
            ("snapshots", "Event snapshots made", &self.snapshots),
            ("snapshots_failed", "Event snapshots that could not be made or were dropped", &self.snapshots_failed),
        ];
        for (name, help, c) in counters {
            r.register(name, help, c.clone());
        }
        r.register(
            "detections",
            "Detections handed to the model, by what asked for them (interval, motion, uncertain, idle)",
            self.detections.clone(),
        );
        r.register(
            "events",
            "Events started, by label (the labels of events.labels from the start, others with their first event)",
            self.events.clone(),
        );
        r.register("tracks_active", "Confirmed tracks now", self.tracks.clone());
        r.register(
            "mqtt_connected",
            "Whether the MQTT client is connected (1) or not (0)",
            self.mqtt_connected.clone(),
        );
        let histograms = [
            (
                "model_duration",
                "Model time per detection (preprocessing excluded)",
                &self.model,
            ),
            (
                "frame_age",
                "Frame age when its results were published (capture to publication)",
                &self.frame_age,
            ),
            (
                "track_duration",
                "Tracker time per frame (gray plane, tracker step, reconciliation)",
                &self.track,
            ),
        ];
        for (name, help, h) in histograms {
            r.register_with_unit(name, help, Unit::Seconds, h.clone());
        }
        if let Some(t) = &self.temperature {
            r.register_with_unit(
                "cpu_temperature",
                "CPU temperature (thermal zone 0)",
                Unit::Other("celsius".into()),
                t.clone(),
            );
        }
        // The conventional process metrics, without the lookout prefix.
        self.registry.register_with_unit(
            "process_cpu",
            "CPU time of the lookout process (user + system)",
            Unit::Seconds,
            self.cpu.clone(),
        );
        self.registry.register_with_unit(
            "process_resident_memory",
            "Resident memory of the lookout process",
            Unit::Bytes,
            self.rss.clone(),
        );
    }

    /// Labels whose events are counted from 0 before the first one (a rate needs the series
    /// before its first increment); other labels appear with their first event.
    pub fn expect_labels(&self, labels: &[String]) {
        for label in labels {
            let _ = self.events.get_or_create(&ObjectLabel {
                label: label.clone(),
            });
        }
    }

    /// One started event of `label`.
    pub fn event_started(&self, label: &str) {
        self.events
            .get_or_create(&ObjectLabel {
                label: label.to_string(),
            })
            .inc();
    }

    /// Advances everything by a closed stats window; reads the outlets' counters and the
    /// process's CPU time, memory and temperature.
    pub fn window(&self, w: &Window, report: &Report, counters: &Counters) {
        self.frames_processed.inc_by(w.processed);
        self.frames_captured.inc_by(w.captured);
        self.frames_dropped.inc_by(w.dropped);
        self.frames_corrupt.inc_by(w.corrupt);
        self.detections_skipped.inc_by(w.detect_skipped);
        self.tracks_lines_lost.inc_by(w.tracks_lines_lost);
        for (cause, n) in CAUSES.into_iter().zip([
            w.detect_interval,
            w.detect_motion,
            w.detect_uncertain,
            w.detect_idle,
        ]) {
            self.detections
                .get_or_create(&CauseLabel { cause })
                .inc_by(n);
        }
        add_latency(&self.model, &w.model);
        add_latency(&self.frame_age, &w.age);
        add_latency(&self.track, &w.track);
        self.tracks.set(report.tracks as i64);
        self.mqtt_connected
            .set(i64::from(counters.mqtt_connected.load(Ordering::Relaxed)));
        let cpu_seconds = crate::sysinfo::process_cpu_time().as_secs_f64();
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            let l = &mut *last;
            for (counter, source, seen) in [
                (&self.mqtt_sent, &counters.mqtt_sent, &mut l.mqtt_sent),
                (
                    &self.mqtt_dropped,
                    &counters.mqtt_dropped,
                    &mut l.mqtt_dropped,
                ),
                (&self.snapshots, &counters.snapshots, &mut l.snapshots),
                (
                    &self.snapshots_failed,
                    &counters.snapshots_failed,
                    &mut l.snapshots_failed,
                ),
            ] {
                let now = source.load(Ordering::Relaxed);
                counter.inc_by(now.saturating_sub(*seen));
                *seen = now.max(*seen);
            }
            self.cpu.inc_by((cpu_seconds - l.cpu_seconds).max(0.0));
            l.cpu_seconds = l.cpu_seconds.max(cpu_seconds);
        }
        if let Some(kib) = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| crate::sysinfo::status_kib(&s, "VmRSS:"))
        {
            self.rss.set(i64::try_from(kib * 1024).unwrap_or(i64::MAX));
        }
        if let (Some(g), Some(t)) = (&self.temperature, read_temperature()) {
            g.set(t);
        }
    }

    /// Everything in the Prometheus text format (version 0.0.4), ending with a newline.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            // Writing into a String cannot fail; a metric's own encoder could. Say so in the
            // body (a comment line keeps it valid) rather than serve half of it silently.
            out.clear();
            out.push_str(&format!("# lookout: metrics could not be rendered: {e}\n"));
        }
        out
    }
}

impl std::fmt::Debug for Families {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Families").finish_non_exhaustive()
    }
}

/// A window's latency samples into `h`, in seconds.
fn add_latency(h: &Buckets, l: &Latency) {
    for (us, n) in l.recorded_us() {
        h.add(us as f64 / 1e6, n);
    }
}

/// The CPU temperature in °C, where thermal zone 0 exists.
fn read_temperature() -> Option<f64> {
    let t = std::fs::read_to_string(THERMAL_ZONE).ok()?;
    t.trim().parse::<f64>().ok().map(|milli| milli / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn window() -> Window {
        let mut w = Window {
            processed: 30,
            captured: 31,
            dropped: 1,
            detect_motion: 2,
            detect_idle: 1,
            detect_skipped: 4,
            ..Window::default()
        };
        for ms in [40, 40, 180] {
            w.model.record(Duration::from_millis(ms));
        }
        w.age.record(Duration::from_millis(12));
        w
    }

    fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{text}"))
    }

    #[test]
    fn windows_add_up_in_the_text_format() {
        let f = Families::new();
        let counters = Counters::default();
        counters.mqtt_sent.store(7, Ordering::Relaxed);
        counters.mqtt_connected.store(true, Ordering::Relaxed);
        let w = window();
        let report = w.report(2);
        f.window(&w, &report, &counters);
        f.event_started("person");
        counters.mqtt_sent.store(9, Ordering::Relaxed);
        f.window(&w, &report, &counters);
        let t = f.render();
        assert!(t.ends_with('\n'));
        assert!(
            t.contains("# TYPE lookout_frames_processed_total counter\n"),
            "{t}"
        );
        assert_eq!(
            line(&t, "lookout_frames_processed_total "),
            "lookout_frames_processed_total 60"
        );
        assert_eq!(
            line(&t, "lookout_frames_captured_total "),
            "lookout_frames_captured_total 62"
        );
        assert_eq!(
            line(&t, "lookout_frames_dropped_total "),
            "lookout_frames_dropped_total 2"
        );
        assert_eq!(
            line(&t, "lookout_detections_skipped_total "),
            "lookout_detections_skipped_total 8"
        );
        assert_eq!(
            line(&t, "lookout_detections_total{cause=\"motion\"}"),
            "lookout_detections_total{cause=\"motion\"} 4"
        );
        assert_eq!(
            line(&t, "lookout_detections_total{cause=\"uncertain\"}"),
            "lookout_detections_total{cause=\"uncertain\"} 0"
        );
        assert_eq!(
            line(&t, "lookout_events_total{"),
            "lookout_events_total{label=\"person\"} 1"
        );
        assert_eq!(
            line(&t, "lookout_tracks_active "),
            "lookout_tracks_active 2"
        );
        assert_eq!(
            line(&t, "lookout_mqtt_messages_sent_total "),
            "lookout_mqtt_messages_sent_total 9"
        );
        assert_eq!(
            line(&t, "lookout_mqtt_connected "),
            "lookout_mqtt_connected 1"
        );
        // Histograms: cumulative buckets in seconds, +Inf, sum and count.
        assert!(
            t.contains("# TYPE lookout_model_duration_seconds histogram\n"),
            "{t}"
        );
        assert_eq!(
            line(&t, "lookout_model_duration_seconds_bucket{le=\"0.035\"}"),
            "lookout_model_duration_seconds_bucket{le=\"0.035\"} 0"
        );
        assert_eq!(
            line(&t, "lookout_model_duration_seconds_bucket{le=\"0.05\"}"),
            "lookout_model_duration_seconds_bucket{le=\"0.05\"} 4"
        );
        assert_eq!(
            line(&t, "lookout_model_duration_seconds_bucket{le=\"0.2\"}"),
            "lookout_model_duration_seconds_bucket{le=\"0.2\"} 6"
        );
        assert_eq!(
            line(&t, "lookout_model_duration_seconds_bucket{le=\"+Inf\"}"),
            "lookout_model_duration_seconds_bucket{le=\"+Inf\"} 6"
        );
        assert_eq!(
            line(&t, "lookout_model_duration_seconds_count"),
            "lookout_model_duration_seconds_count 6"
        );
        let sum: f64 = line(&t, "lookout_model_duration_seconds_sum ")[35..]
            .trim()
            .parse()
            .unwrap();
        assert!((sum - 0.52).abs() < 0.002, "{sum}");
        assert_eq!(
            line(&t, "lookout_frame_age_seconds_count"),
            "lookout_frame_age_seconds_count 2"
        );
        assert!(line(&t, "lookout_build_info{")
            .contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))));
        assert!(line(&t, "process_cpu_seconds_total ").len() > "process_cpu_seconds_total ".len());
        assert!(
            t.contains("# TYPE process_resident_memory_bytes gauge\n"),
            "{t}"
        );
    }
}
