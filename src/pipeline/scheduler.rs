//! The tracker thread's rules, as a struct the thread steps and tests drive without threads.
//!
//! [`Scheduler`] decides everything the tracker thread does; the thread itself
//! (`tracking.rs`) only waits on the hub and calls, in a loop:
//!
//! ```text
//!  while !should_wake(hub) { while_waiting(hub); wait }   the hub locked
//!  take(hub)                                              results + the newest frame + counters
//!  on_results(results)                                    detections for older frames → tracker
//!  on_frame(frame, detector)                              publish the previous frame, step, request
//!  tick() → Some(end) ⇒ finish(end)                      track events, stats window, end conditions
//! ```
//!
//! The rules, each with a thread-free test below:
//! - **Publish**: a frame's line goes to the tracks file when the *next* frame arrives (so
//!   detections that came back for it in between are included), the last one at the end.
//! - **Detections when the [`Planner`] asks**: every N frames (fixed schedule), or for motion,
//!   uncertain tracks, the longest gap and the idle heartbeat (adaptive; `crate::schedule`),
//!   on the newest frame, the first frame included; counted by cause. **Busy ⇒ skipped**: a
//!   request while the detector works is counted, never queued; the next frame asks again.
//! - **Lockstep waits**: in [`Schedule::Lockstep`] the tracker takes no new frame until the
//!   detection it asked for is back; in `Live` it never waits for the detector.
//! - **Stats windows**: counters and latencies per `stats_interval` on the scheduler's clock,
//!   merged into the run's total; frame age = now − capture time when the frame's results are
//!   final; drops = frames replaced in the slot + stale buffers the source discarded.
//! - **Liveness**: READY after the first processed frame, a watchdog ping per frame, and while
//!   the capture thread reports reopening a lost camera (fresh reports only, so a capture
//!   thread stuck in an attempt lets systemd restart the service), with a STATUS line when it
//!   starts and ends.
//! - **End conditions**, in order: stop, reload, `max_frames` / `max_duration`, the end of the
//!   source once nothing is left in the slot, the job slot or the detector.
//!
//! Time comes from a [`Clock`]: the monotonic clock frames are stamped with in a run, a fake
//! one in tests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::hub::{DetResult, DetectorSlot, Shared};
use super::options::{RunOptions, Schedule};
use super::summary::EndReason;
use crate::config::Config;
use crate::events::{Event, EventRecord, Events};
use crate::frame::{monotonic_now, Frame, GrayImage};
use crate::logging::RateLimit;
use crate::notify::Outlet;
use crate::output::{self, FrameOut, TracksWriter};
use crate::preprocess::{self, Scratch};
use crate::schedule::{Cause, Planner, PlannerConfig};
use crate::service::Notifier;
use crate::stats::Window;
use crate::track::{TrackEvent, Tracker};
use crate::vocab::Detection;

/// How fresh the capture thread's last reopen report must be for the tracker to keep the
/// watchdog fed (reopen attempts come at most 5 s apart; a capture thread stuck inside an
/// attempt stops the pings and systemd restarts the service).
pub(super) const RECONNECT_ALIVE: Duration = Duration::from_secs(15);

/// The time the scheduler goes by: the clock frames' `captured_at` is on.
pub(super) trait Clock {
    /// Now, on the monotonic clock.
    fn now(&self) -> Duration;
}

/// The system's monotonic clock (what V4L2 and the replay sources stamp frames with).
pub(super) struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        monotonic_now()
    }
}

/// Who is told that the pipeline is alive: systemd (through [`Notifier`]), or a test.
pub(super) trait Supervisor {
    /// The service is ready (sent once, whatever the number of calls).
    fn ready(&self, status: &str);
    /// A sign of life for the watchdog (rate-limited by the receiver).
    fn alive(&self);
    /// A status line for `systemctl status`.
    fn status(&self, status: &str);
}

impl Supervisor for Notifier {
    fn ready(&self, status: &str) {
        Notifier::ready(self, status);
    }
    fn alive(&self) {
        self.frame_processed();
    }
    fn status(&self, status: &str) {
        Notifier::status(self, status);
    }
}

/// What the tracker took from the hub in one wake-up.
pub(super) struct Taken {
    /// The newest frame, unless none arrived or a lockstep run awaits a detection.
    pub(super) frame: Option<Frame>,
    /// Finished detections, oldest first.
    pub(super) results: Vec<DetResult>,
}

/// How a run ended, as the tracker thread saw it.
#[derive(Debug)]
pub(super) struct RunOutcome {
    /// Counters and histograms of the whole run (the capture time is added by the caller).
    pub(super) total: Window,
    /// Why the run ended.
    pub(super) end: EndReason,
    /// Tracks confirmed during the run.
    pub(super) tracks_started: u64,
    /// Tracks ended during the run.
    pub(super) tracks_ended: u64,
    /// Events started during the run.
    pub(super) events_started: u64,
    /// Confirmed tracks at the end.
    pub(super) tracks_now: usize,
}

/// The hub's cumulative counters as last seen (the window records the differences).
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    replaced: u64,
    source_dropped: u64,
    source_corrupt: u64,
    captured: u64,
    tracks_lines_lost: u64,
}

/// The tracker thread's state and rules (see the module documentation).
pub(super) struct Scheduler<'a> {
    // ── settings ──
    interval: Duration,
    lockstep: bool,
    track_width: u32,
    /// The camera's name (`CAMERA=` in the journal, the outlets' topics).
    camera: String,
    opts: &'a RunOptions,
    // ── collaborators ──
    tracker: &'a mut Tracker,
    writer: Option<&'a mut TracksWriter>,
    events: Option<&'a mut Events>,
    supervisor: Option<&'a dyn Supervisor>,
    clock: &'a dyn Clock,
    gray: GrayImage,
    scratch: Scratch,
    // ── state ──
    total: Window,
    window: Window,
    window_start: Duration,
    run_start: Duration,
    tracks_started: u64,
    tracks_ended: u64,
    events_started: u64,
    /// The latest frame's size in pixels (where zones and masks lie).
    frame_size: (u32, u32),
    /// When to detect (starts by asking on the first frame).
    planner: Planner,
    /// Lockstep: the frame whose detection the tracker awaits before taking another frame.
    waiting_for: Option<u64>,
    /// The frame stepped last, published when the next one arrives or at the end.
    pending: Option<(u64, Duration)>,
    seen: Seen,
    /// The source ended and nothing is left in the slot, the job slot or the detector.
    source_finished: bool,
    /// Another camera of the run failed: this one ends as if stopped.
    aborted: bool,
    /// STATUS= says the camera is being reopened.
    reconnect_status: bool,
    /// Frames that could not be turned into a gray plane: one warning a minute at most.
    frame_errors: RateLimit,
    /// Failed detections: one warning a minute at most.
    detect_errors: RateLimit,
    /// The frame of the latest detection round and its reported detections, for the
    /// outlets (only kept when there are any).
    detected: Option<(Arc<Frame>, Vec<Detection>)>,
    /// This camera's detection switch (`RunOptions::switches`), and whether it was on at the
    /// last frame.
    switch: Arc<AtomicBool>,
    detecting: bool,
}

