//! One run's figures: a pipeline [`Summary`] turned into stage latencies, rates, CPU,
//! memory and keep-up, and the recommendation over a sweep's rows.

use std::collections::BTreeMap;
use std::time::Duration;

use super::report::{
    CameraFigures, CoreFigures, CoreMapFigures, CpuFigures, FrameCounts, KeepUp, ModelFigures,
    Percentiles, Recommendation, RunFigures, StageFigures, ThreadFigures,
};
use crate::detect::ModelInfo;
use crate::pipeline::{CoreMap, EndReason, Summary, ThreadCpu};
use crate::stats::{Latency, Window};
use crate::sysinfo::{self, TaskCpu};

/// The shortest run whose rates and CPU shares are reported (see
/// [`RunFigures::not_measured`]).
pub const MIN_MEASURED_WINDOW: Duration = Duration::from_secs(1);

/// Why a run of `wall` seconds that captured `captured` frames is too small to measure rates
/// over, or `None` when it is not.
fn not_measured(captured: u64, wall: f64) -> Option<String> {
    let min = MIN_MEASURED_WINDOW.as_secs_f64();
    if captured == 0 {
        Some(format!(
            "no frame was captured in {wall:.2} s: there is nothing to measure"
        ))
    } else if wall < min {
        Some(format!(
            "the run lasted {wall:.2} s, under the {min:.0} s needed for rates and CPU shares to mean anything (ask for more --frames or --seconds)"
        ))
    } else {
        None
    }
}

pub(super) fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

fn end_name(e: &EndReason) -> &'static str {
    match e {
        EndReason::EndOfSource => "end_of_source",
        EndReason::Limit => "limit",
        EndReason::Stopped => "stopped",
        EndReason::Reload => "reload",
    }
}

/// CPU seconds of the matmul pool threads between two task snapshots.
pub(super) fn mm_cpu(before: &[TaskCpu], after: &[TaskCpu]) -> Vec<(String, Duration)> {
    after
        .iter()
        .filter(|t| t.name.starts_with("lookout-mm"))
        .map(|t| {
            let b = before
                .iter()
                .find(|x| x.tid == t.tid)
                .map_or(Duration::ZERO, |x| x.cpu);
            (t.name.clone(), t.cpu.saturating_sub(b))
        })
        .collect()
}

/// Turns a pipeline summary into a row of figures.
pub fn figures(
    setting: &str,
    s: &Summary,
    detect_every: u32,
    mm: &[(String, Duration)],
    system_busy: Vec<f64>,
    target_fps: f64,
) -> RunFigures {
    let t = &s.total;
    let wall = Wall::new(t.elapsed, t.captured);
    let mm_cpu: Duration = mm.iter().map(|(_, d)| *d).sum();
    RunFigures {
        setting: setting.to_string(),
        model: ModelFigures::from(&s.model),
        source: s.source.clone(),
        source_fps: s.source_fps,
        detect_every,
        end: end_name(&s.end).to_string(),
        wall_s: round(wall.secs, 3),
        frames: FrameCounts {
            captured: t.captured,
            processed: t.processed,
            dropped: t.dropped,
            detections: t.detections,
            detect_skipped: t.detect_skipped,
        },
        not_measured: wall.unmeasured.clone(),
        fps: wall.rate(t.processed),
        capture_fps: wall.rate(t.captured),
        detect_fps: wall.rate(t.detections),
        frame_age: Percentiles::from(&t.age),
        stages: stages(t, &s.thread_cpu, mm_cpu, s.cpu_time),
        cpu: cpu_figures(s, mm, system_busy, &wall),
        keep_up: keep_up(s, mm_cpu, detect_every, target_fps, &wall),
        core_map: CoreMapFigures::from(&s.core_map),
        cameras: vec![camera_figures(s)],
    }
}

