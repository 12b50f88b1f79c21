//! Several cameras in one daemon, for real: `lookout run` on 2 and 4 copies of the bundled
//! clip at once, one model shared by all. Every camera gets detections, none more than 20 %
//! more than another (counted from each camera's `summary`, never timed), every record names
//! its camera, the model is loaded once, each camera writes its own tracks file.

use std::collections::BTreeMap;
use std::process::Command;

/// A configuration of `names.len()` cameras, each the bundled clip replayed at 40 fps with a
/// detection asked for on every frame (more than the shared detector can serve: the cameras
/// compete for it), each with its own `labels`.
fn config(dir: &std::path::Path, cams: &[(&str, &str)]) -> std::path::PathBuf {
    let mut text = format!(
        "[model]\ninput_size = [128, 128]\n\n[pipeline]\ndetect_every = 1\nstats_interval = 1.0\npin_threads = false\n\n\
         [output]\ntracks_file = \"{}\"\n",
        dir.join("tracks.jsonl").display()
    );
    for (name, labels) in cams {
        text.push_str(&format!(
            "\n[[camera]]\nname = \"{name}\"\nlabels = {labels}\n[camera.source]\nspec = \"demo\"\nfps = 40\n"
        ));
    }
    let p = dir.join("cameras.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// `lookout run --config FILE` to the clip's end: its stderr lines.
fn run(cfg: &std::path::Path) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_lookout"))
        .args(["run", "--config"])
        .arg(cfg)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "lookout run failed: {err}");
    err.lines().map(String::from).collect()
}

/// The value of `KEY=` in a stderr line (values end at the next ` KEY=`; the tests' fields
/// hold no spaces but SOURCE's).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split(' ').next()
}

fn event<'a>(lines: &'a [String], ev: &str) -> Vec<&'a String> {
    let tag = format!("LOOKOUT_EVENT={ev} ");
    lines.iter().filter(|l| l.contains(&tag)).collect()
}

/// Detections per camera, from each camera's `summary` (`N detections`).
fn detections(lines: &[String]) -> BTreeMap<String, u64> {
    event(lines, "summary")
        .iter()
        .map(|l| {
            let camera = field(l, "CAMERA").unwrap().to_string();
            let n = l
                .split(" detections")
                .next()
                .and_then(|s| s.rsplit(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no detection count in {l}"));
            (camera, n)
        })
        .collect()
}

fn fair_share(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..n).map(|i| format!("cam-{i}")).collect();
    let cams: Vec<(&str, &str)> = names.iter().map(|s| (s.as_str(), "[]")).collect();
    let lines = run(&config(dir.path(), &cams));
    let det = detections(&lines);
    assert_eq!(det.keys().cloned().collect::<Vec<_>>(), names, "{lines:#?}");
    let (min, max) = (*det.values().min().unwrap(), *det.values().max().unwrap());
    assert!(min > 0, "a camera got no detection: {det:?}");
    assert!(
        (max - min) as f64 <= 0.2 * max as f64,
        "detections per camera differ by more than 20 %: {det:?}"
    );
    let loaded = lines
        .iter()
        .filter(|l| l.contains(" loaded: input "))
        .count();
    assert_eq!(loaded, 1, "the model is loaded once: {lines:#?}");
    for name in &names {
        // Its own tracks file: a line per frame it processed.
        let tracks = dir.path().join(format!("tracks.{name}.jsonl"));
        let text = std::fs::read_to_string(&tracks).unwrap();
        let summary = event(&lines, "summary")
            .into_iter()
            .find(|l| field(l, "CAMERA") == Some(name))
            .unwrap();
        let frames: usize = field(summary, "FRAMES").unwrap().parse().unwrap();
        assert!(frames > 0);
        assert_eq!(text.lines().count(), frames, "{}", tracks.display());
        let stats = event(&lines, "stats");
        assert!(
            stats.iter().any(|l| field(l, "CAMERA") == Some(name)),
            "no stats of {name}"
        );
    }
}

#[test]
fn two_cameras_share_the_detector_fairly_with_one_model() {
    fair_share(2);
}

#[test]
fn four_cameras_share_the_detector_fairly_with_one_model() {
    fair_share(4);
}

#[test]
fn each_record_names_its_camera_and_each_camera_keeps_its_own_labels() {
    let dir = tempfile::tempdir().unwrap();
    let lines = run(&config(
        dir.path(),
        &[("people", "[\"person\"]"), ("all", "[]")],
    ));
    let mut seen = BTreeMap::new();
    for ev in [
        "track_start",
        "track_end",
        "event_start",
        "event_end",
        "stats",
    ] {
        for l in event(&lines, ev) {
            let camera = field(l, "CAMERA").unwrap_or_else(|| panic!("no CAMERA in {l}"));
            assert!(camera == "people" || camera == "all", "{l}");
            if camera == "people" {
                if let Some(label) = field(l, "LABEL") {
                    assert_eq!(label, "person", "{l}");
                }
            }
            *seen.entry((camera.to_string(), ev)).or_insert(0) += 1;
        }
    }
    for camera in ["people", "all"] {
        for ev in ["track_start", "stats"] {
            assert!(
                seen.contains_key(&(camera.to_string(), ev)),
                "no {ev} of {camera}: {seen:?}"
            );
        }
    }
}

#[test]
fn one_camera_without_camera_tables_is_named_by_mqtt_camera() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("one.toml");
    std::fs::write(
        &cfg,
        "[source]\nspec = \"demo\"\nfps = 40\n[model]\ninput_size = [128, 128]\n\
         [pipeline]\npin_threads = false\nstats_interval = 1.0\n[mqtt]\ncamera = \"porch\"\n",
    )
    .unwrap();
    let lines = run(&cfg);
    let det = detections(&lines);
    assert_eq!(det.keys().collect::<Vec<_>>(), ["porch"], "{lines:#?}");
    assert!(event(&lines, "stats")
        .iter()
        .all(|l| field(l, "CAMERA") == Some("porch")));
}
