//! Frame sources without a camera: the bundled demo clip, damaged MJPEG streams, Y4M 4:2:0
//! and 4:2:2 files, image directories, looping, pacing and the errors for bad specs.
//! (The newest-frame logic of the camera source is unit-tested in `src/source/newest.rs`; a
//! real V4L2 capture runs in the VM, `tests/vm/v4l2-capture.sh`.)

use std::path::Path;
use std::time::Duration;

use lookout::frame::PixelFormat;
use lookout::source::{self, FrameSource, Pacing, SourceError, SourceOptions};

fn fast() -> SourceOptions {
    SourceOptions {
        pace: Pacing::AsFastAsPossible,
        ..SourceOptions::default()
    }
}

fn open(spec: &str, opts: &SourceOptions) -> Box<dyn FrameSource + Send> {
    match source::open(spec, opts) {
        Ok(s) => s,
        Err(e) => panic!("opening {spec}: {e}"),
    }
}

fn open_err(spec: &str) -> String {
    match source::open(spec, &fast()) {
        Ok(_) => panic!("{spec} opened but should not"),
        Err(e) => e.to_string(),
    }
}

/// Reads every frame; panics on errors.
fn drain(src: &mut dyn FrameSource) -> Vec<lookout::frame::Frame> {
    let mut v = Vec::new();
    loop {
        match src.next() {
            Ok(Some(f)) => v.push(f),
            Ok(None) => return v,
            Err(e) => panic!("reading: {e}"),
        }
    }
}

fn jpeg(w: u32, h: u32, shade: u8) -> Vec<u8> {
    let rgb: Vec<u8> = (0..w * h)
        .flat_map(|i| [shade, (i % 251) as u8, 255 - shade])
        .collect();
    let mut buf = Vec::new();
    let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut buf, 80);
    let r = image::ImageEncoder::write_image(enc, &rgb, w, h, image::ExtendedColorType::Rgb8);
    assert!(r.is_ok(), "{r:?}");
    buf
}

#[test]
fn demo_clip_plays_200_frames_in_order() {
    let mut src = open("demo", &fast());
    assert_eq!(src.fps(), Some(10.0));
    let frames = drain(src.as_mut());
    assert_eq!(frames.len(), 200);
    for w in frames.windows(2) {
        assert_eq!(w[1].seq, w[0].seq + 1);
        assert!(w[1].captured_at >= w[0].captured_at);
    }
    for f in &frames {
        assert_eq!(
            (f.width, f.height, f.format),
            (640, 480, PixelFormat::Mjpeg)
        );
    }
    let st = src.stats();
    assert_eq!((st.delivered, st.corrupt, st.dropped_stale), (200, 0, 0));
    // Every frame of the clip decodes.
    let mut scratch = lookout::preprocess::Scratch::new();
    let mut out = vec![0.0; 3 * 64 * 64];
    for f in frames.iter().step_by(20) {
        let r = lookout::preprocess::frame_to_tensor(
            f,
            64,
            64,
            lookout::preprocess::ResizeMode::Letterbox,
            &mut out,
            &mut scratch,
        );
        assert!(r.is_ok(), "frame {}: {r:?}", f.seq);
    }
}

#[test]
fn demo_clip_loops() {
    let opts = SourceOptions {
        looped: true,
        ..fast()
    };
    let mut src = open("demo", &opts);
    let mut last = None;
    for _ in 0..205 {
        match src.next() {
            Ok(Some(f)) => {
                if let Some(l) = last {
                    assert!(f.seq > l);
                }
                last = Some(f.seq);
            }
            other => panic!("looped clip ended: {other:?}"),
        }
    }
    assert_eq!(last, Some(204));
}

