//! What lookout tells the world about objects: track start/end events in the journal,
//! optionally one JSON line per processed frame (`--tracks-out FILE`), and the one JSON form
//! of a detection ([`DetectionOut`]) that `lookout detect --json`, the tracks file and the
//! golden data (`models/golden/detections.json`) share.
//!
//! Journal field names (`LOOKOUT_EVENT`, `TRACK_ID`, `LABEL`, `SCORE`, `BOX`) and the JSON
//! keys (`label`, `class_id`, `score`, `box`; `seq`, `captured_at_ms`, `tracks`, `id`,
//! `detected`) are an interface: dashboards run `journalctl -o json | jq` against them.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::events::EventRecord;
use crate::frame::monotonic_now;
use crate::geom::BBox;
use crate::logging::RateLimit;
use crate::vocab::{self, Detection};

/// One detection on the wire: an object of `lookout detect --json`
/// (`{"label":…,"class_id":…,"score":…,"box":[x0,y0,x1,y1]}`), the object part of a track in
/// the tracks file (without `class_id`), and an entry of the golden data
/// (`models/golden/detections.json`, read back by the self-check and the tests).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct DetectionOut {
    /// COCO label.
    pub label: String,
    /// Index into the label list; left out of the tracks file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_id: Option<usize>,
    /// Confidence 0..1.
    pub score: f32,
    /// `[x0, y0, x1, y1]` in pixels (image, frame or model input: the context says which).
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
}

impl DetectionOut {
    /// `lookout detect --json`'s form of a detection: with its class id, the score rounded to
    /// 4 decimals and the box to 0.1 px.
    pub fn of_detection(d: &Detection) -> DetectionOut {
        DetectionOut {
            label: vocab::label(d.class_id),
            class_id: Some(d.class_id),
            score: round_to(d.score, 1e4),
            bbox: round_box(&d.bbox),
        }
    }

    /// A track's form in the tracks file: no class id, the score rounded to 3 decimals and the
    /// box to 0.1 px.
    pub fn of_track(class_id: usize, score: f32, bbox: &BBox) -> DetectionOut {
        DetectionOut {
            label: vocab::label(class_id),
            class_id: None,
            score: round_to(score, 1e3),
            bbox: round_box(bbox),
        }
    }

    /// The box as a [`BBox`].
    pub fn to_bbox(&self) -> BBox {
        let [x0, y0, x1, y1] = self.bbox;
        BBox::new(x0, y0, x1, y1)
    }
}

/// One object in a frame, as written to the tracks file:
/// `{"id":…,"label":…,"score":…,"box":[…],"detected":…,"detected_seq":…}`.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct TrackOut {
    /// Stable track id.
    pub id: u64,
    /// Label, score of the last detection that matched the track, and the box in frame pixels.
    #[serde(flatten)]
    pub object: DetectionOut,
    /// True on the line where a detection's correction was applied to the box (in a live run
    /// that detection ran on an earlier frame: see `detected_seq`).
    pub detected: bool,
    /// The frame the latest detection matched to this track ran on: the age of the evidence
    /// behind the box is `seq − detected_seq` frames.
    pub detected_seq: u64,
    /// The event this track carries (`[events]`), if it is one; left out when not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<u64>,
}

/// One processed frame, as written to the tracks file.
#[derive(Serialize, Debug, Clone)]
pub struct FrameOut {
    /// Frame sequence number.
    pub seq: u64,
    /// Capture time in ms on the monotonic clock.
    pub captured_at_ms: f64,
    /// Objects in this frame.
    pub tracks: Vec<TrackOut>,
}

fn round_to(v: f32, scale: f32) -> f32 {
    (v * scale).round() / scale
}

fn round_box(b: &BBox) -> [f32; 4] {
    b.to_array().map(|v| round_to(v, 10.0))
}