impl<'a> Scheduler<'a> {
    /// A scheduler for one run of `cfg` with `opts` (limits, stop/reload flags, logging; its
    /// notifier, if any, is the supervisor), stepping `tracker`, on `clock`.
    pub(super) fn new(
        cfg: &Config,
        opts: &'a RunOptions,
        tracker: &'a mut Tracker,
        clock: &'a dyn Clock,
    ) -> Self {
        let start = clock.now();
        let pl = &cfg.pipeline;
        let plan = PlannerConfig::new(
            pl.schedule,
            pl.detect_every,
            Duration::from_secs_f64(pl.idle_detect_interval),
        );
        let camera = cfg.mqtt.camera.clone();
        let switch = opts.switches.of(&camera);
        if !switch.load(Ordering::Relaxed) && opts.log_events {
            // A reload keeps a camera switched off.
            log::info!(
                LOOKOUT_EVENT = "detect_switch", CAMERA = camera.as_str();
                "camera {camera:?}: detection is switched off (MQTT detect/set)"
            );
        }
        Scheduler {
            interval: Duration::from_secs_f64(cfg.pipeline.stats_interval),
            lockstep: opts.schedule == Schedule::Lockstep,
            track_width: cfg.pipeline.track_width,
            camera,
            opts,
            tracker,
            writer: None,
            events: None,
            supervisor: opts.notifier.as_deref().map(|n| n as &dyn Supervisor),
            clock,
            gray: GrayImage::default(),
            scratch: Scratch::default(),
            total: Window::default(),
            window: Window::default(),
            window_start: start,
            run_start: start,
            tracks_started: 0,
            tracks_ended: 0,
            events_started: 0,
            frame_size: (0, 0),
            planner: Planner::new(plan),
            waiting_for: None,
            pending: None,
            seen: Seen::default(),
            source_finished: false,
            aborted: false,
            reconnect_status: false,
            frame_errors: RateLimit::per_minute(),
            detect_errors: RateLimit::per_minute(),
            detected: None,
            detecting: switch.load(Ordering::Relaxed),
            switch,
        }
    }

    /// Publishes every processed frame's tracks to `writer`.
    pub(super) fn with_writer(mut self, writer: Option<&'a mut TracksWriter>) -> Self {
        self.writer = writer;
        self
    }

    /// Decides which tracks are events, by `events`' rules, and logs their records.
    pub(super) fn with_events(mut self, events: &'a mut Events) -> Self {
        self.events = Some(events);
        self
    }

    fn stop_requested(&self) -> bool {
        self.opts.stop.load(Ordering::Relaxed) || self.opts.reload.load(Ordering::Relaxed)
    }

    /// Whether the tracker has something to do: a detection result, a frame it may take
    /// (lockstep: none while a requested detection is outstanding), the source's end, another
    /// thread's panic, or a stop or reload request.
    pub(super) fn should_wake(&self, hub: &Shared) -> bool {
        !hub.results.is_empty()
            || (self.waiting_for.is_none() && hub.frame.is_some())
            || hub.source_done
            || hub.panicked.is_some()
            || hub.aborted
            || self.stop_requested()
    }

    /// Called before each wait with nothing to do: while the capture thread keeps reporting
    /// that it is reopening a lost camera, or waiting for one that was missing at start, the
    /// watchdog stays fed and the status says so. A daemon waiting for its camera is up
    /// (READY), so `systemctl start` returns and the service is not killed for a slow start.
    pub(super) fn while_waiting(&mut self, hub: &Shared) {
        let (Some(sup), Some(reported)) = (self.supervisor, hub.source_reconnecting) else {
            return;
        };
        let status = if hub.source_waiting {
            "waiting for the camera to appear"
        } else {
            "camera lost: reopening it"
        };
        if hub.source_waiting {
            sup.ready(status);
        }
        // Reopen attempts come at most 5 s apart: fresh reports mean the capture thread is
        // alive and working on it.
        if self.clock.now().saturating_sub(reported) < RECONNECT_ALIVE {
            sup.alive();
        }
        if !self.reconnect_status {
            self.reconnect_status = true;
            sup.status(status);
        }
    }

    /// Takes the results and (unless a lockstep run awaits a detection) the newest frame from
    /// the hub, and counts what was captured and dropped since the last call.
    pub(super) fn take(&mut self, hub: &mut Shared) -> Taken {
        if self.reconnect_status && hub.source_reconnecting.is_none() {
            self.reconnect_status = false;
            if let Some(sup) = self.supervisor {
                sup.status("running");
            }
        }
        let results = hub.results.drain(..).collect();
        let frame = if self.waiting_for.is_none() {
            hub.frame.take()
        } else {
            None
        };
        let w = &mut self.window;
        w.dropped += (hub.replaced - self.seen.replaced)
            + hub.source_dropped.saturating_sub(self.seen.source_dropped);
        w.captured += hub.captured - self.seen.captured;
        w.corrupt += hub.source_corrupt.saturating_sub(self.seen.source_corrupt);
        self.seen = Seen {
            replaced: hub.replaced,
            source_dropped: hub.source_dropped,
            source_corrupt: hub.source_corrupt,
            captured: hub.captured,
            ..self.seen
        };
        self.aborted = hub.aborted;
        self.source_finished =
            hub.source_done && hub.frame.is_none() && hub.job.is_none() && !hub.detector_busy;
        Taken { frame, results }
    }

