//! The real-time pipeline: the only module that knows about threads and cores.
//!
//! ```text
//!  capture thread ──Frame──► newest-frame slot ──► tracker thread ──job──► detector thread
//!  (never waits; a frame        (replaced = dropped)   every frame:        (newest frame only;
//!   not taken in time is                               gray → step →        busy ⇒ the request
//!   dropped and counted)                               publish              is skipped)
//!                             ◄────────── detections for frame k ─────────────┘
//!                              applied to the tracks' positions at k, carried to now
//! ```
//! All three threads wait on one condition variable guarding `Shared`, so the tracker
//! wakes for a new frame *or* a detection result, and never for anything else.
//!
//! In [`Schedule::Lockstep`] (benchmarks of tracking fidelity) capture waits for the tracker
//! and the tracker waits for each detection it asked for: deterministic, nothing dropped.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::detect::{Detection, Detector, ModelInfo};
use crate::frame::{monotonic_now, Frame, GrayImage};
use crate::geom::ResizeMode;
use crate::output::{self, FrameOut, TracksWriter};
use crate::preprocess::{self, Scratch};
use crate::service::Notifier;
use crate::source::{self, FrameSource, Pacing, SourceOptions};
use crate::stats::{Report, Window};
use crate::sysinfo;
use crate::track::{TrackEvent, Tracker};

/// How detection is scheduled against tracking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Real time: capture never waits, the detector runs asynchronously on the newest frame.
    Live,
    /// Every frame processed, every requested detection awaited (deterministic evaluation).
    Lockstep,
}

/// Everything a run needs besides the configuration.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Scheduling mode.
    pub schedule: Schedule,
    /// Override of the replay pacing (benchmarks play files as fast as possible).
    pub pace: Option<Pacing>,
    /// Stop after this many processed frames.
    pub max_frames: Option<u64>,
    /// Stop after this long.
    pub max_duration: Option<Duration>,
    /// Extra JSON Lines file of tracks per frame (overrides `output.tracks_file`).
    pub tracks_out: Option<PathBuf>,
    /// Log stats reports and track events (false for quiet benchmark sweeps).
    pub log_events: bool,
    /// Artificial extra detector latency (tests of the "never wait for the model" rule).
    pub detect_delay: Duration,
    /// Set to stop the run (signals); checked at least every 100 ms.
    pub stop: Arc<AtomicBool>,
    /// Set to end the run so the caller can reload its configuration (SIGHUP).
    pub reload: Arc<AtomicBool>,
    /// systemd notifications (READY after the first frame, watchdog while frames flow).
    pub notifier: Option<Arc<Notifier>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            schedule: Schedule::Live,
            pace: None,
            max_frames: None,
            max_duration: None,
            tracks_out: None,
            log_events: true,
            detect_delay: Duration::ZERO,
            stop: Arc::new(AtomicBool::new(false)),
            reload: Arc::new(AtomicBool::new(false)),
            notifier: None,
        }
    }
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The recording ended.
    EndOfSource,
    /// `max_frames` or `max_duration` reached.
    Limit,
    /// Asked to stop (signal).
    Stopped,
    /// Asked to reload the configuration (signal).
    Reload,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Counters and histograms of the whole run.
    pub total: Window,
    /// The figures of the whole run.
    pub report: Report,
    /// The model that ran.
    pub model: ModelInfo,
    /// Source description.
    pub source: String,
    /// Source frame rate, if known.
    pub source_fps: Option<f64>,
    /// Track start events.
    pub tracks_started: u64,
    /// Track end events.
    pub tracks_ended: u64,
    /// Process CPU time spent during the run.
    pub cpu_time: Duration,
    /// Why it ended.
    pub end: EndReason,
    /// Which core each thread was pinned to (`None`: not pinned).
    pub core_map: CoreMap,
    /// CPU time each pipeline thread used, read by the thread itself as it ended.
    pub thread_cpu: ThreadCpu,
}

/// CPU time of the three pipeline threads over a run (`CLOCK_THREAD_CPUTIME_ID`, read by each
/// thread just before it ends: the threads are gone when the caller could look). The model's
/// matmul pool outlives the run; its threads are named `lookout-mm-N`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadCpu {
    /// `lookout-capture`.
    pub capture: Duration,
    /// `lookout-track`.
    pub track: Duration,
    /// `lookout-detect` (preprocessing, the model's own share on this thread, decode + NMS).
    pub detect: Duration,
}

