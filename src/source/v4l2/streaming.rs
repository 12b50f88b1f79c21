//! Streaming from a camera: format negotiation, the [`V4l2Source`] with newest-frame
//! semantics over the mmap queue, and recovery from an unplugged camera.

use std::io;
use std::time::{Duration, Instant};

use v4l::format::FourCC;
use v4l::video::Capture;
use v4l::Device;

use super::devices::{describe_rates, describe_sizes, fourcc_str, fps_of};
use super::mmap::{BufMeta, MmapQueue};
use super::{V4L2_BUF_FLAG_ERROR, V4L2_BUF_FLAG_TIMESTAMP_MASK, V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC};
use crate::frame::{monotonic_now, Frame, PixelFormat};
use crate::source::interface::{FrameSource, SourceError, SourceOptions, SourceStats};
use crate::source::newest::{pack_rows, take_newest, BufferQueue};

/// Formats tried, in order, when the caller asks for none: raw 4:2:2/4:2:0 first (cheap to
/// preprocess), MJPEG before the rarer ones.
const PREFERRED: [PixelFormat; 7] = [
    PixelFormat::Yuyv,
    PixelFormat::Nv12,
    PixelFormat::Yu12,
    PixelFormat::Uyvy,
    PixelFormat::Mjpeg,
    PixelFormat::Grey,
    PixelFormat::Rgb24,
];

/// First and last back-off between attempts to reopen a lost camera.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The mode a camera was opened in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Negotiated {
    /// Pixel format.
    pub format: PixelFormat,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Bytes per row in the driver's buffers (≥ the packed row).
    pub stride: u32,
    /// Frame rate the driver reports, if it reports one.
    pub fps: Option<f64>,
}

/// The longest a wait for a frame polls before it looks at the run's interrupt.
const POLL_SLICE: Duration = Duration::from_millis(250);

/// A V4L2 camera as a [`FrameSource`].
pub struct V4l2Source {
    path: String,
    opts: SourceOptions,
    negotiated: Negotiated,
    /// The device has been opened once (`negotiated` is its mode, kept on reopening); false
    /// while waiting for a camera that was missing at start.
    opened: bool,
    state: State,
    next_seq: u64,
    stats: SourceStats,
}

enum State {
    Streaming(Box<Open>),
    Lost {
        attempts: u32,
        next_try: Instant,
        backoff: Duration,
    },
}

/// An open, streaming device. Field order matters: the queue unmaps before the device closes.
struct Open {
    queue: MmapQueue,
    _device: Device,
}

impl V4l2Source {
    /// Opens `path`, negotiates the mode `opts` asks for and starts streaming.
    ///
    /// # Errors
    /// [`SourceError::NoDevice`], [`SourceError::NotCapture`], [`SourceError::Negotiate`]
    /// (listing what the device offers), or [`SourceError::Device`] for a failed ioctl.
    pub fn open(path: &str, opts: &SourceOptions) -> Result<V4l2Source, SourceError> {
        let (open, negotiated) = open_device(path, opts)?;
        log::info!(
            "opened {path}: {} {}x{} stride {} at {} fps, {} buffers",
            negotiated.format,
            negotiated.width,
            negotiated.height,
            negotiated.stride,
            negotiated
                .fps
                .map_or("?".to_string(), |f| format!("{f:.2}")),
            open.queue.len()
        );
        Ok(V4l2Source {
            path: path.to_string(),
            opts: opts.clone(),
            negotiated,
            opened: true,
            state: State::Streaming(Box::new(open)),
            next_seq: 0,
            stats: SourceStats::default(),
        })
    }

