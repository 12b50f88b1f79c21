//! One run's figures: a pipeline [`Summary`] turned into stage latencies, rates, CPU,
//! memory and keep-up, and the recommendation over a sweep's rows.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::pipeline::{CoreMap, EndReason, Summary};
use crate::stats::Latency;
use crate::sysinfo::{self, TaskCpu};

/// Percentiles of one stage.
#[derive(Clone, Debug, Serialize)]
pub struct StageFigures {
    /// Stage key (`capture`, `gray`, `track`, `preprocess`, `model`, `postprocess`).
    pub name: String,
    /// What the stage is, for people.
    pub what: String,
    /// Samples.
    pub count: u64,
    /// p50 in ms.
    pub p50_ms: f64,
    /// p95 in ms.
    pub p95_ms: f64,
    /// Max in ms.
    pub max_ms: f64,
    /// Summed wall time in the stage, ms.
    pub total_ms: f64,
    /// CPU time attributed to the stage, ms (see [`RunFigures::stages`]); `None` for a
    /// sub-stage already counted in its parent.
    pub cpu_ms: Option<f64>,
    /// `cpu_ms` as a share (0..100 %) of the process CPU time.
    pub cpu_share_pct: Option<f64>,
}

/// Percentiles of a latency, in ms.
#[derive(Clone, Debug, Serialize)]
pub struct Percentiles {
    /// p50.
    pub p50_ms: f64,
    /// p95.
    pub p95_ms: f64,
    /// Max.
    pub max_ms: f64,
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

/// The model that ran.
#[derive(Clone, Debug, Serialize)]
pub struct ModelFigures {
    /// File or `embedded:…`.
    pub name: String,
    /// `int8` or `f32`.
    pub datum: String,
    /// Input width.
    pub input_w: u32,
    /// Input height.
    pub input_h: u32,
    /// Matmul threads.
    pub threads: usize,
    /// Parse + optimize + plan time, ms.
    pub load_time_ms: f64,
}

/// Frame counters of a run.
#[derive(Clone, Debug, Serialize)]
pub struct FrameCounts {
    /// Delivered by the source.
    pub captured: u64,
    /// Processed by the tracker.
    pub processed: u64,
    /// Dropped (replaced in the newest-frame slot, or stale in the camera).
    pub dropped: u64,
    /// Model runs.
    pub detections: u64,
    /// Detection requests skipped because the detector was busy.
    pub detect_skipped: u64,
}

/// CPU time of one thread (or group of threads) during a run.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadFigures {
    /// Thread name (`lookout-capture`, `lookout-track`, `lookout-detect`, `lookout-mm-N`).
    pub name: String,
    /// The core it was pinned to.
    pub core: Option<usize>,
    /// CPU seconds.
    pub cpu_s: f64,
    /// CPU time ÷ wall time, % of one core (`None` when the run is not measured: see
    /// [`RunFigures::not_measured`]).
    pub pct_of_core: Option<f64>,
}

/// Utilisation of one core by lookout's pinned threads.
#[derive(Clone, Debug, Serialize)]
pub struct CoreFigures {
    /// Core number.
    pub core: usize,
    /// The threads pinned to it.
    pub threads: Vec<String>,
    /// Their CPU time ÷ wall time, % (`None` when the run is not measured).
    pub pct: Option<f64>,
}

/// CPU use of a run.
#[derive(Clone, Debug, Serialize)]
pub struct CpuFigures {
    /// Process CPU seconds.
    pub process_s: f64,
    /// Process CPU ÷ wall: cores kept busy (`None` when the run is not measured).
    pub cores_busy: Option<f64>,
    /// `cores_busy` as % of all cores (`None` when the run is not measured).
    pub utilisation_pct: Option<f64>,
    /// Per thread.
    pub threads: Vec<ThreadFigures>,
    /// Per pinned core (empty when nothing is pinned).
    pub per_core: Vec<CoreFigures>,
    /// Busy share of every CPU of the machine (all processes, `/proc/stat`), %.
    pub system_per_core_pct: Vec<f64>,
}