/// Builds the output record of one track.
pub fn track_out(
    id: u64,
    class_id: usize,
    score: f32,
    bbox: &BBox,
    detected: bool,
    detected_seq: u64,
) -> TrackOut {
    TrackOut {
        id,
        object: DetectionOut::of_track(class_id, score, bbox),
        detected,
        detected_seq,
        event: None,
    }
}

/// Logs a track's start as a journal entry (`CAMERA=camera`).
pub fn log_track_start(camera: &str, t: &TrackOut) {
    let o = &t.object;
    let bx = journal_box(o);
    log::info!(
        LOOKOUT_EVENT = "track_start", CAMERA = camera, TRACK_ID = t.id, LABEL = o.label.as_str(), SCORE = format!("{:.3}", o.score).as_str(), BOX = bx.as_str();
        "track {} started: {} {:.2} at [{}]", t.id, o.label, o.score, bx
    );
}

/// Logs a track's end as a journal entry (`CAMERA=camera`).
pub fn log_track_end(camera: &str, t: &TrackOut, frames: u64) {
    let o = &t.object;
    let bx = journal_box(o);
    log::info!(
        LOOKOUT_EVENT = "track_end", CAMERA = camera, TRACK_ID = t.id, LABEL = o.label.as_str(), SCORE = format!("{:.3}", o.score).as_str(), BOX = bx.as_str(), TRACK_FRAMES = frames;
        "track {} ended: {} after {} frame(s), last at [{}]", t.id, o.label, frames, bx
    );
}

/// Logs an event's start, update or end as a journal entry: `LOOKOUT_EVENT` is
/// `event_start`, `event_update` or `event_end`, with `CAMERA`, `EVENT_ID`, `TRACK_ID`, `LABEL`,
/// `SCORE` (the best detection score), `BOX` (the latest box), `ZONES` (comma-separated,
/// empty when none) and, at the end, `EVENT_SECONDS`.
pub fn log_event(camera: &str, r: &EventRecord) {
    let (kind, e) = match r {
        EventRecord::Start(e) => ("event_start", e),
        EventRecord::Update(e) => ("event_update", e),
        EventRecord::End(e) => ("event_end", e),
    };
    let o = DetectionOut::of_track(e.class_id, e.score, &e.bbox);
    let bx = journal_box(&o);
    let zones = e.zones.join(",");
    let where_ = if zones.is_empty() {
        String::new()
    } else {
        format!(" in {zones}")
    };
    match r {
        EventRecord::End(_) => log::info!(
            LOOKOUT_EVENT = kind, CAMERA = camera, EVENT_ID = e.id, TRACK_ID = e.track_id, LABEL = o.label.as_str(), SCORE = format!("{:.3}", o.score).as_str(), BOX = bx.as_str(), ZONES = zones.as_str(), EVENT_SECONDS = format!("{:.1}", e.seconds).as_str();
            "event {} ended: {} after {:.1} s, best {:.2}, last at [{}]{where_}", e.id, o.label, e.seconds, o.score, bx
        ),
        _ => log::info!(
            LOOKOUT_EVENT = kind, CAMERA = camera, EVENT_ID = e.id, TRACK_ID = e.track_id, LABEL = o.label.as_str(), SCORE = format!("{:.3}", o.score).as_str(), BOX = bx.as_str(), ZONES = zones.as_str();
            "event {} {}: {} {:.2} at [{}]{where_} (track {})", e.id, if kind == "event_start" { "started" } else { "updated" }, o.label, o.score, bx, e.track_id
        ),
    }
}

/// The journal's `BOX` field: `x0,y0,x1,y1` in whole pixels.
fn journal_box(o: &DetectionOut) -> String {
    let [x0, y0, x1, y1] = o.bbox;
    format!("{x0:.0},{y0:.0},{x1:.0},{y1:.0}")
}

/// Errors of the tracks file.
#[derive(Debug, thiserror::Error)]
#[error("tracks file {path}: {source}")]
pub struct TracksFileError {
    /// The file.
    pub path: PathBuf,
    /// What failed.
    pub source: std::io::Error,
}

