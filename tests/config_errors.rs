//! Bad configurations are refused the same way by `lookout check-config FILE` and
//! `lookout run --config FILE`: exit status 78 (EX_CONFIG, so the unit's
//! `RestartPreventExitStatus=78` does not restart-loop on a typo) and a message that names the
//! key and, where the key is in the file, its line (`FILE:LINE:COL: KEY: message`).
//!
//! Also: the shipped `systemd/lookout.toml` validates (with its camera replaced by the demo clip
//! on machines without one), documents every key, and departs from the built-in defaults only
//! where it says so.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EX_CONFIG: i32 = 78;

/// One malformed configuration.
struct Case {
    /// What is wrong (for failure messages).
    name: &'static str,
    /// The file's text; `{tmp}` is replaced by a scratch directory that exists.
    toml: &'static str,
    /// The key the error must name (`(syntax)` for broken TOML).
    key: &'static str,
    /// The line it must name (None: not checked).
    line: Option<usize>,
    /// Text the message must also contain (what was expected / found).
    says: &'static str,
}

const fn case(
    name: &'static str,
    toml: &'static str,
    key: &'static str,
    line: Option<usize>,
    says: &'static str,
) -> Case {
    Case {
        name,
        toml,
        key,
        line,
        says,
    }
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    // --- broken TOML ---------------------------------------------------------------------
    case("unclosed table header", "[source\nspec = \"demo\"\n", "(syntax)", Some(1), "not valid TOML"),
    case("unterminated string", "[source]\nspec = \"demo\n", "(syntax)", Some(2), "not valid TOML"),
    case("duplicate key", "[model]\nthreshold = 0.5\nthreshold = 0.6\n", "(syntax)", Some(3), "threshold = 0.6"),
    case("value without a key", "[pipeline]\n= 5\n", "(syntax)", Some(2), "not valid TOML"),
    case("bare word value", "[source]\nspec = demo\n", "(syntax)", Some(2), "spec = demo"),
    case("duplicate table", "[model]\nthreads = 1\n[model]\nthreads = 2\n", "(syntax)", Some(3), "not valid TOML"),
    // --- unknown keys, at every level ----------------------------------------------------
    case("unknown section", "[camra]\ndevice = \"/dev/video0\"\n", "camra", Some(1), "unknown field"),
    // `[camera]` is `[[camera]]` written as one table.
    case("[camera] as a single table", "[camera]\nname = \"a\"\n", "camera", Some(1), "expected a sequence"),
    case("unknown key in [source]", "[source]\nspec = \"demo\"\ndevice = \"/dev/video0\"\n", "source.device", Some(3), "unknown field"),
    case("unknown key in [model]", "[model]\nthreshhold = 0.5\n", "model.threshhold", Some(2), "unknown field"),
    case("unknown key in [pipeline]", "[pipeline]\n\ndetect_evry = 3\n", "pipeline.detect_evry", Some(3), "unknown field"),
    case("unknown key in [tracker]", "[tracker]\niou = 0.5\n", "tracker.iou", Some(2), "unknown field"),
    case("unknown key in [tracker.visual]", "[tracker.visual]\nradius = 3\n", "tracker.visual.radius", Some(2), "search_radius"),
    case("unknown key in [tracker.kalman]", "[tracker.kalman]\nnoise = 0.1\n", "tracker.kalman.noise", Some(2), "unknown field"),
    case("unknown key in [output]", "[output]\nformat = \"json\"\n", "output.format", Some(2), "unknown field"),
    // --- wrong types ---------------------------------------------------------------------
    case("section given as a string", "source = \"demo\"\n", "source", Some(1), "expected struct"),
    case("width as a string", "[source]\nwidth = \"640\"\n", "source.width", Some(2), "invalid type"),
    case("loop as an integer", "[source]\nloop = 1\n", "source.loop", Some(2), "invalid type"),
    case("threshold as a word", "[model]\nthreshold = \"high\"\n", "model.threshold", Some(2), "invalid type"),
    case("input_size as one number", "[model]\ninput_size = 416\n", "model.input_size", Some(2), "invalid type"),
    case("input_size a word other than auto", "[model]\ninput_size = \"big\"\n", "model.input_size", Some(2), "\"auto\""),
    case("input_size of three numbers", "[model]\ninput_size = [416, 320, 3]\n", "model.input_size", Some(2), "[width, height]"),
    case("precision not a known one", "[model]\nprecision = \"int4\"\n", "model.precision", Some(2), "fp32"),
    case("resize not a known mode", "[model]\nresize = \"crop\"\n", "model.resize", Some(2), "letterbox"),
    case("pin_threads as a string", "[pipeline]\npin_threads = \"yes\"\n", "pipeline.pin_threads", Some(2), "invalid type"),
    case("confirm_hits fractional", "[tracker]\nconfirm_hits = 2.5\n", "tracker.confirm_hits", Some(2), "invalid type"),
    case("labels as a string", "[output]\nlabels = \"person\"\n", "output.labels", Some(2), "invalid type"),
    // --- out of range --------------------------------------------------------------------
    case("negative fps", "[source]\nfps = -1\n", "source.fps", Some(2), "-1"),
    case("fps too high", "[source]\nfps = 5000\n", "source.fps", Some(2), "found 5000"),
    case("width without height", "[source]\nwidth = 640\nheight = 0\n", "source.width", Some(2), "640x0"),
    case("FourCC of 3 characters", "[source]\nformat = \"YUV\"\n", "source.format", Some(2), "FourCC"),
    // A FourCC lookout cannot read, or a typo: once silently "the best format available".
    case("format lookout cannot read", "[source]\nformat = \"H264\"\n", "source.format", Some(2), "\"H264\""),
    case("format typo", "[source]\n\nformat = \"YUVY\"\n", "source.format", Some(3), "\"YUVY\""),
    case("threshold above 1", "[model]\nthreshold = 1.5\n", "model.threshold", Some(2), "found 1.5"),
    case("iou_threshold zero", "[model]\niou_threshold = 0.0\n", "model.iou_threshold", Some(2), "found 0"),
    case("max_detections zero", "[model]\nmax_detections = 0\n", "model.max_detections", Some(2), "found 0"),
    case("threads zero", "[model]\nthreads = 0\n", "model.threads", Some(2), "found 0"),
    case("input_size not multiple of 32", "[model]\ninput_size = [416, 400]\n", "model.input_size", Some(2), "multiples of 32"),
    case("input_size over the area a Pi can hold", "[model]\ninput_size = [2048, 2048]\n", "model.input_size", Some(2), "2048x1152"),
    case("detect_every zero", "[pipeline]\ndetect_every = 0\n", "pipeline.detect_every", Some(2), "found 0"),
    case("stats_interval too short", "[pipeline]\nstats_interval = 0.1\n", "pipeline.stats_interval", Some(2), "found 0.1"),
    case("stats_interval NaN", "[pipeline]\nstats_interval = nan\n", "pipeline.stats_interval", Some(2), "NaN"),
    case("track_width tiny", "[pipeline]\ntrack_width = 8\n", "pipeline.track_width", Some(2), "found 8"),
    case("tracker iou above 1", "[tracker]\niou_threshold = 1.5\n", "tracker.iou_threshold", Some(2), "1.5"),
    case("tracker min_visible above 1", "[tracker]\nmin_visible = 2.0\n", "tracker.min_visible", Some(2), "got 2"),
    case("even patch size", "[tracker.visual]\npatch_size = 8\n", "tracker.visual.patch_size", Some(2), "odd"),
    case("grid too large", "[tracker.visual]\ngrid = 11\n", "tracker.visual.grid", Some(2), "got 11"),
    case("kalman noise zero", "[tracker.kalman]\ndetection_noise = 0.0\n", "tracker.kalman.detection_noise", Some(2), "got 0"),
    // --- bad core numbers ----------------------------------------------------------------
    case("capture_core negative", "[pipeline]\ncapture_core = -1\n", "pipeline.capture_core", Some(2), "-1"),
    case("capture_core beyond the machine", "[pipeline]\ncapture_core = 999\n", "pipeline.capture_core", Some(2), "found 999"),
    case("track_core beyond the machine", "[pipeline]\ntrack_core = 999\n", "pipeline.track_core", Some(2), "found 999"),
    case("detect_cores beyond the machine", "[pipeline]\ndetect_cores = [0, 999]\n", "pipeline.detect_cores", Some(2), "found 999"),
    // --- bad labels ----------------------------------------------------------------------
    case("unknown output label", "[output]\nlabels = [\"person\", \"persn\"]\n", "output.labels", Some(2), "persn"),
    case("tracks_max_mb zero", "[output]\ntracks_max_mb = 0\n", "output.tracks_max_mb", Some(2), "found 0"),
    case("tracks_max_mb negative", "[output]\n\ntracks_max_mb = -5.0\n", "output.tracks_max_mb", Some(3), "found -5"),
    case("tracks_max_mb NaN", "[output]\ntracks_max_mb = nan\n", "output.tracks_max_mb", Some(2), "NaN"),
    case("unknown tracker class", "[tracker]\nclasses = [\n  \"car\",\n  \"unicorn\",\n]\n", "tracker.classes[1]", Some(4), "unicorn"),
    // --- several cameras -----------------------------------------------------------------
    case("two cameras of one name", "[[camera]]\nname = \"a\"\n[camera.source]\nspec = \"demo\"\n[[camera]]\nname = \"a\"\n[camera.source]\nspec = \"demo\"\n", "camera[1].name", Some(6), "names two cameras"),
    case("camera name with a space", "[[camera]]\nname = \"front door\"\n[camera.source]\nspec = \"demo\"\n", "camera[0].name", Some(2), "front door"),
    case("camera without a source", "[[camera]]\nname = \"a\"\n", "camera[0].source", None, "[camera.source]"),
    case("[source] beside cameras", "[source]\nspec = \"/dev/video2\"\n[[camera]]\nname = \"a\"\n[camera.source]\nspec = \"demo\"\n", "source", Some(1), "[camera.source]"),
    case("camera source file missing", "[[camera]]\nname = \"a\"\n[camera.source]\nspec = \"/nonexistent/clip.mjpeg\"\n", "camera[0].source.spec", Some(4), "not found"),
    case("camera source without spec", "[[camera]]\nname = \"a\"\n[camera.source]\nfps = 5\n", "camera[0].source.spec", None, "found none"),
    case("camera detect_every zero", "[[camera]]\nname = \"a\"\ndetect_every = 0\n[camera.source]\nspec = \"demo\"\n", "camera[0].detect_every", Some(3), "found 0"),
    // --- events, masks and zones ---------------------------------------------------------
    case("unknown key in [events]", "[events]\nmin_scor = 0.5\n", "events.min_scor", Some(2), "unknown field"),
    case("unknown event label", "[events]\nlabels = [\"person\", \"unicorn\"]\n", "events.labels[1]", Some(2), "unicorn"),
    case("event min_score above 1", "[events]\nmin_score = 1.5\n", "events.min_score", Some(2), "got 1.5"),
    case("event min_score_moving negative", "[events]\nmin_score = 0.5\nmin_score_moving = -0.2\n", "events.min_score_moving", Some(3), "got -0.2"),
    case("event min_detections zero", "[events]\nmin_detections = 0\n", "events.min_detections", Some(2), "got 0"),
    case("event rejoin_seconds NaN", "[events]\nrejoin_seconds = nan\n", "events.rejoin_seconds", Some(2), "NaN"),
    case("min_height of an unknown label", "[events.min_height]\npersn = 30\n", "events.min_height.persn", Some(2), "persn"),
    case("min_height negative", "[events.min_height]\nperson = -30\n", "events.min_height.person", Some(2), "-30"),
    case("mask of two points", "[events]\nmasks = [[[0.0, 0.0], [1.0, 1.0]]]\n", "events.masks[0]", Some(2), "at least 3 points"),
    case("mask outside the frame", "[events]\nmasks = [\n  [[0.0, 0.0], [0.5, 0.0], [0.5, 0.5]],\n  [[0.0, 0.0], [1.5, 0.0], [0.5, 0.5]],\n]\n", "events.masks[1]", Some(4), "outside the frame"),
    case("zone crossing itself", "[zones]\ndoor = [[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]\n", "zones.door", Some(2), "crosses itself"),
    case("zone in pixels, not fractions", "[zones]\ndoor = [[10, 10], [300, 10], [300, 200]]\n", "zones.door", Some(2), "fractions"),
    case("required zone that does not exist", "[events]\nzones = [\"drive\"]\n", "events.zones[0]", Some(2), "no zone named \"drive\""),
    // --- [mqtt], [snapshots] ---------------------------------------------------------------
    case("unknown key in [mqtt]", "[mqtt]\nbroker = \"pi.local\"\n", "mqtt.broker", Some(2), "unknown field"),
    case("camera name with a space", "[mqtt]\nhost = \"127.0.0.1\"\ncamera = \"front door\"\n", "mqtt.camera", Some(3), "letters, digits"),
    case("topic prefix with a wildcard", "[mqtt]\ntopic_prefix = \"home/#\"\n", "mqtt.topic_prefix", Some(2), "no '+' or '#'"),
    case("qos 3", "[mqtt]\nqos = 3\n", "mqtt.qos", Some(2), "0, 1 or 2"),
    case("port 0", "[mqtt]\nport = 0\n", "mqtt.port", Some(2), "1–65535"),
    case("port past 65535", "[mqtt]\nport = 70000\n", "mqtt.port", Some(2), "70000"),
    case("keepalive of 1 s", "[mqtt]\nkeepalive = 1\n", "mqtt.keepalive", Some(2), "5–3600"),
    case("password file missing", "[mqtt]\nhost = \"127.0.0.1\"\npassword_file = \"{tmp}/nope\"\n", "mqtt.password_file", Some(3), "nope"),
    case("client key without certificate", "[mqtt]\nclient_key = \"/etc/k.pem\"\n", "mqtt.client_key", Some(2), "go together"),
    case("snapshot quality 0", "[snapshots]\nquality = 0\n", "snapshots.quality", Some(2), "1–100"),
    case("snapshot dir is a file", "[snapshots]\ndir = \"/proc/version\"\n", "snapshots.dir", Some(2), "not a directory"),
    // --- metrics ---------------------------------------------------------------------------
    case("unknown key in [metrics]", "[metrics]\nport = 9464\n", "metrics.port", Some(2), "unknown field"),
    case("metrics enabled as a word", "[metrics]\nenabled = \"yes\"\n", "metrics.enabled", Some(2), "invalid type"),
    case("metrics listen a host name", "[metrics]\nlisten = \"localhost:9464\"\n", "metrics.listen", Some(2), "IP:PORT"),
    case("metrics listen without a port", "[metrics]\nenabled = true\nlisten = \"127.0.0.1\"\n", "metrics.listen", Some(3), "\"127.0.0.1\""),
    case("metrics listen on port 0", "[metrics]\nlisten = \"127.0.0.1:0\"\n", "metrics.listen", Some(2), "port in 1..=65535"),
    case("metrics text file not *.prom", "[metrics]\ntextfile = \"/var/lib/lookout/lookout.txt\"\n", "metrics.textfile", Some(2), "*.prom"),
    case("metrics text file relative", "[metrics]\ntextfile = \"lookout.prom\"\n", "metrics.textfile", Some(2), "absolute path"),
    case("metrics on with nowhere to go", "[metrics]\nenabled = true\nlisten = \"\"\n", "metrics.enabled", Some(2), "nothing to export"),
    case("metrics text file in a missing directory", "[metrics]\nenabled = true\ntextfile = \"{tmp}/no-such-dir/lookout.prom\"\n", "metrics.textfile", Some(3), "no such directory"),
    // --- things that do not exist --------------------------------------------------------
    case("missing camera, waiting turned off", "[source]\nspec = \"/dev/video99\"\nwait_for_camera = false\n", "source.spec", Some(2), "no such device"),
    case("missing device that can never be a camera", "[source]\nspec = \"/dev/lookout-no-such-node\"\n", "source.spec", Some(2), "lookout waits only for /dev/videoN"),
    case("missing clip", "[source]\nspec = \"{tmp}/no-such-clip.mjpeg\"\n", "source.spec", Some(2), "not found"),
    // It exists, but no backend reads it: once valid for check-config, then exit 1 from run.
    case("existing file of an unsupported kind", "[source]\nspec = \"{tmp}/clip.avi\"\n", "source.spec", Some(2), "clip.avi"),
    case("empty source", "[source]\nspec = \"  \"\n", "source.spec", Some(2), "empty"),
    // Commands (`exec:`): the program must exist and be executable, the line must split.
    case("exec program not installed", "[source]\nspec = \"exec:lookout-no-such-camera-tool -o -\"\n", "source.spec", Some(2), "\"lookout-no-such-camera-tool\" is not found in PATH"),
    case("exec program by a missing path", "[source]\n\nspec = \"exec:{tmp}/bin/rpicam-vid -o -\"\n", "source.spec", Some(3), "cannot be found"),
    case("exec program not executable", "[source]\nspec = \"exec:{data}/README.md\"\n", "source.spec", Some(2), "not executable"),
    case("exec program a directory", "[source]\nspec = \"exec:{tmp}\"\n", "source.spec", Some(2), "not a regular file"),
    case("exec quote never closed", "[source]\nspec = \"exec:sh -c 'rpicam-vid -o -\"\n", "source.spec", Some(2), "a quote is not closed"),
    case("exec without a command", "[source]\nspec = \"exec:   \"\n", "source.spec", Some(2), "expected a command after `exec:`"),
    case("missing model file", "[model]\nfile = \"{tmp}/no-such-model.onnx\"\n", "model.file", Some(2), "no-such-model.onnx"),
    case("model file is a photo, not ONNX", "[model]\nfile = \"{data}/astronaut.jpg\"\n", "model.file", Some(2), "not a valid ONNX model"),
    case("model is ONNX but not a NanoDet", "[model]\nfile = \"{data}/not-nanodet.onnx\"\n", "model.file", Some(2), "not-nanodet.onnx"),
    case("precision beside a model file", "[model]\nfile = \"{tmp}/no-such-model.onnx\"\nprecision = \"fp32\"\n", "model.precision", Some(3), "the file decides"),
    case("model file is a directory", "[model]\nfile = \"{tmp}\"\n", "model.file", Some(2), "directory"),
    case("tracks file in a missing directory", "[output]\ntracks_file = \"{tmp}/no-such-dir/tracks.jsonl\"\n", "output.tracks_file", Some(2), "existing directory"),
];

