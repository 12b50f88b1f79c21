//! V4L2 cameras: format negotiation, mmap streaming with newest-frame semantics, recovery from
//! an unplugged camera, and device listing for `lookout devices`.
//!
//! The `v4l` crate's `MmapStream::next` requeues the previous buffer only when it dequeues the
//! next one, which makes "drain everything ready, keep the newest, give the rest back at once"
//! impossible through its safe API. So this file keeps its own small mmap queue
//! (`MmapQueue`) built on the crate's raw `ioctl`/`mmap` wrappers and the bindgen structs;
//! everything else (open, caps, formats, sizes, rates, parameters) uses the crate's safe API.
//! The "keep newest" rule itself is in [`super::newest`], tested without a device.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use v4l::device::Handle;
use v4l::format::FourCC;
use v4l::frameinterval::FrameIntervalEnum;
use v4l::framesize::FrameSizeEnum;
use v4l::video::Capture;
use v4l::Device;

use super::newest::{pack_rows, take_newest, BufferQueue};
use super::{FrameSource, SourceError, SourceOptions, SourceStats};
use crate::frame::{monotonic_now, Frame, PixelFormat};

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

const V4L2_BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
const V4L2_MEMORY_MMAP: u32 = 1;
const V4L2_BUF_FLAG_ERROR: u32 = 0x0000_0040;
const V4L2_BUF_FLAG_TIMESTAMP_MASK: u32 = 0x0000_e000;
const V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC: u32 = 0x0000_2000;

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