    /// As [`V4l2Source::open`], but a camera that is not there yet (no device node, or a
    /// node without its driver: a USB camera that enumerates after the daemon started) is not
    /// an error: the source waits for it, trying again with back-off (0.5 s doubling to 5 s)
    /// on each [`FrameSource::next`], which returns [`SourceError::WaitingForDevice`]
    /// meanwhile. Only names a camera can appear under ([`crate::source::interface::is_camera_name`])
    /// are waited for.
    ///
    /// # Errors
    /// As [`V4l2Source::open`] for a device that is present but unusable.
    pub fn open_or_wait(path: &str, opts: &SourceOptions) -> Result<V4l2Source, SourceError> {
        match V4l2Source::open(path, opts) {
            Err(SourceError::NoDevice { source, .. })
                if crate::source::interface::is_camera_name(path) && is_absent(&source) =>
            {
                log::warn!(
                    LOOKOUT_EVENT = "camera_waiting";
                    "{path}: no camera there yet ({source}); waiting for it to appear, trying again with back-off up to {}s",
                    BACKOFF_MAX.as_secs()
                );
                Ok(V4l2Source {
                    path: path.to_string(),
                    opts: opts.clone(),
                    negotiated: Negotiated {
                        format: opts.format.unwrap_or(PREFERRED[0]),
                        width: opts.width.unwrap_or(0),
                        height: opts.height.unwrap_or(0),
                        stride: 0,
                        fps: opts.fps.map(f64::from),
                    },
                    opened: false,
                    state: State::Lost {
                        attempts: 0,
                        next_try: Instant::now() + BACKOFF_MIN,
                        backoff: BACKOFF_MIN,
                    },
                    next_seq: 0,
                    stats: SourceStats::default(),
                })
            }
            other => other,
        }
    }

    /// The negotiated mode.
    pub fn negotiated(&self) -> Negotiated {
        self.negotiated
    }

    fn lose(&mut self, source: io::Error) -> SourceError {
        log::warn!(
            "{}: camera lost ({source}); reopening with back-off",
            self.path
        );
        // Dropping the open device unmaps its buffers and closes the descriptor.
        self.state = State::Lost {
            attempts: 0,
            next_try: Instant::now() + BACKOFF_MIN,
            backoff: BACKOFF_MIN,
        };
        SourceError::Disconnected {
            device: self.path.clone(),
            source,
        }
    }

    /// One reopen attempt (after sleeping until it is due). Keeps the first negotiated mode.
    fn try_reopen(&mut self) -> Result<(), SourceError> {
        let State::Lost {
            attempts,
            next_try,
            backoff,
        } = self.state
        else {
            return Ok(());
        };
        let now = Instant::now();
        if next_try > now && self.opts.interrupt.sleep_until(next_try) {
            // The run is ending: no attempt now (the next run's first `next` makes it).
            return Err(self.timed_out());
        }
        let mut opts = self.opts.clone();
        if self.opened {
            opts.width = Some(self.negotiated.width);
            opts.height = Some(self.negotiated.height);
            opts.format = Some(self.negotiated.format);
        }
        match open_device(&self.path, &opts) {
            Ok((open, negotiated)) if !self.opened => {
                self.negotiated = negotiated;
                self.opened = true;
                log::warn!(
                    LOOKOUT_EVENT = "camera_appeared";
                    "{}: the camera appeared after {} attempts: {}",
                    self.path,
                    attempts + 1,
                    self.describe()
                );
                self.state = State::Streaming(Box::new(open));
                Ok(())
            }
            Ok((open, negotiated)) => {
                self.negotiated = negotiated;
                self.state = State::Streaming(Box::new(open));
                self.stats.reopens += 1;
                log::warn!("{}: camera back after {} attempts", self.path, attempts + 1);
                Ok(())
            }
            Err(e) => {
                let attempts = attempts + 1;
                let backoff_next = (backoff * 2).min(BACKOFF_MAX);
                self.state = State::Lost {
                    attempts,
                    next_try: Instant::now() + backoff,
                    backoff: backoff_next,
                };
                log::debug!("{}: reopen attempt {attempts} failed: {e}", self.path);
                if !self.opened {
                    return Err(SourceError::WaitingForDevice {
                        device: self.path.clone(),
                        attempts,
                        reason: e.to_string(),
                        retry_in: backoff,
                    });
                }
                Err(SourceError::Reconnecting {
                    device: self.path.clone(),
                    attempts,
                    reason: e.to_string(),
                    retry_in: backoff,
                })
            }
        }
    }
}