#[test]
fn real_time_pacing_spaces_frames() {
    // Behaviour, not speed: at 50 fps, 5 frames span at least 4 intervals.
    let opts = SourceOptions {
        pace: Pacing::RealTime,
        replay_fps: Some(50.0),
        ..SourceOptions::default()
    };
    let mut src = open("demo", &opts);
    let frames: Vec<_> = (0..5).filter_map(|_| src.next().ok().flatten()).collect();
    assert_eq!(frames.len(), 5);
    let span = frames[4].captured_at - frames[0].captured_at;
    assert!(span >= Duration::from_millis(75), "span {span:?}");
}

#[test]
fn damaged_mjpeg_stream_is_survived_and_counted() {
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir
        .as_ref()
        .map(|d| d.path())
        .unwrap_or(Path::new("/nonexistent"));
    let good: Vec<Vec<u8>> = (0..5).map(|i| jpeg(32, 24, 40 * i as u8)).collect();
    let mut data = Vec::new();
    data.extend(&good[0]);
    data.extend(&good[1]);
    data.extend(&good[2]);
    data.extend([0x11u8; 300]); // garbage between frames: skipped, not a frame
    data.extend(&good[3][..good[3].len() / 2]); // truncated JPEG: one corrupt frame
    data.extend([0xFF, 0xD8, 0xFF, 0x42, 0x42]); // SOI followed by junk: one corrupt frame
    data.extend(&good[4]);
    data.extend(&good[0]);
    data.extend(&good[1][..good[1].len() - 40]); // truncated at the very end: one corrupt
    let path = dir.join("damaged.mjpeg");
    assert!(std::fs::write(&path, &data).is_ok());
    let mut src = open(path.to_str().unwrap_or_default(), &fast());
    let frames = drain(src.as_mut());
    assert_eq!(frames.len(), 5);
    assert_eq!(frames[3].data, good[4]);
    assert_eq!(frames[4].data, good[0]);
    let seqs: Vec<u64> = frames.iter().map(|f| f.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    assert_eq!(src.stats().corrupt, 3);
    assert_eq!(src.stats().delivered, 5);
    assert!(frames.iter().all(|f| (f.width, f.height) == (32, 24)));
}

fn write_y4m(path: &Path, header: &str, frames: &[Vec<u8>]) {
    let mut data = header.as_bytes().to_vec();
    for f in frames {
        data.extend(b"FRAME\n");
        data.extend(f);
    }
    assert!(std::fs::write(path, data).is_ok());
}

#[test]
fn y4m_420_and_422_round_trip() {
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir
        .as_ref()
        .map(|d| d.path())
        .unwrap_or(Path::new("/nonexistent"));
    for (tag, format) in [
        ("C420jpeg", PixelFormat::Yu12),
        ("C420mpeg2 XYSCSS=420MPEG2", PixelFormat::Yu12),
        ("C422", PixelFormat::Yuv422p),
        ("Cmono", PixelFormat::Grey),
    ] {
        let (w, h) = (16u32, 10u32);
        let len = format.frame_len(w, h).unwrap_or(0);
        let frames: Vec<Vec<u8>> = (0..3u8)
            .map(|k| {
                (0..len)
                    .map(|i| (i as u8).wrapping_mul(3).wrapping_add(k))
                    .collect()
            })
            .collect();
        let path = dir.join(format!("clip-{}.y4m", format));
        write_y4m(
            &path,
            &format!("YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 {tag}\n"),
            &frames,
        );
        let mut src = open(path.to_str().unwrap_or_default(), &fast());
        assert_eq!(src.fps(), Some(25.0));
        let got = drain(src.as_mut());
        assert_eq!(got.len(), 3, "{tag}");
        for (g, want) in got.iter().zip(&frames) {
            assert_eq!((g.width, g.height, g.format), (w, h, format), "{tag}");
            assert_eq!(&g.data, want, "{tag}");
        }
    }
    // No C tag means 4:2:0; a truncated last frame is counted and ends the stream.
    let path = dir.join("default.y4m");
    let len = PixelFormat::Yu12.frame_len(8, 8).unwrap_or(0);
    let mut data = b"YUV4MPEG2 W8 H8 F30000:1001\nFRAME\n".to_vec();
    data.extend(vec![100u8; len]);
    data.extend(b"FRAME\n");
    data.extend(vec![100u8; len / 2]);
    assert!(std::fs::write(&path, data).is_ok());
    let mut src = open(path.to_str().unwrap_or_default(), &fast());
    assert!(src.fps().is_some_and(|f| (f - 29.97).abs() < 0.01));
    let got = drain(src.as_mut());
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].format, PixelFormat::Yu12);
    assert_eq!(src.stats().corrupt, 1);
}

