//! `exec:COMMAND ARGS…`: frames from a command's stdout, for cameras lookout cannot open as a
//! V4L2 device — the Raspberry Pi Camera Module through `rpicam-vid`, an IP camera through
//! `ffmpeg`.
//!
//! - **Command line**: split into words like a shell (`command.rs`: quotes and backslashes; no
//!   variables, globs, pipes or redirections); no shell runs unless the command is one
//!   (`exec:sh -c 'a | b'`). The program is looked up in `$PATH`.
//! - **Stream**: recognized from its first bytes — MJPEG (`FF D8`, concatenated JPEGs) or
//!   YUV4MPEG2 (`YUV4MPEG2 `) — and read by the recordings' streaming readers
//!   ([`ReplaySource`]), never paced: frames come at the command's rate and their age is
//!   measured from their arrival. Anything else is a failed start naming the first bytes.
//! - **The child** (`child.rs`): its own process group, stdin `/dev/null`, stderr to the log
//!   (`stderr.rs`: line by line, cut to 300 bytes, at most 20 lines per 10 s), ended with
//!   SIGTERM then SIGKILL after 400 ms and always reaped — on a restart, when the source is
//!   dropped (a stop, a reload that changes the source, a thread unwinding).
//! - **Lost like a camera**: the command exiting, its output ending or breaking, or no frame
//!   for [`STALL`] — the group is ended and the command started again with the V4L2
//!   camera's back-off (0.5 s doubling to 5 s), reported as [`SourceError::Disconnected`] /
//!   [`SourceError::Reconnecting`] (the pipeline keeps the watchdog fed meanwhile and a stop
//!   ends the waits). A restart that delivers a frame counts in [`SourceStats::reopens`].
//! - **A command that fails at once**: every start that ends without a frame doubles the
//!   back-off; after [`FAILURES_NOTICE`] in a row an error names the command, how it ended and
//!   its last stderr line, and lookout keeps trying (a camera that is gone may come back).
//!   Only a command that cannot be started when the source opens is a configuration error
//!   ([`SourceError::Command`]: `lookout run` exits 78 naming `source.spec`).
//! - **`realtime = false`** (`Pacing::AsFastAsPossible`): every frame the command writes is
//!   processed, in order (the command waits for lookout); by default the pipeline keeps only
//!   the newest frame, as for a camera.

mod child;
pub mod command;
mod stderr;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use child::{ChildPipe, ChildReport};

use super::interface::{FrameSource, Pacing, SourceError, SourceOptions, SourceStats};
use super::replay::ReplaySource;
use crate::frame::Frame;

pub use child::GRACE;
pub use stderr::{LINES_PER_WINDOW, MAX_LINE, WINDOW};

/// The spec prefix of a command source.
pub const PREFIX: &str = "exec:";
/// A running command that delivers no frame for this long is ended and started again.
pub const STALL: Duration = Duration::from_secs(20);
/// Starts in a row that end without a frame before an error says so (then every 60th).
pub const FAILURES_NOTICE: u32 = 5;
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The bytes that tell the stream's kind.
const MAGIC_Y4M: &[u8] = b"YUV4MPEG2 ";
const MAGIC_JPEG: &[u8] = &[0xFF, 0xD8];

/// A command's stdout as a [`FrameSource`] (see the module documentation).
pub struct ExecSource {
    /// The spec as written (`exec:…`), a URL's password shown as `***`: names the source in
    /// messages.
    spec: String,
    argv: Vec<String>,
    opts: SourceOptions,
    state: State,
    /// How the current (or last) run of the command ended, and its last stderr line.
    report: Arc<Mutex<ChildReport>>,
    pid: Option<u32>,
    stats: SourceStats,
    /// Damaged frames counted by the readers of earlier runs.
    corrupt_before: u64,
    seq: u64,
    /// Some run of the command delivered a frame.
    ever_delivered: bool,
    /// Failed starts since the last frame.
    attempts: u32,
    /// The wait before the next start after a failed one (doubles, up to 5 s).
    backoff: Duration,
    fps: Option<f64>,
    /// `MJPEG 640x480` once frames came.
    mode: Option<String>,
}

