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
//! This file only starts and joins the threads ([`run`], [`run_with`]). One file per concern:
//! `options` (what a run is asked to do), `summary` (what it reports), `error` (what ends
//! it), `cores` (the thread → core plan and pinning), `parts` (what a run is made of: model,
//! source, tracker), `hub` (the state the threads share), `scheduler` (the tracker thread's
//! rules, steppable without threads), `capture`, `detection` and `tracking` (the three
//! threads), `keepalive` (the watchdog through long waits), `panics` (a thread's panic ends
//! the run).

mod capture;
mod cores;
mod desk;
mod detection;
mod error;
mod hub;
mod keepalive;
mod options;
mod panics;
mod parts;
mod scheduler;
mod summary;
mod tracking;

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::{tracks_file_of, Camera, Config};
use crate::geom::ResizeMode;
use crate::interrupt::Interrupt;
use crate::output::TracksWriter;
use crate::service::Notifier;
use crate::sysinfo::{process_cpu_time, thread_cpu_time};

pub use cores::CoreMap;
pub use error::{PipelineError, ThreadPanic};
pub use keepalive::{keeping_watchdog_fed, unless_stopped, unless_stopped_within};
pub use options::{RunOptions, Schedule};
pub use panics::{install_panic_hook, INJECT_AT};
pub use parts::{
    build, build_cameras, build_each_camera, load_detector, reconcile_cameras, source_options,
    Part, Parts, Reconcile, Reconciled,
};
pub use summary::{EndReason, Summary, ThreadCpu};

use capture::capture_loop;
use cores::pin;
use desk::{CameraSlot, Desk};
use detection::{detect_loop, shared_detect_loop, Settings};
use hub::Hub;
use scheduler::RunOutcome;
use tracking::track_loop;

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
    let hub = Arc::new(Hub::default());
    let det_thread = spawn_detector(cfg, opts, parts, &hub)?;
    let run = run_camera(cfg, opts, parts, &hub, None);
    // Release the detector whatever happened (the tracker normally did already).
    hub.lock().shutdown = true;
    hub.cv.notify_all();
    // After a stop or a failure (a panic included), an inference in flight is not awaited.
    let stopped = !matches!(&run, Ok((o, _)) if o.end != EndReason::Stopped);
    join_detector(&hub, det_thread, stopped, opts.notifier.as_deref())?;
    // A thread that panicked as the run was ending anyway still fails it.
    if let Some(p) = hub.lock().panicked.take() {
        return Err(PipelineError::Panicked(p));
    }
    let (outcome, cpu_time) = run?;
    summarize(cfg, parts, &hub, outcome, cpu_time)
}

/// Runs several cameras at once, each with its own capture and tracker threads, all sharing
/// the one model of `parts` (built by [`build_cameras`]) through one detector thread that
/// serves the waiting camera it served least recently. One camera is [`run_with`], unchanged.
/// Returns a summary per camera, in the order of `cams`.
pub fn run_cameras(
    cams: &[Camera],
    opts: &RunOptions,
    parts: &mut [Parts],
) -> Result<Vec<Summary>, PipelineError> {
    if let ([cam], [p]) = (cams, &mut *parts) {
        return run_with(&cam.config, opts, p).map(|s| vec![s]);
    }
    if cams.len() != parts.len() || cams.is_empty() {
        return Err(PipelineError::Cameras(format!(
            "{} camera(s) but {} set(s) of parts",
            cams.len(),
            parts.len()
        )));
    }
    if opts.schedule == Schedule::Lockstep {
        return Err(PipelineError::Cameras(
            "the lockstep schedule (benchmarks of tracking fidelity) runs one camera at a time"
                .into(),
        ));
    }
    let hubs: Vec<Arc<Hub>> = cams.iter().map(|_| Arc::new(Hub::default())).collect();
    let desk = Arc::new(Desk::new(cams.len()));
    let det_thread = spawn_shared_detector(cams, opts, &parts[0], &hubs, &desk)?;
    let runs = run_each_camera(cams, opts, parts, &hubs, &desk);
    desk.close();
    let stopped = runs
        .iter()
        .any(|r| !matches!(r, Ok((o, _)) if o.end != EndReason::Stopped));
    let det_cpu = join_shared_detector(&desk, det_thread, stopped, opts.notifier.as_deref())?;
    let mut summaries = Vec::with_capacity(cams.len());
    for (i, run) in runs.into_iter().enumerate() {
        let (outcome, cpu_time) = run?;
        let mut s = summarize(&cams[i].config, &parts[i], &hubs[i], outcome, cpu_time)?;
        s.thread_cpu.detect = det_cpu;
        summaries.push(s);
    }
    Ok(summaries)
}