#[test]
fn y4m_bad_headers_are_clear_errors() {
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir
        .as_ref()
        .map(|d| d.path())
        .unwrap_or(Path::new("/nonexistent"));
    let p = dir.join("c444.y4m");
    write_y4m(&p, "YUV4MPEG2 W8 H8 F25:1 C444\n", &[]);
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(
        e.contains("c444.y4m") && e.contains("C444") && e.contains("C420"),
        "{e}"
    );
    let p = dir.join("notyuv.y4m");
    assert!(std::fs::write(&p, b"hello world\n").is_ok());
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(e.contains("notyuv.y4m") && e.contains("YUV4MPEG2"), "{e}");
    let p = dir.join("nosize.y4m");
    write_y4m(&p, "YUV4MPEG2 F25:1\n", &[]);
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(e.contains("W or H"), "{e}");
}

#[test]
fn image_directory_plays_in_name_order() {
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir
        .as_ref()
        .map(|d| d.path())
        .unwrap_or(Path::new("/nonexistent"));
    assert!(std::fs::write(dir.join("b.jpg"), jpeg(20, 10, 10)).is_ok());
    let png = image::RgbImage::from_fn(12, 6, |x, y| image::Rgb([x as u8, y as u8, 7]));
    assert!(png.save(dir.join("a.png")).is_ok());
    assert!(std::fs::write(dir.join("c.JPEG"), jpeg(8, 8, 99)).is_ok());
    assert!(std::fs::write(dir.join("bb-broken.jpg"), b"not a jpeg at all").is_ok());
    assert!(std::fs::write(dir.join("notes.txt"), b"ignored").is_ok());
    let spec = format!("{}/", dir.display());
    let mut src = open(&spec, &fast());
    let frames = drain(src.as_mut());
    let got: Vec<(u32, u32, PixelFormat)> = frames
        .iter()
        .map(|f| (f.width, f.height, f.format))
        .collect();
    assert_eq!(
        got,
        vec![
            (12, 6, PixelFormat::Rgb24),
            (20, 10, PixelFormat::Mjpeg),
            (8, 8, PixelFormat::Mjpeg)
        ]
    );
    assert_eq!(frames[0].data[..3], [0, 0, 7]);
    assert_eq!(src.stats().corrupt, 1);
}