/// The longest tracks file name accepted (`PATH_MAX` on Linux, counting its final NUL).
pub const MAX_PATH_BYTES: usize = 4095;

/// Why `path` can never be a tracks file, if it cannot: longer than the system allows, or a
/// component longer than 255 bytes (every line would be lost), or the same file as one of
/// `keep` (the configuration, the model or the recording: the tracks file would overwrite it).
/// `keep` pairs a file with the name to give it in the message.
pub fn tracks_path_problem(path: &Path, keep: &[(&Path, &str)]) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let bytes = path.as_os_str().as_bytes().len();
    if bytes > MAX_PATH_BYTES {
        return Some(format!(
            "a file name of {bytes} bytes is longer than the system allows ({MAX_PATH_BYTES})"
        ));
    }
    if let Some(c) = path.components().find(|c| c.as_os_str().len() > 255) {
        return Some(format!(
            "the name part \"{}…\" is {} bytes long; the system allows 255",
            String::from_utf8_lossy(&c.as_os_str().as_bytes()[..32]),
            c.as_os_str().len()
        ));
    }
    let same = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    keep.iter().find(|(k, _)| same(path, k)).map(|(k, what)| {
        format!(
            "{} is the {what} ({}); writing tracks there would overwrite it",
            path.display(),
            k.display()
        )
    })
}

/// Opens the tracks file for writing without ever blocking (a FIFO with no reader is an error,
/// `ENXIO`, retried later, not a hang), locks a regular file against a second writer, and with
/// `truncate` empties it — only once the lock is held, so a second daemon never destroys the
/// first one's lines.
fn open_tracks_file(path: &Path, truncate: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = File::options()
        .write(true)
        .create(true)
        .append(!truncate)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    // Writes block as usual (a FIFO's reader sets the pace, lines are never torn).
    let flags = if truncate {
        rustix::fs::OFlags::empty()
    } else {
        rustix::fs::OFlags::APPEND
    };
    rustix::fs::fcntl_setfl(&file, flags)?;
    if file.metadata()?.is_file() {
        use rustix::fs::FlockOperation;
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ResourceBusy,
                    "another process (another lookout?) is writing it; give each daemon its own \
                     tracks file",
                ))
            }
            Err(e) => return Err(e.into()),
        }
        if truncate {
            file.set_len(0)?;
        }
    }
    Ok(file)
}

/// Complete lines held before they are written (a crash loses at most these and the lines
/// since the last stats report's flush).
const BUFFER: usize = 8 * 1024;

/// A JSON Lines writer, one line per processed frame, flushed at each stats report and at
/// the end so a crash loses at most a few seconds.
///
/// - **Rotation**: when a line would take the file past `max_bytes`, the file is renamed to
///   `….1` (replacing the previous one) and a new one started, so the two never hold more than
///   `2 × max_bytes`. Lines are never split; a single line longer than `max_bytes` is dropped
///   (and counted). Only a regular file rotates (not `/dev/stdout`, a FIFO, …).
/// - **Failures** (a full disk, a read-only file system, a vanished directory) never end the
///   run: the lines that could not be written are dropped and counted ([`lines_lost`]), one
///   warning names the file and the OS error (then at most one a minute while it keeps
///   failing), and every following line retries — reopening the file — so writing resumes as
///   soon as it can. A write that failed halfway is cut back to the last whole line.
///
/// [`lines_lost`]: TracksWriter::lines_lost
pub struct TracksWriter {
    path: PathBuf,
    max_bytes: u64,
    /// The open file; `None` after a failure until a retry reopens it.
    file: Option<File>,
    /// The file is a regular file (the only kind that rotates).
    rotatable: bool,
    /// Bytes in the file (not counting `buf`).
    written: u64,
    /// Complete lines not written yet, and how many.
    buf: Vec<u8>,
    buf_lines: u64,
    /// Lines dropped since the writer was created.
    lost: u64,
    /// The current outage: lines lost before it started (`None`: writing works).
    failing: Option<u64>,
    warnings: RateLimit,
    recoveries: RateLimit,
    line: Vec<u8>,
}

