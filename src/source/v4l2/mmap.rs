//! The mmap capture queue: every `unsafe` of the V4L2 backend, each block with its SAFETY
//! comment.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use v4l::device::Handle;

use super::{V4L2_BUF_TYPE_VIDEO_CAPTURE, V4L2_MEMORY_MMAP};
use crate::source::newest::BufferQueue;

/// What the driver said about a dequeued buffer.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BufMeta {
    pub(super) bytesused: u32,
    pub(super) flags: u32,
    pub(super) sequence: u32,
    pub(super) timestamp: Duration,
}

/// One mapped driver buffer.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

/// A minimal mmap capture queue: buffers the driver fills, which we dequeue and requeue
/// individually (the `v4l` crate's stream cannot requeue without dequeueing).
pub(super) struct MmapQueue {
    handle: Arc<Handle>,
    maps: Vec<Mapping>,
    pub(super) meta: Vec<BufMeta>,
    streaming: bool,
}

// SAFETY: the mappings are private to this queue (nothing else holds their pointers) and the
// queue is used from one thread at a time (`&mut self` for every access), so moving it to
// another thread is sound.
unsafe impl Send for MmapQueue {}

fn zeroed_buffer(index: u32) -> v4l::v4l_sys::v4l2_buffer {
    // SAFETY: v4l2_buffer is a plain C struct (integers, a timeval and a union of integers and
    // pointers) for which all-zero bytes are a valid value, as the kernel API expects.
    let mut b: v4l::v4l_sys::v4l2_buffer = unsafe { std::mem::zeroed() };
    b.index = index;
    b.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    b.memory = V4L2_MEMORY_MMAP;
    b
}

impl MmapQueue {
    /// Requests `count` mmap buffers (the driver may grant a different number) and maps them.
    pub(super) fn new(handle: Arc<Handle>, count: u32) -> io::Result<MmapQueue> {
        // SAFETY: all-zero is a valid v4l2_requestbuffers (plain integers).
        let mut req: v4l::v4l_sys::v4l2_requestbuffers = unsafe { std::mem::zeroed() };
        req.count = count;
        req.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        req.memory = V4L2_MEMORY_MMAP;
        // SAFETY: VIDIOC_REQBUFS takes a pointer to a v4l2_requestbuffers, which `req` is and
        // which outlives the call.
        unsafe {
            v4l::v4l2::ioctl(
                handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_REQBUFS,
                &mut req as *mut _ as *mut std::os::raw::c_void,
            )?;
        }
        if req.count == 0 {
            return Err(io::Error::other("driver granted no buffers"));
        }
        let mut q = MmapQueue {
            handle,
            maps: Vec::new(),
            meta: vec![BufMeta::default(); req.count as usize],
            streaming: false,
        };
        for index in 0..req.count {
            let mut buf = zeroed_buffer(index);
            // SAFETY: VIDIOC_QUERYBUF takes a pointer to a v4l2_buffer, valid for the call.
            unsafe {
                v4l::v4l2::ioctl(
                    q.handle.fd(),
                    v4l::v4l2::vidioc::VIDIOC_QUERYBUF,
                    &mut buf as *mut _ as *mut std::os::raw::c_void,
                )?;
            }
            let len = buf.length as usize;
            // SAFETY: for MMAP buffers the kernel filled `m.offset` (reading that union member
            // is what the API prescribes); mapping `length` bytes at that offset of the device
            // fd with a null hint is the documented way to access the buffer. The mapping is
            // released in Drop.
            let ptr = unsafe {
                v4l::v4l2::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    q.handle.fd(),
                    buf.m.offset as libc::off_t,
                )?
            };
            q.maps.push(Mapping {
                ptr: ptr as *mut u8,
                len,
            });
        }
        Ok(q)
    }

    pub(super) fn len(&self) -> usize {
        self.maps.len()
    }

    /// Queues every buffer and starts streaming.
    pub(super) fn start(&mut self) -> io::Result<()> {
        for i in 0..self.maps.len() {
            self.requeue(i)?;
        }
        let mut typ = V4L2_BUF_TYPE_VIDEO_CAPTURE as std::os::raw::c_int;
        // SAFETY: VIDIOC_STREAMON takes a pointer to the buffer type int.
        unsafe {
            v4l::v4l2::ioctl(
                self.handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_STREAMON,
                &mut typ as *mut _ as *mut std::os::raw::c_void,
            )?;
        }
        self.streaming = true;
        Ok(())
    }

    /// The first `used` bytes of buffer `index` (clamped to its length). Only meaningful
    /// while the buffer is dequeued.
    pub(super) fn bytes(&self, index: usize, used: usize) -> &[u8] {
        match self.maps.get(index) {
            // SAFETY: `ptr` maps `len` readable bytes for the queue's lifetime; the slice
            // borrows `self`, so it cannot outlive the mapping, and the caller only reads a
            // buffer it has dequeued (the driver does not write to it until it is requeued).
            Some(m) => unsafe { std::slice::from_raw_parts(m.ptr, used.min(m.len)) },
            None => &[],
        }
    }
}

