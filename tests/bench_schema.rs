//! `docs/bench-schema.json` against the report types of `lookout bench --json`
//! (`lookout::bench::report`): a report with every optional field filled in, and one with
//! every optional field empty, are serialized; every key path they have must be in the
//! schema, required, with a type (or enum value) the schema allows, in the schema's order, and every key
//! path the schema documents must be in one of the full reports. Renaming, adding or removing
//! a report field without the schema (or the other way round) fails here, with no model run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use lookout::bench::report::{
    BenchReport, CameraFigures, CheckStatus, CoreFigures, CoreMapFigures, CpuFigures, DetectCauses,
    EffectiveSettings, FidelityReport, FidelityRow, FrameCounts, ImageCheck, ImageTiming,
    InferenceTiming, KeepUp, Limit, MissCauses, ModelCheck, ModelFigures, OpTiming, Percentiles,
    PlainDetection, Recommendation, RunFigures, SelfCheck, StageFigures, SystemFigures,
    ThermalFigures, ThreadFigures, TruthScores, SCHEMA_ID,
};
use lookout::bench::report::{
    DetectionTruth, HeightRecall, InputSizeReport, InputSizeRow, ObjectEvents,
};
use lookout::bench::Sweep;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

fn schema_text() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench-schema.json");
    std::fs::read_to_string(&p).unwrap()
}

// ───────────────────────────── reports ─────────────────────────────

fn some<T>(full: bool, v: T) -> Option<T> {
    full.then_some(v)
}

fn many<T: Clone>(full: bool, v: T) -> Vec<T> {
    if full {
        vec![v.clone(), v]
    } else {
        Vec::new()
    }
}

fn thermal(full: bool) -> ThermalFigures {
    ThermalFigures {
        temp_c: some(full, 51.5),
        cpu_mhz: some(full, 1500.5),
        throttled: some(full, "0x50005".into()),
        throttled_flags: many(full, "under-voltage now".into()),
    }
}

fn model() -> ModelFigures {
    ModelFigures {
        name: "embedded:nanodet-g-416-int8.onnx".into(),
        datum: "int8".into(),
        input_w: 416,
        input_h: 416,
        threads: 2,
        load_time_ms: 812.5,
        int8_path: Some(
            "own int8 ops: 33 of 34 convs (kernel arm64simd_mmm_i32_8x8_dot), 27 im2col concats (27 written by the convs), 1 eager im2col, 28 lookup tables, 4 quantizations, 1 max-pool, 2 average pools, 2 resizes".into(),
        ),
    }
}

fn run(full: bool) -> RunFigures {
    let stage = StageFigures {
        name: "model".into(),
        what: "model (tract)".into(),
        count: 7,
        p50_ms: 1.5,
        p95_ms: 2.5,
        max_ms: 3.5,
        total_ms: 10.5,
        cpu_ms: some(full, 9.5),
        cpu_share_pct: some(full, 40.5),
    };
    RunFigures {
        setting: "detect_every=5".into(),
        model: model(),
        source: "demo".into(),
        source_fps: some(full, 10.5),
        detect_every: 5,
        end: "limit".into(),
        wall_s: 2.5,
        frames: FrameCounts {
            captured: 40,
            processed: 40,
            dropped: 1,
            detections: 8,
            detect_skipped: 2,
        },
        not_measured: some(full, "the run lasted 0.40 s".into()),
        fps: some(full, 20.5),
        capture_fps: some(full, 20.5),
        detect_fps: some(full, 4.5),
        frame_age: Percentiles {
            p50_ms: 1.5,
            p95_ms: 2.5,
            max_ms: 3.5,
        },
        // The schema wants exactly six stages.
        stages: vec![stage; 6],
        cpu: CpuFigures {
            process_s: 1.5,
            cores_busy: some(full, 0.5),
            utilisation_pct: some(full, 25.5),
            threads: vec![ThreadFigures {
                name: "lookout-detect".into(),
                core: some(full, 2),
                cpu_s: 0.5,
                pct_of_core: some(full, 30.5),
            }],
            per_core: many(
                full,
                CoreFigures {
                    core: 2,
                    threads: vec!["lookout-detect".into()],
                    pct: some(full, 30.5),
                },
            ),
            system_per_core_pct: many(full, 12.5),
        },
        keep_up: KeepUp {
            target_fps: 10.5,
            needed_detect_fps: 2.5,
            detect_capacity_fps: 6.5,
            track_capacity_fps: some(full, 90.5),
            keeps_up: true,
            projected_cpu_pct: 45.5,
        },
        core_map: CoreMapFigures {
            capture: some(full, 0),
            track: some(full, 1),
            detect: some(full, 2),
            matmul: many(full, 3),
        },
        // Two cameras: each camera's figures beside the run's total.
        cameras: vec![
            CameraFigures {
                name: "cam1".into(),
                source: "demo".into(),
                fps: some(full, 10.5),
                capture_fps: some(full, 10.5),
                detect_fps: some(full, 2.5),
                frame_age: Percentiles {
                    p50_ms: 1.5,
                    p95_ms: 2.5,
                    max_ms: 3.5,
                },
                frames: FrameCounts {
                    captured: 20,
                    processed: 20,
                    dropped: 1,
                    detections: 4,
                    detect_skipped: 1,
                },
                truth_file: some(full, "tests/data/truth/vtest-200-399.gt.txt".into()),
                truth: some(full, truth_scores(full)),
            };
            2
        ],
    }
}