    /// Applies detections made on older frames (they are matched to the tracks' boxes at
    /// their frame) and records their timings; a lockstep run stops waiting for its request.
    pub(super) fn on_results(&mut self, results: Vec<DetResult>) {
        for r in results {
            self.window.preprocess.record(r.preprocess);
            self.window.model.record(r.model);
            self.window.postprocess.record(r.postprocess);
            self.window.detections += 1;
            if self.waiting_for == Some(r.seq) {
                self.waiting_for = None;
            }
            match r.dets {
                // A round asked for before detection was switched off starts nothing.
                Ok(_) if !self.detecting => {}
                Ok(round) => {
                    let outcome = self.tracker.apply_detection_round(r.seq, &round);
                    self.planner.applied(outcome.started);
                    if !self.opts.outlets.is_empty() {
                        self.detected = Some((Arc::new(r.frame), round.reported));
                    }
                }
                Err(e) => {
                    if let Some(held) = self.detect_errors.hit(self.clock.now()) {
                        warn_repeating("detect_error", &format!("detection skipped: {e}"), held);
                    }
                }
            }
        }
    }

    /// A new frame: publishes the previous one (now final), steps the tracker, and asks the
    /// detector for this frame when a detection is due.
    pub(super) fn on_frame(&mut self, frame: Frame, detector: &mut dyn DetectorSlot) {
        if let Some((seq, captured_at)) = self.pending.take() {
            self.publish(seq, captured_at);
        }
        let detecting = self.follow_switch();
        if !self.step_tracker(&frame) {
            // A frame without a gray plane (a damaged JPEG) is skipped: the tracker, the
            // events' looks and the planner would otherwise see the previous frame's plane
            // under this frame's number.
            return;
        }
        self.frame_size = (frame.width, frame.height);
        self.pending = Some((frame.seq, frame.captured_at));
        if !detecting {
            return;
        }
        let Some(cause) = self
            .planner
            .decide(&self.gray, &*self.tracker, frame.captured_at)
        else {
            return;
        };
        let (seq, at) = (frame.seq, frame.captured_at);
        if detector.submit(frame) {
            if self.lockstep {
                self.waiting_for = Some(seq);
            }
            self.planner.handed_out(cause, at);
            let w = &mut self.window;
            *match cause {
                Cause::Interval => &mut w.detect_interval,
                Cause::Motion => &mut w.detect_motion,
                Cause::Uncertain => &mut w.detect_uncertain,
                Cause::Idle => &mut w.detect_idle,
            } += 1;
        } else {
            self.window.detect_skipped += 1;
        }
    }

    /// Reads this camera's detection switch: switched off, every track ends (its event with
    /// it) and no detection is asked for until it is switched on again. True while on.
    fn follow_switch(&mut self) -> bool {
        let on = self.switch.load(Ordering::Relaxed);
        if on != self.detecting {
            self.detecting = on;
            if !on {
                self.tracker.reset();
            }
            if self.opts.log_events {
                log::info!(
                    LOOKOUT_EVENT = "detect_switch", CAMERA = self.camera.as_str();
                    "camera {:?}: detection switched {}",
                    self.camera,
                    if on { "on" } else { "off: its tracks and events end" }
                );
            }
        }
        on
    }

    /// Gray plane + tracker step, timed; the frame's age; signs of life. False (and no
    /// tracker step) when the frame gives no gray plane: it is counted as processed and
    /// damaged, and goes no further.
    fn step_tracker(&mut self, frame: &Frame) -> bool {
        let t0 = self.clock.now();
        let gray_ok =
            preprocess::frame_to_gray(frame, self.track_width, &mut self.gray, &mut self.scratch);
        self.window.gray.record(self.clock.now().saturating_sub(t0));
        if let Err(e) = &gray_ok {
            // A frame the source passed but that cannot be decoded (a damaged JPEG) is a
            // damaged frame too.
            self.window.corrupt += 1;
            if let Some(held) = self.frame_errors.hit(t0) {
                warn_repeating("frame_error", &format!("frame {}: {e}", frame.seq), held);
            }
        } else {
            self.tracker.step(frame.seq, &self.gray);
        }
        let now = self.clock.now();
        self.window.track.record(now.saturating_sub(t0));
        self.window.processed += 1;
        self.window
            .age
            .record(now.saturating_sub(frame.captured_at));
        if let Some(sup) = self.supervisor {
            sup.ready("running");
            sup.alive();
        }
        gray_ok.is_ok()
    }

    /// After each wake-up: track events, the stats window, and whether the run is over.
    pub(super) fn tick(&mut self) -> Option<EndReason> {
        self.track_events();
        let now = self.clock.now();
        if let Some(held) = self.frame_errors.overdue(now) {
            warn_held("frame_error", "unreadable frames", held);
        }
        if let Some(held) = self.detect_errors.overdue(now) {
            warn_held("detect_error", "failed detections", held);
        }
        let elapsed = now.saturating_sub(self.window_start);
        if elapsed >= self.interval {
            self.window.elapsed = elapsed;
            if let Some(w) = self.writer.as_deref_mut() {
                w.flush();
            }
            self.count_lost_lines();
            if self.opts.log_events || !self.opts.outlets.is_empty() {
                let report = self.window.report(self.tracker.tracks().count());
                self.opts.outlets.stats(&self.camera, &self.window, &report);
                if self.opts.log_events {
                    report.log(&self.camera);
                    // The daemon runs for months: what was freed goes back to the kernel.
                    crate::memory::release_free_memory();
                }
            }
            self.total.merge(&self.window);
            self.window = Window::default();
            self.window_start = self.clock.now();
        }
        self.end()
    }

    fn track_events(&mut self) {
        let mut ended = Vec::new();
        for ev in self.tracker.drain_events() {
            match ev {
                TrackEvent::Started(t) => {
                    self.tracks_started += 1;
                    if self.opts.log_events {
                        output::log_track_start(
                            &self.camera,
                            &output::track_out(
                                t.id,
                                t.class_id,
                                t.score,
                                &t.bbox,
                                t.detected,
                                t.detected_seq,
                            ),
                        );
                    }
                }
                TrackEvent::Ended(t) => {
                    self.tracks_ended += 1;
                    if self.opts.log_events {
                        let o = output::track_out(
                            t.id,
                            t.class_id,
                            t.score,
                            &t.bbox,
                            false,
                            t.detected_seq,
                        );
                        output::log_track_end(&self.camera, &o, t.age_frames);
                    }
                    ended.push(t);
                }
            }
        }
        let Some(events) = self.events.as_deref_mut() else {
            return;
        };
        if let Some((seq, at)) = self.pending {
            events.update_seen(
                seq,
                at,
                self.frame_size,
                Some(&self.gray),
                self.tracker.confirmed(),
                &ended,
            );
        }
        self.log_event_records();
        if let (Some((frame, reported)), Some(events)) =
            (self.detected.take(), self.events.as_deref())
        {
            let in_view: Vec<Event> = events.in_view().cloned().collect();
            self.opts
                .outlets
                .detected(&self.camera, &frame, &reported, &in_view);
        }
    }