impl V4l2Source {
    /// No frame within the timeout (counted).
    fn timed_out(&mut self) -> SourceError {
        self.stats.timeouts += 1;
        SourceError::Timeout {
            device: self.path.clone(),
            timeout: self.opts.timeout,
        }
    }

    /// An ioctl failed: the camera is lost (reopened with back-off) when the device is gone,
    /// else the error names the operation.
    fn device_error(&mut self, op: &'static str, e: io::Error) -> SourceError {
        if is_gone(&e) {
            return self.lose(e);
        }
        SourceError::Device {
            device: self.path.clone(),
            op,
            source: e,
        }
    }
}

impl FrameSource for V4l2Source {
    fn next(&mut self) -> Result<Option<Frame>, SourceError> {
        if matches!(self.state, State::Lost { .. }) {
            self.try_reopen()?;
        }
        let deadline = Instant::now() + self.opts.timeout;
        loop {
            let State::Streaming(open) = &mut self.state else {
                return Ok(None);
            };
            // Polled in slices, so a run that ends is not held up by a silent camera.
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .min(POLL_SLICE);
            let newest = match take_newest(&mut open.queue, wait) {
                Ok(Some(n)) => n,
                Ok(None) if Instant::now() < deadline && !self.opts.interrupt.is_raised() => {
                    continue
                }
                Ok(None) => return Err(self.timed_out()),
                Err(e) => return Err(self.device_error("VIDIOC_DQBUF", e)),
            };
            self.stats.dropped_stale += newest.dropped;
            let meta = open.queue.meta[newest.index];
            let n = self.negotiated;
            let mut data = Vec::new();
            let ok = unpack_buffer(
                open.queue.bytes(newest.index, meta.bytesused as usize),
                meta.flags,
                &n,
                &mut data,
            );
            if let Err(e) = open.queue.requeue(newest.index) {
                return Err(self.device_error("VIDIOC_QBUF", e));
            }
            if !ok {
                self.stats.corrupt += 1;
                self.next_seq += newest.dropped + 1;
                log::debug!(
                    "{}: skipped damaged buffer (driver seq {}, {} bytes, flags {:#x})",
                    self.path,
                    meta.sequence,
                    meta.bytesused,
                    meta.flags
                );
                if Instant::now() >= deadline {
                    return Err(self.timed_out());
                }
                continue;
            }
            let captured_at = capture_time(&meta);
            // Sequence numbers count every frame dequeued, so gaps show the dropped ones.
            let seq = self.next_seq + newest.dropped;
            self.next_seq = seq + 1;
            self.stats.delivered += 1;
            return Ok(Some(Frame {
                seq,
                captured_at,
                width: n.width,
                height: n.height,
                format: n.format,
                data,
            }));
        }
    }

    fn stats(&self) -> SourceStats {
        self.stats
    }

    fn fps(&self) -> Option<f64> {
        self.negotiated.fps
    }

    fn interrupt(&self) -> Option<crate::interrupt::Interrupt> {
        Some(self.opts.interrupt.clone())
    }

    fn describe(&self) -> String {
        let n = self.negotiated;
        if !self.opened {
            return format!("V4L2 {} (waiting for the camera to appear)", self.path);
        }
        format!(
            "V4L2 {} {} {}x{}{}",
            self.path,
            n.format,
            n.width,
            n.height,
            n.fps.map_or(String::new(), |f| format!(" @ {f:.2} fps"))
        )
    }
}