/// Scores against a ground truth; `full`: the optional figures are there.
fn truth_scores(full: bool) -> TruthScores {
    TruthScores {
        objects: 12,
        events: 13,
        events_per_object: 1.1,
        events_per_object_max: 2,
        false_events: 1,
        false_event_share: 0.077,
        objects_to_find: 11,
        missed: 1,
        missed_share: 0.091,
        time_to_event_p50_s: some(full, 0.5),
        time_to_event_p90_s: some(full, 1.5),
        recall: 0.8,
        precision: 0.9,
        idf1: 0.7,
        objects_detail: if full {
            vec![ObjectEvents {
                id: 4,
                first_frame: 12,
                scored_frames: 40,
                tallest_px: 88.0,
                to_find: true,
                events: vec![3, 7],
                first_event_frame: Some(15),
            }]
        } else {
            Vec::new()
        },
        false_event_ids: if full { vec![9] } else { Vec::new() },
    }
}

/// `--sweep fidelity`'s section; `full`: its rows are there.
fn fidelity(full: bool) -> FidelityReport {
    let row = FidelityRow {
        name: "adaptive".into(),
        schedule: "adaptive".into(),
        detect_every: 5,
        coverage: 0.5,
        covered: 10,
        id_switches: 1,
        matched_track_frames: 12,
        id_switches_per_100: 8.5,
        detections: 4,
        detections_per_frame: 0.5,
        causes: DetectCauses {
            interval: 1,
            motion: 1,
            uncertain: 1,
            idle: 1,
        },
        misses: MissCauses {
            unreported: 4,
            weak: 1,
            moved: 2,
            jumped: 1,
            label: 1,
            at_detection: 1,
        },
        cpu_ms_per_frame: 12.5,
        cpu_vs_n1: 0.5,
        events: 3,
        truth: some(full, truth_scores(full)),
    };
    FidelityReport {
        source: "demo".into(),
        frames: 20,
        frame_width: 640,
        frame_height: 480,
        source_fps: 10.5,
        reference_detections: 20,
        detect_ms: 80.5,
        gray_ms: 1.5,
        record_s: 2.5,
        idle_detect_interval_s: 10.5,
        truth_file: some(full, "tests/data/truth/vtest-640x480-10fps.gt.txt".into()),
        rows: many(full, row),
    }
}

/// `--sweep input-size`'s section; `full`: its rows and their truth scores are there.
fn input_size(full: bool) -> InputSizeReport {
    let h = HeightRecall {
        boxes: 10,
        found: 7,
        recall: some(full, 0.7),
    };
    let row = InputSizeRow {
        width: 416,
        height: 320,
        scale: 0.65,
        padding: 0.025,
        model_ms: 20.5,
        model_vs_declared: 0.78,
        detect_ms: 24.5,
        detections: some(
            full,
            DetectionTruth {
                frames: 20,
                small: h,
                middle: h,
                large: h,
                all: h,
                false_boxes: 3,
                false_boxes_per_frame: 0.15,
            },
        ),
        events_fixed: some(full, truth_scores(full)),
        events_adaptive: some(full, truth_scores(full)),
    };
    InputSizeReport {
        source: "demo".into(),
        frames: 20,
        frame_width: 640,
        frame_height: 480,
        truth_file: some(full, "tests/data/truth/vtest-640x480-10fps.gt.txt".into()),
        declared: [416, 416],
        auto: [416, 320],
        timing_rounds: 12,
        rows: many(full, row),
    }
}