/// One thread per camera, each running [`run_camera`] against the shared detector; a camera
/// that fails ends the others (as if stopped).
fn run_each_camera(
    cams: &[Camera],
    opts: &RunOptions,
    parts: &mut [Parts],
    hubs: &[Arc<Hub>],
    desk: &Desk,
) -> Vec<Result<(RunOutcome, Duration), PipelineError>> {
    let abort_all = || {
        for h in hubs {
            h.lock().aborted = true;
            h.cv.notify_all();
        }
    };
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, (cam, p)) in cams.iter().zip(parts.iter_mut()).enumerate() {
            let mut o = opts.clone();
            // `--tracks-out FILE`: a file per camera, as `[output] tracks_file`.
            o.tracks_out = opts
                .tracks_out
                .as_ref()
                .map(|t| PathBuf::from(tracks_file_of(&t.display().to_string(), &cam.name)));
            let hub = &hubs[i];
            let spawned = std::thread::Builder::new()
                .name(format!("lookout-cam-{i}"))
                .spawn_scoped(scope, move || {
                    let r = run_camera(&cam.config, &o, p, hub, Some((desk, i)));
                    if r.is_err() {
                        abort_all();
                    }
                    r
                });
            handles.push(spawned.map_err(|e| {
                abort_all();
                PipelineError::Thread(format!(
                    "cannot start the thread of camera {}: {e}",
                    cam.name
                ))
            }));
        }
        handles
            .into_iter()
            .map(|h| {
                h?.join()
                    .map_err(|_| PipelineError::Thread("camera thread panicked".into()))?
            })
            .collect()
    })
}

/// One camera's run: its tracks file, its capture and tracker threads (`desk`: the shared
/// detector's desk and this camera's place at it; `None`: a detector of its own on `hub`).
/// Returns how the tracker ended and the process CPU time of the run.
fn run_camera(
    cfg: &Config,
    opts: &RunOptions,
    parts: &mut Parts,
    hub: &Arc<Hub>,
    desk: Option<(&Desk, usize)>,
) -> Result<(RunOutcome, Duration), PipelineError> {
    let source = parts.source.describe();
    if opts.log_events {
        let camera = cfg.mqtt.camera.as_str();
        log::info!(LOOKOUT_EVENT = "start", CAMERA = camera, SOURCE = source.as_str(); "source: {source}");
        log::info!(LOOKOUT_EVENT = "cores", CAMERA = camera; "threads: {}", parts.core_map.describe());
    }
    let tracks_path = opts.tracks_out.clone().or_else(|| {
        (!cfg.output.tracks_file.is_empty()).then(|| PathBuf::from(&cfg.output.tracks_file))
    });
    let max_bytes = cfg.output.tracks_max_bytes();
    // The tracks file stays open across runs (a reload appends to it; another path, or a
    // new rotation size, starts its own).
    let mut writer = match (parts.tracks.take(), tracks_path.as_deref()) {
        (Some(w), Some(p)) if w.path() == p && w.max_bytes() == max_bytes => Some(w),
        (_, Some(p)) => Some(TracksWriter::create_or_retry(p, max_bytes)?),
        (_, None) => None,
    };
    // Every wait of the source ends when this run does.
    let interrupt = parts.source.interrupt().unwrap_or_default();
    interrupt.lower();
    let cpu0 = process_cpu_time();
    let outcome = run_capture_and_tracker(cfg, opts, parts, hub, &interrupt, writer.as_mut(), desk);
    interrupt.raise();
    parts.tracks = writer;
    Ok((outcome?, process_cpu_time().saturating_sub(cpu0)))
}