/// Errors that end a run.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The source failed for good.
    #[error(transparent)]
    Source(#[from] source::SourceError),
    /// The model failed to load or run.
    #[error(transparent)]
    Detect(#[from] crate::detect::DetectError),
    /// The tracker configuration is invalid.
    #[error("tracker: {0}")]
    Tracker(String),
    /// The tracks file cannot be written.
    #[error(transparent)]
    Output(#[from] output::TracksFileError),
    /// A thread could not be started or died.
    #[error("pipeline thread {0}")]
    Thread(String),
}

/// The thread → core assignment.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CoreMap {
    /// Capture thread core.
    pub capture: Option<usize>,
    /// Tracker thread core.
    pub track: Option<usize>,
    /// Detector thread core.
    pub detect: Option<usize>,
    /// Cores of the model's matmul pool (when threads > 1).
    pub matmul: Vec<usize>,
}

impl CoreMap {
    /// The map for the cores this process may run on (`allowed`, ascending CPU ids: all of
    /// them, or the set systemd's `CPUAffinity=` or `taskset` left). Explicit cores from the
    /// config win when allowed; otherwise, counting positions in `allowed`, with 4+ cores
    /// capture 1st, tracking 2nd, detection 3rd.. ; with 2–3 cores capture and tracking share
    /// the 1st and detection gets the rest; with 1 core nothing is pinned.
    pub fn plan(cfg: &Config, allowed: &[usize]) -> CoreMap {
        let p = &cfg.pipeline;
        let cores = allowed.len();
        if !p.pin_threads || cores <= 1 {
            return CoreMap::default();
        }
        let (cap, trk, det_from) = match cores {
            2 | 3 => (0, 0, 1),
            _ => (0, 1, 2),
        };
        let ok = |c: &usize| allowed.contains(c);
        let explicit: Vec<usize> = p.detect_cores.iter().copied().filter(ok).collect();
        let detect_cores: Vec<usize> = if explicit.is_empty() {
            allowed[det_from..].to_vec()
        } else {
            explicit
        };
        let threads = cfg.model.threads.max(1);
        CoreMap {
            capture: Some(p.capture_core.filter(ok).unwrap_or(allowed[cap])),
            track: Some(p.track_core.filter(ok).unwrap_or(allowed[trk])),
            detect: detect_cores.first().copied(),
            matmul: if threads > 1 {
                detect_cores.iter().copied().cycle().take(threads).collect()
            } else {
                Vec::new()
            },
        }
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        let c = |o: Option<usize>| o.map_or("-".to_string(), |c| c.to_string());
        format!(
            "capture→core {}, tracking→core {}, detection→core {}{}",
            c(self.capture),
            c(self.track),
            c(self.detect),
            if self.matmul.is_empty() {
                String::new()
            } else {
                format!(", model matmul pool→cores {:?}", self.matmul)
            }
        )
    }
}

/// How fresh the capture thread's last reopen report must be for the tracker to keep the
/// watchdog fed (reopen attempts come at most 5 s apart; a capture thread stuck inside an
/// attempt stops the pings and systemd restarts the service).
const RECONNECT_ALIVE: Duration = Duration::from_secs(15);

/// Runs `f` while a helper thread pings systemd's watchdog at half its period: for bounded
/// waits that are not hangs (a reload loading a new model, the end of a run waiting for the
/// inference in flight), so systemd does not kill a healthy daemon. Without a watchdog it
/// just runs `f`.
pub fn keeping_watchdog_fed<T>(notifier: Option<&Notifier>, f: impl FnOnce() -> T) -> T {
    let Some((n, period)) = notifier.and_then(|n| n.watchdog_period().map(|p| (n, p))) else {
        return f();
    };
    let done = (Mutex::new(false), Condvar::new());
    std::thread::scope(|scope| {
        let pinger = std::thread::Builder::new()
            .name("lookout-keepalive".into())
            .spawn_scoped(scope, || {
                let mut finished = done.0.lock().unwrap_or_else(|p| p.into_inner());
                while !*finished {
                    n.ping_watchdog();
                    finished = done
                        .1
                        .wait_timeout(finished, period / 2)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            });
        if let Err(e) = pinger {
            log::warn!("cannot start the watchdog keep-alive thread: {e}");
        }
        let out = f();
        *done.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        done.1.notify_all();
        out
    })
}

/// Pins the calling thread; a failure is logged, never fatal.
fn pin(core: Option<usize>, what: &str) {
    if let Some(c) = core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
            log::warn!("could not pin the {what} thread to core {c}; it runs unpinned");
        }
    }
}

/// A detection result travelling back to the tracker.
#[derive(Debug)]
struct DetResult {
    seq: u64,
    dets: Result<Vec<Detection>, String>,
    preprocess: Duration,
    model: Duration,
    postprocess: Duration,
}