/// A V4L2 camera as a [`FrameSource`].
pub struct V4l2Source {
    path: String,
    opts: SourceOptions,
    negotiated: Negotiated,
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
            state: State::Streaming(Box::new(open)),
            next_seq: 0,
            stats: SourceStats::default(),
        })
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
        if next_try > now {
            std::thread::sleep(next_try - now);
        }
        let mut opts = self.opts.clone();
        opts.width = Some(self.negotiated.width);
        opts.height = Some(self.negotiated.height);
        opts.format = Some(self.negotiated.format);
        match open_device(&self.path, &opts) {
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
            let wait = deadline.saturating_duration_since(Instant::now());
            let newest = match take_newest(&mut open.queue, wait) {
                Ok(Some(n)) => n,
                Ok(None) => {
                    self.stats.timeouts += 1;
                    return Err(SourceError::Timeout {
                        device: self.path.clone(),
                        timeout: self.opts.timeout,
                    });
                }
                Err(e) if is_gone(&e) => return Err(self.lose(e)),
                Err(e) => {
                    return Err(SourceError::Device {
                        device: self.path.clone(),
                        op: "VIDIOC_DQBUF",
                        source: e,
                    })
                }
            };
            self.stats.dropped_stale += newest.dropped;
            let meta = open.queue.meta[newest.index];
            let n = self.negotiated;
            let mut data = Vec::new();
            let ok = meta.flags & V4L2_BUF_FLAG_ERROR == 0
                && meta.bytesused > 0
                && pack_rows(
                    open.queue.bytes(newest.index, meta.bytesused as usize),
                    n.format,
                    n.width,
                    n.height,
                    n.stride as usize,
                    &mut data,
                )
                .is_some();
            if let Err(e) = open.queue.requeue(newest.index) {
                if is_gone(&e) {
                    return Err(self.lose(e));
                }
                return Err(SourceError::Device {
                    device: self.path.clone(),
                    op: "VIDIOC_QBUF",
                    source: e,
                });
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
                    self.stats.timeouts += 1;
                    return Err(SourceError::Timeout {
                        device: self.path.clone(),
                        timeout: self.opts.timeout,
                    });
                }
                continue;
            }
            // Buffer timestamps are CLOCK_MONOTONIC unless the driver says otherwise.
            let monotonic =
                meta.flags & V4L2_BUF_FLAG_TIMESTAMP_MASK == V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC;
            // A timestamp from the future (vivid stamps the frame's ideal time, which runs ahead
            // of a slow machine) would make frame ages 0: such frames count from now.
            let now = monotonic_now();
            let captured_at = if meta.timestamp.is_zero() || !monotonic {
                now
            } else {
                meta.timestamp.min(now)
            };
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

    fn describe(&self) -> String {
        let n = self.negotiated;
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

/// ENODEV, ENXIO or EIO: the device is gone (unplugged, driver unloaded).
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

fn fourcc_str(code: [u8; 4]) -> String {
    String::from_utf8_lossy(&code).trim_end().to_string()
}

fn fps_of(num: u32, den: u32) -> Option<f64> {
    (num > 0 && den > 0).then(|| den as f64 / num as f64)
}

/// Opens the device, negotiates, allocates and queues buffers, starts streaming.
fn open_device(path: &str, opts: &SourceOptions) -> Result<(Open, Negotiated), SourceError> {
    let device = Device::with_path(path).map_err(|source| SourceError::NoDevice {
        device: path.to_string(),
        source,
    })?;
    let caps = device
        .query_caps()
        .map_err(dev_err(path, "VIDIOC_QUERYCAP"))?;
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
    let offered: Vec<[u8; 4]> = device
        .enum_formats()
        .map_err(dev_err(path, "VIDIOC_ENUM_FMT"))?
        .iter()
        .map(|d| d.fourcc.repr)
        .collect();
    let list = |codes: &[[u8; 4]]| {
        codes
            .iter()
            .map(|c| fourcc_str(*c))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let format = match opts.format {
        Some(f) if offered.contains(&f.fourcc()) => f,
        Some(f) => {
            return Err(SourceError::Negotiate {
                device: path.to_string(),
                message: format!("format {f} not offered; the device offers {}", list(&offered)),
            })
        }
        None => PREFERRED
            .into_iter()
            .find(|f| offered.contains(&f.fourcc()))
            .ok_or_else(|| SourceError::Negotiate {
                device: path.to_string(),
                message: format!(
                    "none of the formats lookout reads from a camera ({}) is offered; the device offers {}",
                    PREFERRED.map(|f| f.to_string()).join(", "),
                    list(&offered)
                ),
            })?,
    };
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
                list(&offered)
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
                describe_sizes(&device, format.fourcc())
            ),
        });
    }
    let mut fps = device
        .params()
        .ok()
        .and_then(|p| fps_of(p.interval.numerator, p.interval.denominator));
    if let Some(want) = opts.fps {
        let set = device
            .set_params(&v4l::video::capture::Parameters::with_fps(want))
            .map_err(dev_err(path, "VIDIOC_S_PARM"))?;
        fps = fps_of(set.interval.numerator, set.interval.denominator);
        let ok = fps.is_some_and(|f| (f - want as f64).abs() <= want as f64 * 0.05);
        if !ok {
            return Err(SourceError::Negotiate {
                device: path.to_string(),
                message: format!(
                    "{want} fps not available at {format} {}x{} (driver set {}); rates: {}",
                    got.width,
                    got.height,
                    fps.map_or("none".to_string(), |f| format!("{f:.2} fps")),
                    describe_rates(&device, format.fourcc(), got.width, got.height)
                ),
            });
        }
    }
    let packed_row = match format.frame_len(got.width, 1) {
        Some(_) if matches!(format, PixelFormat::Nv12 | PixelFormat::Yu12) => got.width,
        Some(_) if format == PixelFormat::Yuv422p => got.width,
        Some(n) => n as u32,
        None => 0,
    };
    let negotiated = Negotiated {
        format,
        width: got.width,
        height: got.height,
        stride: got.stride.max(packed_row),
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

fn describe_sizes(device: &Device, code: [u8; 4]) -> String {
    let sizes = device
        .enum_framesizes(FourCC::new(&code))
        .unwrap_or_default();
    if sizes.is_empty() {
        return "none reported".to_string();
    }
    sizes
        .iter()
        .map(|s| match &s.size {
            FrameSizeEnum::Discrete(d) => format!("{}x{}", d.width, d.height),
            FrameSizeEnum::Stepwise(s) => format!(
                "{}x{}..{}x{} step {}x{}",
                s.min_width, s.min_height, s.max_width, s.max_height, s.step_width, s.step_height
            ),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_rates(device: &Device, code: [u8; 4], w: u32, h: u32) -> String {
    let rates = rates_of(device, code, w, h);
    if rates.is_empty() {
        return "none reported".to_string();
    }
    rates
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A frame-rate entry of a device listing.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RateInfo {
    /// One fixed rate.
    Discrete {
        /// Frames per second.
        fps: f64,
    },
    /// Any rate in a range.
    Stepwise {
        /// Lowest rate, frames per second.
        min_fps: f64,
        /// Highest rate, frames per second.
        max_fps: f64,
    },
}

impl std::fmt::Display for RateInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RateInfo::Discrete { fps } => write!(f, "{fps:.3}"),
            RateInfo::Stepwise { min_fps, max_fps } => write!(f, "{min_fps:.3}-{max_fps:.3}"),
        }
    }
}

fn rates_of(device: &Device, code: [u8; 4], w: u32, h: u32) -> Vec<RateInfo> {
    let ivals = device
        .enum_frameintervals(FourCC::new(&code), w, h)
        .unwrap_or_default();
    ivals
        .iter()
        .filter_map(|i| match &i.interval {
            FrameIntervalEnum::Discrete(f) => {
                fps_of(f.numerator, f.denominator).map(|fps| RateInfo::Discrete { fps })
            }
            // The slowest interval is `max`, the fastest `min`.
            FrameIntervalEnum::Stepwise(s) => Some(RateInfo::Stepwise {
                min_fps: fps_of(s.max.numerator, s.max.denominator).unwrap_or(0.0),
                max_fps: fps_of(s.min.numerator, s.min.denominator).unwrap_or(0.0),
            }),
        })
        .collect()
}

/// A frame-size entry of a device listing.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SizeInfo {
    /// One fixed size, with its rates.
    Discrete {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// Frame rates at this size.
        rates: Vec<RateInfo>,
    },
    /// A range of sizes; `rates` are those at the largest size.
    Stepwise {
        /// Smallest width.
        min_width: u32,
        /// Largest width.
        max_width: u32,
        /// Width step.
        step_width: u32,
        /// Smallest height.
        min_height: u32,
        /// Largest height.
        max_height: u32,
        /// Height step.
        step_height: u32,
        /// Frame rates at the largest size.
        rates: Vec<RateInfo>,
    },
}

/// One pixel format of a device listing.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FormatInfo {
    /// FourCC, e.g. `YUYV`.
    pub fourcc: String,
    /// The driver's description.
    pub description: String,
    /// Whether lookout can read this format.
    pub supported: bool,
    /// Sizes with their frame rates.
    pub sizes: Vec<SizeInfo>,
}