impl TracksWriter {
    /// Creates (truncates) the file, to be rotated at `max_bytes`. A regular file is locked
    /// for as long as the writer has it open: a second writer is refused
    /// ([`std::io::ErrorKind::ResourceBusy`]) and the file left as it was.
    pub fn create(path: &Path, max_bytes: u64) -> Result<TracksWriter, TracksFileError> {
        let file = open_tracks_file(path, true).map_err(|source| TracksFileError {
            path: path.into(),
            source,
        })?;
        let rotatable = file.metadata().is_ok_and(|m| m.is_file());
        Ok(TracksWriter::with_file(
            path,
            max_bytes,
            Some(file),
            rotatable,
        ))
    }

    /// A writer on `file` (`None`: not open; every line retries opening it).
    fn with_file(path: &Path, max_bytes: u64, file: Option<File>, rotatable: bool) -> TracksWriter {
        TracksWriter {
            path: path.into(),
            max_bytes,
            file,
            rotatable,
            written: 0,
            buf: Vec::with_capacity(BUFFER),
            buf_lines: 0,
            lost: 0,
            failing: None,
            warnings: RateLimit::per_minute(),
            recoveries: RateLimit::per_minute(),
            line: Vec::new(),
        }
    }

    /// As [`TracksWriter::create`], but a file that cannot be created now (a read-only or
    /// full file system, a directory not mounted yet) is not an error: the failure is told
    /// and counted like any later one, and every line retries until the file can be opened.
    /// The daemon starts this way: its tracks file never keeps it from running.
    ///
    /// # Errors
    /// Only a file another writer holds (a second daemon on the same tracks file): that never
    /// fixes itself, and writing anyway would interleave both daemons' lines.
    pub fn create_or_retry(path: &Path, max_bytes: u64) -> Result<TracksWriter, TracksFileError> {
        match TracksWriter::create(path, max_bytes) {
            Ok(w) => Ok(w),
            Err(e) if e.source.kind() == std::io::ErrorKind::ResourceBusy => Err(e),
            Err(e) => {
                let mut w = TracksWriter::with_file(path, max_bytes, None, true);
                w.fail(e.source, 0);
                Ok(w)
            }
        }
    }

    /// The size at which the file rotates.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines dropped (not written) since the writer was created.
    pub fn lines_lost(&self) -> u64 {
        self.lost
    }

    /// Appends one frame (buffered). Never fails: a line that cannot be written is counted in
    /// [`lines_lost`](TracksWriter::lines_lost).
    pub fn write(&mut self, frame: &FrameOut) {
        self.line.clear();
        if let Err(e) = serde_json::to_writer(&mut self.line, frame) {
            self.fail(e.into(), 1);
            return;
        }
        self.line.push(b'\n');
        let len = self.line.len() as u64;
        if self.rotatable && len > self.max_bytes {
            let e = std::io::Error::other(format!(
                "a line of {len} bytes is longer than the rotation size ({} bytes)",
                self.max_bytes
            ));
            self.fail(e, 1);
            return;
        }
        // After a failure: reopen first, so the size below is the file's as it is now.
        if self.file.is_none() {
            if let Err(e) = self.reopen() {
                self.fail(e, 1);
                return;
            }
        }
        if self.rotatable && self.written + self.buf.len() as u64 + len > self.max_bytes {
            self.flush();
            if self.file.is_some() {
                self.rotate();
            }
            if self.file.is_none() {
                self.lost += 1; // told by the failure that closed it
                return;
            }
        }
        self.buf.extend_from_slice(&self.line);
        self.buf_lines += 1;
        // While failing, every line retries at once (and is lost at once if it fails again).
        if self.buf.len() >= BUFFER || self.failing.is_some() {
            self.flush();
        }
    }

