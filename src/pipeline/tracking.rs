//! The tracker thread: takes the newest frame, steps the tracker, schedules detections,
//! applies results, publishes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::hub::{DetResult, Hub};
use super::{EndReason, PipelineError, RunOptions, Schedule};
use crate::config::Config;
use crate::frame::{monotonic_now, GrayImage};
use crate::output::{self, FrameOut, TracksWriter};
use crate::preprocess::{self, Scratch};
use crate::stats::Window;
use crate::track::{TrackEvent, Tracker};

/// How fresh the capture thread's last reopen report must be for the tracker to keep the
/// watchdog fed (reopen attempts come at most 5 s apart; a capture thread stuck inside an
/// attempt stops the pings and systemd restarts the service).
const RECONNECT_ALIVE: Duration = Duration::from_secs(15);

type TrackOutcome = (Window, EndReason, u64, u64, usize);

/// The tracker thread: takes the newest frame, steps the tracker, schedules detections,
/// applies results, publishes.
pub(super) fn track_loop(
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