enum State {
    /// Running; its first bytes are awaited to tell the stream's kind.
    Starting {
        pipe: Box<ChildPipe>,
        since: Instant,
    },
    /// Frames flow through a reader that owns the pipe.
    Streaming {
        reader: Box<ReplaySource>,
        frames: u64,
        last_frame: Instant,
    },
    /// Not running; started again at `next_try`.
    Down { next_try: Instant },
}

impl ExecSource {
    /// Splits the command line (the spec without its `exec:` prefix) and starts it.
    ///
    /// # Errors
    /// [`SourceError::Command`] when the line does not split or the command cannot be started
    /// (not found, not executable).
    pub fn open(spec: &str, opts: &SourceOptions) -> Result<ExecSource, SourceError> {
        let spec = spec.trim().to_string();
        // What is shown of the command (a camera URL's password is not).
        let shown = command::redact(&spec);
        let bad = |message: String| SourceError::Command {
            spec: shown.clone(),
            message: command::redact(&message),
        };
        let line = spec.strip_prefix(PREFIX).unwrap_or(&spec);
        let argv = command::split(line).map_err(bad)?;
        let program = argv.first().cloned().unwrap_or_default();
        command::resolve_in_env(&program).map_err(bad)?;
        let mut src = ExecSource {
            spec: shown.clone(),
            argv,
            opts: opts.clone(),
            state: State::Down {
                next_try: Instant::now(),
            },
            report: Arc::default(),
            pid: None,
            stats: SourceStats::default(),
            corrupt_before: 0,
            seq: 0,
            ever_delivered: false,
            attempts: 0,
            backoff: BACKOFF_MIN,
            fps: opts.replay_fps,
            mode: None,
        };
        src.start()
            .map_err(|e| bad(format!("cannot start {program:?}: {e}")))?;
        Ok(src)
    }

    /// Starts the command (state `Starting`).
    fn start(&mut self) -> std::io::Result<()> {
        self.report = Arc::default();
        let pipe = ChildPipe::spawn(
            &self.argv,
            self.opts.interrupt.clone(),
            self.opts.timeout,
            self.report.clone(),
        )?;
        self.pid = Some(pipe.pid());
        log::debug!("{}: started (pid {})", self.spec, pipe.pid());
        self.state = State::Starting {
            pipe: Box::new(pipe),
            since: Instant::now(),
        };
        Ok(())
    }