/// One camera's figures: its frames, rates (over its own run's wall time) and frame age.
pub fn camera_figures(s: &Summary) -> CameraFigures {
    let t = &s.total;
    let wall = Wall::new(t.elapsed, t.captured);
    CameraFigures {
        name: s.camera.clone(),
        source: s.source.clone(),
        fps: wall.rate(t.processed),
        capture_fps: wall.rate(t.captured),
        detect_fps: wall.rate(t.detections),
        frame_age: Percentiles::from(&t.age),
        frames: FrameCounts {
            captured: t.captured,
            processed: t.processed,
            dropped: t.dropped,
            detections: t.detections,
            detect_skipped: t.detect_skipped,
        },
        truth_file: None,
        truth: None,
    }
}

/// The figures of a run of several cameras at once: the run's figures are their total (frames
/// and samples added, the wall time the longest camera's, the capture and tracker threads'
/// CPU added, the shared detector's counted once), and `cameras` lists each camera's.
pub fn cameras_figures(
    setting: &str,
    summaries: &[Summary],
    detect_every: u32,
    mm: &[(String, Duration)],
    system_busy: Vec<f64>,
    target_fps: f64,
) -> Option<RunFigures> {
    let total = total_summary(summaries)?;
    let mut run = figures(setting, &total, detect_every, mm, system_busy, target_fps);
    run.cameras = summaries.iter().map(camera_figures).collect();
    Some(run)
}