/// State shared by the three threads, behind one mutex + condvar.
#[derive(Default)]
struct Shared {
    /// The newest captured frame not yet taken by the tracker.
    frame: Option<Frame>,
    /// Frames replaced in the slot before the tracker took them.
    replaced: u64,
    /// Frames the source delivered.
    captured: u64,
    /// Stale buffers the source itself discarded (camera), as last reported.
    source_dropped: u64,
    /// The frame waiting for the detector (at most one: requests while busy are skipped).
    job: Option<Frame>,
    /// The detector is working on a frame.
    detector_busy: bool,
    /// Finished detections, oldest first.
    results: VecDeque<DetResult>,
    /// The source ended (or failed: `error`).
    source_done: bool,
    /// A fatal source error.
    error: Option<source::SourceError>,
    /// Everyone stops.
    shutdown: bool,
    /// The detector thread has ended.
    detector_exited: bool,
    /// When the source last reported a lost camera or a failed reopen attempt (`None` while
    /// frames flow). A source busy reopening a vanished camera is alive, not hung: the
    /// tracker keeps the watchdog fed while these reports keep coming.
    source_reconnecting: Option<Instant>,
    /// Time in `source.next()` per delivered frame, left here by the capture thread when it
    /// ends (moved into the run's total).
    capture_time: Option<crate::stats::Latency>,
    /// CPU time of each thread, written by the thread as it ends.
    thread_cpu: ThreadCpu,
}

struct Hub {
    state: Mutex<Shared>,
    cv: Condvar,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panicking thread poisons the lock; the data is still consistent counters/slots.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn wait<'a>(&self, g: MutexGuard<'a, Shared>, t: Duration) -> MutexGuard<'a, Shared> {
        match self.cv.wait_timeout(g, t) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        }
    }
}

/// The source options a configuration asks for.
pub fn source_options(cfg: &Config, pace: Option<Pacing>) -> SourceOptions {
    let s = &cfg.source;
    let nz = |v: u32| (v > 0).then_some(v);
    SourceOptions {
        width: nz(s.width),
        height: nz(s.height),
        // Validation rejects a format that does not parse, so `None` here means "" (best).
        format: cfg.pixel_format(),
        fps: nz(s.fps),
        pace: pace.unwrap_or(if s.realtime {
            Pacing::RealTime
        } else {
            Pacing::AsFastAsPossible
        }),
        looped: s.looped,
        replay_fps: nz(s.fps).map(f64::from),
        ..SourceOptions::default()
    }
}

fn process_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// What a run is made of; kept across runs so a reload restarts only what changed.
pub struct Parts {
    /// The loaded model (shared with the detector thread of a run).
    pub detector: Arc<Detector>,
    /// The open source.
    pub source: Box<dyn FrameSource + Send>,
    /// The tracker and its tracks.
    pub tracker: Tracker,
    /// Thread → core map.
    pub core_map: CoreMap,
}

// Machine facts, kept reachable under their old paths.
pub use crate::sysinfo::{allowed_cores, core_count};

/// Loads the model with a matmul pool pinned as the core map says.
pub fn load_detector(cfg: &Config, core_map: &CoreMap) -> Result<Detector, PipelineError> {
    let pool = if cfg.model.threads > 1 {
        let matmul = core_map.matmul.clone();
        let p = rayon::ThreadPoolBuilder::new()
            .num_threads(cfg.model.threads)
            .thread_name(|i| format!("lookout-mm-{i}"))
            .start_handler(move |i| pin(matmul.get(i).copied(), "model matmul"))
            .build()
            .map_err(|e| PipelineError::Thread(format!("model pool: {e}")))?;
        Some(Arc::new(p))
    } else {
        None
    };
    Ok(Detector::load_with_pool(&cfg.detector(), pool)?)
}

/// Builds every part for `cfg`: model, source, tracker, core map.
pub fn build(cfg: &Config, pace: Option<Pacing>) -> Result<Parts, PipelineError> {
    let core_map = CoreMap::plan(cfg, &sysinfo::allowed_cores());
    let detector = Arc::new(load_detector(cfg, &core_map)?);
    let source = source::open(&cfg.source.spec, &source_options(cfg, pace))?;
    let tracker =
        Tracker::new(cfg.tracker.clone()).map_err(|e| PipelineError::Tracker(e.to_string()))?;
    Ok(Parts {
        detector,
        source,
        tracker,
        core_map,
    })
}

/// Opens the source and loads the model for `cfg`, then runs until the source ends, a limit
/// is reached or `opts.stop` is set.
pub fn run(cfg: &Config, opts: &RunOptions) -> Result<Summary, PipelineError> {
    let mut parts = build(cfg, opts.pace)?;
    run_with(cfg, opts, &mut parts)
}

