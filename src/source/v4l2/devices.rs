//! Device enumeration: the listing behind `lookout devices`, and the size and rate texts that
//! negotiation errors quote.

use v4l::format::FourCC;
use v4l::frameinterval::FrameIntervalEnum;
use v4l::framesize::FrameSizeEnum;
use v4l::video::Capture;
use v4l::Device;

use crate::frame::PixelFormat;

pub(super) fn fourcc_str(code: [u8; 4]) -> String {
    String::from_utf8_lossy(&code).trim_end().to_string()
}

pub(super) fn fps_of(num: u32, den: u32) -> Option<f64> {
    (num > 0 && den > 0).then(|| den as f64 / num as f64)
}

pub(super) fn describe_sizes(device: &Device, code: [u8; 4]) -> String {
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

pub(super) fn describe_rates(device: &Device, code: [u8; 4], w: u32, h: u32) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