/// The summary of a camera's run, once its threads ended: the first panic or source error
/// of the run fails it.
fn summarize(
    cfg: &Config,
    parts: &Parts,
    hub: &Hub,
    outcome: RunOutcome,
    cpu_time: Duration,
) -> Result<Summary, PipelineError> {
    let mut g = hub.lock();
    // A thread that panicked as the run was ending anyway still fails it.
    if let Some(p) = g.panicked.take() {
        return Err(PipelineError::Panicked(p));
    }
    if let Some(e) = g.error.take() {
        return Err(e.into());
    }
    let report = outcome.total.report(outcome.tracks_now);
    let mut total = outcome.total;
    if let Some(c) = g.capture_time.take() {
        total.capture.merge(&c);
    }
    Ok(Summary {
        camera: cfg.mqtt.camera.clone(),
        report,
        total,
        model: parts.detector.info().clone(),
        source: parts.source.describe(),
        source_fps: parts.source.fps(),
        tracks_started: outcome.tracks_started,
        tracks_ended: outcome.tracks_ended,
        events_started: outcome.events_started,
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
    let floor = cfg.detection_floor();
    let labels = cfg.label_filter();
    let det = Arc::clone(&parts.detector);
    std::thread::Builder::new()
        .name("lookout-detect".into())
        .spawn(move || {
            pin(det_core, "detector");
            let settings = Settings {
                delay,
                resize,
                floor,
                labels: labels.as_deref(),
            };
            if let Err(p) = panics::guard(|| detect_loop(&det, &h, &settings)) {
                panics::stop_everything(&h, p);
            }
            h.lock().detector_exited = true;
            h.cv.notify_all();
        })
        .map_err(|e| PipelineError::Thread(format!("cannot start lookout-detect: {e}")))
}

/// Starts the detector thread shared by several cameras (pinned as a single camera's), with
/// each camera's detection floor and labels. Returns the thread's CPU time when it ends.
fn spawn_shared_detector(
    cams: &[Camera],
    opts: &RunOptions,
    parts: &Parts,
    hubs: &[Arc<Hub>],
    desk: &Arc<Desk>,
) -> Result<JoinHandle<Duration>, PipelineError> {
    let hubs = hubs.to_vec();
    let desk = Arc::clone(desk);
    let det_core = parts.core_map.detect;
    let delay = opts.detect_delay;
    let per_camera: Vec<(ResizeMode, f32, Option<Vec<usize>>)> = cams
        .iter()
        .map(|c| {
            let cfg = &c.config;
            (cfg.model.resize, cfg.detection_floor(), cfg.label_filter())
        })
        .collect();
    let det = Arc::clone(&parts.detector);
    std::thread::Builder::new()
        .name("lookout-detect".into())
        .spawn(move || {
            pin(det_core, "detector");
            let settings: Vec<Settings> = per_camera
                .iter()
                .map(|(resize, floor, labels)| Settings {
                    delay,
                    resize: *resize,
                    floor: *floor,
                    labels: labels.as_deref(),
                })
                .collect();
            let cpu = panics::guard(|| shared_detect_loop(&det, &desk, &hubs, &settings))
                .unwrap_or_else(|p| {
                    for h in &hubs {
                        panics::stop_everything(h, p.clone());
                    }
                    Duration::ZERO
                });
            desk.lock().exited = true;
            desk.cv.notify_all();
            cpu
        })
        .map_err(|e| PipelineError::Thread(format!("cannot start lookout-detect: {e}")))
}

/// Runs the capture and tracker threads, scoped to the run, until the tracker ends it.
fn run_capture_and_tracker(
    cfg: &Config,
    opts: &RunOptions,
    parts: &mut Parts,
    hub: &Arc<Hub>,
    interrupt: &Interrupt,
    writer: Option<&mut TracksWriter>,
    desk: Option<(&Desk, usize)>,
) -> Result<RunOutcome, PipelineError> {
    let Parts {
        source,
        tracker,
        events,
        core_map,
        ..
    } = parts;
    // Ends the run for every thread: the capture thread's slot wait and its source's waits.
    let end_run = |h: &Hub| {
        h.lock().shutdown = true;
        h.cv.notify_all();
        interrupt.raise();
    };
    // A recording played as fast as possible would otherwise hand out frames in a busy loop
    // (hundreds of thousands a second, all replaced unseen), burning a core the tracker may
    // share: it waits until the tracker took the previous frame. Cameras and real-time
    // replays pace themselves.
    let wait_for_slot = opts.schedule == Schedule::Lockstep || source.unpaced();
    std::thread::scope(|scope| {
        let h = hub.clone();
        let stop = opts.stop.clone();
        let cap_core = core_map.capture;
        std::thread::Builder::new()
            .name("lookout-capture".into())
            .spawn_scoped(scope, move || {
                pin(cap_core, "capture");
                let looped =
                    panics::guard(|| capture_loop(&mut **source, &h, &stop, wait_for_slot));
                if let Err(p) = looped {
                    panics::stop_everything(&h, p);
                }
            })
            .map_err(|e| PipelineError::Thread(format!("cannot start lookout-capture: {e}")))?;
        let h = hub.clone();
        let trk_core = core_map.track;
        let handle = std::thread::Builder::new()
            .name("lookout-track".into())
            .spawn_scoped(scope, move || {
                pin(trk_core, "tracking");
                let r = panics::guard(|| match desk {
                    None => track_loop(cfg, opts, &h, &mut &*h, tracker, events, writer),
                    Some((desk, index)) => {
                        let mut slot = CameraSlot {
                            hub: &h,
                            desk,
                            index,
                        };
                        track_loop(cfg, opts, &h, &mut slot, tracker, events, writer)
                    }
                })
                .unwrap_or_else(|p| {
                    panics::stop_everything(&h, p.clone());
                    Err(PipelineError::Panicked(p))
                });
                // Whatever happened, release the other threads.
                h.lock().thread_cpu.track = thread_cpu_time();
                end_run(&h);
                r
            });
        let handle = match handle {
            Ok(handle) => handle,
            Err(e) => {
                // The capture thread is running: end it, or the scope would wait for it.
                end_run(hub);
                return Err(PipelineError::Thread(format!(
                    "cannot start lookout-track: {e}"
                )));
            }
        };
        handle
            .join()
            .map_err(|_| PipelineError::Thread("tracker panicked".into()))?
    })
}

/// Waits for the shared detector thread at the end of a run of several cameras, as
/// [`join_detector`] waits for a single camera's; returns its CPU time (zero when it was left
/// with an inference in flight).
fn join_shared_detector(
    desk: &Desk,
    det_thread: JoinHandle<Duration>,
    stopped: bool,
    notifier: Option<&Notifier>,
) -> Result<Duration, PipelineError> {
    if !stopped {
        return keeping_watchdog_fed(notifier, || det_thread.join())
            .map_err(|_| PipelineError::Thread("detector panicked".into()));
    }
    let deadline = Instant::now() + Duration::from_millis(250);
    let mut g = desk.lock();
    while !g.exited && Instant::now() < deadline {
        g = desk.wait(g, deadline.saturating_duration_since(Instant::now()));
    }
    let exited = g.exited;
    drop(g);
    if exited {
        return Ok(det_thread.join().unwrap_or_default());
    }
    log::info!("stopping without waiting for the inference in flight");
    Ok(Duration::ZERO)
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
    //! The glue between the threads, end to end. The rules themselves are tested without
    //! threads in `scheduler.rs`, `capture.rs` and `parts.rs`; this test waits on what systemd
    //! would hear, never on the clock.
    use super::*;
    use crate::frame::{monotonic_now, Frame};
    use crate::source::{self, FrameSource};
    use crate::track::Tracker;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A camera that delivers two frames, is lost and being reopened until the test lets it
    /// come back (`back`), then delivers two more frames and ends. It gives up after ~30 s of
    /// reopening, so a broken pipeline fails the test instead of hanging it.
    struct Comeback {
        seq: u64,
        attempts: u32,
        back: Arc<AtomicBool>,
    }

    impl FrameSource for Comeback {
        fn next(&mut self) -> Result<Option<Frame>, source::SourceError> {
            let frame = |seq| Frame {
                seq,
                captured_at: monotonic_now(),
                width: 64,
                height: 48,
                format: crate::frame::PixelFormat::Grey,
                data: vec![128; 64 * 48],
            };
            let device = "/dev/video-test".to_string();
            if self.seq < 2 || (self.back.load(Ordering::Relaxed) && self.seq < 4) {
                self.seq += 1;
                return Ok(Some(frame(self.seq)));
            }
            if self.seq >= 4 || self.attempts > 1500 {
                return Ok(None);
            }
            // A real camera's back-off between reopen attempts (keeps this loop from spinning).
            std::thread::sleep(Duration::from_millis(20));
            self.attempts += 1;
            Err(if self.attempts == 1 {
                source::SourceError::Disconnected {
                    device,
                    source: std::io::Error::from_raw_os_error(libc::ENODEV),
                }
            } else {
                source::SourceError::Reconnecting {
                    device,
                    attempts: self.attempts - 1,
                    reason: "No such file or directory".into(),
                    retry_in: Duration::from_millis(20),
                }
            })
        }
        fn stats(&self) -> source::SourceStats {
            source::SourceStats::default()
        }
        fn fps(&self) -> Option<f64> {
            Some(25.0)
        }
        fn describe(&self) -> String {
            "test camera that comes back".into()
        }
    }

    #[test]
    fn a_run_tells_systemd_while_a_lost_camera_is_reopened_and_when_it_is_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let notifier =
            Arc::new(Notifier::with_socket(&path, Some(Duration::from_millis(100))).unwrap());
        let mut c = Config::default();
        c.model.threads = 1;
        c.pipeline.pin_threads = false;
        c.pipeline.detect_every = 1000;
        c.model.input_size = crate::config::InputSize::List(vec![64, 64]);
        let core_map = CoreMap::default();
        let back = Arc::new(AtomicBool::new(false));
        let mut parts = Parts {
            detector: Arc::new(load_detector(&c, &core_map).unwrap()),
            source: Box::new(Comeback {
                seq: 0,
                attempts: 0,
                back: back.clone(),
            }),
            tracker: Tracker::new(c.tracker.clone()).unwrap(),
            events: crate::events::Events::new(c.event_rules().unwrap()),
            core_map,
            tracks: None,
        };
        let opts = RunOptions {
            notifier: Some(notifier),
            log_events: false,
            ..RunOptions::default()
        };
        let run = std::thread::spawn(move || run_with(&c, &opts, &mut parts));
        let mut buf = [0u8; 256];
        let mut heard = Vec::new();
        let mut next = || {
            let len = loop {
                match server.recv(&mut buf) {
                    // A receive with a timeout fails with EINTR when the process is paused.
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    r => break r,
                }
            }
            .unwrap_or_else(|e| panic!("no notification within 30 s after {heard:?}: {e}"));
            let m = String::from_utf8_lossy(&buf[..len]).to_string();
            heard.push(m.clone());
            m
        };
        while next() != "STATUS=camera lost: reopening it" {}
        // No frames flow now: these pings are the tracker vouching for the reopening camera.
        let mut pings = 0;
        while pings < 2 {
            let m = next();
            assert!(m == "WATCHDOG=1", "while reopening: {m:?}");
            pings += 1;
        }
        back.store(true, Ordering::Relaxed);
        while next() != "STATUS=running" {}
        let summary = run.join().unwrap().unwrap();
        assert_eq!(summary.end, EndReason::EndOfSource);
        // Live: a frame the tracker did not take in time was replaced, and counted.
        let t = &summary.total;
        assert_eq!((t.captured, t.processed + t.dropped), (4, 4));
        assert!(
            t.processed >= 2,
            "one frame before the loss, one after: {t:?}"
        );
    }
}