fn lookout() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lookout"));
    // Never talk to a journal or a service manager from a test, whatever the environment.
    c.env_remove("JOURNAL_STREAM").env_remove("NOTIFY_SOCKET");
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"))
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
    p
}

/// Checks one bad file with one command; returns a description of what went wrong, if anything.
fn check_refusal(c: &Case, file: &Path, how: &str, out: &Output) -> Option<String> {
    let all = text(out);
    let mut wrong = Vec::new();
    if out.status.code() != Some(EX_CONFIG) {
        wrong.push(format!(
            "exit status {:?}, expected {EX_CONFIG}",
            out.status.code()
        ));
    }
    let located = match c.line {
        Some(l) => format!("{}:{l}:", file.display()),
        None => format!("{}:", file.display()),
    };
    let line_ok = all.lines().any(|l| {
        l.contains(&located) && l.contains(&format!(": {}: ", c.key)) && l.contains(c.says)
    });
    if !line_ok {
        wrong.push(format!(
            "no line naming `{located}<col>: {}: …{}…`",
            c.key, c.says
        ));
    }
    if wrong.is_empty() {
        None
    } else {
        Some(format!(
            "[{}] `{how}`: {}\n--- output ---\n{all}",
            c.name,
            wrong.join("; ")
        ))
    }
}