/// Several cameras' summaries as one (see [`cameras_figures`]); `None` for none.
fn total_summary(summaries: &[Summary]) -> Option<Summary> {
    let (first, rest) = summaries.split_first()?;
    let mut total = first.clone();
    for s in rest {
        total.total.merge(&s.total);
        total.tracks_started += s.tracks_started;
        total.tracks_ended += s.tracks_ended;
        total.events_started += s.events_started;
        // Each camera measured the whole process over its run: the longest is the run's.
        total.cpu_time = total.cpu_time.max(s.cpu_time);
        total.thread_cpu.capture += s.thread_cpu.capture;
        total.thread_cpu.track += s.thread_cpu.track;
        total.source_fps = match (total.source_fps, s.source_fps) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
    let elapsed = summaries.iter().map(|s| s.total.elapsed).max()?;
    total.total.elapsed = elapsed;
    total.camera = "total".into();
    total.source = summaries
        .iter()
        .map(|s| s.source.as_str())
        .collect::<Vec<_>>()
        .join(" + ");
    Some(total)
}

/// A run's wall time, and whether it is long enough for per-second figures.
struct Wall {
    /// Seconds (never 0).
    secs: f64,
    /// Why per-second figures are not given ([`not_measured`]), `None` when they are.
    unmeasured: Option<String>,
}

impl Wall {
    fn new(elapsed: Duration, captured: u64) -> Wall {
        let secs = elapsed.as_secs_f64().max(1e-9);
        Wall {
            secs,
            unmeasured: not_measured(captured, secs),
        }
    }

    fn measured(&self) -> bool {
        self.unmeasured.is_none()
    }

    /// `x` per wall second, rounded, only over a window long enough to mean something.
    fn per_wall(&self, x: f64, digits: i32) -> Option<f64> {
        self.measured().then(|| round(x / self.secs, digits))
    }

    /// A count per wall second.
    fn rate(&self, n: u64) -> Option<f64> {
        self.per_wall(n as f64, 2)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The six stages with their CPU attribution (see [`RunFigures::stages`]); `mm_cpu` is the
/// matmul pool's CPU time, `cpu_time` the process's.
fn stages(t: &Window, tc: &ThreadCpu, mm_cpu: Duration, cpu_time: Duration) -> Vec<StageFigures> {
    let proc_ms = ms(cpu_time);
    let share = |c: f64| (proc_ms > 0.0).then(|| round(100.0 * c / proc_ms, 1));
    let model_cpu =
        (ms(tc.detect) + ms(mm_cpu) - t.preprocess.sum_ms() - t.postprocess.sum_ms()).max(0.0);
    let stage = |name: &str, what: &str, l: &Latency, cpu: Option<f64>| StageFigures {
        name: name.into(),
        what: what.into(),
        count: l.count(),
        p50_ms: round(l.quantile_ms(0.5), 3),
        p95_ms: round(l.quantile_ms(0.95), 3),
        max_ms: round(l.max_ms(), 3),
        total_ms: round(l.sum_ms(), 1),
        cpu_ms: cpu.map(|c| round(c, 1)),
        cpu_share_pct: cpu.and_then(share),
    };
    vec![
        stage(
            "capture",
            "capture (source.next)",
            &t.capture,
            Some(ms(tc.capture)),
        ),
        stage(
            "track",
            "tracking (gray + step)",
            &t.track,
            Some(ms(tc.track)),
        ),
        stage(
            "gray",
            "  of which frame→gray (+JPEG decode)",
            &t.gray,
            None,
        ),
        stage(
            "preprocess",
            "preprocess (frame→tensor)",
            &t.preprocess,
            Some(t.preprocess.sum_ms()),
        ),
        stage("model", "model (tract)", &t.model, Some(model_cpu)),
        stage(
            "postprocess",
            "decode + NMS",
            &t.postprocess,
            Some(t.postprocess.sum_ms()),
        ),
    ]
}

/// Process, per-thread, per-pinned-core and whole-machine CPU of a run.
fn cpu_figures(
    s: &Summary,
    mm: &[(String, Duration)],
    system_busy: Vec<f64>,
    wall: &Wall,
) -> CpuFigures {
    let threads = thread_cpu(s, mm);
    let mut per_core: BTreeMap<usize, (Vec<String>, f64)> = BTreeMap::new();
    for (n, c, d) in &threads {
        if let Some(c) = c {
            let e = per_core.entry(*c).or_default();
            e.0.push(n.clone());
            e.1 += d.as_secs_f64();
        }
    }
    let cores = sysinfo::core_count() as f64;
    let cores_busy = s.cpu_time.as_secs_f64() / wall.secs;
    CpuFigures {
        process_s: round(s.cpu_time.as_secs_f64(), 3),
        cores_busy: wall.measured().then(|| round(cores_busy, 2)),
        utilisation_pct: wall
            .measured()
            .then(|| round(100.0 * cores_busy / cores, 1)),
        threads: threads
            .iter()
            .map(|(n, c, d)| ThreadFigures {
                name: n.clone(),
                core: *c,
                cpu_s: round(d.as_secs_f64(), 3),
                pct_of_core: wall.per_wall(100.0 * d.as_secs_f64(), 1),
            })
            .collect(),
        per_core: per_core
            .into_iter()
            .map(|(core, (threads, cpu))| CoreFigures {
                core,
                threads,
                pct: wall.per_wall(100.0 * cpu, 1),
            })
            .collect(),
        system_per_core_pct: system_busy.into_iter().map(|b| round(b, 1)).collect(),
    }
}

/// Every thread of a run with its core (if pinned) and CPU time: the three pipeline threads,
/// then the matmul pool's (`lookout-mm-N` runs on the pool's N-th core).
fn thread_cpu(s: &Summary, mm: &[(String, Duration)]) -> Vec<(String, Option<usize>, Duration)> {
    let (cm, tc) = (&s.core_map, &s.thread_cpu);
    let mut threads = vec![
        ("lookout-capture".to_string(), cm.capture, tc.capture),
        ("lookout-track".to_string(), cm.track, tc.track),
        ("lookout-detect".to_string(), cm.detect, tc.detect),
    ];
    for (name, d) in mm {
        let core = name
            .rsplit('-')
            .next()
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| cm.matmul.get(i).copied());
        threads.push((name.clone(), core, *d));
    }
    threads
}

/// The real-time verdict: can this setting follow `target_fps`, and at what projected CPU?
fn keep_up(
    s: &Summary,
    mm_cpu: Duration,
    detect_every: u32,
    target_fps: f64,
    wall: &Wall,
) -> KeepUp {
    let (t, tc) = (&s.total, &s.thread_cpu);
    let det_ms =
        t.preprocess.quantile_ms(0.5) + t.model.quantile_ms(0.5) + t.postprocess.quantile_ms(0.5);
    let detect_capacity = if det_ms > 0.0 { 1000.0 / det_ms } else { 0.0 };
    let track_capacity = wall.per_wall(t.processed as f64, 1);
    let needed = target_fps / f64::from(detect_every.max(1));
    let per = |d: Duration, n: u64| {
        if n > 0 {
            d.as_secs_f64() / n as f64
        } else {
            0.0
        }
    };
    let per_frame = per(tc.capture, t.captured) + per(tc.track, t.processed);
    let per_detection = per(tc.detect + mm_cpu, t.detections);
    KeepUp {
        target_fps,
        needed_detect_fps: round(needed, 2),
        detect_capacity_fps: round(detect_capacity, 2),
        track_capacity_fps: track_capacity,
        keeps_up: t.detections > 0
            && detect_capacity >= needed
            && track_capacity.is_some_and(|c| c >= target_fps),
        projected_cpu_pct: round(100.0 * (per_frame * target_fps + per_detection * needed), 1),
    }
}

impl From<&Latency> for Percentiles {
    fn from(l: &Latency) -> Self {
        Percentiles {
            p50_ms: round(l.quantile_ms(0.5), 3),
            p95_ms: round(l.quantile_ms(0.95), 3),
            max_ms: round(l.max_ms(), 3),
        }
    }
}

impl From<&ModelInfo> for ModelFigures {
    fn from(m: &ModelInfo) -> Self {
        ModelFigures {
            name: m.name.clone(),
            datum: m.datum.to_string(),
            input_w: m.input_w,
            input_h: m.input_h,
            threads: m.threads,
            load_time_ms: round(m.load_time.as_secs_f64() * 1e3, 1),
            int8_path: m.int8_path.clone(),
        }
    }
}

impl From<&CoreMap> for CoreMapFigures {
    fn from(c: &CoreMap) -> Self {
        CoreMapFigures {
            capture: c.capture,
            track: c.track,
            detect: c.detect,
            matmul: c.matmul.clone(),
        }
    }
}

/// Picks, among the rows that keep up with the target rate, the one with the lowest projected
/// CPU; with none, says so and names the fastest detector.
pub fn recommend(rows: &[RunFigures]) -> Option<Recommendation> {
    let first = rows.first()?;
    let target = first.keep_up.target_fps;
    let best = rows.iter().filter(|r| r.keep_up.keeps_up).min_by(|a, b| {
        a.keep_up
            .projected_cpu_pct
            .total_cmp(&b.keep_up.projected_cpu_pct)
    });
    Some(match best {
        Some(r) => {
            let mut text = format!(
                "recommended: {} — keeps up with {target} fps at the lowest CPU (≈{:.0}% of one core projected at {target} fps; detector {:.1}/s ≥ {:.1}/s needed)",
                r.setting, r.keep_up.projected_cpu_pct, r.keep_up.detect_capacity_fps, r.keep_up.needed_detect_fps
            );
            // For detection intervals the cheapest is always the sparsest; name the densest too.
            let dense = rows
                .iter()
                .filter(|r| r.keep_up.keeps_up && r.setting.starts_with("detect_every="))
                .min_by_key(|r| r.detect_every);
            if let Some(d) = dense.filter(|d| d.setting != r.setting) {
                text.push_str(&format!(
                    "; the most frequent detection that still keeps up: {} (≈{:.0}%)",
                    d.setting, d.keep_up.projected_cpu_pct
                ));
            }
            Recommendation {
                setting: Some(r.setting.clone()),
                text,
            }
        }
        None => {
            let fastest = rows.iter().max_by(|a, b| {
                a.keep_up
                    .detect_capacity_fps
                    .total_cmp(&b.keep_up.detect_capacity_fps)
            });
            Recommendation {
                setting: None,
                text: format!(
                    "no setting keeps up with {target} fps{}",
                    fastest.map_or(String::new(), |f| format!(
                        "; the fastest detector is {} at {:.1}/s (needs {:.1}/s)",
                        f.setting, f.keep_up.detect_capacity_fps, f.keep_up.needed_detect_fps
                    ))
                ),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(total: crate::stats::Window, cpu_time: Duration) -> Summary {
        Summary {
            camera: "camera".into(),
            total,
            report: crate::stats::Window::default().report(0),
            model: ModelInfo {
                name: "m".into(),
                input_w: 416,
                input_h: 416,
                datum: "int8",
                threads: 1,
                load_time: Duration::ZERO,
                int8_path: None,
            },
            source: "demo".into(),
            source_fps: Some(10.0),
            tracks_started: 0,
            tracks_ended: 0,
            events_started: 0,
            cpu_time,
            end: EndReason::Limit,
            core_map: CoreMap::default(),
            thread_cpu: Default::default(),
        }
    }

    fn row(setting: &str, every: u32, cap: f64, cpu: f64, ok: bool) -> RunFigures {
        let s = summary(Default::default(), Duration::ZERO);
        let mut f = figures(setting, &s, every, &[], vec![], 10.0);
        f.keep_up.keeps_up = ok;
        f.keep_up.detect_capacity_fps = cap;
        f.keep_up.projected_cpu_pct = cpu;
        f
    }

    #[test]
    fn recommends_the_cheapest_row_that_keeps_up() {
        let rows = vec![
            row("detect_every=1", 1, 8.0, 120.0, false),
            row("detect_every=2", 2, 8.0, 70.0, true),
            row("detect_every=5", 5, 8.0, 30.0, true),
        ];
        let r = recommend(&rows).unwrap();
        assert_eq!(r.setting.as_deref(), Some("detect_every=5"));
        assert!(r.text.contains("detect_every=2"), "{}", r.text);
        let none = recommend(&rows[..1]).unwrap();
        assert_eq!(none.setting, None);
        assert!(none.text.contains("no setting keeps up"), "{}", none.text);
    }

    #[test]
    fn rates_and_cpu_shares_need_frames_and_a_second() {
        let window = |captured: u64, ms: u64| crate::stats::Window {
            captured,
            processed: captured,
            detections: captured / 5,
            elapsed: Duration::from_millis(ms),
            ..Default::default()
        };
        // Nothing captured in 5 ms with 0.77 s of CPU (model load): once "154 cores busy".
        let empty = figures(
            "default",
            &summary(window(0, 5), Duration::from_millis(770)),
            5,
            &[],
            vec![],
            10.0,
        );
        let why = empty.not_measured.as_deref().unwrap_or_default();
        assert!(why.contains("no frame was captured"), "{why}");
        assert_eq!(
            (empty.fps, empty.capture_fps, empty.detect_fps),
            (None, None, None)
        );
        assert_eq!(
            (empty.cpu.cores_busy, empty.cpu.utilisation_pct),
            (None, None)
        );
        assert!(empty.cpu.threads.iter().all(|t| t.pct_of_core.is_none()));
        assert!(!empty.keep_up.keeps_up && empty.keep_up.track_capacity_fps.is_none());
        // Frames, but over 0.4 s: still not a measurement.
        let short = figures(
            "default",
            &summary(window(10, 400), Duration::from_millis(800)),
            5,
            &[],
            vec![],
            10.0,
        );
        let why = short.not_measured.as_deref().unwrap_or_default();
        assert!(why.contains("0.40 s") && why.contains("1 s"), "{why}");
        assert_eq!(short.fps, None);
        // Two seconds: measured.
        let long = figures(
            "default",
            &summary(window(40, 2000), Duration::from_millis(1000)),
            5,
            &[],
            vec![],
            10.0,
        );
        assert_eq!(long.not_measured, None);
        assert_eq!((long.fps, long.detect_fps), (Some(20.0), Some(4.0)));
        assert_eq!(long.cpu.cores_busy, Some(0.5));
        assert_eq!(long.keep_up.track_capacity_fps, Some(20.0));
    }
}
