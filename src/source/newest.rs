//! The "always the newest frame" rule, separated from the device so it can be tested with a
//! fake queue, plus the copy of padded camera rows into a tightly packed frame.
//!
//! A V4L2 capture queue hands out filled buffers oldest first. If the consumer is slower than
//! the camera, several may be waiting; handing them out one by one would make every frame
//! older than the last. [`take_newest`] instead waits for the first buffer, then drains every
//! other ready one without waiting, gives the older ones straight back to the driver and
//! keeps only the newest, counting how many it dropped.

use std::io;
use std::time::Duration;

use crate::frame::{PixelFormat, MAX_FRAME_SIDE};

/// The part of a capture queue that [`take_newest`] needs.
pub trait BufferQueue {
    /// Waits up to `timeout` for a filled buffer and takes it out of the queue.
    /// `Ok(None)` means none was ready in time (a zero timeout only checks).
    fn dequeue(&mut self, timeout: Duration) -> io::Result<Option<usize>>;
    /// Gives a buffer back to the driver to be filled again.
    fn requeue(&mut self, index: usize) -> io::Result<()>;
}

/// The newest ready buffer, dequeued and owned by the caller until it requeues it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Newest {
    /// Buffer index.
    pub index: usize,
    /// Older ready buffers that were given back unseen.
    pub dropped: u64,
}

/// Waits up to `timeout` for one buffer, then drains all other ready buffers (zero timeout),
/// requeueing every older one. Returns `Ok(None)` on timeout. The caller must requeue
/// `Newest::index` once it has copied the data.
///
/// # Errors
/// The first I/O error of the queue; a buffer already held is requeued (best effort) first.
pub fn take_newest<Q: BufferQueue + ?Sized>(
    queue: &mut Q,
    timeout: Duration,
) -> io::Result<Option<Newest>> {
    let Some(mut current) = queue.dequeue(timeout)? else {
        return Ok(None);
    };
    let mut dropped = 0;
    loop {
        match queue.dequeue(Duration::ZERO) {
            Ok(Some(newer)) => {
                if let Err(e) = queue.requeue(current) {
                    let _ = queue.requeue(newer);
                    return Err(e);
                }
                current = newer;
                dropped += 1;
            }
            Ok(None) => break,
            Err(e) => {
                let _ = queue.requeue(current);
                return Err(e);
            }
        }
    }
    Ok(Some(Newest {
        index: current,
        dropped,
    }))
}

