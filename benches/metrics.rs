//! Cost of the metrics outlet on the tracker thread: one `Outlet::stats` call, what a closed
//! stats window costs with `[metrics]` on (adding a window of 300 frames and 60 detections,
//! reading the process's CPU time, memory and temperature, rendering the text, waking the
//! exporter), and one started event. No exporter thread runs (no listener, no text file).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use lookout::events::{Event, EventRecord};
use lookout::geom::BBox;
use lookout::metrics::{Metrics, MetricsConfig};
use lookout::notify::{Counters, Outlet};
use lookout::stats::Window;

fn window() -> Window {
    let mut w = Window {
        processed: 300,
        captured: 300,
        detections: 60,
        detect_interval: 60,
        elapsed: Duration::from_secs(10),
        ..Window::default()
    };
    for i in 0..300u64 {
        w.age.record(Duration::from_micros(20_000 + i * 37));
        w.track.record(Duration::from_micros(3_000 + i * 11));
    }
    for i in 0..60u64 {
        w.model.record(Duration::from_micros(150_000 + i * 1_013));
    }
    w
}

fn bench_outlet(c: &mut Criterion) {
    let cfg = MetricsConfig {
        enabled: true,
        listen: String::new(),
        textfile: String::new(),
    };
    let labels: Vec<String> = lookout::events::DEFAULT_LABELS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let m = Metrics::new(&cfg, &labels, Arc::new(Counters::default()));
    let w = window();
    let report = w.report(3);
    c.bench_function("metrics_stats_window", |b| {
        b.iter(|| m.stats("camera", black_box(&w), black_box(&report)))
    });
    let event = EventRecord::Start(Event {
        id: 1,
        track_id: 1,
        class_id: 0,
        score: 0.8,
        last_score: 0.8,
        bbox: BBox::new(10.0, 10.0, 50.0, 120.0),
        best_bbox: BBox::new(10.0, 10.0, 50.0, 120.0),
        zones: Vec::new(),
        seq: 1,
        seconds: 0.0,
    });
    c.bench_function("metrics_event_start", |b| {
        b.iter(|| m.event("camera", black_box(&event)))
    });
}

criterion_group!(benches, bench_outlet);
criterion_main!(benches);