#[test]
fn malformed_configs_are_refused_with_the_key_and_line() {
    assert!(
        CASES.len() >= 30,
        "keep at least 30 malformed configurations"
    );
    let dir = scratch();
    let tmp = dir.path().to_str().expect("temporary path is UTF-8");
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    // An existing file that no source backend reads (the "unsupported kind" case).
    write(dir.path(), "clip.avi", "RIFF....AVI ");
    let mut failures = Vec::new();
    for (i, c) in CASES.iter().enumerate() {
        let file = write(
            dir.path(),
            &format!("case{i:02}.toml"),
            &c.toml.replace("{tmp}", tmp).replace("{data}", data),
        );
        let out = lookout()
            .arg("check-config")
            .arg(&file)
            .output()
            .expect("runs lookout check-config");
        if let Some(f) = check_refusal(c, &file, "check-config", &out) {
            failures.push(f);
        }
        if !out.stdout.is_empty() {
            failures.push(format!(
                "[{}] check-config printed a configuration for an invalid file:\n{}",
                c.name,
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        let out = lookout()
            .args(["run", "--config"])
            .arg(&file)
            .output()
            .expect("runs lookout run");
        if let Some(f) = check_refusal(c, &file, "run --config", &out) {
            failures.push(f);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} checks failed:\n\n{}",
        failures.len(),
        CASES.len() * 2,
        failures.join("\n\n")
    );
}

#[test]
fn every_problem_in_a_file_is_reported() {
    let dir = scratch();
    let file = write(
        dir.path(),
        "several.toml",
        "[model]\nthreshold = 2.0\nthreads = 0\n\n[pipeline]\ndetect_every = 0\n",
    );
    let out = lookout().arg("check-config").arg(&file).output().unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(EX_CONFIG), "{all}");
    let f = file.display();
    for want in [
        format!("{f}:2:1: model.threshold:"),
        format!("{f}:3:1: model.threads:"),
        format!("{f}:6:1: pipeline.detect_every:"),
    ] {
        assert!(all.contains(&want), "missing `{want}` in:\n{all}");
    }
}

#[test]
fn a_missing_config_file_is_a_config_error() {
    let dir = scratch();
    let file = dir.path().join("absent.toml");
    for args in [vec!["check-config"], vec!["run", "--config"]] {
        let out = lookout().args(&args).arg(&file).output().unwrap();
        let all = text(&out);
        assert_eq!(out.status.code(), Some(EX_CONFIG), "{args:?}: {all}");
        assert!(
            all.contains("absent.toml") && all.contains("cannot read the configuration file"),
            "{args:?}: {all}"
        );
    }
}

#[test]
fn pixel_format_aliases_are_valid_in_the_config_as_on_the_command_line() {
    // `lookout capture --format` has always taken these aliases; the config now takes the same.
    let dir = scratch();
    for (i, name) in ["MJPEG", "mjpg", "I420", "yuyv", "GRAY", "422P", ""]
        .iter()
        .enumerate()
    {
        let file = write(
            dir.path(),
            &format!("format{i}.toml"),
            &format!("[source]\nformat = \"{name}\"\n"),
        );
        let out = lookout().arg("check-config").arg(&file).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "format {name:?}: {}",
            text(&out)
        );
    }
}

fn shipped_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/lookout.toml")
}

