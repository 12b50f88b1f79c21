//! A V4L2 buffer's padded rows → packed frame data (`pack_rows`, any stride), then frame →
//! tensor and frame → gray, for every pixel format with arbitrary sizes (any u32, or small),
//! data lengths (arbitrary, or exactly the format's length), model input sizes and tensor
//! buffer lengths: no panic, finite output, the promised sizes.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use lookout::frame::{Frame, GrayImage, PixelFormat};
use lookout::preprocess::{self, ResizeMode, Scratch};
use lookout::source::newest::pack_rows;

/// Reads numbers off the front of the input, zeros once it is used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        let n = N.min(self.0.len());
        b[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        b
    }
    fn u8(&mut self) -> u8 {
        self.bytes::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.bytes())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let mut scratch = Scratch::new();
    // Two frames through one scratch: the second reuses (or must invalidate) the first's taps.
    for seq in 0..2u64 {
        let sel = input.u8();
        let format = PixelFormat::ALL[usize::from(sel) % PixelFormat::ALL.len()];
        let (width, height) = if sel & 0x08 != 0 {
            (input.u32(), input.u32())
        } else {
            (u32::from(input.u16() % 700), u32::from(input.u16() % 700))
        };
        let (iw, ih) = (u32::from(input.u16() % 500), u32::from(input.u16() % 500));
        let mode = if sel & 0x10 != 0 {
            ResizeMode::Stretch
        } else {
            ResizeMode::Letterbox
        };
        let max_width = u32::from(input.u16());
        let body_len = usize::from(input.u16());
        let body = &input.0[..body_len.min(input.0.len())];
        input.0 = &input.0[body.len()..];
        // Exactly the format's length (the bytes cycled) when asked and not absurdly large.
        let data = match format.frame_len(width.min(4096), height.min(4096)) {
            Some(len) if sel & 0x20 != 0 && width <= 4096 && height <= 4096 && len <= 1 << 22 => {
                if body.is_empty() {
                    vec![128u8; len]
                } else {
                    body.iter().copied().cycle().take(len).collect()
                }
            }
            _ => body.to_vec(),
        };
        // A V4L2 buffer's rows `stride` bytes apart (any stride, any buffer length): packed
        // rows of exactly the format's length, or refused.
        let stride = usize::from(input.u16()) << (input.u8() % 24);
        let mut packed = Vec::new();
        if pack_rows(&data, format, width, height, stride, &mut packed).is_some() {
            if let Some(len) = format.frame_len(width, height) {
                assert_eq!(packed.len(), len, "packed rows of the wrong length");
            }
        }
        let frame = Frame {
            seq,
            captured_at: Duration::from_millis(seq),
            width,
            height,
            format,
            data,
        };
        let want = 3 * iw as usize * ih as usize;
        let mut tensor = vec![0.0f32; if sel & 0x40 != 0 { want / 2 } else { want }];
        if let Ok(map) =
            preprocess::frame_to_tensor(&frame, iw, ih, mode, &mut tensor, &mut scratch)
        {
            assert_eq!(tensor.len(), want, "accepted a wrong tensor length");
            assert!(
                tensor.iter().all(|v| v.is_finite()),
                "non-finite tensor value"
            );
            assert!(map.scale_x > 0.0 && map.scale_y > 0.0, "{map:?}");
        }
        let mut gray = GrayImage::default();
        if preprocess::frame_to_gray(&frame, max_width, &mut gray, &mut scratch).is_ok() {
            assert!(
                gray.width >= 1 && gray.width <= max_width.min(width),
                "{}",
                gray.width
            );
            assert!(gray.height >= 1 && gray.height <= height);
            assert_eq!(gray.data.len(), gray.width as usize * gray.height as usize);
            assert!(gray.scale >= 1.0);
        }
    }
});
