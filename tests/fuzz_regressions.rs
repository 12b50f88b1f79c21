//! Inputs the fuzz targets (`fuzz/`, see docs/development.md, "Fuzzing") crashed on, replayed as plain
//! tests. The raw inputs are in `tests/data/fuzz/`, named after the target and the artifact
//! libFuzzer wrote (`cargo +nightly fuzz run --release --sanitizer none TARGET FILE` replays
//! one under the fuzzer).

use std::path::{Path, PathBuf};
use std::time::Duration;

use lookout::detect::decode::{self, RawOutputs, NUM_CLASSES, REG_MAX, STRIDES};
use lookout::detect::nms;
use lookout::frame::{Frame, GrayImage, PixelFormat};
use lookout::preprocess::{self, Mapping, PreprocessError, ResizeMode, Scratch};
use lookout::source::replay::ReplaySource;
use lookout::source::{FrameSource, Pacing, SourceOptions};

fn data(name: &str) -> (PathBuf, Vec<u8>) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(name);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (p, bytes)
}

/// `config` target: an unknown top-level key named `""` gave an error with an empty key
/// (`fuzz.toml:1:1: : unknown field …`); the key now says where: `(top level)`.
#[test]
fn an_unknown_empty_top_level_key_is_named_in_the_error() {
    let (_, bytes) = data("config-crash-6c02fd57443d5e916e5982d8b7f5d79f1e195a79");
    let text = std::str::from_utf8(&bytes).unwrap();
    let errs = lookout::config::Config::parse(text, "fuzz.toml").unwrap_err();
    assert!(!errs.0.is_empty());
    for e in &errs.0 {
        assert!(!e.key.is_empty() && !e.message.is_empty(), "{e}");
        assert_eq!(e.line, 1, "{e}");
    }
    assert_eq!(errs.0[0].key, "(top level)");
}

fn fast() -> SourceOptions {
    SourceOptions {
        pace: Pacing::AsFastAsPossible,
        ..SourceOptions::default()
    }
}

/// `y4m` target: a header token starting with a byte that is not UTF-8 (read as U+FFFD, three
/// bytes) was split at byte 1, inside the character: a panic opening the file.
#[test]
fn y4m_header_with_a_non_ascii_token_is_read_not_a_panic() {
    let (path, bytes) = data("y4m-crash-e9f82ef5.y4m");
    // That header has no W (its `W` is buried in garbage): a clear error, no panic.
    let err = ReplaySource::y4m_bytes(&path, bytes, &fast())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("y4m-crash-e9f82ef5.y4m") && err.contains("W or H"),
        "{err}"
    );
    // The same kind of token in an otherwise good header is ignored like any unknown tag.
    let mut y4m = b"YUV4MPEG2 \x92\x92x W4 H2 \xe2\x82 Cmono\nFRAME\n".to_vec();
    y4m.extend([50u8; 8]);
    let mut src = ReplaySource::y4m_bytes(Path::new("token.y4m"), y4m, &fast())
        .unwrap_or_else(|e| panic!("{e}"));
    let frame = src.next().ok().flatten().expect("one frame");
    assert_eq!(
        (frame.width, frame.height, frame.format),
        (4, 2, PixelFormat::Grey)
    );
}