#[test]
fn bad_specs_are_clear_errors() {
    let e = open_err("/nonexistent/clip.mjpeg");
    assert!(e.contains("/nonexistent/clip.mjpeg"), "{e}");
    let e = open_err("/nonexistent/clip.y4m");
    assert!(e.contains("/nonexistent/clip.y4m"), "{e}");
    let e = open_err("movie.mp4");
    assert!(e.contains("movie.mp4") && e.contains("FILE.mjpeg"), "{e}");
    let e = open_err("");
    assert!(e.contains("unknown source"), "{e}");
    let e = open_err("/dev/video-lookout-test-missing");
    assert!(
        e.contains("/dev/video-lookout-test-missing") && e.contains("cannot open camera"),
        "{e}"
    );
    // /dev/null exists but is not a V4L2 device.
    let e = open_err("/dev/null");
    assert!(e.contains("/dev/null"), "{e}");

    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir
        .as_ref()
        .map(|d| d.path())
        .unwrap_or(Path::new("/nonexistent"));
    let e = open_err(dir.to_str().unwrap_or_default());
    assert!(e.contains("no usable frames") && e.contains(".png"), "{e}");
    let p = dir.join("empty.mjpeg");
    assert!(std::fs::write(&p, [0u8; 100]).is_ok());
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(e.contains("empty.mjpeg") && e.contains("FF D8 FF"), "{e}");
    let missing_dir = dir.join("nope/");
    let e = open_err(&format!("{}/", missing_dir.display()));
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn source_errors_say_whether_to_retry() {
    let e = source::open("/dev/video-lookout-test-missing", &fast()).err();
    assert!(matches!(e, Some(SourceError::NoDevice { .. })));
    assert!(e.is_some_and(|e| !e.is_transient()));
}

// ── empty and absurd recordings ──

/// A JPEG whose frame header (SOF0) claims `w`×`h`; the scan data stays the small image's.
fn with_sof_size(mut jpeg: Vec<u8>, w: u16, h: u16) -> Vec<u8> {
    let sof = jpeg
        .windows(2)
        .position(|m| m == [0xFF, 0xC0])
        .expect("baseline JPEG has an SOF0");
    jpeg[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
    jpeg[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    jpeg
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A small valid PNG whose IHDR claims `w`×`h` (a decompression bomb's header).
fn png_claiming(w: u32, h: u32) -> Vec<u8> {
    let mut png = Vec::new();
    let enc = image::codecs::png::PngEncoder::new(&mut png);
    let r = image::ImageEncoder::write_image(
        enc,
        &[0u8; 4 * 4 * 3],
        4,
        4,
        image::ExtendedColorType::Rgb8,
    );
    assert!(r.is_ok(), "{r:?}");
    // 8-byte signature, then IHDR: length (4), "IHDR" (4), width, height, ..., CRC.
    png[16..20].copy_from_slice(&w.to_be_bytes());
    png[20..24].copy_from_slice(&h.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

#[test]
fn absurd_y4m_sizes_are_refused_from_the_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    // What a new user tried: the header claims 99999², the body holds 1000 bytes. Refused
    // from the header (before any buffer is sized from it), naming the file and the size.
    let p = dir.path().join("absurd.y4m");
    let mut data = b"YUV4MPEG2 W99999 H99999 F10:1 C420\nFRAME\n".to_vec();
    data.extend([7u8; 1000]);
    std::fs::write(&p, data).expect("write");
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(
        e.contains("absurd.y4m") && e.contains("99999x99999") && e.contains("8192"),
        "{e}"
    );
    // Just over the limit on one side only.
    let p = dir.path().join("wide.y4m");
    write_y4m(&p, "YUV4MPEG2 W8193 H2 Cmono\n", &[vec![0u8; 8193 * 2]]);
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(e.contains("wide.y4m") && e.contains("8193x2"), "{e}");
    // At the limit is allowed (one row of 8192 grey pixels).
    let p = dir.path().join("edge.y4m");
    write_y4m(&p, "YUV4MPEG2 W8192 H1 Cmono\n", &[vec![9u8; 8192]]);
    let mut src = open(p.to_str().unwrap_or_default(), &fast());
    let got = drain(src.as_mut());
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].width, got[0].height), (8192, 1));
}

#[test]
fn a_y4m_that_ends_before_its_first_frame_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 640x480 4:2:0 needs 460800 bytes per frame; the file holds 1006 after its header.
    let p = dir.path().join("short.y4m");
    let mut data = b"YUV4MPEG2 W640 H480 F10:1 C420\nFRAME\n".to_vec();
    data.extend([7u8; 1000]);
    std::fs::write(&p, data).expect("write");
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(
        e.contains("short.y4m")
            && e.contains("truncated first frame")
            && e.contains("640x480")
            && e.contains("460800")
            && e.contains("1006"),
        "{e}"
    );
    // A header alone (no frame at all).
    let p = dir.path().join("header-only.y4m");
    write_y4m(&p, "YUV4MPEG2 W8 H8 C420\n", &[]);
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(
        e.contains("header-only.y4m") && e.contains("holds 0 bytes"),
        "{e}"
    );
    // Long enough on paper, but the FRAME line carries parameters and the pixels fall short:
    // caught on the first read, naming the frame and the byte counts.
    let p = dir.path().join("params.y4m");
    let mut data = b"YUV4MPEG2 W4 H4 Cmono\nFRAME".to_vec();
    data.extend([b' '; 20]);
    data.extend(b"\n");
    data.extend([1u8; 3]);
    std::fs::write(&p, data).expect("write");
    let mut src = open(p.to_str().unwrap_or_default(), &fast());
    match src.next() {
        Err(e @ SourceError::Empty { .. }) => {
            let e = e.to_string();
            assert!(
                e.contains("params.y4m") && e.contains("frame 0 truncated: 3 of the 16 bytes"),
                "{e}"
            );
        }
        other => panic!("expected an Empty error, got {other:?}"),
    }
}

#[test]
fn an_mjpeg_without_a_usable_jpeg_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = jpeg(32, 24, 90);
    // Cut inside the first (only) JPEG.
    let p = dir.path().join("cut.mjpeg");
    std::fs::write(&p, &good[..good.len() / 2]).expect("write");
    let e = open_err(p.to_str().unwrap_or_default());
    assert!(
        e.contains("cut.mjpeg") && e.contains("truncated") && e.contains("no usable frames"),
        "{e}"
    );
    // Every JPEG claims a size beyond the limit: 65500² (refused by the header reader as
    // before) and 9000x10 (over 8192 on one side).
    for (w, h) in [(65500u16, 65500u16), (9000, 10)] {
        let p = dir.path().join(format!("huge-{w}.mjpeg"));
        let big = with_sof_size(good.clone(), w, h);
        std::fs::write(&p, [big.clone(), big].concat()).expect("write");
        let e = open_err(p.to_str().unwrap_or_default());
        assert!(
            e.contains(&format!("huge-{w}.mjpeg")) && e.contains("bad header"),
            "{w}x{h}: {e}"
        );
    }
    // One absurd frame among good ones is skipped and counted, not fatal.
    let p = dir.path().join("mixed.mjpeg");
    let data = [
        good.clone(),
        with_sof_size(good.clone(), 9000, 10),
        good.clone(),
    ]
    .concat();
    std::fs::write(&p, data).expect("write");
    let mut src = open(p.to_str().unwrap_or_default(), &fast());
    assert_eq!(drain(src.as_mut()).len(), 2);
    assert_eq!(src.stats().corrupt, 1);
}

#[test]
fn an_image_directory_without_a_usable_image_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A PNG bomb's header (60000² would be 10 GB of RGB) is refused before decoding; with a
    // good image beside it, it is skipped and counted.
    std::fs::write(dir.path().join("a-bomb.png"), png_claiming(60000, 60000)).expect("write");
    std::fs::write(dir.path().join("b-wide.png"), png_claiming(9000, 4)).expect("write");
    std::fs::write(dir.path().join("c-good.jpg"), jpeg(16, 16, 10)).expect("write");
    let spec = format!("{}/", dir.path().display());
    let mut src = open(&spec, &fast());
    let got = drain(src.as_mut());
    assert_eq!(got.len(), 1);
    assert_eq!(src.stats().corrupt, 2);
    // Alone, the bad images make the first read an error naming the directory and the file.
    std::fs::remove_file(dir.path().join("c-good.jpg")).expect("rm");
    let mut src = open(&spec, &fast());
    match src.next() {
        Err(e @ SourceError::Empty { .. }) => {
            let e = e.to_string();
            assert!(
                e.contains(&dir.path().display().to_string())
                    && e.contains("2 skipped")
                    && e.contains("b-wide.png"),
                "{e}"
            );
        }
        other => panic!("expected an Empty error, got {other:?}"),
    }
    // The same directory looped ends the same way (it never loops over nothing).
    let mut src = open(
        &spec,
        &SourceOptions {
            looped: true,
            ..fast()
        },
    );
    assert!(matches!(src.next(), Err(SourceError::Empty { .. })));
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", path.display());
}

