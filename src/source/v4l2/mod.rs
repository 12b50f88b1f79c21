//! V4L2 cameras: format negotiation, mmap streaming with newest-frame semantics, recovery from
//! an unplugged camera, and device listing for `lookout devices`.
//!
//! The `v4l` crate's `MmapStream::next` requeues the previous buffer only when it dequeues the
//! next one, which makes "drain everything ready, keep the newest, give the rest back at once"
//! impossible through its safe API. So this module keeps its own small mmap queue
//! (`MmapQueue`, in `mmap.rs`, the only file here with `unsafe`) built on the crate's raw
//! `ioctl`/`mmap` wrappers and the bindgen structs; everything else (open, caps, formats,
//! sizes, rates, parameters) uses the crate's safe API: `streaming.rs` (negotiation, the
//! source, reconnecting) and `devices.rs` (enumeration for `lookout devices` and error texts).
//! The "keep newest" rule itself is in [`super::newest`], tested without a device.

mod devices;
mod mmap;
mod streaming;

pub use devices::{list_devices, DeviceInfo, FormatInfo, RateInfo, SizeInfo};
pub use streaming::{Negotiated, V4l2Source};

const V4L2_BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
const V4L2_MEMORY_MMAP: u32 = 1;
const V4L2_BUF_FLAG_ERROR: u32 = 0x0000_0040;
const V4L2_BUF_FLAG_TIMESTAMP_MASK: u32 = 0x0000_e000;
const V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC: u32 = 0x0000_2000;
