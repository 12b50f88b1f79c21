//! The streaming MJPEG reader (`ReplaySource::mjpeg_reader`) fed arbitrary bytes in arbitrary
//! pieces: the first bytes of the input choose the read sizes (1..=256 bytes, cycled), the
//! rest is the stream. The frames, their order and the corrupt count must be the same as when
//! the whole input is available at once (`ReplaySource::mjpeg_bytes`): how bytes arrive from
//! a FIFO never changes what is read. No panic, no frame over the size limit.
#![no_main]

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use lookout::source::replay::ReplaySource;
use lookout::source::{FrameSource, Pacing, SourceOptions};

mod common;

/// Bytes handed out in reads of the given sizes, cycled.
struct Pieces {
    data: Vec<u8>,
    pos: usize,
    sizes: Vec<usize>,
    k: usize,
}

impl Read for Pieces {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self.sizes[self.k % self.sizes.len()];
        self.k += 1;
        let n = size.min(buf.len()).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Seek for Pieces {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        if let SeekFrom::Start(p) = to {
            self.pos = (p as usize).min(self.data.len());
        }
        Ok(self.pos as u64)
    }
}

/// Every frame's bytes (at most 64) and the corrupt count, or the error's text.
fn frames(
    src: Result<ReplaySource, lookout::source::SourceError>,
) -> Result<(Vec<Vec<u8>>, u64), String> {
    let mut src = src.map_err(|e| e.to_string())?;
    let mut v = Vec::new();
    while v.len() < 64 {
        match src.next() {
            Ok(Some(f)) => v.push(f.data),
            Ok(None) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok((v, src.stats().corrupt))
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 8) + 1;
    if rest.len() < n {
        return;
    }
    let (head, body) = rest.split_at(n);
    let sizes: Vec<usize> = head.iter().map(|&b| usize::from(b) + 1).collect();
    let opts = SourceOptions {
        pace: Pacing::AsFastAsPossible,
        ..SourceOptions::default()
    };
    let path = Path::new("fuzz.mjpeg");
    let whole = frames(ReplaySource::mjpeg_bytes(path, body.to_vec(), &opts));
    let pieces = Pieces {
        data: body.to_vec(),
        pos: 0,
        sizes,
        k: 0,
    };
    let streamed = frames(ReplaySource::mjpeg_reader(path, pieces, &opts));
    assert_eq!(whole, streamed, "the frames depend on how the bytes arrive");
    if let Ok(mut src) = ReplaySource::mjpeg_bytes(path, body.to_vec(), &opts) {
        common::drain(&mut src);
    }
});
