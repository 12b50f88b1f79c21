//! `lookout capture`: what does a source actually deliver. Argument struct for clap plus the
//! functions `main` calls.
//!
//! `capture` is the first thing to run on a new camera: it negotiates like the daemon does,
//! reads N frames and reports what came back (mode, drops, corrupt frames, sequence numbers,
//! timestamps, mean interval), as text or JSON.

use std::time::Duration;

use anyhow::{bail, Context};

use crate::frame::PixelFormat;
use crate::source::{self, FrameSource, SourceOptions, SourceStats};

/// `lookout capture SPEC`: read frames from a source and report what arrived.
#[derive(Debug, Clone, clap::Args)]
pub struct CaptureArgs {
    /// Source: /dev/videoN, FILE.mjpeg, FILE.y4m, DIR/, `exec:COMMAND ARGS…` or `demo`.
    pub spec: String,
    /// Pixel format to ask a camera for: a FourCC (YUYV, UYVY, NV12, YU12, 422P, GREY, RGB3,
    /// MJPG) or an alias (MJPEG, JPEG, I420, YUV420, GRAY, Y8, RGB, RGB24), as in the config.
    #[arg(long, value_parser = format_arg)]
    pub format: Option<String>,
    /// Frame size to ask a camera for, WIDTHxHEIGHT (e.g. 640x480).
    #[arg(long, value_parser = size_arg)]
    pub size: Option<String>,
    /// Frame rate to ask a camera for; for recordings without a rate, the playback rate.
    #[arg(long)]
    pub fps: Option<u32>,
    /// Number of frames to read.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub frames: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Parses a pixel format name: a V4L2 FourCC or an alias (the one parser,
/// [`PixelFormat`]'s `FromStr`, shared with the config file).
///
/// # Errors
/// Names the unknown format and lists the accepted ones.
pub fn parse_format(name: &str) -> anyhow::Result<PixelFormat> {
    Ok(name.parse::<PixelFormat>()?)
}

/// `--format`, checked by clap (a refusal is exit status 64, like any bad argument).
fn format_arg(s: &str) -> Result<String, String> {
    parse_format(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// `--size`, checked by clap.
fn size_arg(s: &str) -> Result<String, String> {
    parse_size(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// Parses `WIDTHxHEIGHT`.
///
/// # Errors
/// Names the bad value and the expected form.
pub fn parse_size(s: &str) -> anyhow::Result<(u32, u32)> {
    let bad = || format!("bad size {s:?}: expected WIDTHxHEIGHT, e.g. 640x480");
    let (w, h) = s.trim().split_once(['x', 'X']).with_context(bad)?;
    let w: u32 = w.parse().ok().filter(|&v| v > 0).with_context(bad)?;
    let h: u32 = h.parse().ok().filter(|&v| v > 0).with_context(bad)?;
    Ok((w, h))
}

/// What `capture` found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CaptureReport {
    /// The source spec.
    pub spec: String,
    /// The source's own description (device and mode, or file).
    pub source: String,
    /// Frames received.
    pub frames: u64,
    /// Pixel format of the first frame.
    pub format: Option<String>,
    /// Width of the first frame.
    pub width: Option<u32>,
    /// Height of the first frame.
    pub height: Option<u32>,
    /// Nominal frame rate of the source.
    pub nominal_fps: Option<f64>,
    /// Source counters at the end.
    pub stats: SourceStats,
    /// Sequence number of the first frame.
    pub first_seq: Option<u64>,
    /// Sequence number of the last frame.
    pub last_seq: Option<u64>,
    /// Capture time of the first frame, seconds on CLOCK_MONOTONIC.
    pub first_captured_at: Option<f64>,
    /// Capture time of the last frame, seconds on CLOCK_MONOTONIC.
    pub last_captured_at: Option<f64>,
    /// Mean interval between capture times, milliseconds.
    pub mean_interval_ms: Option<f64>,
    /// True if sequence numbers strictly increased.
    pub seq_increasing: bool,
    /// True if capture times never went backwards.
    pub timestamps_monotonic: bool,
    /// Sizes of frames that differed from the first frame's size.
    pub size_changes: u64,
    /// Bytes of the last frame.
    pub last_frame_bytes: Option<usize>,
    /// Transient errors met (timeouts, camera lost), as messages.
    pub errors: Vec<String>,
    /// True if the source ended before `frames` were read.
    pub ended_early: bool,
}

/// Opens a source, reads `args.frames` frames and prints a report (JSON with `--json`).
///
/// # Errors
/// A bad spec or option, a source that fails to open, a fatal read error, or more than 5
/// transient errors in a row.
pub fn run_capture(args: &CaptureArgs) -> anyhow::Result<()> {
    let mut opts = SourceOptions::default();
    if let Some(f) = &args.format {
        opts.format = Some(parse_format(f)?);
    }
    if let Some(s) = &args.size {
        let (w, h) = parse_size(s)?;
        opts.width = Some(w);
        opts.height = Some(h);
    }
    opts.fps = args.fps;
    if let Some(fps) = args.fps {
        opts.replay_fps = Some(fps as f64);
    }
    let mut src =
        source::open(&args.spec, &opts).with_context(|| format!("opening source {}", args.spec))?;
    let report = capture(src.as_mut(), &args.spec, args.frames)?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        format_report(&report)
    };
    // A closed pipe (`capture … | head`) ends the output, not the process with a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    if report.frames == 0 {
        bail!("{}: no frames received", args.spec);
    }
    Ok(())
}

/// Reads up to `frames` frames from `src` and summarizes them.
///
/// # Errors
/// A fatal source error, or more than 5 transient errors in a row.
pub fn capture(
    src: &mut dyn FrameSource,
    spec: &str,
    frames: u64,
) -> anyhow::Result<CaptureReport> {
    let mut r = CaptureReport {
        spec: spec.to_string(),
        source: src.describe(),
        frames: 0,
        format: None,
        width: None,
        height: None,
        nominal_fps: src.fps(),
        stats: SourceStats::default(),
        first_seq: None,
        last_seq: None,
        first_captured_at: None,
        last_captured_at: None,
        mean_interval_ms: None,
        seq_increasing: true,
        timestamps_monotonic: true,
        size_changes: 0,
        last_frame_bytes: None,
        errors: Vec::new(),
        ended_early: false,
    };
    let mut in_a_row = 0;
    let mut last_t: Option<Duration> = None;
    let mut first_t: Option<Duration> = None;
    while r.frames < frames {
        let frame = match src.next() {
            Ok(Some(f)) => f,
            Ok(None) => {
                r.ended_early = true;
                break;
            }
            Err(e) if e.is_transient() => {
                in_a_row += 1;
                r.errors.push(e.to_string());
                if in_a_row > 5 {
                    return Err(e).context(format!(
                        "{spec}: giving up after {in_a_row} errors in a row"
                    ));
                }
                continue;
            }
            Err(e) => return Err(e).context(format!("reading {spec}")),
        };
        in_a_row = 0;
        if r.format.is_none() {
            r.format = Some(frame.format.to_string());
            r.width = Some(frame.width);
            r.height = Some(frame.height);
            r.first_seq = Some(frame.seq);
            first_t = Some(frame.captured_at);
        } else if r.width != Some(frame.width) || r.height != Some(frame.height) {
            r.size_changes += 1;
        }
        if let Some(prev) = r.last_seq {
            r.seq_increasing &= frame.seq > prev;
        }
        if let Some(prev) = last_t {
            r.timestamps_monotonic &= frame.captured_at >= prev;
        }
        r.last_seq = Some(frame.seq);
        last_t = Some(frame.captured_at);
        r.last_frame_bytes = Some(frame.data.len());
        r.frames += 1;
    }
    r.stats = src.stats();
    r.source = src.describe();
    r.first_captured_at = first_t.map(|t| t.as_secs_f64());
    r.last_captured_at = last_t.map(|t| t.as_secs_f64());
    if let (Some(a), Some(b)) = (first_t, last_t) {
        if r.frames > 1 {
            r.mean_interval_ms =
                Some(b.saturating_sub(a).as_secs_f64() * 1000.0 / (r.frames - 1) as f64);
        }
    }
    Ok(r)
}

/// The text form of a capture report.
pub fn format_report(r: &CaptureReport) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let mut s = String::new();
    s += &format!("source           {}\n", r.source);
    s += &format!(
        "mode             {} {}x{}{}\n",
        opt(r.format.clone()),
        opt(r.width.map(|v| v.to_string())),
        opt(r.height.map(|v| v.to_string())),
        r.nominal_fps
            .map_or(String::new(), |f| format!(" @ {f:.2} fps nominal"))
    );
    s += &format!(
        "frames           {}{}\n",
        r.frames,
        if r.ended_early { " (source ended)" } else { "" }
    );
    s += &format!(
        "dropped (stale)  {}\ncorrupt          {}\nreopens          {}\ntimeouts         {}\n",
        r.stats.dropped_stale, r.stats.corrupt, r.stats.reopens, r.stats.timeouts
    );
    s += &format!(
        "seq              {} .. {}{}\n",
        opt(r.first_seq.map(|v| v.to_string())),
        opt(r.last_seq.map(|v| v.to_string())),
        if r.seq_increasing {
            ""
        } else {
            " (NOT increasing)"
        }
    );
    s += &format!(
        "captured_at      {} .. {} s{}\n",
        opt(r.first_captured_at.map(|v| format!("{v:.6}"))),
        opt(r.last_captured_at.map(|v| format!("{v:.6}"))),
        if r.timestamps_monotonic {
            ""
        } else {
            " (went BACKWARDS)"
        }
    );
    s += &format!(
        "mean interval    {}\n",
        opt(r
            .mean_interval_ms
            .map(|v| format!("{v:.2} ms ({:.2} fps)", 1000.0 / v.max(1e-9))))
    );
    for e in &r.errors {
        s += &format!("error            {e}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_sizes_parse() {
        assert_eq!(parse_format("yuyv").ok(), Some(PixelFormat::Yuyv));
        assert_eq!(parse_format("MJPEG").ok(), Some(PixelFormat::Mjpeg));
        assert!(parse_format("H264").is_err());
        assert_eq!(parse_size("640x480").ok(), Some((640, 480)));
        assert!(parse_size("640").is_err());
        assert!(parse_size("0x10").is_err());
    }

    #[test]
    fn capture_of_the_demo_clip_reports_frames() {
        let opts = SourceOptions {
            pace: source::Pacing::AsFastAsPossible,
            ..SourceOptions::default()
        };
        let mut src = source::open("demo", &opts).ok();
        let r = src.as_mut().map(|s| capture(s.as_mut(), "demo", 5));
        let r = r.and_then(|r| r.ok());
        assert!(r
            .as_ref()
            .is_some_and(|r| r.frames == 5 && r.seq_increasing));
        let text = r.map(|r| format_report(&r)).unwrap_or_default();
        assert!(text.contains("MJPG 640x480"), "{text}");
    }
}