/// `frame_convert` target: the second frame of the input is NV12 declaring 407416 x
/// 3295346697 with 11 bytes of data; frame → gray sized its row table (485 million entries)
/// from the declared height before looking at the data: out of memory. Now refused first.
#[test]
fn frame_to_gray_refuses_an_absurd_declared_size_before_allocating() {
    let (_, bytes) = data("frame_convert-oom-8161bae7.bin");
    // The target's layout: sel, sizes (u32 pair if sel & 8, else u16 pair mod 700), input
    // size, max gray width, body length, body.
    let mut rest: &[u8] = &bytes;
    let mut take = |n: usize| -> (u64, usize) {
        let k = n.min(rest.len());
        let mut b = [0u8; 8];
        b[..k.min(8)].copy_from_slice(&rest[..k.min(8)]);
        rest = &rest[k..];
        (u64::from_le_bytes(b), k)
    };
    let mut frames = Vec::new();
    for seq in 0..2u64 {
        let sel = take(1).0 as u8;
        let (w, h) = if sel & 8 != 0 {
            (take(4).0 as u32, take(4).0 as u32)
        } else {
            ((take(2).0 % 700) as u32, (take(2).0 % 700) as u32)
        };
        let _input = (take(2), take(2));
        let max_width = take(2).0 as u32;
        let claimed = take(2).0 as usize;
        let body = take(claimed).1; // the bytes actually there
        frames.push((seq, sel, w, h, max_width, body));
    }
    let (seq, sel, w, h, max_width, body) = frames[1];
    assert_eq!(
        (sel % 8, w, h, max_width, body),
        (2, 407_416, 3_295_346_697, 59_997, 11)
    );
    let frame = Frame {
        seq,
        captured_at: Duration::ZERO,
        width: w,
        height: h,
        format: PixelFormat::Nv12,
        data: vec![0u8; body],
    };
    let mut scratch = Scratch::new();
    let mut gray = GrayImage::default();
    let r = preprocess::frame_to_gray(&frame, max_width, &mut gray, &mut scratch);
    assert!(matches!(r, Err(PreprocessError::TooLarge { .. })), "{r:?}");
    let mut tensor = vec![0.0f32; 3 * 57 * 172];
    let r = preprocess::frame_to_tensor(
        &frame,
        57,
        172,
        ResizeMode::Letterbox,
        &mut tensor,
        &mut scratch,
    );
    assert!(matches!(r, Err(PreprocessError::TooLarge { .. })), "{r:?}");
    // Within the side limit but far more than the data holds: the length is checked first.
    let tall = Frame {
        height: 8192,
        width: 1,
        format: PixelFormat::Grey,
        data: vec![0u8; 11],
        ..frame
    };
    let r = preprocess::frame_to_gray(&tall, 1, &mut gray, &mut scratch);
    assert!(
        matches!(
            r,
            Err(PreprocessError::ShortFrame {
                expected: 8192,
                found: 11,
                ..
            })
        ),
        "{r:?}"
    );
}

/// `decode` target: raw outputs full of NaN, infinities and huge logits (what a broken model
/// or kernel could produce) decode to boxes that are finite and inside the input, and map to
/// boxes inside the image.
#[test]
fn decode_of_non_finite_outputs_keeps_boxes_finite_and_inside() {
    let (w, h) = (64usize, 48usize);
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30, -1e30, 0.9];
    let mut k = 0usize;
    let mut next = || {
        k += 1;
        specials[k % specials.len()]
    };
    let mut raw = RawOutputs::default();
    for &s in &STRIDES {
        let cells = (w / s) * (h / s);
        raw.cls
            .push((0..cells * NUM_CLASSES).map(|_| next()).collect());
        raw.reg
            .push((0..cells * 4 * (REG_MAX + 1)).map(|_| next()).collect());
    }
    let cands = decode::decode(&raw, w, h, 0.35);
    assert!(
        !cands.is_empty(),
        "the +inf and 0.9 scores pass the threshold"
    );
    let map = Mapping::new(640, 480, w as u32, h as u32, ResizeMode::Letterbox);
    for d in nms(cands, 0.6, 100) {
        let b = d.bbox;
        assert!(
            [b.x0, b.y0, b.x1, b.y1].iter().all(|v| v.is_finite())
                && 0.0 <= b.x0
                && b.x0 <= b.x1
                && b.x1 <= w as f32
                && 0.0 <= b.y0
                && b.y0 <= b.y1
                && b.y1 <= h as f32,
            "{b:?}"
        );
        let m = map.to_image(&b);
        assert!(
            m.x1 <= 640.0 && m.y1 <= 480.0 && m.x0 >= 0.0 && m.y0 >= 0.0,
            "{m:?}"
        );
    }
}