impl BufferQueue for MmapQueue {
    fn dequeue(&mut self, timeout: Duration) -> io::Result<Option<usize>> {
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        if self.handle.poll(libc::POLLIN, ms)? == 0 {
            return Ok(None);
        }
        let mut buf = zeroed_buffer(0);
        // SAFETY: VIDIOC_DQBUF takes a pointer to a v4l2_buffer, valid for the call. The fd is
        // non-blocking (v4l opens with O_NONBLOCK), so this never hangs.
        let r = unsafe {
            v4l::v4l2::ioctl(
                self.handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_DQBUF,
                &mut buf as *mut _ as *mut std::os::raw::c_void,
            )
        };
        match r {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Ok(None),
            Err(e) => return Err(e),
        }
        let index = buf.index as usize;
        if index >= self.meta.len() {
            return Err(io::Error::other(format!(
                "driver returned buffer index {index}, only {} exist",
                self.meta.len()
            )));
        }
        self.meta[index] = BufMeta {
            bytesused: buf.bytesused,
            flags: buf.flags,
            sequence: buf.sequence,
            timestamp: Duration::from_secs(buf.timestamp.tv_sec.max(0) as u64)
                + Duration::from_micros(buf.timestamp.tv_usec.max(0) as u64),
        };
        Ok(Some(index))
    }

    fn requeue(&mut self, index: usize) -> io::Result<()> {
        let mut buf = zeroed_buffer(index as u32);
        // SAFETY: VIDIOC_QBUF takes a pointer to a v4l2_buffer, valid for the call.
        unsafe {
            v4l::v4l2::ioctl(
                self.handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_QBUF,
                &mut buf as *mut _ as *mut std::os::raw::c_void,
            )
        }
    }
}

impl Drop for MmapQueue {
    fn drop(&mut self) {
        // Errors are ignored: after an unplug every call fails with ENODEV and there is
        // nothing left to clean up in the driver.
        if self.streaming {
            let mut typ = V4L2_BUF_TYPE_VIDEO_CAPTURE as std::os::raw::c_int;
            // SAFETY: VIDIOC_STREAMOFF takes a pointer to the buffer type int.
            let _ = unsafe {
                v4l::v4l2::ioctl(
                    self.handle.fd(),
                    v4l::v4l2::vidioc::VIDIOC_STREAMOFF,
                    &mut typ as *mut _ as *mut std::os::raw::c_void,
                )
            };
        }
        for m in self.maps.drain(..) {
            // SAFETY: `ptr`/`len` are exactly a mapping made in `new`, unmapped once here;
            // no slice into it survives (they borrow `self`).
            let _ = unsafe { v4l::v4l2::munmap(m.ptr as *mut std::os::raw::c_void, m.len) };
        }
        // SAFETY: all-zero is a valid v4l2_requestbuffers; count 0 frees the buffers.
        let mut req: v4l::v4l_sys::v4l2_requestbuffers = unsafe { std::mem::zeroed() };
        req.type_ = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        req.memory = V4L2_MEMORY_MMAP;
        // SAFETY: VIDIOC_REQBUFS takes a pointer to a v4l2_requestbuffers, valid for the call.
        let _ = unsafe {
            v4l::v4l2::ioctl(
                self.handle.fd(),
                v4l::v4l2::vidioc::VIDIOC_REQBUFS,
                &mut req as *mut _ as *mut std::os::raw::c_void,
            )
        };
    }
}
