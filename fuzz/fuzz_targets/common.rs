//! Shared by the source targets: push every frame a source yields through both conversions.

use lookout::frame::MAX_FRAME_SIDE;
use lookout::frame::{Frame, GrayImage};
use lookout::preprocess::{self, ResizeMode, Scratch};
use lookout::source::FrameSource;

/// Frames read from one input at most (a looped source is not asked for).
pub const MAX_FRAMES: usize = 8;

/// Reads up to [`MAX_FRAMES`] frames; each must have a size within the limit, and goes through
/// `frame_to_tensor` (64×48, both resize modes), then `frame_to_gray` with the same scratch
/// (an MJPEG frame: from the colour decode) and with a scratch of its own, as the tracker's
/// thread has (an MJPEG frame: the JPEG's luma alone), 40 wide and half the frame's width.
pub fn drain(src: &mut dyn FrameSource) {
    let mut scratch = Scratch::new();
    let mut gray_scratch = Scratch::new();
    let mut tensor = vec![0.0f32; 3 * 64 * 48];
    let mut gray = GrayImage::default();
    for k in 0..MAX_FRAMES {
        let frame: Frame = match src.next() {
            Ok(Some(f)) => f,
            Ok(None) | Err(_) => return,
        };
        assert!(
            (1..=MAX_FRAME_SIDE).contains(&frame.width)
                && (1..=MAX_FRAME_SIDE).contains(&frame.height),
            "a source delivered a {}x{} frame",
            frame.width,
            frame.height
        );
        // Decoding a JPEG that claims thousands of pixels per side costs its full size; the
        // size check above is the finding, keep executions fast past it.
        if u64::from(frame.width) * u64::from(frame.height) > 1 << 20 {
            continue;
        }
        let mode = if k % 2 == 0 {
            ResizeMode::Letterbox
        } else {
            ResizeMode::Stretch
        };
        if preprocess::frame_to_tensor(&frame, 64, 48, mode, &mut tensor, &mut scratch).is_ok() {
            assert!(
                tensor.iter().all(|v| v.is_finite()),
                "non-finite tensor value"
            );
        }
        let half = (frame.width / 2).max(1);
        for (width, own) in [(40, false), (40, true), (half, true)] {
            let sc = if own { &mut gray_scratch } else { &mut scratch };
            if preprocess::frame_to_gray(&frame, width, &mut gray, sc).is_ok() {
                assert_eq!(gray.data.len(), gray.width as usize * gray.height as usize);
                assert!(gray.width <= width && gray.width >= 1 && gray.height >= 1);
            }
        }
    }
}