/// When a buffer was captured on the monotonic clock: its timestamp when the driver stamps
/// CLOCK_MONOTONIC (the V4L2 default), else now. A timestamp from the future (vivid stamps the
/// frame's ideal time, which runs ahead of a slow machine) would make frame ages 0: such
/// frames count from now.
fn capture_time(meta: &BufMeta) -> Duration {
    let monotonic = meta.flags & V4L2_BUF_FLAG_TIMESTAMP_MASK == V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC;
    let now = monotonic_now();
    if meta.timestamp.is_zero() || !monotonic {
        now
    } else {
        meta.timestamp.min(now)
    }
}

/// ENODEV, ENXIO or EIO: the device is gone (unplugged, driver unloaded).
/// An open error that means "no camera there (yet)": no device node, or a node whose driver
/// is not bound.
fn is_absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || is_gone(e)
}

fn is_gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENODEV) | Some(libc::ENXIO) | Some(libc::EIO)
    )
}

fn dev_err<'a>(path: &'a str, op: &'static str) -> impl FnOnce(io::Error) -> SourceError + 'a {
    move |source| SourceError::Device {
        device: path.to_string(),
        op,
        source,
    }
}

/// Opens the device, negotiates, allocates and queues buffers, starts streaming.
fn open_device(path: &str, opts: &SourceOptions) -> Result<(Open, Negotiated), SourceError> {
    let device = open_capture_device(path)?;
    let offered: Vec<[u8; 4]> = device
        .enum_formats()
        .map_err(dev_err(path, "VIDIOC_ENUM_FMT"))?
        .iter()
        .map(|d| d.fourcc.repr)
        .collect();
    let format = choose_format(path, opts.format, &offered)?;
    let got = set_format(path, &device, format, &offered, opts)?;
    let fps = set_rate(path, &device, format, &got, opts.fps)?;
    let negotiated = Negotiated {
        format,
        width: got.width,
        height: got.height,
        stride: got.stride.max(packed_row(format, got.width)),
        fps,
    };
    let mut queue = MmapQueue::new(device.handle(), opts.buffers.clamp(2, 32))
        .map_err(dev_err(path, "VIDIOC_REQBUFS/mmap"))?;
    queue.start().map_err(dev_err(path, "VIDIOC_STREAMON"))?;
    Ok((
        Open {
            queue,
            _device: device,
        },
        negotiated,
    ))
}

/// Opens `path` and checks that it is a streaming capture device.
fn open_capture_device(path: &str) -> Result<Device, SourceError> {
    let device = Device::with_path(path).map_err(|source| SourceError::NoDevice {
        device: path.to_string(),
        source,
    })?;
    let caps = device.query_caps().map_err(|e| match e.raw_os_error() {
        // Not a V4L2 device at all (/dev/null, a disk, a serial port): it never will be one.
        Some(libc::ENOTTY) | Some(libc::EINVAL) => SourceError::NotCapture {
            device: path.to_string(),
            driver: "none: not a V4L2 device".to_string(),
            card: String::new(),
        },
        _ => dev_err(path, "VIDIOC_QUERYCAP")(e),
    })?;
    let flags = caps.capabilities;
    if !flags.contains(v4l::capability::Flags::VIDEO_CAPTURE)
        || !flags.contains(v4l::capability::Flags::STREAMING)
    {
        return Err(SourceError::NotCapture {
            device: path.to_string(),
            driver: caps.driver,
            card: caps.card,
        });
    }
    Ok(device)
}

