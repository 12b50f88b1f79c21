//! A synthetic camera recording (made here, not a file in the repo): a still scene with
//! sensor-like noise, optionally becoming busy later. Used to check that the adaptive schedule
//! leaves the model idle on a still scene, through the real pipeline and the fidelity replay.
//!
//! To measure the idle cost with `lookout bench` (docs/tracking.md, "Why `fixed` stays the default"), write the
//! recording to a file:
//!
//! ```text
//! LOOKOUT_SCENE_OUT=/tmp/static.y4m cargo test --test static_scene -- --ignored write_static_scene
//! ```

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use lookout::config::Config;
use lookout::fidelity::replay;
use lookout::schedule::{Cause, PlannerConfig, ScheduleKind};

/// Frame size and rate of the synthetic camera.
const W: usize = 640;
const H: usize = 480;
const FPS: u32 = 10;

/// Roughly Gaussian noise (sum of four uniforms), σ ≈ 4 gray levels, deterministic.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> i32 {
        let mut sum = 0i32;
        for _ in 0..4 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            sum += (self.0 % 7) as i32;
        }
        sum - 12
    }
}

/// The still scene: a person photo from `tests/data`, gray, letterboxed into 640×480.
fn still_scene() -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let photo = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
        .min()
        .unwrap();
    let img = image::open(&photo).unwrap().to_luma8();
    let img = image::imageops::resize(&img, W as u32, H as u32, image::imageops::Triangle);
    img.into_raw()
}

/// Writes a Cmono Y4M: `still_s` seconds of the still scene with fresh noise in every frame,
/// then (if `busy_s` > 0) that many seconds with a bright box walking across it.
fn write_scene(path: &Path, still_s: u32, busy_s: u32) {
    let base = still_scene();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(out, "YUV4MPEG2 W{W} H{H} F{FPS}:1 Ip A1:1 Cmono").unwrap();
    let mut noise = Noise(0x2545_F491_4F6C_DD1D);
    let mut frame = vec![0u8; W * H];
    for k in 0..(still_s + busy_s) * FPS {
        let walker = k
            .checked_sub(still_s * FPS)
            .map(|t| 40 + 8 * t as usize % (W - 120));
        for (i, px) in frame.iter_mut().enumerate() {
            let (x, y) = (i % W, i / W);
            let v = match walker {
                Some(wx) if (wx..wx + 60).contains(&x) && (150..400).contains(&y) => 240,
                _ => i32::from(base[i]),
            };
            *px = (v + noise.next()).clamp(0, 255) as u8;
        }
        out.write_all(b"FRAME\n").unwrap();
        out.write_all(&frame).unwrap();
    }
    out.flush().unwrap();
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("lookout-{name}-{}.y4m", std::process::id()))
}

/// The fidelity replay runs the daemon's own planner and tracker over the recording: a still
/// scene asks for the first frame and then only the heartbeat; the walker appearing at 10 s
/// is asked for within 3 frames.
#[test]
fn still_scene_runs_the_model_only_on_the_heartbeat_and_a_newcomer_at_once() {
    let path = temp("still");
    write_scene(&path, 10, 1);
    let cfg = Config::default();
    let rec = replay::record(&cfg, path.to_str().unwrap(), None).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(rec.frames.len(), 11 * FPS as usize);
    let plan = PlannerConfig::new(ScheduleKind::Adaptive, 5, Duration::from_secs(4));
    let run = replay::simulate(&rec, &cfg.tracker, &cfg.event_rules().unwrap(), plan).unwrap();
    let asked: Vec<usize> = run.asked.iter().map(|(k, _)| *k).collect();
    // The photo holds a person the model finds: a still, tracked object. The heartbeat then
    // comes every max_age_frames / 2 = 30 frames (the 4 s idle interval is longer), so the
    // track never expires for want of a detection.
    let still: Vec<_> = run.asked.iter().filter(|(k, _)| *k < 100).collect();
    assert!(
        still.len() <= 4 && still.iter().skip(1).all(|(_, c)| *c == Cause::Idle),
        "still: the first frame, then only heartbeats: {:?}",
        run.asked
    );
    assert!(
        asked
            .windows(2)
            .filter(|w| w[1] < 100)
            .all(|w| w[1] - w[0] >= 30),
        "heartbeats at least 30 frames apart: {asked:?}"
    );
    let first_busy = asked.iter().copied().find(|&k| k >= 100);
    assert!(
        first_busy.is_some_and(|k| k <= 102),
        "the walker appears at frame 100: {:?}",
        run.asked
    );
    let first_id = run.tracks[1].first().map(|t| t.id);
    assert!(
        first_id.is_some()
            && run.tracks[1..100]
                .iter()
                .all(|f| f.iter().any(|t| Some(t.id) == first_id)),
        "the still person keeps its track through the still part"
    );
}

/// Writes the still recording for a `lookout bench` measurement (see the module docs).
#[test]
#[ignore = "writes a file for a manual measurement"]
fn write_static_scene() {
    let out = std::env::var_os("LOOKOUT_SCENE_OUT").map_or_else(|| temp("scene"), Into::into);
    write_scene(&out, 60, 0);
    println!("wrote {}", out.display());
}
