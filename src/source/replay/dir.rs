//! Directories of images: `.jpg`/`.jpeg`/`.png` files played in file-name order.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use super::mjpeg::{find_soi, jpeg_size, scan_jpeg, Scan};
use super::Raw;
use crate::frame::{monotonic_now, PixelFormat, MAX_FRAME_SIDE};
use crate::logging::RateLimit;
use crate::source::{SourceError, SourceStats};

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

fn load_image(path: &Path) -> Result<Raw, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    match image_kind(path) {
        Some(ImageKind::Jpeg) => {
            let start = find_soi(&bytes, 0).ok_or("no JPEG start marker")?;
            let end = match scan_jpeg(&bytes, start) {
                Scan::Complete(end) => end,
                Scan::Broken(at) => return Err(format!("broken JPEG structure at byte {at}")),
                Scan::Truncated => return Err("truncated JPEG".into()),
            };
            let (width, height) = jpeg_size(&bytes[start..end])?;
            Ok(Raw {
                width,
                height,
                format: PixelFormat::Mjpeg,
                data: bytes[start..end].to_vec(),
            })
        }
        Some(ImageKind::Png) => {
            // The size limit is checked against the header, before the decoder allocates.
            let mut reader =
                image::ImageReader::with_format(Cursor::new(&bytes), image::ImageFormat::Png);
            let mut limits = image::Limits::default();
            limits.max_image_width = Some(MAX_FRAME_SIDE);
            limits.max_image_height = Some(MAX_FRAME_SIDE);
            reader.limits(limits);
            let img = reader
                .decode()
                .map_err(|e| format!("bad PNG: {e}"))?
                .to_rgb8();
            Ok(Raw {
                width: img.width(),
                height: img.height(),
                format: PixelFormat::Rgb24,
                data: img.into_raw(),
            })
        }
        None => Err("not a .jpg, .jpeg or .png file".into()),
    }
}