/// A report; `full`: every `Option` is `Some` and every list has entries.
fn report(full: bool, limit: Limit) -> BenchReport {
    let image = ImageCheck {
        image: "astronaut".into(),
        max_abs_diff: some(full, 0.5e-4),
        ours: some(full, "person 0.81".into()),
        golden: some(full, "person 0.80".into()),
        iou: some(full, 0.95),
        ok: true,
        problem: some(full, "top detection differs".into()),
    };
    BenchReport {
        schema: SCHEMA_ID.into(),
        lookout_version: "0.1.0".into(),
        settings: EffectiveSettings {
            mode: "pipeline".into(),
            config_file: some(full, "/etc/lookout/lookout.toml".into()),
            source: "demo".into(),
            pacing: "looped, as fast as possible".into(),
            limit,
            sweep: some(full, Sweep::DetectEvery),
            detect_every: 5,
            model: "embedded:nanodet-g-416-int8.onnx".into(),
            threads: 1,
            tracks_out: some(full, "/tmp/tracks.jsonl".into()),
            target_fps: 10.5,
        },
        system: SystemFigures {
            board: some(full, "Raspberry Pi 4 Model B Rev 1.4".into()),
            cpu_model: "Cortex-A72".into(),
            cpu_part: some(full, "0xd08".into()),
            cores: 4,
            arch: "aarch64".into(),
            kernel: some(full, "6.6.51".into()),
            os: some(full, "Debian GNU/Linux 12 (bookworm)".into()),
            glibc: some(full, "2.36".into()),
            cpu_features: many(full, "asimd".into()),
            dotprod: false,
            matmul_kernel: "arm64simd generic".into(),
            thermal_before: thermal(full),
            thermal_after: thermal(full),
            throttled_during_bench: false,
        },
        self_check: SelfCheck {
            status: CheckStatus::Passed,
            golden_dir: some(full, "models/golden".into()),
            reason: some(full, "self-check skipped: no golden data".into()),
            models: many(
                full,
                ModelCheck {
                    model: "embedded:nanodet-g-416-int8.onnx".into(),
                    golden_key: "nanodet-g-416-int8.onnx".into(),
                    status: CheckStatus::Failed,
                    reason: some(full, "astronaut: mismatch".into()),
                    images: many(full, image),
                },
            ),
        },
        trustworthy: true,
        runs: many(full, run(full)),
        recommendation: some(
            full,
            Recommendation {
                setting: some(full, "detect_every=5".into()),
                text: "recommended: detect_every=5".into(),
            },
        ),
        inference: some(
            full,
            InferenceTiming {
                model: model(),
                runs_per_image: 20,
                median_ms: 80.5,
                min_ms: 70.5,
                images: many(
                    full,
                    ImageTiming {
                        image: "coffee".into(),
                        median_ms: 80.5,
                        min_ms: 70.5,
                        detections: many(
                            full,
                            PlainDetection {
                                class_id: 41,
                                label: "cup".into(),
                                score: 0.5,
                                bbox: [1.5, 2.5, 100.5, 200.5],
                            },
                        ),
                    },
                ),
                ops: many(
                    full,
                    OpTiming {
                        op: "QConvI8".into(),
                        nodes: 34,
                        ms_per_run: 18.5,
                    },
                ),
            },
        ),
        fidelity: some(full, fidelity(full)),
        input_size: some(full, input_size(full)),
        peak_rss_kib: some(full, 123_456),
        total_s: 12.5,
    }
}

// ───────────────────────────── the schema, flattened ─────────────────────────────