/// Runs with an already loaded detector and opened source (benchmarks reuse a model).
pub fn run_with(
    cfg: &Config,
    opts: &RunOptions,
    parts: &mut Parts,
) -> Result<Summary, PipelineError> {
    let Parts {
        detector,
        source: src,
        tracker,
        core_map,
    } = parts;
    let core_map = core_map.clone();
    let detector = &*detector;
    let source_desc = src.describe();
    let source_fps = src.fps();
    let model = detector.info().clone();
    if opts.log_events {
        log::info!(LOOKOUT_EVENT = "start", SOURCE = source_desc.as_str(); "source: {source_desc}");
        log::info!(LOOKOUT_EVENT = "cores"; "threads: {}", core_map.describe());
    }
    let tracks_path = opts.tracks_out.clone().or_else(|| {
        (!cfg.output.tracks_file.is_empty()).then(|| PathBuf::from(&cfg.output.tracks_file))
    });
    let mut writer = tracks_path
        .as_deref()
        .map(TracksWriter::create)
        .transpose()?;
    let labels = cfg.label_filter();
    let hub = Arc::new(Hub {
        state: Mutex::new(Shared::default()),
        cv: Condvar::new(),
    });
    let lockstep = opts.schedule == Schedule::Lockstep;
    // A recording played as fast as possible would otherwise hand out frames in a busy loop
    // (hundreds of thousands a second, all replaced unseen), burning a core the tracker may
    // share: it waits until the tracker took the previous frame. Cameras and real-time
    // replays pace themselves.
    let wait_for_slot = lockstep || src.unpaced();
    let cpu0 = process_cpu_time();
    // ── detector ── not a scoped thread: a stop need not wait for the inference in flight
    // (a second or more on a Pi 3 / Zero 2 W), the process may end while it runs.
    let det_thread = {
        let h = hub.clone();
        let det_core = core_map.detect;
        let delay = opts.detect_delay;
        let resize = cfg.model.resize;
        let det = Arc::clone(detector);
        std::thread::Builder::new()
            .name("lookout-detect".into())
            .spawn(move || {
                pin(det_core, "detector");
                detect_loop(&det, &h, delay, resize);
                h.lock().detector_exited = true;
                h.cv.notify_all();
            })
            .map_err(|e| PipelineError::Thread(format!("detector: {e}")))?
    };

    let summary = std::thread::scope(|scope| -> Result<Summary, PipelineError> {
        // ── capture ──
        let h = hub.clone();
        let stop = opts.stop.clone();
        let cap_core = core_map.capture;
        std::thread::Builder::new()
            .name("lookout-capture".into())
            .spawn_scoped(scope, move || {
                pin(cap_core, "capture");
                capture_loop(&mut **src, &h, &stop, wait_for_slot)
            })
            .map_err(|e| PipelineError::Thread(format!("capture: {e}")))?;
        // ── tracker (publishes) ──
        let h = hub.clone();
        let trk_core = core_map.track;
        let handle = std::thread::Builder::new()
            .name("lookout-track".into())
            .spawn_scoped(scope, move || {
                pin(trk_core, "tracking");
                let r = track_loop(cfg, opts, &h, tracker, writer.as_mut(), labels.as_deref());
                // Whatever happened, release the other threads.
                let mut g = h.lock();
                g.shutdown = true;
                g.thread_cpu.track = thread_cpu_time();
                drop(g);
                h.cv.notify_all();
                r
            })
            .map_err(|e| PipelineError::Thread(format!("tracker: {e}")))?;
        let outcome = handle
            .join()
            .map_err(|_| PipelineError::Thread("tracker panicked".into()))?;
        let (total, end, started, ended, tracks_now) = outcome?;
        Ok(Summary {
            report: total.report(tracks_now),
            total,
            model: model.clone(),
            source: source_desc.clone(),
            source_fps,
            tracks_started: started,
            tracks_ended: ended,
            cpu_time: Duration::ZERO,
            end,
            core_map: core_map.clone(),
            thread_cpu: ThreadCpu::default(),
        })
    });
    // Release the detector whatever happened (the tracker normally did already).
    hub.lock().shutdown = true;
    hub.cv.notify_all();
    if matches!(&summary, Ok(s) if s.end == EndReason::Stopped) {
        // Stop within a second: give the detector a moment, then leave its inference behind.
        let deadline = Instant::now() + Duration::from_millis(250);
        let mut g = hub.lock();
        while !g.detector_exited && Instant::now() < deadline {
            g = hub.wait(g, deadline.saturating_duration_since(Instant::now()));
        }
        let exited = g.detector_exited;
        drop(g);
        if exited {
            let _ = det_thread.join();
        } else {
            log::info!("stopping without waiting for the inference in flight");
        }
    } else {
        // The inference in flight may take seconds on a slow board: a bounded wait, not a hang.
        keeping_watchdog_fed(opts.notifier.as_deref(), || det_thread.join())
            .map_err(|_| PipelineError::Thread("detector panicked".into()))?;
    }
    let mut summary = summary?;
    summary.cpu_time = process_cpu_time().saturating_sub(cpu0);
    let mut g = hub.lock();
    if let Some(e) = g.error.take() {
        return Err(e.into());
    }
    if let Some(c) = g.capture_time.take() {
        summary.total.capture.merge(&c);
    }
    summary.thread_cpu = g.thread_cpu.clone();
    drop(g);
    Ok(summary)
}

