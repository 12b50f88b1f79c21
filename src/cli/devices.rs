//! `lookout devices`: what cameras are there — every V4L2 capture device with driver, card,
//! bus, formats, sizes and rates, as text or JSON. Argument struct for clap plus the function
//! `main` calls.

use crate::source::{self, DeviceInfo};

/// `lookout devices`: list V4L2 capture devices.
#[derive(Debug, Clone, clap::Args)]
pub struct DevicesArgs {
    /// Print JSON (an array of devices) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Prints every V4L2 capture device with driver, card, bus, formats, sizes and rates.
///
/// # Errors
/// Only when writing JSON fails.
pub fn run_devices(args: &DevicesArgs) -> anyhow::Result<()> {
    let devices = source::list_devices();
    let text = if args.json {
        serde_json::to_string_pretty(&devices)? + "\n"
    } else if devices.is_empty() {
        "no V4L2 capture devices found\n".to_string()
    } else {
        devices.iter().map(format_device).collect()
    };
    // A closed pipe (`devices | head`) ends the output, not the process with a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    Ok(())
}

/// The text listing of one device.
pub fn format_device(d: &DeviceInfo) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} (driver {}, bus {})",
        d.path, d.card, d.driver, d.bus
    );
    for f in &d.formats {
        let _ = writeln!(
            s,
            "  {:<4} {}{}",
            f.fourcc,
            f.description,
            if f.supported {
                ""
            } else {
                "  [not read by lookout]"
            }
        );
        for size in &f.sizes {
            let line = match size {
                source::v4l2::SizeInfo::Discrete { width, height, rates } => {
                    format!("{width}x{height}: {}", rates_text(rates))
                }
                source::v4l2::SizeInfo::Stepwise {
                    min_width,
                    max_width,
                    step_width,
                    min_height,
                    max_height,
                    step_height,
                    rates,
                } => format!(
                    "{min_width}x{min_height}..{max_width}x{max_height} step {step_width}x{step_height}: {}",
                    rates_text(rates)
                ),
            };
            let _ = writeln!(s, "       {line}");
        }
    }
    s
}

fn rates_text(rates: &[source::v4l2::RateInfo]) -> String {
    if rates.is_empty() {
        return "rate not reported".into();
    }
    let list: Vec<String> = rates
        .iter()
        .map(|r| match r {
            source::v4l2::RateInfo::Discrete { fps } => trim_rate(*fps),
            source::v4l2::RateInfo::Stepwise { min_fps, max_fps } => {
                format!("{}-{}", trim_rate(*min_fps), trim_rate(*max_fps))
            }
        })
        .collect();
    format!("{} fps", list.join(", "))
}

fn trim_rate(fps: f64) -> String {
    if (fps - fps.round()).abs() < 1e-6 {
        format!("{}", fps.round() as i64)
    } else {
        format!("{fps:.3}")
    }
}
