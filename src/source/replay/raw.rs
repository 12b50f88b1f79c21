//! What the recording backends read from and what they yield, shared by `mjpeg.rs`, `y4m.rs`,
//! `dir.rs` and the player in `mod.rs` (a leaf: it imports none of them).

use std::io::{Read, Seek};

use crate::frame::PixelFormat;

/// What a recording is read from: a file, a FIFO, or bytes in memory.
pub(super) trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

/// What a backend yields before pacing and numbering.
pub(super) struct Raw {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) format: PixelFormat,
    pub(super) data: Vec<u8>,
}