/// Copies a camera buffer whose rows are `stride` bytes apart (V4L2 `bytesperline`, ≥ the
/// packed row length) into `dst` with no padding, the layout `Frame::data` promises.
///
/// Planar formats follow V4L2's single-plane conventions: NV12's UV plane has the luma stride;
/// YU12's and 422P's chroma planes have half of it. MJPEG is copied as is (`src` is the
/// `bytesused` prefix). Returns `None` when `src` is shorter than the layout needs.
pub fn pack_rows(
    src: &[u8],
    format: PixelFormat,
    width: u32,
    height: u32,
    stride: usize,
    dst: &mut Vec<u8>,
) -> Option<()> {
    dst.clear();
    // No camera delivers more; it also keeps every size below from overflowing.
    if width > MAX_FRAME_SIDE || height > MAX_FRAME_SIDE {
        return None;
    }
    let (w, h) = (width as usize, height as usize);
    let Some(packed_len) = format.frame_len(width, height) else {
        dst.extend_from_slice(src);
        return Some(());
    };
    let (row_bytes, cw, ch) = match format {
        PixelFormat::Yuyv | PixelFormat::Uyvy => (w.div_ceil(2) * 4, 0, 0),
        PixelFormat::Grey => (w, 0, 0),
        PixelFormat::Rgb24 => (w * 3, 0, 0),
        PixelFormat::Nv12 | PixelFormat::Yu12 => (w, w.div_ceil(2), h.div_ceil(2)),
        PixelFormat::Yuv422p => (w, w.div_ceil(2), h),
        PixelFormat::Mjpeg => (0, 0, 0),
    };
    let stride = stride.max(row_bytes);
    if stride == row_bytes {
        dst.extend_from_slice(src.get(..packed_len)?);
        return Some(());
    }
    dst.reserve(packed_len);
    let mut copy_plane =
        |offset: usize, rows: usize, row_len: usize, pitch: usize| -> Option<usize> {
            for r in 0..rows {
                let start = offset.checked_add(r.checked_mul(pitch)?)?;
                dst.extend_from_slice(src.get(start..start.checked_add(row_len)?)?);
            }
            offset.checked_add(rows.checked_mul(pitch)?)
        };
    let after_y = copy_plane(0, h, row_bytes, stride)?;
    match format {
        PixelFormat::Nv12 => {
            copy_plane(after_y, ch, 2 * cw, stride)?;
        }
        PixelFormat::Yu12 | PixelFormat::Yuv422p => {
            let cstride = stride / 2;
            let after_u = copy_plane(after_y, ch, cw, cstride)?;
            copy_plane(after_u, ch, cw, cstride)?;
        }
        _ => {}
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A fake driver: `ready` holds filled buffers oldest first, `queued` the ones given back.
    struct FakeQueue {
        ready: VecDeque<usize>,
        queued: Vec<usize>,
        fail_on_drain: bool,
        waits: Vec<Duration>,
    }

    impl BufferQueue for FakeQueue {
        fn dequeue(&mut self, timeout: Duration) -> io::Result<Option<usize>> {
            self.waits.push(timeout);
            if self.fail_on_drain && timeout == Duration::ZERO {
                return Err(io::Error::from_raw_os_error(libc::ENODEV));
            }
            Ok(self.ready.pop_front())
        }
        fn requeue(&mut self, index: usize) -> io::Result<()> {
            self.queued.push(index);
            Ok(())
        }
    }

    fn fake(ready: &[usize]) -> FakeQueue {
        FakeQueue {
            ready: ready.iter().copied().collect(),
            queued: Vec::new(),
            fail_on_drain: false,
            waits: Vec::new(),
        }
    }

    #[test]
    fn keeps_the_newest_and_requeues_the_rest() {
        let mut q = fake(&[2, 0, 1]);
        let n = take_newest(&mut q, Duration::from_millis(500))
            .ok()
            .flatten();
        assert_eq!(
            n,
            Some(Newest {
                index: 1,
                dropped: 2
            })
        );
        assert_eq!(q.queued, vec![2, 0]);
        // first wait uses the timeout, the drain never waits
        assert_eq!(q.waits[0], Duration::from_millis(500));
        assert!(q.waits[1..].iter().all(|w| w.is_zero()));
    }

    #[test]
    fn single_ready_buffer_drops_nothing() {
        let mut q = fake(&[1]);
        let n = take_newest(&mut q, Duration::from_millis(10))
            .ok()
            .flatten();
        assert_eq!(
            n,
            Some(Newest {
                index: 1,
                dropped: 0
            })
        );
        assert!(q.queued.is_empty());
    }

    #[test]
    fn timeout_is_none() {
        let mut q = fake(&[]);
        assert!(matches!(
            take_newest(&mut q, Duration::from_millis(10)),
            Ok(None)
        ));
    }

    #[test]
    fn error_while_draining_gives_the_held_buffer_back() {
        let mut q = fake(&[0, 1]);
        q.fail_on_drain = true;
        let r = take_newest(&mut q, Duration::from_millis(10));
        assert!(r.is_err());
        assert_eq!(q.queued, vec![0]);
    }

    #[test]
    fn padded_yuyv_rows_are_packed() {
        // 2x2 YUYV: 4 bytes per row, stride 8
        let src = [1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0];
        let mut dst = Vec::new();
        assert!(pack_rows(&src, PixelFormat::Yuyv, 2, 2, 8, &mut dst).is_some());
        assert_eq!(dst, vec![1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn padded_nv12_planes_are_packed() {
        // 2x2 NV12, stride 4: Y rows [1,2][3,4], UV row [5,6]
        let src = [1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0, 0];
        let mut dst = Vec::new();
        assert!(pack_rows(&src, PixelFormat::Nv12, 2, 2, 4, &mut dst).is_some());
        assert_eq!(dst, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn padded_yu12_planes_are_packed() {
        // 2x2 YU12, stride 4 (chroma stride 2): Y [1,2][3,4], U [5], V [6]
        let src = [1, 2, 0, 0, 3, 4, 0, 0, 5, 0, 6, 0];
        let mut dst = Vec::new();
        assert!(pack_rows(&src, PixelFormat::Yu12, 2, 2, 4, &mut dst).is_some());
        assert_eq!(dst, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn absurd_sizes_and_strides_are_none_not_a_panic() {
        let mut out = Vec::new();
        let src = [0u8; 64];
        assert!(pack_rows(&src, PixelFormat::Yuyv, u32::MAX, 2, 8, &mut out).is_none());
        assert!(pack_rows(&src, PixelFormat::Nv12, 4, 4, usize::MAX, &mut out).is_none());
        assert!(pack_rows(&src, PixelFormat::Yu12, 4, 4, usize::MAX / 2, &mut out).is_none());
    }

    #[test]
    fn short_buffer_is_none() {
        let mut dst = Vec::new();
        assert!(pack_rows(&[0; 5], PixelFormat::Grey, 2, 2, 4, &mut dst).is_none());
        assert!(pack_rows(&[0; 3], PixelFormat::Grey, 2, 2, 2, &mut dst).is_none());
    }
}