/// What the schema says about one key path (`settings.limit.frames`, `runs[].stages[].name`;
/// `[]` = any array item).
#[derive(Default, Debug)]
struct Node {
    /// JSON types allowed (`integer` also allows nothing else; `number` allows integers).
    types: BTreeSet<String>,
    /// Allowed values, when the schema lists them (`enum`, `const`).
    values: Option<Vec<Value>>,
    /// An object's keys, in the schema's order, and which are required.
    keys: Vec<String>,
    required: BTreeSet<String>,
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The schema document, and the order of every object's keys in its text (`Value` sorts
/// them), by their path in the document (`properties.settings.properties`).
struct Doc {
    root: Value,
    orders: Vec<(String, Vec<String>)>,
}

impl Doc {
    /// The keys of the object at `doc_path`, in document order (several objects at one path,
    /// the alternatives of a `oneOf`, one after the other).
    fn keys_at(&self, doc_path: &str) -> impl Iterator<Item = &String> {
        let doc_path = doc_path.to_string();
        self.orders
            .iter()
            .filter(move |(p, _)| *p == doc_path)
            .flat_map(|(_, keys)| keys)
    }
}

/// Records `schema` (at `doc_path` in the schema document; and what it references) under the
/// report's key path `path` in `out`.
fn flatten(
    doc: &Doc,
    schema: &Value,
    doc_path: &str,
    path: &str,
    out: &mut BTreeMap<String, Node>,
) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r
            .strip_prefix("#/$defs/")
            .expect("only #/$defs/ references");
        let def_path = format!("$defs.{name}");
        flatten(doc, &doc.root["$defs"][name], &def_path, path, out);
    }
    for alt in schema
        .get("oneOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        flatten(
            doc,
            alt,
            &format!("{}[]", join(doc_path, "oneOf")),
            path,
            out,
        );
    }
    let node = out.entry(path.to_string()).or_default();
    match schema.get("type") {
        Some(Value::String(t)) => {
            node.types.insert(t.clone());
        }
        Some(Value::Array(ts)) => node
            .types
            .extend(ts.iter().map(|t| t.as_str().unwrap().to_string())),
        _ => {}
    }
    let listed = match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(e)), _) => Some(e.clone()),
        (_, Some(c)) => Some(vec![c.clone()]),
        _ => None,
    };
    if let Some(vals) = listed {
        node.types
            .extend(vals.iter().map(|v| type_of(v).to_string()));
        node.values.get_or_insert_with(Vec::new).extend(vals);
    }
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        node.required.insert(r.as_str().unwrap().to_string());
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        node.types.insert("object".into());
        let props_path = join(doc_path, "properties");
        for k in doc.keys_at(&props_path) {
            if !node.keys.contains(k) {
                node.keys.push(k.clone());
            }
        }
        for (k, s) in props {
            flatten(doc, s, &join(&props_path, k), &join(path, k), out);
        }
    }
    if let Some(items) = schema.get("items") {
        out.entry(path.to_string())
            .or_default()
            .types
            .insert("array".into());
        let items_path = join(doc_path, "items");
        flatten(doc, items, &items_path, &format!("{path}[]"), out);
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn flat_schema() -> BTreeMap<String, Node> {
    let text = schema_text();
    let doc = Doc {
        root: serde_json::from_str(&text).unwrap(),
        orders: key_orders(&text),
    };
    let mut out = BTreeMap::new();
    flatten(&doc, &doc.root, "", "", &mut out);
    out
}

// ───────────────────────────── the comparison ─────────────────────────────

/// Checks `v` at `path` against the schema; pushes each disagreement to `errs` and each key
/// path seen to `seen`.
fn check(
    schema: &BTreeMap<String, Node>,
    v: &Value,
    path: &str,
    seen: &mut BTreeSet<String>,
    errs: &mut Vec<String>,
) {
    seen.insert(path.to_string());
    let shown = if path.is_empty() { "$" } else { path };
    let Some(node) = schema.get(path) else {
        errs.push(format!("{shown}: in the report, not in the schema"));
        return;
    };
    let t = type_of(v);
    let type_ok = node.types.contains(t) || (t == "integer" && node.types.contains("number"));
    if !type_ok {
        errs.push(format!(
            "{shown}: {t} {v}, the schema allows {:?}",
            node.types
        ));
    }
    if let Some(vals) = &node.values {
        if !vals.contains(v) {
            errs.push(format!("{shown}: {v} is not one of {vals:?}"));
        }
    }
    match v {
        Value::Object(obj) => {
            // Every key the report writes is always there: the schema must require it.
            let optional: Vec<&String> =
                obj.keys().filter(|k| !node.required.contains(*k)).collect();
            if !optional.is_empty() {
                errs.push(format!("{shown}: keys not in `required`: {optional:?}"));
            }
            for (k, x) in obj {
                check(schema, x, &join(path, k), seen, errs);
            }
        }
        Value::Array(items) => {
            for x in items {
                check(schema, x, &format!("{path}[]"), seen, errs);
            }
        }
        _ => {}
    }
}

/// Every object's keys in document order, by key path (`serde_json::Value` sorts them).
fn key_orders(json: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_str(json);
    let walk = Walk {
        path: String::new(),
        out: &mut out,
    };
    walk.deserialize(&mut de).unwrap();
    out
}

/// Walks a JSON document recording the order of each object's keys.
struct Walk<'a> {
    path: String,
    out: &'a mut Vec<(String, Vec<String>)>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        let path = format!("{}[]", self.path);
        while a
            .next_element_seed(Walk {
                path: path.clone(),
                out: &mut *self.out,
            })?
            .is_some()
        {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        let mut keys = Vec::new();
        while let Some(k) = a.next_key::<String>()? {
            a.next_value_seed(Walk {
                path: join(&self.path, &k),
                out: &mut *self.out,
            })?;
            keys.push(k);
        }
        self.out.push((self.path, keys));
        Ok(())
    }
}