    /// Logs what happened to events since the last look, and counts the starts.
    fn log_event_records(&mut self) {
        let Some(events) = self.events.as_deref_mut() else {
            return;
        };
        for r in events.drain() {
            if let EventRecord::Start(_) = r {
                self.events_started += 1;
            }
            if self.opts.log_events {
                output::log_event(&self.camera, &r);
            }
            self.opts.outlets.event(&self.camera, &r);
        }
    }

    /// The end conditions, in order of precedence.
    fn end(&self) -> Option<EndReason> {
        let opts = self.opts;
        let processed = self.total.processed + self.window.processed;
        if opts.stop.load(Ordering::Relaxed) || self.aborted {
            Some(EndReason::Stopped)
        } else if opts.reload.load(Ordering::Relaxed) {
            Some(EndReason::Reload)
        } else if opts.max_frames.is_some_and(|m| processed >= m)
            || opts
                .max_duration
                .is_some_and(|d| self.clock.now().saturating_sub(self.run_start) >= d)
        {
            Some(EndReason::Limit)
        } else if self.source_finished && self.waiting_for.is_none() {
            Some(EndReason::EndOfSource)
        } else {
            None
        }
    }

    /// Publishes the last frame, closes the window and the tracks file.
    pub(super) fn finish(mut self, end: EndReason) -> RunOutcome {
        if let Some((seq, captured_at)) = self.pending.take() {
            self.publish(seq, captured_at);
        }
        if let Some(w) = self.writer.as_deref_mut() {
            w.flush();
        }
        self.count_lost_lines();
        // A reload keeps the tracks, and with them the events under way; any other end ends
        // them.
        if end != EndReason::Reload {
            if let Some(events) = self.events.as_deref_mut() {
                events.finish();
            }
        }
        self.log_event_records();
        self.window.elapsed = self.clock.now().saturating_sub(self.window_start);
        self.total.merge(&self.window);
        RunOutcome {
            total: self.total,
            end,
            tracks_started: self.tracks_started,
            tracks_ended: self.tracks_ended,
            events_started: self.events_started,
            tracks_now: self.tracker.tracks().count(),
        }
    }

    /// Lines the tracks file dropped since the last look, into the window.
    fn count_lost_lines(&mut self) {
        if let Some(w) = self.writer.as_deref() {
            let lost = w.lines_lost();
            self.window.tracks_lines_lost += lost - self.seen.tracks_lines_lost;
            self.seen.tracks_lines_lost = lost;
        }
    }

    /// Writes one frame's tracks to the tracks file (a line that cannot be written is
    /// counted by the writer, and the run goes on).
    fn publish(&mut self, seq: u64, captured_at: Duration) {
        if let Some(w) = self.writer.as_deref_mut() {
            let events = self.events.as_deref();
            let tracks = self
                .tracker
                .tracks()
                .map(|t| {
                    let mut o = output::track_out(
                        t.id,
                        t.class_id,
                        t.score,
                        &t.bbox,
                        t.detected && t.seq == seq,
                        t.detected_seq,
                    );
                    o.event = events.and_then(|e| e.event_of(t.id));
                    o
                })
                .collect();
            w.write(&FrameOut {
                seq,
                captured_at_ms: captured_at.as_secs_f64() * 1e3,
                tracks,
            });
        }
    }
}

/// A rate-limited warning: `message`, then how many like it were held back since the last
/// one (see [`RateLimit`]).
fn warn_repeating(event: &str, message: &str, held: crate::logging::Held) {
    if held.count == 0 {
        log::warn!(LOOKOUT_EVENT = event; "{message}");
    } else {
        log::warn!(LOOKOUT_EVENT = event, HELD_BACK = held.count; "{message} ({held})");
    }
}

/// The summary of a rate-limited warning that stopped repeating: `what: N more like it …`.
fn warn_held(event: &str, what: &str, held: crate::logging::Held) {
    log::warn!(LOOKOUT_EVENT = event, HELD_BACK = held.count; "{what}: {held}");
}

#[cfg(test)]
mod tests {
    //! The rules stepped by hand: a [`Shared`] stands in for the other threads (the test puts
    //! frames in the slot and answers jobs), a fake clock for time, a recorder for systemd.
    use super::*;
    use crate::frame::PixelFormat;
    use crate::geom::BBox;
    use crate::track::TrackerConfig;
    use crate::vocab::DetectionRound;
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::Ordering;

    const MS: Duration = Duration::from_millis(1);

    /// Time stands still unless a test moves it.
    struct FakeClock(Cell<Duration>);

    impl FakeClock {
        fn at(secs: u64) -> FakeClock {
            FakeClock(Cell::new(Duration::from_secs(secs)))
        }
        fn advance(&self, d: Duration) {
            self.0.set(self.0.get() + d);
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Duration {
            self.0.get()
        }
    }

    /// What systemd would have heard.
    #[derive(Default)]
    struct Recorder(RefCell<Vec<String>>);