fn shipped_text() -> String {
    let p = shipped_path();
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// The shipped file with its camera replaced by the bundled clip, so it validates anywhere.
fn shipped_on_demo() -> String {
    let text = shipped_text();
    let camera = "spec = \"/dev/video0\"";
    assert_eq!(
        text.lines().filter(|l| l.trim() == camera).count(),
        1,
        "systemd/lookout.toml must name the camera exactly once as `{camera}`"
    );
    text.replace(camera, "spec = \"demo\"")
}

#[test]
fn shipped_config_validates_and_check_config_prints_the_effective_config() {
    let dir = scratch();
    let file = write(dir.path(), "lookout.toml", &shipped_on_demo());
    let out = lookout().arg("check-config").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout.contains("valid; effective configuration"),
        "{stdout}"
    );
    // The effective configuration is itself a valid configuration with the same values.
    let body: String = stdout.lines().skip(1).collect::<Vec<_>>().join("\n");
    let printed =
        lookout::config::Config::parse(&body, "printed").unwrap_or_else(|e| panic!("{e}\n{body}"));
    let shipped = lookout::config::Config::parse(&shipped_on_demo(), "shipped").unwrap();
    assert_eq!(printed, shipped);
    for want in [
        "[source]",
        "spec = \"demo\"",
        "fps = 10",
        "[tracker.kalman]",
        "[output]",
    ] {
        assert!(stdout.contains(want), "missing `{want}` in:\n{stdout}");
    }
}