/// One V4L2 capture device.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeviceInfo {
    /// Device node, e.g. `/dev/video0`.
    pub path: String,
    /// Driver name, e.g. `uvcvideo`.
    pub driver: String,
    /// Card (camera) name.
    pub card: String,
    /// Bus, e.g. `usb-0000:01:00.0-1.2`.
    pub bus: String,
    /// Formats with sizes and rates.
    pub formats: Vec<FormatInfo>,
}

/// Every `/dev/video*` node that is a streaming video capture device, sorted by path.
/// Nodes that cannot be opened or are not capture devices (metadata nodes, encoders) are
/// skipped.
pub fn list_devices() -> Vec<DeviceInfo> {
    let mut paths: Vec<String> = std::fs::read_dir("/dev")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| n.starts_with("video"))
                .map(|n| format!("/dev/{n}"))
                .collect()
        })
        .unwrap_or_default();
    // video2 before video10
    paths.sort_by_key(|p| {
        let digits: String = p.chars().filter(|c| c.is_ascii_digit()).collect();
        (digits.parse::<u64>().unwrap_or(u64::MAX), p.clone())
    });
    paths.iter().filter_map(|p| describe_device(p)).collect()
}

fn describe_device(path: &str) -> Option<DeviceInfo> {
    let device = Device::with_path(path).ok()?;
    let caps = device.query_caps().ok()?;
    if !caps
        .capabilities
        .contains(v4l::capability::Flags::VIDEO_CAPTURE)
    {
        return None;
    }
    let formats = device
        .enum_formats()
        .unwrap_or_default()
        .into_iter()
        .map(|d| {
            let code = d.fourcc.repr;
            let sizes = device
                .enum_framesizes(d.fourcc)
                .unwrap_or_default()
                .into_iter()
                .map(|s| match s.size {
                    FrameSizeEnum::Discrete(ds) => SizeInfo::Discrete {
                        width: ds.width,
                        height: ds.height,
                        rates: rates_of(&device, code, ds.width, ds.height),
                    },
                    FrameSizeEnum::Stepwise(st) => SizeInfo::Stepwise {
                        min_width: st.min_width,
                        max_width: st.max_width,
                        step_width: st.step_width,
                        min_height: st.min_height,
                        max_height: st.max_height,
                        step_height: st.step_height,
                        rates: rates_of(&device, code, st.max_width, st.max_height),
                    },
                })
                .collect();
            FormatInfo {
                fourcc: fourcc_str(code),
                description: d.description,
                supported: PixelFormat::from_fourcc(code).is_some(),
                sizes,
            }
        })
        .collect();
    Some(DeviceInfo {
        path: path.to_string(),
        driver: caps.driver,
        card: caps.card,
        bus: caps.bus,
        formats,
    })
}