    impl Recorder {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut self.0.borrow_mut())
        }
    }

    impl Supervisor for Recorder {
        fn ready(&self, status: &str) {
            self.0.borrow_mut().push(format!("READY {status}"));
        }
        fn alive(&self) {
            self.0.borrow_mut().push("ALIVE".into());
        }
        fn status(&self, status: &str) {
            self.0.borrow_mut().push(format!("STATUS {status}"));
        }
    }

    fn cfg(detect_every: u32) -> Config {
        let mut c = Config::default();
        c.pipeline.detect_every = detect_every;
        c.pipeline.stats_interval = 1.0;
        c
    }

    /// A tracker that confirms a track at its first detection and ends it at its first miss.
    fn tracker() -> Tracker {
        let mut t = TrackerConfig {
            confirm_hits: 1,
            max_misses: 1,
            ..TrackerConfig::default()
        };
        t.visual.enabled = false;
        Tracker::new(t).unwrap()
    }

    /// A 64×48 gray frame captured at `captured_at` on the fake clock.
    fn frame(seq: u64, captured_at: Duration) -> Frame {
        Frame {
            seq,
            captured_at,
            width: 64,
            height: 48,
            format: PixelFormat::Grey,
            data: (0..64 * 48).map(|i| (i * 7 % 251) as u8).collect(),
        }
    }

    fn det(class_id: usize) -> Detection {
        Detection {
            class_id,
            score: 0.9,
            bbox: BBox::new(10.0, 10.0, 40.0, 40.0),
        }
    }

    /// A round of `dets`, all reported.
    fn reported(dets: Vec<Detection>) -> DetectionRound {
        DetectionRound {
            reported: dets,
            weak: Vec::new(),
        }
    }

    /// The lines of a tracks file, parsed.
    fn jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The detector thread: takes the job and answers it at once with `dets`.
    fn answer(hub: &mut Shared, dets: Result<Vec<Detection>, String>) -> u64 {
        let job = hub.job.take().expect("a detection was requested");
        let seq = job.seq;
        hub.results.push_back(DetResult {
            seq,
            dets: dets.map(reported),
            preprocess: 2 * MS,
            model: 40 * MS,
            postprocess: MS,
            frame: job,
        });
        hub.detector_busy = false;
        seq
    }

    /// One pass of the tracker thread's loop, minus the waiting (which must not be needed).
    fn pass(s: &mut Scheduler, hub: &mut Shared) -> Option<EndReason> {
        assert!(s.should_wake(hub), "the tracker would still be waiting");
        let taken = s.take(hub);
        s.on_results(taken.results);
        if let Some(f) = taken.frame {
            s.on_frame(f, hub);
        }
        s.tick()
    }

    /// The capture thread delivers frame `seq` (captured now) and the tracker takes it.
    fn deliver(
        s: &mut Scheduler,
        hub: &mut Shared,
        clock: &FakeClock,
        seq: u64,
    ) -> Option<EndReason> {
        hub.frame = Some(frame(seq, clock.now()));
        hub.captured += 1;
        pass(s, hub)
    }

    #[test]
    fn detection_is_requested_on_the_first_frame_then_every_n_frames() {
        let (c, opts, clock, mut hub) = (
            cfg(3),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        let mut asked = Vec::new();
        for seq in 0..10 {
            deliver(&mut s, &mut hub, &clock, seq);
            if hub.job.is_some() {
                asked.push(answer(&mut hub, Ok(Vec::new())));
            }
        }
        assert_eq!(asked, [0, 3, 6, 9]);
        assert_eq!(s.window.detect_skipped, 0);
    }

    /// A 640×480 gray frame of a still scene with sensor-like noise (σ = 4 levels), and, from
    /// `appear` on, a bright 40×100 object walking right 6 pixels per frame.
    fn scene_frame(seq: u64, captured_at: Duration, appear: Option<u64>) -> Frame {
        let (w, h) = (640usize, 480usize);
        let mut rng = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut noise = move || {
            // xorshift; the sum of 4 uniforms in 0..=6 is roughly Gaussian. The range is cut
            // by a multiply, not `% 7`: a 64-bit division is a library call on armv7, and this
            // runs 80 million times per test (minutes under qemu-user).
            let mut sum = 0i32;
            for _ in 0..4 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                sum += (((rng >> 32) * 7) >> 32) as i32;
            }
            sum - 12
        };
        let object_x = appear
            .filter(|&a| seq >= a)
            .map(|a| 100 + 6 * (seq - a) as usize);
        let mut data = Vec::with_capacity(w * h);
        for y in 0..h {
            for x in 0..w {
                let still = 40 + ((x / 16 + y / 24) % 5) as i32 * 30;
                let v = match object_x {
                    Some(ox) if (ox..ox + 40).contains(&x) && (200..300).contains(&y) => 235,
                    _ => still,
                };
                data.push((v + noise()).clamp(0, 255) as u8);
            }
        }
        Frame {
            seq,
            captured_at,
            width: w as u32,
            height: h as u32,
            format: PixelFormat::Grey,
            data,
        }
    }

    #[test]
    fn adaptive_a_still_scene_runs_the_model_only_on_the_heartbeat_and_a_newcomer_at_once() {
        let mut c = cfg(5);
        c.pipeline.schedule = crate::schedule::ScheduleKind::Adaptive;
        c.pipeline.idle_detect_interval = 10.0;
        let (opts, clock, mut hub) = (RunOptions::default(), FakeClock::at(5), Shared::default());
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        let appear = 250; // 25 s in, at 10 fps
        let mut asked = Vec::new();
        for seq in 0..260 {
            hub.frame = Some(scene_frame(seq, clock.now(), Some(appear)));
            hub.captured += 1;
            pass(&mut s, &mut hub);
            if hub.job.is_some() {
                asked.push(answer(&mut hub, Ok(Vec::new())));
            }
            clock.advance(100 * MS);
        }
        let still: Vec<u64> = asked.iter().copied().filter(|&q| q < appear).collect();
        assert_eq!(
            still,
            [0, 100, 200],
            "still: the first frame, then one heartbeat per 10 s"
        );
        let first = asked.iter().copied().find(|&q| q >= appear);
        assert!(
            first.is_some_and(|q| q <= appear + 2),
            "the newcomer must be detected within 3 frames of appearing: {asked:?}"
        );
        let (idle, motion) = (
            s.total.detect_idle + s.window.detect_idle,
            s.total.detect_motion + s.window.detect_motion,
        );
        assert_eq!(idle, 2, "heartbeats at 10 s and 20 s");
        assert!(motion >= 1, "the newcomer is motion: {motion}");
    }

    #[test]
    fn a_late_detection_marks_the_line_it_is_applied_on_with_the_frame_it_ran_on() {
        let path = std::env::temp_dir().join(format!("lookout-late-{}.jsonl", std::process::id()));
        let mut w = TracksWriter::create(&path, 1 << 20).unwrap();
        let (c, opts, clock, mut hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock).with_writer(Some(&mut w));
        deliver(&mut s, &mut hub, &clock, 0); // frame 0 goes to the detector …
        let job = hub.job.take().unwrap();
        for seq in 1..3 {
            clock.advance(100 * MS);
            deliver(&mut s, &mut hub, &clock, seq);
        }
        hub.results.push_back(DetResult {
            seq: job.seq,
            dets: Ok(reported(vec![det(0)])),
            preprocess: MS,
            model: MS,
            postprocess: MS,
            frame: job,
        }); // … and answers while the tracker is at frame 2
        hub.detector_busy = false;
        clock.advance(100 * MS);
        deliver(&mut s, &mut hub, &clock, 3);
        s.finish(EndReason::EndOfSource);
        let lines = jsonl(&path);
        let _ = std::fs::remove_file(&path);
        let track = |i: usize| &lines[i]["tracks"][0];
        assert!(lines[1]["tracks"].as_array().unwrap().is_empty());
        assert_eq!(track(2)["detected"], true, "applied while at frame 2");
        assert_eq!(track(2)["detected_seq"], 0, "ran on frame 0");
        assert_eq!(track(3)["detected"], false, "frame 3 is the tracker's");
        assert_eq!(track(3)["detected_seq"], 0);
    }

    #[test]
    fn a_busy_detector_makes_requests_skipped_never_queued_and_never_holds_up_frames() {
        let (c, opts, clock, mut hub) = (
            cfg(2),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        deliver(&mut s, &mut hub, &clock, 0);
        let in_flight = hub.job.take().unwrap(); // the detector starts on frame 0 …
        assert!(hub.detector_busy);
        for seq in 1..10 {
            // … and is still busy: every frame is processed at once, live mode never waits.
            hub.frame = Some(frame(seq, clock.now()));
            assert!(s.should_wake(&hub), "frame {seq} waits for the detector");
            pass(&mut s, &mut hub);
            assert!(hub.job.is_none(), "frame {seq}: a request was queued");
        }
        assert_eq!(s.window.processed, 10);
        // Due at frames 2, 4, 6, 8 and, since the count is not reset by a skip, every frame
        // from 2 on: 8 requests skipped.
        assert_eq!(s.window.detect_skipped, 8);
        hub.job = Some(in_flight);
        answer(&mut hub, Ok(Vec::new()));
        deliver(&mut s, &mut hub, &clock, 10);
        assert_eq!(
            hub.job.as_ref().map(|f| f.seq),
            Some(10),
            "the next frame asks again"
        );
        assert_eq!(s.window.detections, 1);
    }

    #[test]
    fn lockstep_takes_no_frame_until_the_requested_detection_is_back() {
        let opts = RunOptions {
            schedule: Schedule::Lockstep,
            ..RunOptions::default()
        };
        let (c, clock, mut hub) = (cfg(2), FakeClock::at(5), Shared::default());
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        deliver(&mut s, &mut hub, &clock, 0);
        assert!(hub.job.is_some());
        hub.frame = Some(frame(1, clock.now()));
        assert!(!s.should_wake(&hub), "lockstep waits for detection 0");
        hub.source_done = true; // not the end either while the detection is outstanding
        assert_eq!(pass(&mut s, &mut hub), None);
        assert_eq!(s.window.processed, 1);
        assert!(hub.frame.is_some(), "frame 1 stays in the slot");
        hub.source_done = false;
        answer(&mut hub, Ok(Vec::new()));
        pass(&mut s, &mut hub); // the result releases the wait …
        assert_eq!(s.window.processed, 1);
        pass(&mut s, &mut hub); // … and the next wake-up takes frame 1
        assert_eq!(s.window.processed, 2);
        assert!(hub.job.is_none(), "frame 1 is not due (every 2)");
    }

    #[test]
    fn a_frames_line_is_published_when_the_next_frame_arrives_with_its_late_detections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tracks.jsonl");
        let mut w = TracksWriter::create(&path, 1 << 20).unwrap();
        let (c, opts, clock, mut hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock).with_writer(Some(&mut w));
        deliver(&mut s, &mut hub, &clock, 0);
        assert_eq!(
            s.pending.map(|p| p.0),
            Some(0),
            "frame 0 is not written yet"
        );
        answer(&mut hub, Ok(vec![det(0)])); // detections for frame 0 come back …
        clock.advance(100 * MS);
        deliver(&mut s, &mut hub, &clock, 1); // … before frame 1: frame 0's line has them
        clock.advance(100 * MS);
        deliver(&mut s, &mut hub, &clock, 2);
        let out = s.finish(EndReason::EndOfSource);
        assert_eq!(out.tracks_started, 1);
        let lines = jsonl(&path);
        assert_eq!(
            lines.len(),
            3,
            "one line per frame, the last one at the end"
        );
        let detected = |i: usize| lines[i]["tracks"][0]["detected"].as_bool();
        assert_eq!(
            [
                lines[0]["seq"].as_u64(),
                lines[1]["seq"].as_u64(),
                lines[2]["seq"].as_u64()
            ],
            [Some(0), Some(1), Some(2)]
        );
        assert_eq!(
            (detected(0), detected(1), detected(2)),
            (Some(true), Some(false), Some(false))
        );
        assert_eq!(lines[1]["captured_at_ms"].as_f64(), Some(5100.0));
    }

    #[test]
    fn failed_detections_are_counted_as_runs() {
        let (c, opts, clock, mut hub) = (
            cfg(1),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        deliver(&mut s, &mut hub, &clock, 0);
        answer(&mut hub, Ok(Vec::new()));
        deliver(&mut s, &mut hub, &clock, 1);
        answer(&mut hub, Err("frame 1: bad data".into()));
        deliver(&mut s, &mut hub, &clock, 2);
        assert_eq!(s.tracker.tracks().count(), 0);
        assert_eq!(
            s.window.detections, 2,
            "a failed detection still counts as a run"
        );
        assert_eq!(s.window.model.count(), 2);
        answer(&mut hub, Ok(vec![det(0)]));
        deliver(&mut s, &mut hub, &clock, 3);
        assert_eq!(s.tracker.tracks().count(), 1);
    }

    #[test]
    fn track_starts_and_ends_are_counted() {
        let (c, opts, clock, mut hub) = (
            cfg(1),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        deliver(&mut s, &mut hub, &clock, 0);
        answer(&mut hub, Ok(vec![det(0)])); // confirmed at once (confirm_hits = 1)
        deliver(&mut s, &mut hub, &clock, 1);
        answer(&mut hub, Ok(Vec::new())); // one round without it ends it (max_misses = 1)
        deliver(&mut s, &mut hub, &clock, 2);
        let out = s.finish(EndReason::EndOfSource);
        assert_eq!(
            (out.tracks_started, out.tracks_ended, out.tracks_now),
            (1, 1, 0)
        );
    }

    #[test]
    fn a_camera_switched_off_ends_its_tracks_and_asks_for_nothing_until_switched_on() {
        let (c, opts, clock, mut hub) = (
            cfg(1),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let switch = opts.switches.of(&c.mqtt.camera);
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        deliver(&mut s, &mut hub, &clock, 0);
        answer(&mut hub, Ok(vec![det(0)]));
        deliver(&mut s, &mut hub, &clock, 1);
        assert_eq!(s.tracker.tracks().count(), 1);
        assert!(hub.job.is_some(), "frame 1 is asked for");
        answer(&mut hub, Ok(vec![det(0)]));

        switch.store(false, Ordering::Relaxed);
        for seq in 2..6 {
            deliver(&mut s, &mut hub, &clock, seq);
            assert!(hub.job.is_none(), "frame {seq}: no detection asked for");
            assert_eq!(
                s.tracker.tracks().count(),
                0,
                "frame {seq}: the track ended"
            );
        }
        // A round asked for before the switch and answered after it starts nothing.
        hub.job = Some(frame(5, clock.now()));
        answer(&mut hub, Ok(vec![det(0)]));
        deliver(&mut s, &mut hub, &clock, 6);
        assert_eq!(s.tracker.tracks().count(), 0);

        switch.store(true, Ordering::Relaxed);
        deliver(&mut s, &mut hub, &clock, 7);
        assert!(
            hub.job.is_some(),
            "switched on: detection is asked for again"
        );
        answer(&mut hub, Ok(vec![det(0)]));
        deliver(&mut s, &mut hub, &clock, 8);
        assert_eq!(s.tracker.tracks().count(), 1);
        let out = s.finish(EndReason::EndOfSource);
        assert_eq!((out.tracks_started, out.tracks_ended), (2, 1));
    }

    #[test]
    fn a_run_started_with_the_camera_switched_off_asks_for_nothing() {
        let (c, opts, clock, mut hub) = (
            cfg(1),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        opts.switches.set(&c.mqtt.camera, false);
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        for seq in 0..3 {
            deliver(&mut s, &mut hub, &clock, seq);
            assert!(hub.job.is_none(), "frame {seq}");
        }
        opts.switches.set(&c.mqtt.camera, true);
        deliver(&mut s, &mut hub, &clock, 3);
        assert!(hub.job.is_some());
    }

    #[test]
    fn stats_windows_close_on_the_clock_and_add_up_to_the_run() {
        let (c, opts, clock, mut hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        for seq in 0..25 {
            clock.advance(100 * MS); // 10 fps; the window is 1 s
            deliver(&mut s, &mut hub, &clock, seq);
            if seq == 8 {
                assert_eq!(
                    (s.total.processed, s.window.processed),
                    (0, 9),
                    "0.9 s: still open"
                );
            }
            if seq == 9 {
                assert_eq!(
                    (s.total.processed, s.window.processed),
                    (10, 0),
                    "1.0 s: closed"
                );
                assert_eq!(s.total.elapsed, Duration::from_secs(1));
            }
        }
        let out = s.finish(EndReason::EndOfSource);
        assert_eq!(out.total.processed, 25);
        assert_eq!(out.total.elapsed, Duration::from_millis(2500));
        assert_eq!(out.total.report(0).fps, 10.0);
    }

    #[test]
    fn frame_age_is_now_minus_capture_time_when_the_frame_is_processed() {
        let (c, opts, clock, mut hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(10),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        hub.frame = Some(frame(0, clock.now()));
        clock.advance(250 * MS); // the frame waited in the slot
        pass(&mut s, &mut hub);
        assert_eq!(s.window.age.count(), 1);
        assert!(
            (s.window.age.quantile_ms(0.5) - 250.0).abs() < 0.5,
            "{}",
            s.window.age.quantile_ms(0.5)
        );
    }

    #[test]
    fn bad_frames_and_failed_detections_every_frame_warn_once_a_minute() {
        let (c, opts, clock, mut hub) = (
            cfg(1),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        // 30 s at 10 fps: every other frame is short of data (it gets no gray plane, so no
        // tracker step and no detection) and every detection of the others fails.
        for seq in 0..300 {
            let mut f = frame(seq, clock.now());
            if seq % 2 == 1 {
                f.data.truncate(10);
            }
            hub.frame = Some(f);
            pass(&mut s, &mut hub);
            if hub.job.is_some() {
                assert_eq!(
                    seq % 2,
                    0,
                    "frame {seq}: a damaged frame went to the detector"
                );
                answer(&mut hub, Err(format!("frame {seq}: bad data")));
            }
            clock.advance(100 * MS);
        }
        assert_eq!(
            s.window.processed + s.total.processed,
            300,
            "no frame is skipped"
        );
        assert_eq!(
            s.tracker.seq(),
            Some(298),
            "the tracker stepped on good frames only"
        );
        // The first of each was logged, the rest held back (and counted for the next line).
        assert_eq!(s.frame_errors.held(), 149);
        assert_eq!(
            s.detect_errors.held(),
            149,
            "results of frames 0, 2, …, 298 came back (the last one on frame 299's pass)"
        );
        // A minute after the first one, the next wake-up tells how many were held back.
        clock.advance(Duration::from_secs(31));
        pass_idle(&mut s);
        assert_eq!((s.frame_errors.held(), s.detect_errors.held()), (0, 0));
    }

    /// A wake-up with nothing taken (a stop-flag poll): only `tick` runs.
    fn pass_idle(s: &mut Scheduler) {
        s.tick();
    }

    #[test]
    fn drops_are_frames_replaced_in_the_slot_plus_the_sources_stale_buffers() {
        let (c, opts, clock, mut hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        (hub.captured, hub.replaced, hub.source_dropped) = (10, 3, 2);
        hub.source_corrupt = 1;
        hub.frame = Some(frame(9, clock.now()));
        pass(&mut s, &mut hub);
        assert_eq!((s.window.captured, s.window.dropped), (10, 5));
        assert_eq!(s.window.corrupt, 1);
        (hub.captured, hub.replaced, hub.source_dropped) = (12, 4, 2); // counters are cumulative
        hub.source_corrupt = 4;
        hub.frame = Some(frame(11, clock.now()));
        pass(&mut s, &mut hub);
        assert_eq!((s.window.captured, s.window.dropped), (12, 6));
        assert_eq!(
            s.window.corrupt, 4,
            "damaged frames are counted, not dropped ones"
        );
    }

    #[test]
    fn ready_after_the_first_frame_and_a_sign_of_life_for_every_frame() {
        let (c, opts, clock, mut hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let rec = Recorder::default();
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        s.supervisor = Some(&rec);
        s.while_waiting(&hub);
        assert!(rec.take().is_empty(), "nothing before the first frame");
        deliver(&mut s, &mut hub, &clock, 0);
        deliver(&mut s, &mut hub, &clock, 1);
        assert_eq!(
            rec.take(),
            ["READY running", "ALIVE", "READY running", "ALIVE"]
        );
    }

    #[test]
    fn a_camera_missing_at_start_is_waited_for_ready_with_the_watchdog_fed() {
        let (c, opts, clock, mut hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(100),
            Shared::default(),
        );
        let rec = Recorder::default();
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        s.supervisor = Some(&rec);
        // The capture thread reports each attempt to open the camera that is not there yet.
        hub.source_reconnecting = Some(clock.now());
        hub.source_waiting = true;
        s.while_waiting(&hub);
        clock.advance(100 * MS);
        s.while_waiting(&hub);
        // READY (the service is up: it waits), the status once, pings while attempts come
        // (the recorder keeps every READY call; the real notifier sends the first only).
        assert_eq!(
            rec.take(),
            [
                "READY waiting for the camera to appear",
                "ALIVE",
                "STATUS waiting for the camera to appear",
                "READY waiting for the camera to appear",
                "ALIVE"
            ]
        );
        // The camera appears: frames flow and the status says so.
        hub.source_reconnecting = None;
        hub.source_waiting = false;
        deliver(&mut s, &mut hub, &clock, 0);
        assert_eq!(rec.take()[0], "STATUS running");
    }

    #[test]
    fn a_camera_being_reopened_keeps_the_watchdog_fed_while_its_reports_are_fresh() {
        let (c, opts, clock, mut hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(100),
            Shared::default(),
        );
        let rec = Recorder::default();
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        s.supervisor = Some(&rec);
        // A hanging camera (poll timeouts) reports nothing: no pings, systemd may restart us.
        s.while_waiting(&hub);
        assert!(rec.take().is_empty());
        hub.source_reconnecting = Some(clock.now());
        for _ in 0..3 {
            assert!(!s.should_wake(&hub));
            s.while_waiting(&hub);
            clock.advance(100 * MS);
        }
        assert_eq!(
            rec.take(),
            [
                "ALIVE",
                "STATUS camera lost: reopening it",
                "ALIVE",
                "ALIVE"
            ]
        );
        // A capture thread stuck inside one attempt stops reporting: the pings stop.
        clock.advance(RECONNECT_ALIVE);
        s.while_waiting(&hub);
        assert!(
            rec.take().is_empty(),
            "stale report still feeds the watchdog"
        );
        hub.source_reconnecting = Some(clock.now()); // the next attempt reports again
        s.while_waiting(&hub);
        assert_eq!(rec.take(), ["ALIVE"]);
        // The camera is back: frames flow, and the status says so once.
        hub.source_reconnecting = None;
        deliver(&mut s, &mut hub, &clock, 0);
        deliver(&mut s, &mut hub, &clock, 1);
        assert_eq!(
            rec.take(),
            [
                "STATUS running",
                "READY running",
                "ALIVE",
                "READY running",
                "ALIVE"
            ]
        );
    }

    #[test]
    fn stop_comes_before_reload_and_both_wake_the_tracker() {
        let (c, opts, clock, hub) = (
            cfg(5),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        assert!(!s.should_wake(&hub));
        assert_eq!(s.tick(), None);
        opts.reload.store(true, Ordering::Relaxed);
        assert!(s.should_wake(&hub));
        assert_eq!(s.tick(), Some(EndReason::Reload));
        opts.stop.store(true, Ordering::Relaxed);
        assert_eq!(s.tick(), Some(EndReason::Stopped));
    }

    #[test]
    fn max_frames_and_max_duration_end_the_run() {
        let opts = RunOptions {
            max_frames: Some(3),
            ..RunOptions::default()
        };
        let (c, clock, mut hub) = (cfg(5), FakeClock::at(5), Shared::default());
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        assert_eq!(deliver(&mut s, &mut hub, &clock, 0), None);
        assert_eq!(deliver(&mut s, &mut hub, &clock, 1), None);
        assert_eq!(deliver(&mut s, &mut hub, &clock, 2), Some(EndReason::Limit));

        let opts = RunOptions {
            max_duration: Some(Duration::from_secs(2)),
            ..RunOptions::default()
        };
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        clock.advance(1999 * MS);
        assert_eq!(s.tick(), None);
        clock.advance(MS);
        assert_eq!(s.tick(), Some(EndReason::Limit));
    }

    #[test]
    fn the_source_ends_the_run_once_the_slot_the_job_and_the_detector_are_empty() {
        let (c, opts, clock, mut hub) = (
            cfg(1),
            RunOptions::default(),
            FakeClock::at(5),
            Shared::default(),
        );
        let mut t = tracker();
        let mut s = Scheduler::new(&c, &opts, &mut t, &clock);
        deliver(&mut s, &mut hub, &clock, 0); // detection requested on frame 0, not yet taken
        hub.source_done = true;
        hub.frame = Some(frame(1, clock.now())); // the source's last frame
        assert_eq!(
            pass(&mut s, &mut hub),
            None,
            "a job is waiting for the detector"
        );
        assert_eq!((s.window.processed, s.window.detect_skipped), (2, 1));
        hub.detector_busy = true;
        let job = hub.job.take(); // the detector works on it …
        assert_eq!(pass(&mut s, &mut hub), None, "the detector is busy");
        hub.job = job;
        answer(&mut hub, Ok(vec![det(0)])); // … and is done
        assert_eq!(pass(&mut s, &mut hub), Some(EndReason::EndOfSource));
        let out = s.finish(EndReason::EndOfSource);
        assert_eq!((out.total.processed, out.total.detections), (2, 1));
        assert_eq!(out.tracks_now, 1, "the last detection was applied");
    }
}