#[test]
fn shipped_config_names_the_camera_and_says_it_waits_for_one_that_is_missing() {
    let p = shipped_path();
    let out = lookout().arg("check-config").arg(&p).output().unwrap();
    let all = text(&out);
    // Valid either way: a camera that is not there (yet) is waited for by `lookout run`,
    // and check-config says so.
    assert_eq!(out.status.code(), Some(0), "{all}");
    if !Path::new("/dev/video0").exists() {
        assert!(
            all.contains("/dev/video0 is not there now; `lookout run` will wait for it"),
            "{all}"
        );
    }
}

#[test]
fn shipped_config_departs_from_defaults_only_where_it_says_so() {
    use lookout::config::Config;
    let shipped = Config::parse(&shipped_on_demo(), "shipped").unwrap();
    let mut expected = Config::default();
    // The `shipped:` notes in the file: the camera (here replaced by the demo) and 10 fps.
    expected.source.spec = "demo".into();
    expected.source.fps = 10;
    assert_eq!(
        shipped, expected,
        "systemd/lookout.toml sets a value that differs from the built-in default without a `shipped:` note; update the file's comments and this test together"
    );
}

#[test]
fn shipped_config_mentions_every_key() {
    let text = shipped_text();
    let mut cfg = lookout::config::Config::default();
    // Optional keys are absent from the rendered defaults; give them values to list them.
    cfg.pipeline.capture_core = Some(0);
    cfg.pipeline.track_core = Some(0);
    let mut section = String::new();
    let mut missing = Vec::new();
    for line in cfg.to_toml().lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let Some((key, _)) = line.split_once(" = ") else {
            continue;
        };
        // The key must appear, set or commented out, after its section header.
        let after = text
            .split_once(&format!("\n{section}\n"))
            .map(|(_, rest)| rest);
        let found = after.is_some_and(|rest| {
            let rest = rest.split("\n[").next().unwrap_or(rest);
            rest.lines().any(|l| {
                let l = l.trim_start_matches('#').trim_start();
                l.starts_with(&format!("{key} =")) || l.starts_with(&format!("{key}="))
            })
        });
        if !found {
            missing.push(format!("{section} {key}"));
        }
    }
    assert!(
        missing.is_empty(),
        "systemd/lookout.toml does not document: {missing:?}"
    );
}

