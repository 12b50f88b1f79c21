//! `lookout bench` end to end: the JSON document validates against `docs/bench-schema.json`,
//! a sweep prints its rows and a recommendation, and a corrupted golden file makes the
//! self-check fail with exit status 2. Runs are a few dozen frames: no timing is asserted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn bench(args: &[&str], golden: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lookout"));
    cmd.arg("bench").args(args).current_dir(repo(""));
    match golden {
        Some(g) => cmd.env("LOOKOUT_GOLDEN_DIR", g),
        None => cmd.env_remove("LOOKOUT_GOLDEN_DIR"),
    };
    cmd.output().expect("run lookout bench")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

// ── a small validator for the subset of JSON Schema (2020-12) that bench-schema.json uses ──

const KNOWN: [&str; 20] = [
    "$schema",
    "$id",
    "$defs",
    "$ref",
    "title",
    "description",
    "type",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "oneOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "default",
];

fn type_ok(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_u64() || v.is_i64(),
        other => panic!("schema uses unknown type {other}"),
    }
}

fn validate(root: &Value, schema: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        panic!("schema at {path} is not an object");
    };
    for k in s.keys() {
        assert!(
            KNOWN.contains(&k.as_str()),
            "the test validator does not know keyword {k}"
        );
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r
            .strip_prefix("#/$defs/")
            .expect("only #/$defs/ references");
        validate(root, &root["$defs"][name], v, path, errs);
    }
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(v, t),
            Value::Array(ts) => ts.iter().any(|t| type_ok(v, t.as_str().unwrap_or("?"))),
            _ => panic!("bad type at {path}"),
        };
        if !ok {
            errs.push(format!("{path}: {v} is not of type {t}"));
            return;
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errs.push(format!("{path}: {v} not in {e:?}"));
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errs.push(format!("{path}: {v} != {c}"));
        }
    }
    if let Some(n) = v.as_f64() {
        if s.get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
        {
            errs.push(format!("{path}: {n} below minimum"));
        }
        if s.get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n > m)
        {
            errs.push(format!("{path}: {n} above maximum"));
        }
        if s.get("exclusiveMinimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n <= m)
        {
            errs.push(format!("{path}: {n} not above exclusiveMinimum"));
        }
    }
    if let Some(alts) = s.get("oneOf").and_then(Value::as_array) {
        let matching = alts
            .iter()
            .filter(|a| {
                let mut e = Vec::new();
                validate(root, a, v, path, &mut e);
                e.is_empty()
            })
            .count();
        if matching != 1 {
            errs.push(format!(
                "{path}: {v} matches {matching} of oneOf, expected exactly 1"
            ));
        }
    }
    if let Some(obj) = v.as_object() {
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or("?");
            if !obj.contains_key(r) {
                errs.push(format!("{path}: missing required key {r}"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, x) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => validate(root, ps, x, &format!("{path}.{k}"), errs),
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errs.push(format!("{path}: unexpected key {k}"))
                }
                None => {}
            }
        }
    }
    if let Some(arr) = v.as_array() {
        if let Some(m) = s.get("minItems").and_then(Value::as_u64) {
            if (arr.len() as u64) < m {
                errs.push(format!("{path}: {} items < {m}", arr.len()));
            }
        }
        if let Some(m) = s.get("maxItems").and_then(Value::as_u64) {
            if (arr.len() as u64) > m {
                errs.push(format!("{path}: {} items > {m}", arr.len()));
            }
        }
        if let Some(items) = s.get("items") {
            for (i, x) in arr.iter().enumerate() {
                validate(root, items, x, &format!("{path}[{i}]"), errs);
            }
        }
    }
}

fn schema_errors(doc: &Value) -> Vec<String> {
    let schema: Value =
        serde_json::from_slice(&std::fs::read(repo("docs/bench-schema.json")).unwrap()).unwrap();
    let mut errs = Vec::new();
    validate(&schema, &schema, doc, "$", &mut errs);
    errs
}

#[test]
fn the_validator_catches_a_missing_key_and_a_wrong_type() {
    let out = serde_json::json!({"schema": "lookout-bench/1", "trustworthy": "yes"});
    let errs = schema_errors(&out);
    assert!(
        errs.iter().any(|e| e.contains("missing required key runs")),
        "{errs:?}"
    );
    assert!(errs.iter().any(|e| e.contains("$.trustworthy")), "{errs:?}");
}

