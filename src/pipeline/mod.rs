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
//!
//! One file per concern: `cores` (the thread → core plan and pinning), `parts` (what a run is
//! made of: model, source, tracker), `hub` (the state the threads share), `scheduler` (the
//! tracker thread's rules, steppable without threads), `capture`, `detection` and `tracking`
//! (the three threads), `keepalive` (the watchdog through long waits).

mod capture;
mod cores;
mod detection;
mod hub;
mod keepalive;
mod parts;
mod scheduler;
mod tracking;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::detect::ModelInfo;
use crate::output::{self, TracksWriter};
use crate::service::Notifier;
use crate::source::{self, Pacing};
use crate::stats::{Report, Window};

pub use cores::CoreMap;
pub use keepalive::keeping_watchdog_fed;
pub use parts::{build, load_detector, source_options, Part, Parts, Reconcile, Reconciled};

use capture::capture_loop;
use cores::pin;
use detection::detect_loop;
use hub::Hub;
use scheduler::RunOutcome;
use tracking::track_loop;

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

fn process_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

// Machine facts, kept reachable under their old paths.
pub use crate::sysinfo::{allowed_cores, core_count};

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
    let source = parts.source.describe();
    let source_fps = parts.source.fps();
    if opts.log_events {
        log::info!(LOOKOUT_EVENT = "start", SOURCE = source.as_str(); "source: {source}");
        log::info!(LOOKOUT_EVENT = "cores"; "threads: {}", parts.core_map.describe());
    }
    let tracks_path = opts.tracks_out.clone().or_else(|| {
        (!cfg.output.tracks_file.is_empty()).then(|| PathBuf::from(&cfg.output.tracks_file))
    });
    let mut writer = tracks_path
        .as_deref()
        .map(TracksWriter::create)
        .transpose()?;
    let hub = Arc::new(Hub::default());
    let cpu0 = process_cpu_time();
    let det_thread = spawn_detector(cfg, opts, parts, &hub)?;
    let outcome = run_capture_and_tracker(cfg, opts, parts, &hub, writer.as_mut());
    // Release the detector whatever happened (the tracker normally did already).
    hub.lock().shutdown = true;
    hub.cv.notify_all();
    let stopped = matches!(&outcome, Ok(o) if o.end == EndReason::Stopped);
    join_detector(&hub, det_thread, stopped, opts.notifier.as_deref())?;
    let outcome = outcome?;
    let cpu_time = process_cpu_time().saturating_sub(cpu0);
    let mut g = hub.lock();
    if let Some(e) = g.error.take() {
        return Err(e.into());
    }
    let report = outcome.total.report(outcome.tracks_now);
    let mut total = outcome.total;
    if let Some(c) = g.capture_time.take() {
        total.capture.merge(&c);
    }
    Ok(Summary {
        report,
        total,
        model: parts.detector.info().clone(),
        source,
        source_fps,
        tracks_started: outcome.tracks_started,
        tracks_ended: outcome.tracks_ended,
        cpu_time,
        end: outcome.end,
        core_map: parts.core_map.clone(),
        thread_cpu: g.thread_cpu.clone(),
    })
}

/// Starts the detector thread. Not a scoped thread: a stop need not wait for the inference in
/// flight (a second or more on a Pi 3 / Zero 2 W), the process may end while it runs.
fn spawn_detector(
    cfg: &Config,
    opts: &RunOptions,
    parts: &Parts,
    hub: &Arc<Hub>,
) -> Result<JoinHandle<()>, PipelineError> {
    let h = hub.clone();
    let det_core = parts.core_map.detect;
    let delay = opts.detect_delay;
    let resize = cfg.model.resize;
    let det = Arc::clone(&parts.detector);
    std::thread::Builder::new()
        .name("lookout-detect".into())
        .spawn(move || {
            pin(det_core, "detector");
            detect_loop(&det, &h, delay, resize);
            h.lock().detector_exited = true;
            h.cv.notify_all();
        })
        .map_err(|e| PipelineError::Thread(format!("detector: {e}")))
}

/// Runs the capture and tracker threads, scoped to the run, until the tracker ends it.
fn run_capture_and_tracker(
    cfg: &Config,
    opts: &RunOptions,
    parts: &mut Parts,
    hub: &Arc<Hub>,
    writer: Option<&mut TracksWriter>,
) -> Result<RunOutcome, PipelineError> {
    let Parts {
        source,
        tracker,
        core_map,
        ..
    } = parts;
    // A recording played as fast as possible would otherwise hand out frames in a busy loop
    // (hundreds of thousands a second, all replaced unseen), burning a core the tracker may
    // share: it waits until the tracker took the previous frame. Cameras and real-time
    // replays pace themselves.
    let wait_for_slot = opts.schedule == Schedule::Lockstep || source.unpaced();
    let labels = cfg.label_filter();
    std::thread::scope(|scope| {
        let h = hub.clone();
        let stop = opts.stop.clone();
        let cap_core = core_map.capture;
        std::thread::Builder::new()
            .name("lookout-capture".into())
            .spawn_scoped(scope, move || {
                pin(cap_core, "capture");
                capture_loop(&mut **source, &h, &stop, wait_for_slot)
            })
            .map_err(|e| PipelineError::Thread(format!("capture: {e}")))?;
        let h = hub.clone();
        let trk_core = core_map.track;
        let handle = std::thread::Builder::new()
            .name("lookout-track".into())
            .spawn_scoped(scope, move || {
                pin(trk_core, "tracking");
                let r = track_loop(cfg, opts, &h, tracker, writer, labels.as_deref());
                // Whatever happened, release the other threads.
                let mut g = h.lock();
                g.shutdown = true;
                g.thread_cpu.track = thread_cpu_time();
                drop(g);
                h.cv.notify_all();
                r
            })
            .map_err(|e| PipelineError::Thread(format!("tracker: {e}")))?;
        handle
            .join()
            .map_err(|_| PipelineError::Thread("tracker panicked".into()))?
    })
}

/// Waits for the detector thread at the end of a run. After a stop, at most 250 ms (a stop
/// ends within a second; an inference in flight is left behind). Otherwise until it ends: the
/// inference in flight may take seconds on a slow board, a bounded wait with the watchdog fed.
fn join_detector(
    hub: &Hub,
    det_thread: JoinHandle<()>,
    stopped: bool,
    notifier: Option<&Notifier>,
) -> Result<(), PipelineError> {
    if !stopped {
        return keeping_watchdog_fed(notifier, || det_thread.join())
            .map_err(|_| PipelineError::Thread("detector panicked".into()));
    }
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{monotonic_now, Frame};
    use crate::source::FrameSource;
    use crate::track::Tracker;

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
        let mut c = Config::default();
        c.model.threads = 1;
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
}