/// FourCCs as `A, B, C` for error texts.
fn fourcc_list(codes: &[[u8; 4]]) -> String {
    codes
        .iter()
        .map(|c| fourcc_str(*c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The format asked for if the device offers it, else (none asked for) the first of
/// [`PREFERRED`] it offers.
fn choose_format(
    path: &str,
    wanted: Option<PixelFormat>,
    offered: &[[u8; 4]],
) -> Result<PixelFormat, SourceError> {
    match wanted {
        Some(f) if offered.contains(&f.fourcc()) => Ok(f),
        Some(f) => Err(SourceError::Negotiate {
            device: path.to_string(),
            message: format!(
                "format {f} not offered; the device offers {}",
                fourcc_list(offered)
            ),
        }),
        None => PREFERRED
            .into_iter()
            .find(|f| offered.contains(&f.fourcc()))
            .ok_or_else(|| SourceError::Negotiate {
                device: path.to_string(),
                message: format!(
                    "none of the formats lookout reads from a camera ({}) is offered; the device offers {}",
                    PREFERRED.map(|f| f.to_string()).join(", "),
                    fourcc_list(offered)
                ),
            }),
    }
}

/// Sets `format` at the size asked for (or the device's current size); the driver must keep
/// the format, and the size when one was asked for.
fn set_format(
    path: &str,
    device: &Device,
    format: PixelFormat,
    offered: &[[u8; 4]],
    opts: &SourceOptions,
) -> Result<v4l::Format, SourceError> {
    let current = device.format().map_err(dev_err(path, "VIDIOC_G_FMT"))?;
    let want_w = opts.width.unwrap_or(current.width);
    let want_h = opts.height.unwrap_or(current.height);
    let req = v4l::Format::new(want_w, want_h, FourCC::new(&format.fourcc()));
    let got = device
        .set_format(&req)
        .map_err(dev_err(path, "VIDIOC_S_FMT"))?;
    if got.fourcc.repr != format.fourcc() {
        return Err(SourceError::Negotiate {
            device: path.to_string(),
            message: format!(
                "asked for {format}, the driver switched to {}; the device offers {}",
                fourcc_str(got.fourcc.repr),
                fourcc_list(offered)
            ),
        });
    }
    if (opts.width.is_some() || opts.height.is_some())
        && (got.width != want_w || got.height != want_h)
    {
        return Err(SourceError::Negotiate {
            device: path.to_string(),
            message: format!(
                "size {want_w}x{want_h} not available in {format} (driver offered {}x{}); sizes: {}",
                got.width,
                got.height,
                describe_sizes(device, format.fourcc())
            ),
        });
    }
    Ok(got)
}

/// Sets the frame rate asked for (within 5 %), and returns the rate in effect.
fn set_rate(
    path: &str,
    device: &Device,
    format: PixelFormat,
    got: &v4l::Format,
    wanted: Option<u32>,
) -> Result<Option<f64>, SourceError> {
    let current = device
        .params()
        .ok()
        .and_then(|p| fps_of(p.interval.numerator, p.interval.denominator));
    let Some(want) = wanted else {
        return Ok(current);
    };
    let set = device
        .set_params(&v4l::video::capture::Parameters::with_fps(want))
        .map_err(dev_err(path, "VIDIOC_S_PARM"))?;
    let fps = fps_of(set.interval.numerator, set.interval.denominator);
    let ok = fps.is_some_and(|f| (f - want as f64).abs() <= want as f64 * 0.05);
    if !ok {
        return Err(SourceError::Negotiate {
            device: path.to_string(),
            message: format!(
                "{want} fps not available at {format} {}x{} (driver set {}); rates: {}",
                got.width,
                got.height,
                fps.map_or("none".to_string(), |f| format!("{f:.2} fps")),
                describe_rates(device, format.fourcc(), got.width, got.height)
            ),
        });
    }
    Ok(fps)
}

/// A dequeued buffer's bytes (its `bytesused` prefix) as a frame's packed data in `data`, or
/// `false` for a damaged buffer, which the caller skips and counts: the driver flagged an
/// error, the buffer is empty or shorter than the negotiated frame, or (MJPEG) it does not
/// hold one whole JPEG — a torn transfer.
fn unpack_buffer(bytes: &[u8], flags: u32, n: &Negotiated, data: &mut Vec<u8>) -> bool {
    if flags & V4L2_BUF_FLAG_ERROR != 0 || bytes.is_empty() {
        return false;
    }
    if n.format == PixelFormat::Mjpeg && !crate::source::replay::is_complete_jpeg(bytes) {
        return false;
    }
    pack_rows(bytes, n.format, n.width, n.height, n.stride as usize, data).is_some()
}

/// The bytes of one row of the first plane without padding (0 for compressed formats): the
/// least stride a driver may report.
fn packed_row(format: PixelFormat, width: u32) -> u32 {
    match format.frame_len(width, 1) {
        Some(_) if matches!(format, PixelFormat::Nv12 | PixelFormat::Yu12) => width,
        Some(_) if format == PixelFormat::Yuv422p => width,
        Some(n) => n as u32,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_device_names_it() {
        let e = V4l2Source::open("/dev/video-lookout-missing", &SourceOptions::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("/dev/video-lookout-missing"), "{e}");
        assert!(e.contains("lookout devices"), "{e}");
    }

    #[test]
    fn a_camera_missing_at_start_is_waited_for_with_back_off() {
        let path = "/dev/video-lookout-not-yet";
        let mut src = match V4l2Source::open_or_wait(path, &SourceOptions::default()) {
            Ok(s) => s,
            Err(e) => panic!("a missing camera is waited for, not an error: {e}"),
        };
        assert!(
            src.describe().contains("waiting for the camera"),
            "{}",
            src.describe()
        );
        let t0 = Instant::now();
        let mut retry = Vec::new();
        for expected in 1..=3 {
            match src.next() {
                Err(e @ SourceError::WaitingForDevice { .. }) => {
                    assert!(e.is_transient());
                    let SourceError::WaitingForDevice {
                        attempts, retry_in, ..
                    } = e
                    else {
                        unreachable!()
                    };
                    assert_eq!(attempts, expected);
                    retry.push(retry_in);
                }
                other => panic!("attempt {expected}: {other:?}"),
            }
        }
        // 0.5 s before the first attempt, then 0.5 s and 1 s: the back-off doubles.
        assert_eq!(retry, [BACKOFF_MIN, BACKOFF_MIN * 2, BACKOFF_MIN * 4]);
        assert!(t0.elapsed() >= BACKOFF_MIN * 2, "{:?}", t0.elapsed());
        assert_eq!(src.stats(), SourceStats::default());
    }

    #[test]
    fn only_camera_names_are_waited_for() {
        // A missing path that can never become a camera stays an error.
        let e = V4l2Source::open_or_wait("/dev/lookout-not-a-camera", &SourceOptions::default());
        assert!(matches!(e, Err(SourceError::NoDevice { .. })));
    }

    fn mode(format: PixelFormat, width: u32, height: u32, stride: u32) -> Negotiated {
        Negotiated {
            format,
            width,
            height,
            stride,
            fps: None,
        }
    }

    #[test]
    fn damaged_buffers_are_refused_and_whole_ones_unpacked() {
        let mut data = Vec::new();
        let yuyv = mode(PixelFormat::Yuyv, 4, 2, 8);
        let whole = vec![7u8; 16];
        assert!(unpack_buffer(&whole, 0, &yuyv, &mut data));
        assert_eq!(data, whole);
        // A short `bytesused`, an empty buffer, the driver's error flag.
        assert!(!unpack_buffer(&whole[..15], 0, &yuyv, &mut data));
        assert!(!unpack_buffer(&[], 0, &yuyv, &mut data));
        assert!(!unpack_buffer(
            &whole,
            V4L2_BUF_FLAG_ERROR,
            &yuyv,
            &mut data
        ));
        // MJPEG: a whole JPEG (padding after EOI allowed) passes, a torn one does not.
        let mjpeg = mode(PixelFormat::Mjpeg, 640, 480, 0);
        let mut jpeg = vec![
            0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x04, 1, 2, 0xFF, 0xDA, 0x00, 0x03,
        ];
        jpeg.extend([9, 0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD9, 0, 0]);
        assert!(unpack_buffer(&jpeg, 0, &mjpeg, &mut data));
        assert!(!unpack_buffer(
            &jpeg[..jpeg.len() - 4],
            0,
            &mjpeg,
            &mut data
        ));
    }
}