#[test]
fn an_mjpeg_fifo_yields_each_frame_as_it_arrives() {
    use std::io::Write;
    use std::sync::mpsc;
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("live.mjpeg");
    mkfifo(&fifo);
    let frames = [jpeg(32, 24, 10), jpeg(32, 24, 200)];
    let (got_tx, got_rx) = mpsc::channel::<u64>();
    let path = fifo.clone();
    let to_write = frames.clone();
    // The writer sends one frame, then waits (bounded) for the reader to have it before it
    // sends the next and closes: a reader that needs the writer to close first gets its
    // frames only after that wait has timed out, which the writer reports.
    let writer = std::thread::spawn(move || -> Vec<bool> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open the FIFO for writing");
        let mut in_time = Vec::new();
        for (i, frame) in to_write.iter().enumerate() {
            f.write_all(frame).expect("write");
            f.flush().expect("flush");
            let seen = got_rx.recv_timeout(Duration::from_secs(10));
            in_time.push(seen == Ok(i as u64));
        }
        in_time
    });
    let mut src = open(fifo.to_str().unwrap_or_default(), &fast());
    for i in 0..2u64 {
        let f = src.next().expect("read").expect("a frame");
        assert_eq!(f.seq, i);
        assert_eq!((f.width, f.height), (32, 24));
        let _ = got_tx.send(i);
    }
    let in_time = writer.join().expect("writer");
    assert_eq!(
        in_time,
        [true, true],
        "each frame must be delivered while the writer still holds the FIFO open"
    );
    assert!(matches!(src.next(), Ok(None)));
}