#[test]
fn frames_40_json_is_one_document_that_validates() {
    let out = bench(&["--frames", "40", "--json"], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    let errs = schema_errors(&doc);
    assert!(errs.is_empty(), "schema violations: {errs:#?}");
    assert_eq!(
        doc["self_check"]["status"], "passed",
        "{}",
        doc["self_check"]
    );
    assert_eq!(doc["settings"]["limit"]["frames"], 40);
    assert_eq!(doc["settings"]["source"], "demo");
    let run = &doc["runs"][0];
    assert!(run["frames"]["processed"].as_u64().unwrap() >= 40, "{run}");
    assert!(run["model"]["load_time_ms"].as_f64().unwrap() > 0.0);
    let stages: Vec<&str> = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        [
            "capture",
            "track",
            "gray",
            "preprocess",
            "model",
            "postprocess"
        ]
    );
    let threads: Vec<&str> = run["cpu"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(threads.starts_with(&["lookout-capture", "lookout-track", "lookout-detect"]));
    assert!(doc["peak_rss_kib"].as_u64().unwrap() > 0);
    assert!(doc["system"]["cores"].as_u64().unwrap() >= 1);
    // One source is one camera, whose figures are the run's.
    let cams = run["cameras"].as_array().unwrap();
    assert_eq!(cams.len(), 1, "{run}");
    assert_eq!(cams[0]["frames"], run["frames"]);
}

/// What `key` of `frames` adds up to over a run's cameras.
fn camera_sum(run: &Value, key: &str) -> u64 {
    run["cameras"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["frames"][key].as_u64().unwrap())
        .sum()
}

#[test]
fn two_sources_are_two_cameras_and_the_run_is_their_total() {
    let out = bench(
        &[
            "--source", "demo", "--source", "demo", "--frames", "30", "--json",
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    let errs = schema_errors(&doc);
    assert!(errs.is_empty(), "schema violations: {errs:#?}");
    assert_eq!(doc["settings"]["source"], "demo + demo");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    let names: Vec<&str> = run["cameras"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cam1", "cam2"]);
    for c in run["cameras"].as_array().unwrap() {
        // Each camera runs until it processed --frames frames.
        assert!(c["frames"]["processed"].as_u64().unwrap() >= 30, "{c}");
        assert!(c["source"].as_str().unwrap().contains("demo"), "{c}");
    }
    for key in [
        "captured",
        "processed",
        "dropped",
        "detections",
        "detect_skipped",
    ] {
        assert_eq!(
            run["frames"][key].as_u64().unwrap(),
            camera_sum(run, key),
            "{key}: {run}"
        );
    }
    // One model for both cameras: one self-checked model, one detector thread.
    assert_eq!(doc["self_check"]["models"].as_array().unwrap().len(), 1);
    let detect_threads = run["cpu"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "lookout-detect")
        .count();
    assert_eq!(detect_threads, 1, "{}", run["cpu"]);

    // The table gives a line per camera.
    let out = bench(
        &["--source", "demo", "--source", "demo", "--frames", "20"],
        None,
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    let line = |name: &str| {
        table
            .lines()
            .any(|l| l.starts_with(name) && l.contains("demo"))
    };
    assert!(line("cam1") && line("cam2"), "{table}");
}

#[test]
fn a_configuration_s_cameras_are_benchmarked_by_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("two.toml");
    std::fs::write(
        &cfg,
        "[[camera]]\nname = \"door\"\n[camera.source]\nspec = \"demo\"\n\
         [[camera]]\nname = \"yard\"\ndetect_every = 3\n[camera.source]\nspec = \"demo\"\n",
    )
    .unwrap();
    let out = bench(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--frames",
            "10",
            "--json",
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    let names: Vec<&str> = doc["runs"][0]["cameras"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["door", "yard"]);
}

#[test]
fn several_sources_name_what_they_cannot_do() {
    // A sweep runs one camera: refused as a command line, before anything is loaded.
    let out = bench(
        &["--source", "demo", "--source", "demo", "--sweep", "threads"],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("--sweep") && err.contains("--source"), "{err}");
    // A bad second source is named as that camera's.
    let out = bench(
        &[
            "--source",
            "demo",
            "--source",
            "/nonexistent/b.mjpeg",
            "--frames",
            "5",
        ],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("cam2.source.spec") && err.contains("/nonexistent/b.mjpeg"),
        "{err}"
    );
}

#[test]
fn truth_scores_each_camera_s_run_against_its_own_ground_truth() {
    let (a, b) = (
        "tests/data/truth/vtest-200-399",
        "tests/data/truth/vtest-640x480-10fps",
    );
    let out = bench(
        &[
            "--source",
            &format!("{a}.mjpeg"),
            "--source",
            "demo",
            "--truth",
            &format!("{a}.gt.txt"),
            "--truth",
            &format!("{b}.gt.txt"),
            "--frames",
            "40",
            "--realtime",
            "--json",
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    let errs = schema_errors(&doc);
    assert!(errs.is_empty(), "schema violations: {errs:#?}");
    let cams = doc["runs"][0]["cameras"].as_array().unwrap();
    let mut found = 0.0;
    // Each camera against its own truth: 11 and 12 true objects (tests/data/truth/README.md).
    for (c, (file, objects)) in cams
        .iter()
        .zip([(format!("{a}.gt.txt"), 11), (format!("{b}.gt.txt"), 12)])
    {
        assert_eq!(c["truth_file"].as_str(), Some(file.as_str()), "{c}");
        assert_eq!(c["truth"]["objects"].as_u64(), Some(objects), "{c}");
        let recall = c["truth"]["recall"].as_f64().unwrap();
        // 40 of 200 frames were played (4 s at 10 fps): most true boxes not reached.
        assert!(recall < 0.5, "{c}");
        found += recall;
    }
    assert!(found > 0.0, "4 s of detections found no true box: {cams:?}");

    // Not one truth per camera; another sweep's rows: refused before anything runs.
    for args in [
        &["--source", "demo", "--truth", "a.txt", "--truth", "b.txt"][..],
        &["--sweep", "threads", "--truth", "a.txt"][..],
    ] {
        let out = bench(args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains("--truth"), "{err}");
    }
}

#[test]
fn a_sweep_prints_one_row_per_setting_and_a_recommendation() {
    let out = bench(&["--sweep", "detect-every", "--frames", "15"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in [1, 2, 3, 5, 10] {
        let row = format!("detect_every={n} ");
        assert!(
            stdout.lines().any(|l| l.starts_with(&row)),
            "no summary row for {row}:\n{stdout}"
        );
    }
    let last = stdout
        .lines()
        .find(|l| l.starts_with("recommended: ") || l.starts_with("no setting keeps up"));
    assert!(last.is_some(), "no recommendation:\n{stdout}");
    assert!(stdout.contains("self-check passed"), "{stdout}");
}

fn copy_golden(tag: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("lookout-golden-{tag}"))
        .tempdir()
        .unwrap();
    for e in std::fs::read_dir(repo("models/golden")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    dir
}

#[test]
fn a_corrupted_golden_output_fails_the_self_check_with_status_2() {
    let dir = copy_golden("corrupt");
    let path = dir.path().join("detections.json");
    let mut all: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    // The default model's top detection on the astronaut becomes a cat (whichever built-in
    // model this CPU runs by default).
    for m in ["nanodet-g-416-int8.onnx", "nanodet-g-416-fp32.onnx"] {
        all[m]["astronaut"][0]["class_id"] = Value::from(15);
    }
    std::fs::write(&path, serde_json::to_vec(&all).unwrap()).unwrap();

    let out = bench(&["--frames", "10", "--json"], Some(dir.path()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("SELF-CHECK FAILED"), "{stderr}");
    let doc = json_of(&out);
    assert!(schema_errors(&doc).is_empty());
    assert_eq!(doc["self_check"]["status"], "failed");
    assert_eq!(doc["trustworthy"], false);
    let m = &doc["self_check"]["models"][0];
    assert!(
        m["reason"].as_str().unwrap().contains("astronaut"),
        "the failing photo is named: {m}"
    );
    // The table says so too.
    let out = bench(&["--frames", "10"], Some(dir.path()));
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("NOT trustworthy"), "{stdout}");
}

#[test]
fn no_golden_data_skips_the_self_check_without_failing() {
    let empty = tempfile::tempdir().unwrap();
    let out = bench(&["--frames", "10"], Some(empty.path()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("self-check skipped: no golden data"),
        "{stdout}"
    );
}

#[test]
fn bad_arguments_are_named() {
    let out = bench(
        &["--source", "/nonexistent/clip.mjpeg", "--frames", "5"],
        None,
    );
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/clip.mjpeg"));
    // An existing file no source reads is a configuration error too (it used to fail later,
    // opening the source, with status 1).
    let dir = tempfile::tempdir().unwrap();
    let avi = dir.path().join("clip.avi");
    std::fs::write(&avi, b"RIFF....AVI ").unwrap();
    let out = bench(&["--source", avi.to_str().unwrap(), "--frames", "5"], None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("source.spec") && err.contains("clip.avi"),
        "{err}"
    );
}

#[test]
fn clap_refuses_bad_command_lines_with_ex_usage_naming_the_flag() {
    // Refused by clap before anything is loaded (the missing config file is never read), with
    // status 64: not 1 (a runtime failure), not 2 (the self-check failed), not 78.
    let cases: [(&[&str], &[&str]); 10] = [
        (
            &["--sweep", "threads", "--tracks-out", "/tmp/x.jsonl"],
            &["--tracks-out", "--sweep"],
        ),
        (
            &["--sweep", "fidelity", "--tracks-out", "/tmp/x.jsonl"],
            &["--tracks-out", "--sweep"],
        ),
        (
            &["--sweep", "fidelity", "--inference-only", "3"],
            &["--inference-only", "--sweep"],
        ),
        (
            &["--inference-only", "3", "--sweep", "model"],
            &["--inference-only", "--sweep"],
        ),
        (
            &["--inference-only", "3", "--tracks-out", "/tmp/x.jsonl"],
            &["--inference-only", "--tracks-out"],
        ),
        (
            &["--inference-only", "0"],
            &["--inference-only", "at least 1"],
        ),
        (&["--frames", "0"], &["--frames", "at least 1"]),
        (&["--seconds", "0"], &["--seconds", "positive"]),
        (&["--seconds", "NaN"], &["--seconds", "positive"]),
        (&["--seconds", "-1"], &["--seconds", "positive"]),
    ];
    for (args, wants) in cases {
        let args = [args, &["--config", "/nonexistent/lookout.toml"][..]].concat();
        let out = bench(&args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        for want in wants {
            assert!(err.contains(want), "{args:?}: no '{want}' in: {err}");
        }
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // --help is not an error.
    let out = bench(&["--help"], None);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--inference-only"));
}

/// The fidelity section's rows by name, after checking what must hold whatever the footage:
/// one row per schedule in order, coverage in 0..=1, N = 1 detects on every frame, the
/// adaptive schedule's causes sum to its detections, N = 10 detects no more than N = 1.
fn fidelity_rows(doc: &Value, frames: u64) -> Vec<&Value> {
    assert!(schema_errors(doc).is_empty(), "{:#?}", schema_errors(doc));
    assert_eq!(doc["settings"]["mode"], "fidelity");
    assert_eq!(doc["settings"]["sweep"], "fidelity");
    assert_eq!(doc["settings"]["limit"]["frames"], frames);
    assert_eq!(doc["runs"].as_array().map(Vec::len), Some(0));
    let f = &doc["fidelity"];
    assert_eq!(f["frames"], frames, "{f}");
    let rows: Vec<&Value> = f["rows"].as_array().unwrap().iter().collect();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["N=1", "N=2", "N=3", "N=5", "N=10", "adaptive"]);
    for r in &rows {
        let c = r["coverage"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&c), "{r}");
        let causes = &r["causes"];
        let sum: u64 = ["interval", "motion", "uncertain", "idle"]
            .iter()
            .map(|k| causes[k].as_u64().unwrap())
            .sum();
        assert_eq!(sum, r["detections"].as_u64().unwrap(), "{r}");
        let misses = &r["misses"];
        let missed: u64 = [
            "unreported",
            "weak",
            "moved",
            "jumped",
            "label",
            "at_detection",
        ]
        .iter()
        .map(|k| misses[k].as_u64().unwrap())
        .sum();
        let reference = f["reference_detections"].as_u64().unwrap();
        assert_eq!(missed, reference - r["covered"].as_u64().unwrap(), "{r}");
    }
    // N = 1 detects on every frame: what it misses, it misses on a detection frame.
    let n1 = &rows[0]["misses"];
    for k in ["unreported", "weak", "moved", "jumped"] {
        assert_eq!(n1[k], 0, "{n1}");
    }
    assert_eq!(rows[0]["detections_per_frame"].as_f64(), Some(1.0));
    assert_eq!(rows[0]["detections"].as_u64(), Some(frames));
    assert_eq!(rows[0]["cpu_vs_n1"].as_f64(), Some(1.0));
    assert!(rows[4]["detections"].as_u64() <= rows[0]["detections"].as_u64());
    assert_eq!(rows[5]["schedule"], "adaptive");
    rows
}

#[test]
fn a_fidelity_sweep_on_the_clip_is_one_document_with_a_row_per_schedule() {
    let out = bench(&["--sweep", "fidelity", "--frames", "20", "--json"], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    fidelity_rows(&doc, 20);
    assert_eq!(doc["fidelity"]["source"], "demo");
    assert_eq!(doc["self_check"]["status"], "passed");
    assert!(doc["fidelity"]["reference_detections"].as_u64().unwrap() > 0);
}

#[test]
fn a_fidelity_sweep_reads_an_image_directory_and_prints_a_table() {
    // Five copies of one photo: a still scene, and a person in it.
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::copy(
            repo("tests/data/astronaut.jpg"),
            dir.path().join(format!("{i:02}.jpg")),
        )
        .unwrap();
    }
    let spec = dir.path().to_str().unwrap();
    let out = bench(&["--sweep", "fidelity", "--source", spec, "--json"], None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    fidelity_rows(&doc, 5);
    assert_eq!(doc["fidelity"]["source"], spec);
    assert_eq!(doc["fidelity"]["frame_width"], 512);
    // The table: its header says what the words mean, then one line per schedule.
    let out = bench(&["--sweep", "fidelity", "--source", spec], None);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("lockstep: ") && stdout.contains("reference: "),
        "{stdout}"
    );
    for row in ["| N = 1 |", "| N = 10 |", "| adaptive (≤ "] {
        assert!(stdout.contains(row), "no {row}:\n{stdout}");
    }
}

#[test]
fn a_fidelity_sweep_names_what_it_cannot_record() {
    let dir = tempfile::tempdir().unwrap();
    // A file that does not exist: a configuration error, as for the other modes.
    let missing = dir.path().join("missing.mjpeg");
    let out = bench(
        &["--sweep", "fidelity", "--source", missing.to_str().unwrap()],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(err.contains("missing.mjpeg"), "{err}");
    // A file that ends inside its first frame: a runtime failure naming it.
    let short = dir.path().join("short.y4m");
    let mut data = b"YUV4MPEG2 W64 H48 F10:1 C420\nFRAME\n".to_vec();
    data.extend([7u8; 100]);
    std::fs::write(&short, data).unwrap();
    let out = bench(
        &["--sweep", "fidelity", "--source", short.to_str().unwrap()],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--sweep fidelity") && err.contains("short.y4m"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // A time limit means nothing for a recording made frame by frame.
    let out = bench(&["--sweep", "fidelity", "--seconds", "5"], None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--frames"), "{err}");
}

#[test]
fn an_absurd_y4m_is_an_error_not_an_empty_run() {
    // What a new user tried: a header claiming 99999² over a 1000-byte body once ran "0
    // captured" with "154.53 cores busy (7726% of the machine)" and exit status 0.
    let dir = tempfile::tempdir().unwrap();
    let y4m = dir.path().join("absurd.y4m");
    let mut data = b"YUV4MPEG2 W99999 H99999 F10:1 C420\nFRAME\n".to_vec();
    data.extend([7u8; 1000]);
    std::fs::write(&y4m, data).unwrap();
    let out = bench(&["--source", y4m.to_str().unwrap(), "--frames", "10"], None);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("absurd.y4m") && stderr.contains("99999x99999"),
        "{stderr}"
    );
    assert!(!stdout.contains("cores busy"), "{stdout}");
    // Plausible size, but the file ends inside the first frame.
    let short = dir.path().join("short.y4m");
    let mut data = b"YUV4MPEG2 W640 H480 F10:1 C420\nFRAME\n".to_vec();
    data.extend([7u8; 1000]);
    std::fs::write(&short, data).unwrap();
    let out = bench(&["--source", short.to_str().unwrap(), "--json"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("short.y4m") && stderr.contains("460800") && stderr.contains("1006"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_sub_second_run_prints_counts_but_no_rates() {
    // Two frames of the clip take a few ms: rates and CPU shares over that are noise.
    let out = bench(&["--frames", "2", "--json"], None);
    assert_eq!(out.status.code(), Some(0));
    let doc = json_of(&out);
    let errs = schema_errors(&doc);
    assert!(errs.is_empty(), "schema violations: {errs:#?}");
    let run = &doc["runs"][0];
    if run["wall_s"].as_f64().unwrap() >= 1.0 {
        // A machine so loaded that two frames took a second: nothing to check here.
        eprintln!("skipped: the 2-frame run took {} s", run["wall_s"]);
        return;
    }
    assert!(
        run["not_measured"]
            .as_str()
            .unwrap()
            .contains("under the 1 s"),
        "{run}"
    );
    for k in ["fps", "capture_fps", "detect_fps"] {
        assert!(run[k].is_null(), "{k}: {run}");
    }
    assert!(run["cpu"]["cores_busy"].is_null() && run["cpu"]["utilisation_pct"].is_null());
    assert_eq!(run["keep_up"]["keeps_up"], false);
    let out = bench(&["--frames", "2"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("no rates or CPU shares"), "{stdout}");
    assert!(
        !stdout.contains("cores busy") && !stdout.contains("fps processed"),
        "{stdout}"
    );
}

#[test]
fn the_input_size_sweep_scores_every_size_by_object_height() {
    let t = "tests/data/truth/vtest-mosaic-half";
    let out = bench(
        &[
            "--sweep",
            "input-size",
            "--precision",
            "fp32",
            "--source",
            &format!("{t}.mjpeg"),
            "--truth",
            &format!("{t}.gt.txt"),
            "--frames",
            "3",
            "--json",
        ],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {err}");
    let doc = json_of(&out);
    let errs = schema_errors(&doc);
    assert!(errs.is_empty(), "schema violations: {errs:#?}");
    assert_eq!(doc["settings"]["mode"], "input-size");
    let r = &doc["input_size"];
    assert_eq!(r["frames"].as_u64(), Some(3), "{r}");
    assert_eq!(r["declared"], serde_json::json!([416, 416]));
    assert_eq!(r["auto"], serde_json::json!([416, 320]), "4:3 frames");
    let rows = r["rows"].as_array().unwrap();
    let sizes: Vec<(u64, u64)> = rows
        .iter()
        .map(|x| (x["width"].as_u64().unwrap(), x["height"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        sizes,
        [(320, 256), (416, 320), (416, 416), (512, 384), (640, 480)],
        "the swept sizes, smallest first, the auto one among them"
    );
    let small = |i: usize| &rows[i]["detections"]["small"];
    for row in rows {
        // Every size sees the same true boxes: 3 frames of distant people.
        assert_eq!(row["detections"]["frames"].as_u64(), Some(3), "{row}");
        assert_eq!(row["detections"]["small"]["boxes"], small(0)["boxes"]);
        assert!(row["model_ms"].as_f64().unwrap() > 0.0, "{row}");
        assert!(
            row["events_fixed"]["objects"].as_u64().unwrap() > 0,
            "{row}"
        );
    }
    assert!(small(0)["boxes"].as_u64().unwrap() > 20, "{r}");
    assert_eq!(rows[2]["model_vs_declared"].as_f64(), Some(1.0));
    // People under 24 px: 640x480 finds more of them than 320x256.
    assert!(
        small(4)["found"].as_u64() > small(0)["found"].as_u64(),
        "{}\n{}",
        small(0),
        small(4)
    );
    // The text table names the sizes and the auto one.
    let text = bench(
        &[
            "--sweep",
            "input-size",
            "--precision",
            "fp32",
            "--source",
            &format!("{t}.mjpeg"),
            "--frames",
            "1",
        ],
        None,
    );
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("| 416x320 (auto) |"), "{stdout}");
    // A live source cannot be replayed at six sizes; a time limit cannot bound a recording.
    for (args, says) in [
        (
            &[
                "--sweep",
                "input-size",
                "--source",
                "exec:cat tests/data/truth/tree-wind.mjpeg",
            ][..],
            "is a camera or a command",
        ),
        (
            &["--sweep", "input-size", "--seconds", "5"][..],
            "not --seconds",
        ),
    ] {
        let out = bench(args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            err.contains("--sweep input-size") && err.contains(says),
            "{args:?}: {err}"
        );
    }
}