/// Can this setting follow the source in real time, and what would it cost?
#[derive(Clone, Debug, Serialize)]
pub struct KeepUp {
    /// The rate to follow: the camera's, or the recording's (10 fps for the clip).
    pub target_fps: f64,
    /// Detections per second needed (`target_fps / detect_every`).
    pub needed_detect_fps: f64,
    /// Detections per second the detector can do (1000 ÷ p50 of preprocess + model + decode).
    pub detect_capacity_fps: f64,
    /// Frames per second the tracker managed (as fast as possible) — its capacity (`None`
    /// when the run is not measured).
    pub track_capacity_fps: Option<f64>,
    /// Both capacities reach the target (never for a run that is not measured).
    pub keeps_up: bool,
    /// Projected CPU at the target rate, % of one core: per-frame capture + tracking CPU ×
    /// target fps + per-detection CPU × needed detections per second.
    pub projected_cpu_pct: f64,
}

/// The figures of one run (one row of a sweep).
#[derive(Clone, Debug, Serialize)]
pub struct RunFigures {
    /// What this row changes (`default`, `threads=2`, `detect_every=5`, `model=…`).
    pub setting: String,
    /// The model.
    pub model: ModelFigures,
    /// Source description.
    pub source: String,
    /// Source frame rate, if known.
    pub source_fps: Option<f64>,
    /// `pipeline.detect_every`.
    pub detect_every: u32,
    /// Why the run ended (`limit`, `end_of_source`, `stopped`).
    pub end: String,
    /// Wall time, s.
    pub wall_s: f64,
    /// Frame counters.
    pub frames: FrameCounts,
    /// Why the rates and CPU shares of this run are not given (`None` when they are): no frame
    /// was captured, or the run lasted under [`MIN_MEASURED_WINDOW`] — a count over a
    /// window that short is noise (a 0.01 s run once showed 7726 % of the machine busy).
    pub not_measured: Option<String>,
    /// Processed frames per second (`None` when the run is not measured).
    pub fps: Option<f64>,
    /// Frames per second the source delivered (`None` when the run is not measured).
    pub capture_fps: Option<f64>,
    /// Model runs per second (`None` when the run is not measured).
    pub detect_fps: Option<f64>,
    /// Frame age at publication.
    pub frame_age: Percentiles,
    /// Stages: `capture` (source.next; CPU = the capture thread), `track` (CPU = the tracker
    /// thread) with its part `gray`, `preprocess` and `postprocess` (CPU = their wall time on the
    /// detector thread), `model` (CPU = detector thread + matmul pool − preprocess − postprocess).
    pub stages: Vec<StageFigures>,
    /// CPU use.
    pub cpu: CpuFigures,
    /// Real-time verdict.
    pub keep_up: KeepUp,
    /// The thread → core map.
    pub core_map: CoreMap,
}