#[test]
fn recordings_that_are_devices_or_directories_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let zero = dir.path().join("zero.mjpeg");
    std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
    let e = open_err(zero.to_str().unwrap_or_default());
    assert!(
        e.contains("zero.mjpeg") && e.contains("character device"),
        "{e}"
    );
    let y4m = dir.path().join("zero.y4m");
    std::os::unix::fs::symlink("/dev/zero", &y4m).expect("symlink");
    let e = open_err(y4m.to_str().unwrap_or_default());
    assert!(
        e.contains("zero.y4m") && e.contains("character device"),
        "{e}"
    );
}

#[test]
fn a_looped_mjpeg_file_streams_again_from_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("three.mjpeg");
    let data = [jpeg(16, 16, 1), jpeg(24, 16, 2), jpeg(32, 16, 3)].concat();
    std::fs::write(&p, data).expect("write");
    let mut src = open(
        p.to_str().unwrap_or_default(),
        &SourceOptions {
            looped: true,
            ..fast()
        },
    );
    let widths: Vec<u32> = (0..7)
        .map(|_| src.next().expect("read").expect("frame").width)
        .collect();
    assert_eq!(widths, [16, 24, 32, 16, 24, 32, 16]);
}

#[test]
fn a_y4m_frame_rate_out_of_bounds_is_clamped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let frame = vec![128u8; 8 * 8 * 3 / 2];
    for (rate, want) in [
        ("F1:10", 1.0),
        ("F1000000000:1", 1000.0),
        ("F30000:1001", 29.97),
    ] {
        let p = dir.path().join("rate.y4m");
        write_y4m(
            &p,
            &format!("YUV4MPEG2 W8 H8 {rate} C420jpeg\n"),
            std::slice::from_ref(&frame),
        );
        let src = open(
            p.to_str().unwrap_or_default(),
            &SourceOptions {
                pace: Pacing::RealTime,
                ..SourceOptions::default()
            },
        );
        let fps = src.fps().unwrap_or_default();
        assert!((fps - want).abs() < 0.01, "{rate}: {fps} fps");
    }
}