    /// Down: waits for the back-off (ended early by the interrupt), then starts again.
    fn restart(&mut self) -> Result<(), SourceError> {
        let State::Down { next_try } = self.state else {
            return Ok(());
        };
        if next_try > Instant::now() && self.opts.interrupt.sleep_until(next_try) {
            return Err(self.timed_out());
        }
        match self.start() {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed_start(format!("cannot start it: {e}"))),
        }
    }

    /// Starting: reads the first bytes and hands the pipe to the reader they call for.
    fn recognize(&mut self) -> Result<(), SourceError> {
        let State::Starting { pipe, since } = &mut self.state else {
            return Ok(());
        };
        let since = *since;
        let head = match pipe.read_ahead(MAGIC_Y4M.len()) {
            Ok(head) => head.to_vec(),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                if self.opts.interrupt.is_raised() || since.elapsed() < STALL {
                    return Err(self.timed_out());
                }
                return Err(
                    self.failed_start(format!("it wrote nothing for {} s", STALL.as_secs()))
                );
            }
            Err(e) => return Err(self.failed_start(format!("cannot read its output: {e}"))),
        };
        let y4m = if head.starts_with(MAGIC_JPEG) {
            false
        } else if head.starts_with(MAGIC_Y4M) {
            true
        } else if head.is_empty() {
            return Err(self.failed_start("it ended without writing anything".into()));
        } else {
            return Err(self.failed_start(format!(
                "its output is neither MJPEG (starting FF D8) nor YUV4MPEG2 (starting `YUV4MPEG2 `); the first bytes are {}",
                show_bytes(&head)
            )));
        };
        let State::Starting { pipe, .. } = std::mem::replace(
            &mut self.state,
            State::Down {
                next_try: Instant::now(),
            },
        ) else {
            return Ok(());
        };
        let mut opts = self.opts.clone();
        opts.pace = Pacing::AsFastAsPossible;
        opts.looped = false;
        let name = Path::new(&self.spec);
        let reader = if y4m {
            ReplaySource::y4m_reader(name, pipe, &opts)
        } else {
            ReplaySource::mjpeg_reader(name, pipe, &opts)
        };
        match reader {
            Ok(reader) => {
                if y4m && self.opts.replay_fps.is_none() {
                    self.fps = reader.fps();
                }
                self.state = State::Streaming {
                    reader: Box::new(reader),
                    frames: 0,
                    last_frame: Instant::now(),
                };
                Ok(())
            }
            Err(_) if self.opts.interrupt.is_raised() => Err(self.timed_out()),
            Err(e) => Err(self.failed_start(e.to_string())),
        }
    }

    /// Streaming: the reader's next frame, renumbered across runs of the command.
    fn read_frame(&mut self) -> Result<Option<Frame>, SourceError> {
        let State::Streaming {
            reader,
            frames,
            last_frame,
        } = &mut self.state
        else {
            return Ok(None);
        };
        let next = reader.next();
        self.stats.corrupt = self.corrupt_before + reader.stats().corrupt;
        match next {
            Ok(Some(mut frame)) => {
                let first = *frames == 0;
                *frames += 1;
                *last_frame = Instant::now();
                frame.seq = self.seq;
                self.seq += 1;
                self.stats.delivered += 1;
                self.mode = Some(format!("{} {}x{}", frame.format, frame.width, frame.height));
                if first {
                    self.first_frame();
                }
                Ok(Some(frame))
            }
            Ok(None) => Err(self.lost("its output ended".into())),
            Err(SourceError::Timeout { .. }) => Err(self.timed_out()),
            Err(SourceError::File { source, .. })
                if source.kind() == std::io::ErrorKind::TimedOut =>
            {
                if last_frame.elapsed() >= STALL {
                    return Err(self.lost(format!("no frame for {} s", STALL.as_secs())));
                }
                Err(self.timed_out())
            }
            Err(e) => Err(self.lost(e.to_string())),
        }
    }

    /// The first frame of a run of the command: a restart that worked is a reopen.
    fn first_frame(&mut self) {
        if self.ever_delivered {
            self.stats.reopens += 1;
            log::warn!(
                "{}: the command runs again (pid {}, restart {}{})",
                self.spec,
                self.pid.unwrap_or(0),
                self.stats.reopens,
                match self.attempts {
                    0 => String::new(),
                    n => format!(", after {n} failed starts"),
                }
            );
        } else {
            log::info!("{}: frames flow: {}", self.spec, self.describe());
        }
        self.ever_delivered = true;
        self.attempts = 0;
        self.backoff = BACKOFF_MIN;
    }

    /// Ends the running command (if any), going `Down`; returns how it ended.
    fn end_run(&mut self, next_try: Instant) -> String {
        if let State::Streaming { reader, .. } = &self.state {
            self.corrupt_before += reader.stats().corrupt;
        }
        // Dropping the pipe (or the reader that owns it) ends and reaps the command.
        self.state = State::Down { next_try };
        let r = self
            .report
            .lock()
            .map(|r| (r.status.clone(), r.last_line.clone()));
        let (status, line) = r.unwrap_or_default();
        let mut how = format!("the command ended ({})", status.as_deref().unwrap_or("?"));
        if let Some(line) = line {
            how += &format!("; its last stderr line: {line:?}");
        }
        how
    }

    /// A run that delivered frames ended: like a camera unplugged, restarted after the
    /// shortest back-off.
    fn lost(&mut self, reason: String) -> SourceError {
        let delivered = matches!(self.state, State::Streaming { frames, .. } if frames > 0);
        if !delivered {
            return self.failed_start(reason);
        }
        let how = self.end_run(Instant::now() + BACKOFF_MIN);
        SourceError::Disconnected {
            device: self.spec.clone(),
            source: std::io::Error::other(format!("{reason}; {how}")),
        }
    }

    /// A run that ended before its first frame: the back-off doubles, and every
    /// [`FAILURES_NOTICE`]th in a row is an error naming the command.
    fn failed_start(&mut self, reason: String) -> SourceError {
        let backoff = self.backoff;
        self.backoff = (backoff * 2).min(BACKOFF_MAX);
        let how = self.end_run(Instant::now() + backoff);
        self.attempts += 1;
        let reason = format!("{reason}; {how}");
        let n = self.attempts;
        if n == FAILURES_NOTICE || (n > FAILURES_NOTICE && n.is_multiple_of(60)) {
            log::error!(
                LOOKOUT_EVENT = "source_failing";
                "{}: the command ended {n} times in a row without a frame (last: {reason}); restarting it every {} s — run it by hand to see why (it must write MJPEG or YUV4MPEG2 to its stdout)",
                self.spec,
                BACKOFF_MAX.as_secs()
            );
        }
        if self.ever_delivered {
            SourceError::Reconnecting {
                device: self.spec.clone(),
                attempts: n,
                reason,
                retry_in: backoff,
            }
        } else {
            SourceError::WaitingForDevice {
                device: self.spec.clone(),
                attempts: n,
                reason,
                retry_in: backoff,
            }
        }
    }

    /// No frame within the read timeout, or the run is ending (counted).
    fn timed_out(&mut self) -> SourceError {
        self.stats.timeouts += 1;
        SourceError::Timeout {
            device: self.spec.clone(),
            timeout: self.opts.timeout,
        }
    }
}