    /// Writes the buffered lines to the file (reopening it after a failure). Never fails: lines
    /// that cannot be written are counted in [`lines_lost`](TracksWriter::lines_lost).
    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let result = if self.file.is_some() {
            Ok(())
        } else {
            self.reopen()
        }
        .and_then(|()| match self.file.as_mut() {
            Some(f) => f.write_all(&self.buf),
            None => Err(std::io::ErrorKind::NotFound.into()),
        });
        match result {
            Ok(()) => {
                self.written += self.buf.len() as u64;
                self.buf.clear();
                self.buf_lines = 0;
                self.recovered();
            }
            Err(e) => {
                // Cut a half-written line off, so the file holds whole lines only; the next
                // attempt reopens the file.
                if let Some(f) = self.file.take() {
                    if self.rotatable {
                        let _ = f.set_len(self.written);
                    }
                }
                let lines = self.buf_lines;
                self.buf.clear();
                self.buf_lines = 0;
                self.fail(e, lines);
            }
        }
    }

    /// Opens the file again for appending (after a failure), taking its size as it is.
    fn reopen(&mut self) -> std::io::Result<()> {
        let f = open_tracks_file(&self.path, false)?;
        let meta = f.metadata()?;
        self.rotatable = meta.is_file();
        self.written = meta.len();
        self.file = Some(f);
        Ok(())
    }

    /// `….jsonl` → `….jsonl.1`, and a new, empty file. If the rename fails (a directory
    /// lookout may not write to), the file is emptied instead: the size bound holds either way.
    fn rotate(&mut self) {
        self.file = None;
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        if let Err(e) = std::fs::rename(&self.path, &old) {
            if self.warnings.hit(monotonic_now()).is_some() {
                log::warn!(
                    LOOKOUT_EVENT = "tracks_file_error";
                    "tracks file {}: cannot rename it to {} ({e}); starting it afresh instead",
                    self.path.display(),
                    Path::new(&old).display()
                );
            }
        }
        match open_tracks_file(&self.path, true) {
            Ok(f) => {
                self.file = Some(f);
                self.written = 0;
            }
            // The next flush retries (reopening) and counts what it cannot write.
            Err(e) => self.fail(e, 0),
        }
    }

    /// `lines` are lost because of `e`: counted, and told (rate-limited).
    fn fail(&mut self, e: std::io::Error, lines: u64) {
        let first = self.failing.is_none();
        if first {
            self.failing = Some(self.lost);
        }
        self.lost += lines;
        let Some(held) = self.warnings.hit(monotonic_now()) else {
            return;
        };
        let path = self.path.display();
        if first {
            log::warn!(
                LOOKOUT_EVENT = "tracks_file_error", TRACKS_LINES_LOST = self.lost;
                "tracks file {path}: {e}; its lines are dropped and counted (TRACKS_LINES_LOST) until writing works again"
            );
        } else {
            log::warn!(
                LOOKOUT_EVENT = "tracks_file_error", TRACKS_LINES_LOST = self.lost, HELD_BACK = held.count;
                "tracks file {path}: still failing: {e}; {} line(s) lost so far", self.lost
            );
        }
    }

    /// A write worked: the end of an outage, if there was one.
    fn recovered(&mut self) {
        let Some(lost_before) = self.failing.take() else {
            return;
        };
        if self.recoveries.hit(monotonic_now()).is_some() {
            log::info!(
                LOOKOUT_EVENT = "tracks_file_resumed", TRACKS_LINES_LOST = self.lost;
                "tracks file {}: writing again after {} line(s) lost",
                self.path.display(),
                self.lost - lost_before
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_file_lines_are_valid_json_with_the_documented_keys() {
        let p = std::env::temp_dir().join(format!("lookout-tracks-{}.jsonl", std::process::id()));
        let mut w = TracksWriter::create(&p, 1 << 20).unwrap();
        let t = track_out(7, 0, 0.8123, &BBox::new(1.04, 2.0, 30.0, 40.0), true, 5);
        w.write(&FrameOut {
            seq: 3,
            captured_at_ms: 12.5,
            tracks: vec![t],
        });
        w.flush();
        assert_eq!(w.lines_lost(), 0);
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(v["seq"], 3);
        assert_eq!(v["tracks"][0]["id"], 7);
        assert_eq!(v["tracks"][0]["label"], "person");
        assert_eq!(v["tracks"][0]["detected"], true);
        assert_eq!(v["tracks"][0]["detected_seq"], 5);
        assert_eq!(v["tracks"][0]["box"][0], 1.0);
        // The exact bytes: key order, rounding, no class_id.
        assert_eq!(
            text,
            "{\"seq\":3,\"captured_at_ms\":12.5,\"tracks\":[{\"id\":7,\"label\":\"person\",\"score\":0.812,\"box\":[1.0,2.0,30.0,40.0],\"detected\":true,\"detected_seq\":5}]}\n"
        );
        let _ = std::fs::remove_file(p);
    }

    /// Frame `seq` with `seq % 4` tracks: lines of different lengths.
    fn frame_out(seq: u64) -> FrameOut {
        FrameOut {
            seq,
            captured_at_ms: seq as f64 * 100.0,
            tracks: (0..seq % 4)
                .map(|i| track_out(i, 0, 0.5, &BBox::new(1.0, 2.0, 3.0, 4.0), false, seq))
                .collect(),
        }
    }

    /// The `seq` of every line of `path` (each must be whole, valid JSON).
    fn seqs(path: &Path) -> Vec<u64> {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{path:?} ends mid-line"
        );
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{path:?}: split line {l:?}: {e}"));
                v["seq"].as_u64().unwrap()
            })
            .collect()
    }

    #[test]
    fn the_file_rotates_to_dot_1_by_size_without_splitting_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tracks.jsonl");
        let old = dir.path().join("tracks.jsonl.1");
        let max = 2000;
        let mut w = TracksWriter::create(&path, max).unwrap();
        let (mut rotations, mut size) = (0, 0);
        for seq in 0..500 {
            w.write(&frame_out(seq));
            if seq % 7 == 0 {
                w.flush(); // stats reports flush at odd points
            }
            let now = std::fs::metadata(&path).unwrap().len();
            let previous = std::fs::metadata(&old).map_or(0, |m| m.len());
            assert!(now <= max && previous <= max, "{now} + {previous} at {seq}");
            let new_size = w.written + w.buf.len() as u64;
            if new_size < size {
                rotations += 1;
            }
            size = new_size;
        }
        w.flush();
        assert_eq!(w.lines_lost(), 0);
        let (a, b) = (seqs(&old), seqs(&path));
        assert!(
            rotations >= 5,
            "the file rotated several times: {rotations}"
        );
        assert!(a[0] > 0, ".1 was replaced by newer lines: {a:?}");
        // .1 holds the lines just before the current file's, with none missing.
        let all: Vec<u64> = a.iter().chain(&b).copied().collect();
        assert_eq!(all, (a[0]..500).collect::<Vec<_>>());
        let total =
            std::fs::metadata(&old).unwrap().len() + std::fs::metadata(&path).unwrap().len();
        assert!(total <= 2 * max, "{total}");
        assert!(total > max, "the previous file is kept: {total}");
    }

    #[test]
    fn a_line_longer_than_the_rotation_size_is_dropped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tracks.jsonl");
        let mut w = TracksWriter::create(&path, 100).unwrap();
        w.write(&frame_out(0)); // short
        w.write(&frame_out(3)); // three tracks: too long
        w.write(&frame_out(4)); // short
        w.flush();
        assert_eq!(w.lines_lost(), 1);
        assert_eq!(seqs(&path), [0, 4]);
    }

    #[test]
    fn a_full_disk_loses_and_counts_lines_but_never_fails() {
        let full = Path::new("/dev/full");
        assert!(full.exists(), "/dev/full is needed (ENOSPC on every write)");
        let mut w = TracksWriter::create(full, 1000).unwrap();
        assert!(!w.rotatable, "a device never rotates");
        for seq in 0..50 {
            w.write(&frame_out(seq));
            w.flush();
        }
        assert_eq!(w.lines_lost(), 50);
        assert!(w.failing.is_some());
        // 50 failed writes within a minute: the first was told, the others held back.
        assert_eq!(w.warnings.held(), 49);
    }

    #[test]
    fn writing_resumes_when_the_file_can_be_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tracks.jsonl");
        let mut w = TracksWriter::create(&path, 1 << 20).unwrap();
        for seq in 0..3 {
            w.write(&frame_out(seq));
        }
        w.flush();
        // The file's directory goes away (a card unmounted, a directory removed): as after a
        // failed write, the file is closed and every line retries by reopening it.
        let gone = dir.path().join("gone");
        w.path = gone.join("tracks.jsonl");
        w.file = None;
        for seq in 3..8 {
            w.write(&frame_out(seq));
        }
        w.flush();
        assert_eq!(w.lines_lost(), 5, "every line failed and was counted");
        assert!(w.failing.is_some());
        std::fs::create_dir(&gone).unwrap();
        for seq in 8..10 {
            w.write(&frame_out(seq));
        }
        w.flush();
        assert_eq!(w.lines_lost(), 5, "nothing lost once it works again");
        assert!(w.failing.is_none());
        assert_eq!(seqs(&gone.join("tracks.jsonl")), [8, 9]);
        assert_eq!(seqs(&path), [0, 1, 2]);
    }

    #[test]
    fn a_file_that_cannot_be_created_at_start_is_retried_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let later = dir.path().join("not-mounted-yet");
        let path = later.join("tracks.jsonl");
        assert!(TracksWriter::create(&path, 1 << 20).is_err());
        let mut w = TracksWriter::create_or_retry(&path, 1 << 20).unwrap();
        assert!(w.failing.is_some(), "the failure at start is an outage");
        for seq in 0..4 {
            w.write(&frame_out(seq));
        }
        w.flush();
        assert_eq!(w.lines_lost(), 4);
        std::fs::create_dir(&later).unwrap();
        for seq in 4..6 {
            w.write(&frame_out(seq));
        }
        w.flush();
        assert_eq!(w.lines_lost(), 4, "nothing lost once it can be written");
        assert!(w.failing.is_none());
        assert_eq!(seqs(&path), [4, 5]);
    }

    #[test]
    fn detect_json_keeps_its_keys_and_rounding() {
        let d = Detection {
            class_id: 15,
            score: 0.441_055,
            bbox: BBox::new(0.234, 0.0, 414.401, 412.727),
        };
        assert_eq!(
            serde_json::to_string(&DetectionOut::of_detection(&d)).unwrap(),
            "{\"label\":\"cat\",\"class_id\":15,\"score\":0.4411,\"box\":[0.2,0.0,414.4,412.7]}"
        );
    }

    #[test]
    fn golden_data_parses_as_detections() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/golden/detections.json");
        let all: std::collections::BTreeMap<
            String,
            std::collections::BTreeMap<String, Vec<DetectionOut>>,
        > = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let chelsea = &all["nanodet-g-416-fp32.onnx"]["chelsea"];
        assert_eq!(chelsea[1].label, "cat");
        assert_eq!(chelsea[1].class_id, Some(15));
        assert_eq!(
            chelsea[1].to_bbox().to_array(),
            [0.235, 0.0, 414.401, 412.727]
        );
        assert!(all.values().flat_map(|m| m.values()).all(|v| v
            .iter()
            .all(|d| d.class_id.is_some_and(|c| vocab::label(c) == d.label))));
    }
}