/// Runs `lookout ARGS…` with at most 2 GB of data memory and a deadline: a command that
/// blocks (opening a FIFO) or reads without end (`/dev/zero`) is killed and reported, never
/// hangs the test or exhausts the machine. Returns the exit status and the output.
fn run_bounded(dir: &Path, args: &[&OsStr], deadline: Duration) -> (Option<i32>, String) {
    let out_path = dir.join("bounded.out");
    let out = std::fs::File::create(&out_path).expect("output file");
    let err = out.try_clone().expect("output file");
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -d 2097152 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_lookout"))
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn lookout");
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20)); // polling interval
    };
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    match status {
        Some(s) => (s.code(), text),
        None => (
            None,
            format!("still running after {deadline:?}; output:\n{text}"),
        ),
    }
}

/// A model file that declares an 8192x8192 input (the shipped INT8 NanoDet with its input
/// dimensions re-declared: 416 and 8192 are both two-byte varints, so the protobuf stays valid).
fn model_declaring_8192(dir: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut bytes = std::fs::read(repo.join("models/nanodet-g-416-int8.onnx")).expect("model");
    // The input's shape [1, 3, 416, 416]: four TensorShapeProto.Dimension messages.
    let dims_416 = [
        0x0A, 2, 8, 1, 0x0A, 2, 8, 3, 0x0A, 3, 8, 0xA0, 3, 0x0A, 3, 8, 0xA0, 3,
    ];
    let dims_8192 = [
        0x0A, 2, 8, 1, 0x0A, 2, 8, 3, 0x0A, 3, 8, 0x80, 0x40, 0x0A, 3, 8, 0x80, 0x40,
    ];
    let at = bytes
        .windows(dims_416.len())
        .position(|w| w == dims_416)
        .expect("the model's declared input shape");
    bytes[at..at + dims_8192.len()].copy_from_slice(&dims_8192);
    let p = dir.join("declares-8192.onnx");
    std::fs::write(&p, bytes).expect("write model");
    p
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", path.display());
}