/// The shortest run whose rates and CPU shares are reported (see [`RunFigures::not_measured`]).
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
    let wall = t.elapsed.as_secs_f64().max(1e-9);
    let unmeasured = not_measured(t.captured, wall);
    let measured = unmeasured.is_none();
    // Per wall-second figures, only over a window long enough to mean something.
    let per_wall = |x: f64, digits: i32| measured.then(|| round(x / wall, digits));
    let rate = |n: u64| per_wall(n as f64, 2);
    let proc_ms = s.cpu_time.as_secs_f64() * 1e3;
    let share = |ms: f64| (proc_ms > 0.0).then(|| round(100.0 * ms / proc_ms, 1));
    let mm_ms: f64 = mm.iter().map(|(_, d)| d.as_secs_f64() * 1e3).sum();
    let tc = &s.thread_cpu;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let model_cpu =
        (ms(tc.detect) + mm_ms - t.preprocess.sum_ms() - t.postprocess.sum_ms()).max(0.0);
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
    let stages = vec![
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
    ];
    let cm = &s.core_map;
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
    let thread_figs: Vec<ThreadFigures> = threads
        .iter()
        .map(|(n, c, d)| ThreadFigures {
            name: n.clone(),
            core: *c,
            cpu_s: round(d.as_secs_f64(), 3),
            pct_of_core: per_wall(100.0 * d.as_secs_f64(), 1),
        })
        .collect();
    let mut per_core: BTreeMap<usize, (Vec<String>, f64)> = BTreeMap::new();
    for (n, c, d) in &threads {
        if let Some(c) = c {
            let e = per_core.entry(*c).or_default();
            e.0.push(n.clone());
            e.1 += d.as_secs_f64();
        }
    }
    let per_core = per_core
        .into_iter()
        .map(|(core, (threads, cpu))| CoreFigures {
            core,
            threads,
            pct: per_wall(100.0 * cpu, 1),
        })
        .collect();
    let cores = sysinfo::core_count() as f64;
    let cores_busy = s.cpu_time.as_secs_f64() / wall;
    // Real-time verdict.
    let det_ms =
        t.preprocess.quantile_ms(0.5) + t.model.quantile_ms(0.5) + t.postprocess.quantile_ms(0.5);
    let detect_capacity = if det_ms > 0.0 { 1000.0 / det_ms } else { 0.0 };
    let track_capacity = per_wall(t.processed as f64, 1);
    let every = f64::from(detect_every.max(1));
    let needed = target_fps / every;
    let per = |d: Duration, n: u64| {
        if n > 0 {
            d.as_secs_f64() / n as f64
        } else {
            0.0
        }
    };
    let per_frame = per(tc.capture, t.captured) + per(tc.track, t.processed);
    let per_detection = per(
        tc.detect + Duration::from_secs_f64(mm_ms / 1e3),
        t.detections,
    );
    RunFigures {
        setting: setting.to_string(),
        model: ModelFigures {
            name: s.model.name.clone(),
            datum: s.model.datum.to_string(),
            input_w: s.model.input_w,
            input_h: s.model.input_h,
            threads: s.model.threads,
            load_time_ms: round(s.model.load_time.as_secs_f64() * 1e3, 1),
        },
        source: s.source.clone(),
        source_fps: s.source_fps,
        detect_every,
        end: end_name(&s.end).to_string(),
        wall_s: round(wall, 3),
        frames: FrameCounts {
            captured: t.captured,
            processed: t.processed,
            dropped: t.dropped,
            detections: t.detections,
            detect_skipped: t.detect_skipped,
        },
        not_measured: unmeasured.clone(),
        fps: rate(t.processed),
        capture_fps: rate(t.captured),
        detect_fps: rate(t.detections),
        frame_age: Percentiles::from(&t.age),
        stages,
        cpu: CpuFigures {
            process_s: round(s.cpu_time.as_secs_f64(), 3),
            cores_busy: measured.then(|| round(cores_busy, 2)),
            utilisation_pct: measured.then(|| round(100.0 * cores_busy / cores, 1)),
            threads: thread_figs,
            per_core,
            system_per_core_pct: system_busy.into_iter().map(|b| round(b, 1)).collect(),
        },
        keep_up: KeepUp {
            target_fps,
            needed_detect_fps: round(needed, 2),
            detect_capacity_fps: round(detect_capacity, 2),
            track_capacity_fps: track_capacity,
            keeps_up: t.detections > 0
                && detect_capacity >= needed
                && track_capacity.is_some_and(|c| c >= target_fps),
            projected_cpu_pct: round(100.0 * (per_frame * target_fps + per_detection * needed), 1),
        },
        core_map: s.core_map.clone(),
    }
}

/// The closing recommendation of a sweep (or the verdict of a single run).
#[derive(Clone, Debug, Serialize)]
pub struct Recommendation {
    /// The recommended row's setting, `None` when no row keeps up.
    pub setting: Option<String>,
    /// One sentence for people.
    pub text: String,
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
    use crate::detect::ModelInfo;

    fn summary(total: crate::stats::Window, cpu_time: Duration) -> Summary {
        Summary {
            total,
            report: crate::stats::Window::default().report(0),
            model: ModelInfo {
                name: "m".into(),
                input_w: 416,
                input_h: 416,
                datum: "int8",
                threads: 1,
                load_time: Duration::ZERO,
            },
            source: "demo".into(),
            source_fps: Some(10.0),
            tracks_started: 0,
            tracks_ended: 0,
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