/// What the driver said about a dequeued buffer.
#[derive(Clone, Copy, Debug, Default)]
struct BufMeta {
    bytesused: u32,
    flags: u32,
    sequence: u32,
    timestamp: Duration,
}

/// One mapped driver buffer.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

/// A minimal mmap capture queue: buffers the driver fills, which we dequeue and requeue
/// individually (the `v4l` crate's stream cannot requeue without dequeueing).
struct MmapQueue {
    handle: Arc<Handle>,
    maps: Vec<Mapping>,
    meta: Vec<BufMeta>,
    streaming: bool,
}

// SAFETY: the mappings are private to this queue (nothing else holds their pointers) and the
// queue is used from one thread at a time (`&mut self` for every access), so moving it to
// another thread is sound.
unsafe impl Send for MmapQueue {}

fn zeroed_buffer(index: u32) -> v4l::v4l_sys::v4l2_buffer {
    // SAFETY: v4l2_buffer is a plain C struct (integers, a timeval and a union of integers and
    // pointers) for which all-zero bytes are a valid value, as the kernel API expects.
    let mut b: v4l::v4l_sys::v4l2_buffer = unsafe { std::mem::zeroed() };
    b.index = index;
    b.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    b.memory = V4L2_MEMORY_MMAP;
    b
}

impl MmapQueue {
    /// Requests `count` mmap buffers (the driver may grant a different number) and maps them.
    fn new(handle: Arc<Handle>, count: u32) -> io::Result<MmapQueue> {
        // SAFETY: all-zero is a valid v4l2_requestbuffers (plain integers).
        let mut req: v4l::v4l_sys::v4l2_requestbuffers = unsafe { std::mem::zeroed() };
        req.count = count;
        req.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        req.memory = V4L2_MEMORY_MMAP;
        // SAFETY: VIDIOC_REQBUFS takes a pointer to a v4l2_requestbuffers, which `req` is and
        // which outlives the call.
        unsafe {
            v4l::v4l2::ioctl(
                handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_REQBUFS,
                &mut req as *mut _ as *mut std::os::raw::c_void,
            )?;
        }
        if req.count == 0 {
            return Err(io::Error::other("driver granted no buffers"));
        }
        let mut q = MmapQueue {
            handle,
            maps: Vec::new(),
            meta: vec![BufMeta::default(); req.count as usize],
            streaming: false,
        };
        for index in 0..req.count {
            let mut buf = zeroed_buffer(index);
            // SAFETY: VIDIOC_QUERYBUF takes a pointer to a v4l2_buffer, valid for the call.
            unsafe {
                v4l::v4l2::ioctl(
                    q.handle.fd(),
                    v4l::v4l2::vidioc::VIDIOC_QUERYBUF,
                    &mut buf as *mut _ as *mut std::os::raw::c_void,
                )?;
            }
            let len = buf.length as usize;
            // SAFETY: for MMAP buffers the kernel filled `m.offset` (reading that union member
            // is what the API prescribes); mapping `length` bytes at that offset of the device
            // fd with a null hint is the documented way to access the buffer. The mapping is
            // released in Drop.
            let ptr = unsafe {
                v4l::v4l2::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    q.handle.fd(),
                    buf.m.offset as libc::off_t,
                )?
            };
            q.maps.push(Mapping {
                ptr: ptr as *mut u8,
                len,
            });
        }
        Ok(q)
    }

    fn len(&self) -> usize {
        self.maps.len()
    }

    /// Queues every buffer and starts streaming.
    fn start(&mut self) -> io::Result<()> {
        for i in 0..self.maps.len() {
            self.requeue(i)?;
        }
        let mut typ = V4L2_BUF_TYPE_VIDEO_CAPTURE as std::os::raw::c_int;
        // SAFETY: VIDIOC_STREAMON takes a pointer to the buffer type int.
        unsafe {
            v4l::v4l2::ioctl(
                self.handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_STREAMON,
                &mut typ as *mut _ as *mut std::os::raw::c_void,
            )?;
        }
        self.streaming = true;
        Ok(())
    }

    /// The first `used` bytes of buffer `index` (clamped to its length). Only meaningful
    /// while the buffer is dequeued.
    fn bytes(&self, index: usize, used: usize) -> &[u8] {
        match self.maps.get(index) {
            // SAFETY: `ptr` maps `len` readable bytes for the queue's lifetime; the slice
            // borrows `self`, so it cannot outlive the mapping, and the caller only reads a
            // buffer it has dequeued (the driver does not write to it until it is requeued).
            Some(m) => unsafe { std::slice::from_raw_parts(m.ptr, used.min(m.len)) },
            None => &[],
        }
    }
}