#[test]
fn hostile_files_are_refused_at_once_naming_the_file_and_key() {
    let dir = scratch();
    let d = dir.path();
    let zero_cfg = d.join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &zero_cfg).expect("symlink");
    let fifo_cfg = d.join("fifo.toml");
    mkfifo(&fifo_cfg);
    // 2 MiB of comments: valid TOML, over the 1 MiB limit of a configuration file.
    let big_cfg = write(
        d,
        "big.toml",
        &"# padding padding padding padding\n".repeat(60_000),
    );
    let fifo_model = d.join("fifo.onnx");
    mkfifo(&fifo_model);
    let zero_model = d.join("zero.onnx");
    std::os::unix::fs::symlink("/dev/zero", &zero_model).expect("symlink");
    let huge_input = model_declaring_8192(d);
    let model_cfg = |name: &str, model: &Path| {
        write(
            d,
            name,
            &format!("[model]\nfile = \"{}\"\n", model.display()),
        )
    };
    let cases = [
        (zero_cfg.clone(), "zero.toml", "(file)", "character device"),
        (fifo_cfg.clone(), "fifo.toml", "(file)", "FIFO"),
        (big_cfg.clone(), "big.toml", "(file)", "1 MiB"),
        (
            model_cfg("m-fifo.toml", &fifo_model),
            "fifo.onnx",
            "model.file",
            "FIFO",
        ),
        (
            model_cfg("m-zero.toml", &zero_model),
            "zero.onnx",
            "model.file",
            "character device",
        ),
        (
            model_cfg("m-8192.toml", &huge_input),
            "declares-8192.onnx",
            "model.file",
            "8192x8192",
        ),
    ];
    let mut failures = Vec::new();
    for (cfg, names, key, says) in &cases {
        for cmd in [&["check-config"][..], &["run", "--config"][..]] {
            let mut args: Vec<&OsStr> = cmd.iter().map(OsStr::new).collect();
            args.push(cfg.as_os_str());
            let (code, out) = run_bounded(d, &args, Duration::from_secs(60));
            let told = out.lines().any(|l| {
                l.contains(&format!(": {key}: ")) && l.contains(names) && l.contains(says)
            });
            if code != Some(EX_CONFIG) || !told {
                failures.push(format!(
                    "{cmd:?} {}: exit {code:?}, expected {EX_CONFIG} and a line naming {key}, {names} and {says:?}:\n{out}",
                    cfg.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn recordings_that_can_never_work_are_configuration_errors() {
    let dir = scratch();
    let d = dir.path();
    std::fs::write(d.join("empty.mjpeg"), b"").expect("write");
    std::fs::write(d.join("c444.y4m"), b"YUV4MPEG2 W8 H8 F25:1 C444\nFRAME\n").expect("write");
    std::fs::create_dir(d.join("no-images")).expect("mkdir");
    for (spec, says) in [
        ("empty.mjpeg", "no usable frames"),
        ("c444.y4m", "C444"),
        ("no-images/", "no usable frames"),
    ] {
        let cfg = write(
            d,
            "rec.toml",
            &format!(
                "[source]\nspec = \"{}/{spec}\"\nrealtime = false\n",
                d.display()
            ),
        );
        let (code, out) = run_bounded(
            d,
            &[OsStr::new("run"), OsStr::new("--config"), cfg.as_os_str()],
            Duration::from_secs(60),
        );
        let told = out
            .lines()
            .any(|l| l.contains(": source.spec: ") && l.contains(spec) && l.contains(says));
        assert!(
            code == Some(EX_CONFIG) && told,
            "{spec}: exit {code:?}, expected {EX_CONFIG} naming source.spec:\n{out}"
        );
    }
}