impl FrameSource for ExecSource {
    fn next(&mut self) -> Result<Option<Frame>, SourceError> {
        loop {
            match self.state {
                State::Down { .. } => self.restart()?,
                State::Starting { .. } => self.recognize()?,
                State::Streaming { .. } => return self.read_frame(),
            }
        }
    }

    fn stats(&self) -> SourceStats {
        self.stats
    }

    fn fps(&self) -> Option<f64> {
        self.fps
    }

    fn interrupt(&self) -> Option<crate::interrupt::Interrupt> {
        Some(self.opts.interrupt.clone())
    }

    fn describe(&self) -> String {
        let state = match (&self.state, &self.mode) {
            (State::Down { .. }, _) => "restarting".to_string(),
            (State::Starting { .. }, _) => format!("pid {}, starting", self.pid.unwrap_or(0)),
            (State::Streaming { .. }, Some(mode)) => {
                format!("pid {}, {mode}", self.pid.unwrap_or(0))
            }
            (State::Streaming { .. }, None) => format!("pid {}", self.pid.unwrap_or(0)),
        };
        let fps = self.fps.map_or(String::new(), |f| format!(" @ {f:.2} fps"));
        format!("command {} ({state}){fps}", self.spec)
    }

    fn unpaced(&self) -> bool {
        self.opts.pace == Pacing::AsFastAsPossible
    }
}

/// The first bytes of an unknown stream, in hex and as text.
fn show_bytes(head: &[u8]) -> String {
    let hex: Vec<String> = head.iter().map(|b| format!("{b:02X}")).collect();
    let text: String = head
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect();
    format!("{} ({text:?})", hex.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_bytes_are_shown_in_hex_and_text() {
        assert_eq!(show_bytes(b"<h\x00"), "3C 68 00 (\"<h.\")");
    }
}