impl BufferQueue for MmapQueue {
    fn dequeue(&mut self, timeout: Duration) -> io::Result<Option<usize>> {
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        if self.handle.poll(libc::POLLIN, ms)? == 0 {
            return Ok(None);
        }
        let mut buf = zeroed_buffer(0);
        // SAFETY: VIDIOC_DQBUF takes a pointer to a v4l2_buffer, valid for the call. The fd is
        // non-blocking (v4l opens with O_NONBLOCK), so this never hangs.
        let r = unsafe {
            v4l::v4l2::ioctl(
                self.handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_DQBUF,
                &mut buf as *mut _ as *mut std::os::raw::c_void,
            )
        };
        match r {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Ok(None),
            Err(e) => return Err(e),
        }
        let index = buf.index as usize;
        if index >= self.meta.len() {
            return Err(io::Error::other(format!(
                "driver returned buffer index {index}, only {} exist",
                self.meta.len()
            )));
        }
        self.meta[index] = BufMeta {
            bytesused: buf.bytesused,
            flags: buf.flags,
            sequence: buf.sequence,
            timestamp: Duration::from_secs(buf.timestamp.tv_sec.max(0) as u64)
                + Duration::from_micros(buf.timestamp.tv_usec.max(0) as u64),
        };
        Ok(Some(index))
    }

    fn requeue(&mut self, index: usize) -> io::Result<()> {
        let mut buf = zeroed_buffer(index as u32);
        // SAFETY: VIDIOC_QBUF takes a pointer to a v4l2_buffer, valid for the call.
        unsafe {
            v4l::v4l2::ioctl(
                self.handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_QBUF,
                &mut buf as *mut _ as *mut std::os::raw::c_void,
            )
        }
    }
}

impl Drop for MmapQueue {
    fn drop(&mut self) {
        // Errors are ignored: after an unplug every call fails with ENODEV and there is
        // nothing left to clean up in the driver.
        if self.streaming {
            let mut typ = V4L2_BUF_TYPE_VIDEO_CAPTURE as std::os::raw::c_int;
            // SAFETY: VIDIOC_STREAMOFF takes a pointer to the buffer type int.
            let _ = unsafe {
                v4l::v4l2::ioctl(
                    self.handle.fd(),
                    v4l::v4l2::vidioc::VIDIOC_STREAMOFF,
                    &mut typ as *mut _ as *mut std::os::raw::c_void,
                )
            };
        }
        for m in self.maps.drain(..) {
            // SAFETY: `ptr`/`len` are exactly a mapping made in `new`, unmapped once here;
            // no slice into it survives (they borrow `self`).
            let _ = unsafe { v4l::v4l2::munmap(m.ptr as *mut std::os::raw::c_void, m.len) };
        }
        // SAFETY: all-zero is a valid v4l2_requestbuffers; count 0 frees the buffers.
        let mut req: v4l::v4l_sys::v4l2_requestbuffers = unsafe { std::mem::zeroed() };
        req.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        req.memory = V4L2_MEMORY_MMAP;
        // SAFETY: VIDIOC_REQBUFS takes a pointer to a v4l2_requestbuffers, valid for the call.
        let _ = unsafe {
            v4l::v4l2::ioctl(
                self.handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_REQBUFS,
                &mut req as *mut _ as *mut std::os::raw::c_void,
            )
        };
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
    fn fractions_become_rates() {
        assert_eq!(fps_of(1, 30), Some(30.0));
        assert_eq!(fps_of(0, 30), None);
        assert_eq!(
            RateInfo::Stepwise {
                min_fps: 1.0,
                max_fps: 60.0
            }
            .to_string(),
            "1.000-60.000"
        );
    }
}