/// The capture thread. `wait_for_slot`: hand out a frame only once the tracker took the
/// previous one (lockstep runs, recordings played as fast as possible); otherwise the newest
/// frame replaces an untaken one (a camera never waits).
fn capture_loop(
    src: &mut (dyn FrameSource + Send),
    hub: &Hub,
    stop: &AtomicBool,
    wait_for_slot: bool,
) {
    let mut next_time = crate::stats::Latency::default();
    loop {
        if stop.load(Ordering::Relaxed) || hub.lock().shutdown {
            break;
        }
        if wait_for_slot {
            // Wait until the tracker took the previous frame: nothing is dropped.
            let mut g = hub.lock();
            while g.frame.is_some() && !g.shutdown {
                g = hub.wait(g, Duration::from_millis(100));
            }
            if g.shutdown {
                break;
            }
        }
        let t0 = Instant::now();
        match src.next() {
            Ok(Some(frame)) => {
                next_time.record(t0.elapsed());
                let dropped = src.stats().dropped_stale;
                let mut g = hub.lock();
                g.source_reconnecting = None;
                g.captured += 1;
                g.source_dropped = dropped;
                if g.frame.replace(frame).is_some() {
                    g.replaced += 1;
                }
                drop(g);
                hub.cv.notify_all();
            }
            Ok(None) => break,
            Err(e) if e.is_transient() => {
                let attempts = match &e {
                    source::SourceError::Disconnected { .. } => Some(0),
                    source::SourceError::Reconnecting { attempts, .. } => Some(*attempts),
                    _ => None,
                };
                hub.lock().source_reconnecting = attempts.map(|_| Instant::now());
                // A camera may stay away for hours: the first attempts are logged, then one
                // a minute or so (the back-off tops out at 5 s).
                match attempts {
                    Some(a) if a > 3 && a % 12 != 0 => {
                        log::debug!(LOOKOUT_EVENT = "source_error"; "{e}")
                    }
                    _ => log::warn!(LOOKOUT_EVENT = "source_error"; "{e}"),
                }
            }
            Err(e) => {
                log::error!(LOOKOUT_EVENT = "source_error"; "{e}");
                hub.lock().error = Some(e);
                break;
            }
        }
    }
    let mut g = hub.lock();
    g.source_done = true;
    g.capture_time = Some(next_time);
    g.thread_cpu.capture = thread_cpu_time();
    drop(g);
    hub.cv.notify_all();
}

