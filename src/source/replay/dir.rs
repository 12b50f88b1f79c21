//! Directories of images: `.jpg`/`.jpeg`/`.png` files played in file-name order.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use super::mjpeg::{find_soi, jpeg_size, scan_jpeg, Scan};
use super::raw::Raw;
use crate::files;
use crate::frame::{monotonic_now, PixelFormat, MAX_FRAME_SIDE};
use crate::logging::RateLimit;
use crate::source::interface::{SourceError, SourceStats};

/// The images of a directory, sorted by file name.
pub(super) struct ImageDir {
    pub(super) files: Vec<PathBuf>,
    pub(super) next: usize,
    /// Why the last skipped image was skipped.
    pub(super) last_problem: Option<String>,
    /// A directory full of broken images logs one line a minute, not one per file.
    pub(super) skipped_warnings: RateLimit,
}

impl ImageDir {
    pub(super) fn open(path: &Path) -> Result<ImageDir, SourceError> {
        let rd = std::fs::read_dir(path).map_err(|source| SourceError::File {
            path: path.to_path_buf(),
            source,
        })?;
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| image_kind(p).is_some())
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(SourceError::Empty {
                path: path.to_path_buf(),
                message: "no .jpg, .jpeg or .png files in the directory".into(),
            });
        }
        Ok(ImageDir {
            files,
            next: 0,
            last_problem: None,
            skipped_warnings: RateLimit::per_minute(),
        })
    }

    pub(super) fn next_frame(&mut self, stats: &mut SourceStats) -> Option<Raw> {
        while let Some(path) = self.files.get(self.next) {
            self.next += 1;
            match load_image(path) {
                Ok(raw) => return Some(raw),
                Err(e) => {
                    stats.corrupt += 1;
                    if let Some(held) = self.skipped_warnings.hit(monotonic_now()) {
                        let more = if held.count > 0 {
                            format!(" ({held})")
                        } else {
                            String::new()
                        };
                        log::warn!("{}: skipped: {e}{more}", path.display());
                    }
                    self.last_problem = Some(format!("{}: {e}", path.display()));
                }
            }
        }
        None
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ImageKind {
    Jpeg,
    Png,
}

fn image_kind(p: &Path) -> Option<ImageKind> {
    let ext = p.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "jpg" | "jpeg" => Some(ImageKind::Jpeg),
        "png" => Some(ImageKind::Png),
        _ => None,
    }
}

/// Reads an image file whole: a regular file of at most [`files::IMAGE_LIMIT`] bytes (a FIFO
/// named `*.jpg` is refused at once, never waited on).
fn read_image_file(path: &Path) -> Result<Vec<u8>, String> {
    files::read_bounded(path, files::IMAGE_LIMIT, "image").map_err(|e| e.to_string())
}

/// The one check of a JPEG file's structure, shared by the directory source and
/// `lookout detect`: the complete JPEG (SOI to EOI) in `bytes`, with its size from the header.
/// A truncated or structurally broken file is an error saying so.
fn whole_jpeg(bytes: &[u8]) -> Result<(&[u8], u32, u32), String> {
    let start = find_soi(bytes, 0).ok_or("no JPEG start marker")?;
    let end = match scan_jpeg(bytes, start) {
        Scan::Complete(end) => end,
        Scan::Broken(at) => return Err(format!("broken JPEG structure at byte {at}")),
        Scan::Truncated => {
            return Err(format!(
                "truncated JPEG (the file ends at byte {} before the image's end marker)",
                bytes.len()
            ))
        }
    };
    let jpeg = &bytes[start..end];
    let (width, height) = jpeg_size(jpeg)?;
    Ok((jpeg, width, height))
}

/// Decodes a PNG with the frame side limit checked against its header, before the decoder
/// allocates.
fn decode_png(bytes: &[u8]) -> Result<image::RgbImage, String> {
    let mut reader = image::ImageReader::with_format(Cursor::new(bytes), image::ImageFormat::Png);
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_FRAME_SIDE);
    limits.max_image_height = Some(MAX_FRAME_SIDE);
    reader.limits(limits);
    Ok(reader
        .decode()
        .map_err(|e| format!("bad PNG: {e}"))?
        .to_rgb8())
}

fn load_image(path: &Path) -> Result<Raw, String> {
    let kind = image_kind(path).ok_or("not a .jpg, .jpeg or .png file")?;
    let bytes = read_image_file(path)?;
    match kind {
        ImageKind::Jpeg => {
            let (jpeg, width, height) = whole_jpeg(&bytes)?;
            Ok(Raw {
                width,
                height,
                format: PixelFormat::Mjpeg,
                data: jpeg.to_vec(),
            })
        }
        ImageKind::Png => {
            let img = decode_png(&bytes)?;
            Ok(Raw {
                width: img.width(),
                height: img.height(),
                format: PixelFormat::Rgb24,
                data: img.into_raw(),
            })
        }
    }
}

/// Reads a JPEG or PNG file (told apart by its first bytes) as packed RGB, with the checks
/// the directory source applies: a bounded regular file ([`files::read_bounded`]), a JPEG
/// whose structure is whole, sides of at most [`MAX_FRAME_SIDE`]. Errors name the file.
pub fn read_rgb_image(path: &Path) -> Result<(Vec<u8>, u32, u32), String> {
    let bytes = read_image_file(path)?;
    let named = |e: String| format!("{}: {e}", path.display());
    let img = if bytes.starts_with(&[0xFF, 0xD8]) {
        let (jpeg, _, _) = whole_jpeg(&bytes).map_err(named)?;
        image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg)
            .map_err(|e| named(format!("bad JPEG: {e}")))?
            .to_rgb8()
    } else if bytes.starts_with(b"\x89PNG") {
        decode_png(&bytes).map_err(named)?
    } else {
        return Err(named(
            "neither a JPEG nor a PNG image (expected a file starting with a JPEG or PNG signature)"
                .into(),
        ));
    };
    let (w, h) = img.dimensions();
    Ok((img.into_raw(), w, h))
}