/// Objects whose keys the report writes in another order than the schema lists them.
fn order_errors(schema: &BTreeMap<String, Node>, json: &str) -> Vec<String> {
    let mut errs = Vec::new();
    for (path, keys) in key_orders(json) {
        let Some(node) = schema.get(&path) else {
            continue; // reported by `check`
        };
        let documented: Vec<&String> = node.keys.iter().filter(|k| keys.contains(*k)).collect();
        if documented.len() == keys.len() && documented.iter().zip(&keys).any(|(a, b)| *a != b) {
            let shown = if path.is_empty() { "$" } else { &path };
            errs.push(format!(
                "{shown}: key order {keys:?}, the schema's {:?}",
                node.keys
            ));
        }
    }
    errs
}

/// The key paths the schema documents and no report had.
fn coverage_errors(schema: &BTreeMap<String, Node>, seen: &BTreeSet<String>) -> Vec<String> {
    schema
        .keys()
        .filter(|p| !seen.contains(*p))
        .map(|path| format!("{path}: in the schema, not in the report"))
        .collect()
}

/// Disagreements between the reports and the schema, both ways.
fn disagreements(full: &[BenchReport], empty: &[BenchReport]) -> Vec<String> {
    let schema = flat_schema();
    let mut errs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, r) in full.iter().chain(empty).enumerate() {
        let json = serde_json::to_string(r).unwrap();
        let v: Value = serde_json::from_str(&json).unwrap();
        // Only the full reports must cover the schema's paths.
        let mut ignored = BTreeSet::new();
        let seen = if i < full.len() {
            &mut seen
        } else {
            &mut ignored
        };
        check(&schema, &v, "", seen, &mut errs);
        errs.extend(order_errors(&schema, &json));
    }
    errs.extend(coverage_errors(&schema, &seen));
    errs.sort();
    errs.dedup();
    errs
}

#[test]
fn the_schema_documents_exactly_the_report_types() {
    let full = [
        report(true, Limit::Frames(40)),
        report(true, Limit::Seconds(8.5)),
    ];
    let empty = [report(false, Limit::Seconds(20.0))];
    let errs = disagreements(&full, &empty);
    assert!(
        errs.is_empty(),
        "docs/bench-schema.json and lookout::bench::report disagree:\n{}",
        errs.join("\n")
    );
}

#[test]
fn a_field_the_schema_lacks_or_a_wrong_type_is_caught() {
    // The check itself can fail: a report that differs from the schema.
    let mut v = serde_json::to_value(report(true, Limit::Frames(1))).unwrap();
    v["settings"]["surprise"] = Value::from(1);
    v["runs"][0]["frames"]["captured"] = Value::from("forty");
    v["self_check"]["status"] = Value::from("maybe");
    for run in v["runs"].as_array_mut().unwrap() {
        run["cpu"].as_object_mut().unwrap().remove("per_core");
    }
    let schema = flat_schema();
    let (mut seen, mut errs) = (BTreeSet::new(), Vec::new());
    check(&schema, &v, "", &mut seen, &mut errs);
    errs.extend(coverage_errors(&schema, &seen));
    let has = |s: &str| errs.iter().any(|e| e.contains(s));
    assert!(
        has("settings.surprise: in the report, not in the schema"),
        "{errs:#?}"
    );
    assert!(has("runs[].frames.captured: string"), "{errs:#?}");
    assert!(has("self_check.status: \"maybe\""), "{errs:#?}");
    assert!(
        has("runs[].cpu.per_core: in the schema, not in the report"),
        "{errs:#?}"
    );
    // Keys out of the schema's order.
    let swapped = r#"{"lookout_version": "0.1.0", "schema": "lookout-bench/1"}"#;
    let errs = order_errors(&schema, swapped);
    assert!(
        errs.iter().any(|e| e.starts_with("$: key order")),
        "{errs:#?}"
    );
}