fn detect_loop(det: &Detector, hub: &Hub, delay: Duration, resize: ResizeMode) {
    let info = det.info().clone();
    let mut input = vec![0.0f32; det.input_len()];
    let mut scratch = Scratch::default();
    loop {
        let frame = {
            let mut g = hub.lock();
            loop {
                if g.shutdown {
                    g.thread_cpu.detect = thread_cpu_time();
                    return;
                }
                if let Some(f) = g.job.take() {
                    break f;
                }
                g = hub.wait(g, Duration::from_millis(100));
            }
        };
        let t0 = Instant::now();
        let mapped = preprocess::frame_to_tensor(
            &frame,
            info.input_w,
            info.input_h,
            resize,
            &mut input,
            &mut scratch,
        );
        let t1 = Instant::now();
        let (dets, model, post) = match mapped {
            Err(e) => (
                Err(format!("frame {}: {e}", frame.seq)),
                Duration::ZERO,
                Duration::ZERO,
            ),
            Ok(map) => match det.run_raw(&input) {
                Err(e) => (Err(e.to_string()), t1.elapsed(), Duration::ZERO),
                Ok(raw) => {
                    let t2 = Instant::now();
                    let d = det.postprocess(&raw, &map);
                    (Ok(d), t2 - t1, t2.elapsed())
                }
            },
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let mut g = hub.lock();
        g.results.push_back(DetResult {
            seq: frame.seq,
            dets,
            preprocess: t1 - t0,
            model,
            postprocess: post,
        });
        g.detector_busy = false;
        drop(g);
        hub.cv.notify_all();
    }
}

type TrackOutcome = (Window, EndReason, u64, u64, usize);

/// The tracker thread: takes the newest frame, steps the tracker, schedules detections,
/// applies results, publishes.
fn track_loop(
    cfg: &Config,
    opts: &RunOptions,
    hub: &Hub,
    tracker: &mut Tracker,
    mut writer: Option<&mut TracksWriter>,
    labels: Option<&[usize]>,
) -> Result<TrackOutcome, PipelineError> {
    let every = u64::from(cfg.pipeline.detect_every.max(1));
    let interval = Duration::from_secs_f64(cfg.pipeline.stats_interval);
    let lockstep = opts.schedule == Schedule::Lockstep;
    let mut gray = GrayImage::default();
    let mut scratch = Scratch::default();
    let mut total = Window::default();
    let mut window = Window::default();
    let mut window_start = Instant::now();
    let run_start = Instant::now();
    let (mut started, mut ended) = (0u64, 0u64);
    let mut since_detect = every; // detect on the first frame
    let mut waiting_for: Option<u64> = None; // lockstep: the detection we await
    let mut pending: Option<(u64, Duration)> = None; // frame processed, line not yet written
    let (mut last_replaced, mut last_source_dropped, mut last_captured) = (0u64, 0u64, 0u64);
    let end;
    let mut reconnect_status = false; // STATUS= says the camera is being reopened

    loop {
        // ── wait for a frame or a result ──
        let (frame, results, done) = {
            let mut g = hub.lock();
            loop {
                let stop = opts.stop.load(Ordering::Relaxed) || opts.reload.load(Ordering::Relaxed);
                let can_take_frame = waiting_for.is_none();
                if !g.results.is_empty()
                    || (can_take_frame && g.frame.is_some())
                    || g.source_done
                    || stop
                {
                    break;
                }
                if let (Some(n), Some(t)) = (&opts.notifier, g.source_reconnecting) {
                    // Reopen attempts come at most 5 s apart: fresh reports mean the capture
                    // thread is alive and working on it.
                    if t.elapsed() < RECONNECT_ALIVE {
                        n.frame_processed();
                    }
                    if !reconnect_status {
                        reconnect_status = true;
                        n.status("camera lost: reopening it");
                    }
                }
                g = hub.wait(g, Duration::from_millis(100));
            }
            if reconnect_status && g.source_reconnecting.is_none() {
                reconnect_status = false;
                if let Some(n) = &opts.notifier {
                    n.status("running");
                }
            }
            let results: Vec<DetResult> = g.results.drain(..).collect();
            let frame = if waiting_for.is_none() {
                g.frame.take()
            } else {
                None
            };
            // Counters: window deltas.
            window.dropped +=
                (g.replaced - last_replaced) + g.source_dropped.saturating_sub(last_source_dropped);
            window.captured += g.captured - last_captured;
            last_replaced = g.replaced;
            last_source_dropped = g.source_dropped;
            last_captured = g.captured;
            let done = g.source_done && g.frame.is_none() && g.job.is_none() && !g.detector_busy;
            drop(g);
            hub.cv.notify_all(); // lockstep capture waits for the slot to empty
            (frame, results, done)
        };
        // ── detections for older frames ──
        for r in results {
            window.preprocess.record(r.preprocess);
            window.model.record(r.model);
            window.postprocess.record(r.postprocess);
            window.detections += 1;
            if waiting_for == Some(r.seq) {
                waiting_for = None;
            }
            match r.dets {
                Ok(mut dets) => {
                    if let Some(keep) = labels {
                        dets.retain(|d| keep.contains(&d.class_id));
                    }
                    tracker.apply_detections(r.seq, &dets);
                }
                Err(e) => log::warn!(LOOKOUT_EVENT = "detect_error"; "detection skipped: {e}"),
            }
        }
        // ── a new frame: first write the previous one (now final), then step ──
        if let Some(frame) = frame {
            if let Some((seq, cap)) = pending.take() {
                publish(seq, cap, tracker, writer.as_deref_mut())?;
            }
            let t0 = Instant::now();
            let gray_ok = preprocess::frame_to_gray(
                &frame,
                cfg.pipeline.track_width,
                &mut gray,
                &mut scratch,
            );
            window.gray.record(t0.elapsed());
            if let Err(e) = &gray_ok {
                log::warn!(LOOKOUT_EVENT = "frame_error"; "frame {}: {e}", frame.seq);
            }
            tracker.step(frame.seq, &gray);
            window.track.record(t0.elapsed());
            window.processed += 1;
            window
                .age
                .record(monotonic_now().saturating_sub(frame.captured_at));
            if let Some(n) = &opts.notifier {
                n.ready("running");
                n.frame_processed();
            }
            pending = Some((frame.seq, frame.captured_at));
            // ── schedule a detection on this (the newest) frame ──
            since_detect += 1;
            if since_detect >= every {
                let mut g = hub.lock();
                if g.detector_busy {
                    window.detect_skipped += 1;
                } else {
                    g.detector_busy = true;
                    if lockstep {
                        waiting_for = Some(frame.seq);
                    }
                    g.job = Some(frame);
                    since_detect = 0;
                    drop(g);
                    hub.cv.notify_all();
                }
            }
        }
        // ── events ──
        for ev in tracker.drain_events() {
            match ev {
                TrackEvent::Started(t) => {
                    started += 1;
                    if opts.log_events {
                        output::log_track_start(&output::track_out(
                            t.id, t.class_id, t.score, &t.bbox, t.detected,
                        ));
                    }
                }
                TrackEvent::Ended(t) => {
                    ended += 1;
                    if opts.log_events {
                        let o = output::track_out(t.id, t.class_id, t.score, &t.bbox, false);
                        output::log_track_end(&o, t.age_frames);
                    }
                }
            }
        }
        // ── periodic stats ──
        if window_start.elapsed() >= interval {
            window.elapsed = window_start.elapsed();
            if opts.log_events {
                window.report(tracker.tracks().count()).log();
            }
            if let Some(w) = writer.as_deref_mut() {
                w.flush()?;
            }
            total.merge(&window);
            window = Window::default();
            window_start = Instant::now();
        }
        // ── the end? ──
        let processed = total.processed + window.processed;
        if opts.stop.load(Ordering::Relaxed) {
            end = EndReason::Stopped;
            break;
        }
        if opts.reload.load(Ordering::Relaxed) {
            end = EndReason::Reload;
            break;
        }
        if opts.max_frames.is_some_and(|m| processed >= m)
            || opts.max_duration.is_some_and(|d| run_start.elapsed() >= d)
        {
            end = EndReason::Limit;
            break;
        }
        if done && waiting_for.is_none() {
            end = EndReason::EndOfSource;
            break;
        }
    }
    if let Some((seq, cap)) = pending.take() {
        publish(seq, cap, tracker, writer.as_deref_mut())?;
    }
    window.elapsed = window_start.elapsed();
    total.merge(&window);
    if let Some(w) = writer {
        w.flush()?;
    }
    Ok((total, end, started, ended, tracker.tracks().count()))
}

/// Writes one frame's tracks to the tracks file.
fn publish(
    seq: u64,
    captured_at: Duration,
    tracker: &Tracker,
    writer: Option<&mut TracksWriter>,
) -> Result<(), PipelineError> {
    if let Some(w) = writer {
        let tracks = tracker
            .tracks()
            .map(|t| {
                output::track_out(
                    t.id,
                    t.class_id,
                    t.score,
                    &t.bbox,
                    t.detected && t.seq == seq,
                )
            })
            .collect();
        w.write(&FrameOut {
            seq,
            captured_at_ms: captured_at.as_secs_f64() * 1e3,
            tracks,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(threads: usize) -> Config {
        let mut c = Config::default();
        c.pipeline.pin_threads = true;
        c.model.threads = threads;
        c
    }

    #[test]
    fn core_map_uses_the_cores_this_process_may_run_on() {
        let all = CoreMap::plan(&cfg(2), &[0, 1, 2, 3]);
        assert_eq!(
            (all.capture, all.track, all.detect, all.matmul.clone()),
            (Some(0), Some(1), Some(2), vec![2, 3])
        );
        // CPUAffinity=2 3: positions map onto the allowed ids, never onto cores 0/1.
        let two = CoreMap::plan(&cfg(2), &[2, 3]);
        assert_eq!(
            (two.capture, two.track, two.detect, two.matmul.clone()),
            (Some(2), Some(2), Some(3), vec![3, 3])
        );
        let one = CoreMap::plan(&cfg(1), &[3]);
        assert_eq!(one, CoreMap::default());
    }

    #[test]
    fn explicit_cores_outside_the_affinity_mask_are_ignored() {
        let mut c = cfg(1);
        c.pipeline.capture_core = Some(0);
        c.pipeline.track_core = Some(3);
        c.pipeline.detect_cores = vec![0, 1];
        let m = CoreMap::plan(&c, &[2, 3]);
        assert_eq!((m.capture, m.track, m.detect), (Some(2), Some(3), Some(3)));
    }

    /// A camera that delivers a few frames, then vanishes and is being reopened for a while
    /// (`Disconnected`, then `Reconnecting` every 100 ms), then hangs (poll timeouts), then ends.
    struct Vanishing {
        calls: u32,
        seq: u64,
    }

    impl FrameSource for Vanishing {
        fn next(&mut self) -> Result<Option<Frame>, source::SourceError> {
            self.calls += 1;
            let device = "/dev/video-test".to_string();
            std::thread::sleep(Duration::from_millis(if self.calls <= 5 {
                40
            } else {
                100
            }));
            match self.calls {
                1..=5 => {
                    self.seq += 1;
                    Ok(Some(Frame {
                        seq: self.seq,
                        captured_at: monotonic_now(),
                        width: 64,
                        height: 48,
                        format: crate::frame::PixelFormat::Grey,
                        data: vec![128; 64 * 48],
                    }))
                }
                6 => Err(source::SourceError::Disconnected {
                    device,
                    source: std::io::Error::from_raw_os_error(libc::ENODEV),
                }),
                7..=20 => Err(source::SourceError::Reconnecting {
                    device,
                    attempts: self.calls - 6,
                    reason: "No such file or directory".into(),
                    retry_in: Duration::from_millis(100),
                }),
                21..=34 => Err(source::SourceError::Timeout {
                    device,
                    timeout: Duration::from_millis(100),
                }),
                _ => Ok(None),
            }
        }
        fn stats(&self) -> source::SourceStats {
            source::SourceStats::default()
        }
        fn fps(&self) -> Option<f64> {
            Some(25.0)
        }
        fn describe(&self) -> String {
            "vanishing test camera".into()
        }
    }

    #[test]
    fn watchdog_is_fed_while_a_lost_camera_is_reopened_but_not_while_it_hangs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let notifier =
            Arc::new(Notifier::with_socket(&path, Some(Duration::from_millis(100))).unwrap());
        let mut c = cfg(1);
        c.pipeline.pin_threads = false;
        c.pipeline.detect_every = 1000;
        c.model.input_size = vec![64, 64];
        let core_map = CoreMap::default();
        let mut parts = Parts {
            detector: Arc::new(load_detector(&c, &core_map).unwrap()),
            source: Box::new(Vanishing { calls: 0, seq: 0 }),
            tracker: Tracker::new(c.tracker.clone()).unwrap(),
            core_map,
        };
        let opts = RunOptions {
            notifier: Some(notifier),
            log_events: false,
            ..RunOptions::default()
        };
        let t0 = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        let listener = std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            let mut got = Vec::new();
            loop {
                match server.recv(&mut buf) {
                    Ok(k) => {
                        got.push((t0.elapsed(), String::from_utf8_lossy(&buf[..k]).to_string()))
                    }
                    Err(_) if rx.try_recv().is_ok() => return got,
                    Err(_) => {}
                }
            }
        });
        let summary = run_with(&c, &opts, &mut parts).unwrap();
        tx.send(()).unwrap();
        let got = listener.join().unwrap();
        assert_eq!(summary.end, EndReason::EndOfSource);
        assert_eq!(summary.total.processed, 5);
        let pings: Vec<f64> = got
            .iter()
            .filter(|(_, m)| m == "WATCHDOG=1")
            .map(|(t, _)| t.as_secs_f64())
            .collect();
        // Phases (approximate, from the source's sleeps): frames until ~0.2 s, reopening
        // ~0.3–1.7 s, hanging ~1.7–3.1 s.
        let reopening = pings.iter().filter(|t| (0.5..1.6).contains(*t)).count();
        let hanging = pings.iter().filter(|t| (2.0..3.0).contains(*t)).count();
        assert!(reopening >= 5, "pings while reopening: {pings:?}");
        assert_eq!(hanging, 0, "pings while the camera hangs: {pings:?}");
        assert!(
            got.iter().any(|(_, m)| m.contains("STATUS=camera lost")),
            "systemctl status tells the camera is being reopened: {got:?}"
        );
    }

    #[test]
    fn keeping_watchdog_fed_pings_only_while_the_wait_lasts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let n = Notifier::with_socket(&path, Some(Duration::from_millis(100))).unwrap();
        let mut buf = [0u8; 64];
        assert!(server.recv(&mut buf).is_err(), "no ping before the wait");
        let out = keeping_watchdog_fed(Some(&n), || {
            std::thread::sleep(Duration::from_millis(350));
            7
        });
        assert_eq!(out, 7);
        for _ in 0..3 {
            let len = server.recv(&mut buf).unwrap();
            assert_eq!(&buf[..len], b"WATCHDOG=1");
        }
        while server.recv(&mut buf).is_ok() {} // drain what was in flight
        assert!(
            server.recv(&mut buf).is_err(),
            "pings stop when the wait ends"
        );
        // Without systemd it only runs the closure.
        assert_eq!(keeping_watchdog_fed(None, || 3), 3);
    }
}
