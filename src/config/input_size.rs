//! `[model] input_size`: the size the model runs at — `"auto"` (shaped like the camera's
//! frame), `[width, height]`, or `[]` (the size the model file declares).

use std::fmt;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The width `"auto"` gives the model's input: the built-in model's own 416, so the frame is
/// seen at the same detail as the file's square input gives a 4:3 frame, with little of the
/// input spent on padding.
pub const AUTO_WIDTH: u32 = 416;

/// Frame shape `"auto"` assumes when the capture size is not set (`source.width` or
/// `source.height` 0): 4:3, what USB cameras and the Pi Camera Module send by default.
const ASSUMED_FRAME: (u32, u32) = (640, 480);

/// `[model] input_size` as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputSize {
    /// `"auto"`: [`AUTO_WIDTH`] wide, as tall as the frame's shape asks (see [`auto_size`]).
    Auto,
    /// `[width, height]`, or `[]` for the model file's own size (any other length is
    /// refused by the configuration's checks, naming the key).
    List(Vec<u32>),
}

impl Default for InputSize {
    fn default() -> Self {
        InputSize::List(Vec::new())
    }
}

impl InputSize {
    /// The `(width, height)` to run the model at for frames of `frame` (the configured
    /// capture size; 0 = unknown), and why, when it is not the model file's own size.
    pub fn resolve(&self, frame: (u32, u32)) -> (Option<(u32, u32)>, Option<String>) {
        match self {
            InputSize::List(v) => match v.as_slice() {
                [w, h] => (Some((*w, *h)), None),
                _ => (None, None),
            },
            InputSize::Auto => {
                let known = frame.0 > 0 && frame.1 > 0;
                let (fw, fh) = if known { frame } else { ASSUMED_FRAME };
                let (w, h) = auto_size(fw, fh);
                let why = if known {
                    format!("input_size \"auto\": {w}x{h}, shaped like the {fw}x{fh} frames of [source]")
                } else {
                    format!("input_size \"auto\": {w}x{h}, for 4:3 frames ([source] width and height are not set)")
                };
                (Some((w, h)), Some(why))
            }
        }
    }
}

/// The `"auto"` input for `fw`×`fh` frames: [`AUTO_WIDTH`] along the frame's longer side and
/// the other side the frame's ratio rounded up to a multiple of 32 (the network's coarsest
/// stride), so little of the input is padding. 4:3 → 416×320, 16:9 → 416×256,
/// 1:1 → 416×416; a portrait frame gets the sizes swapped. (The INT8 model is calibrated at
/// these shapes too, so an object at the frame's edge, with almost no padding beyond it, keeps
/// FP32's score: models/README.md, "The INT8 accuracy gate".)
pub fn auto_size(fw: u32, fh: u32) -> (u32, u32) {
    let (long, short) = (fw.max(fh).max(1), fw.min(fh).max(1));
    let other = (u64::from(AUTO_WIDTH) * u64::from(short)).div_ceil(u64::from(long));
    let other = (other.div_ceil(32) * 32).max(32) as u32;
    if fw >= fh {
        (AUTO_WIDTH, other)
    } else {
        (other, AUTO_WIDTH)
    }
}

impl Serialize for InputSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            InputSize::Auto => s.serialize_str("auto"),
            InputSize::List(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for InputSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = InputSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"auto\", [width, height] or []")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<InputSize, E> {
                if v == "auto" {
                    Ok(InputSize::Auto)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<InputSize, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = seq.next_element::<u32>()? {
                    // More than two is refused by the checks; do not read on without bound.
                    if v.len() > 8 {
                        return Err(de::Error::invalid_length(v.len() + 1, &self));
                    }
                    v.push(x);
                }
                Ok(InputSize::List(v))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_the_frame_shape_at_416_across() {
        assert_eq!(auto_size(640, 480), (416, 320));
        assert_eq!(auto_size(1920, 1080), (416, 256));
        assert_eq!(auto_size(1280, 720), (416, 256));
        assert_eq!(auto_size(480, 480), (416, 416));
        assert_eq!(auto_size(480, 640), (320, 416));
        assert_eq!(auto_size(4000, 10), (416, 32));
        assert_eq!(auto_size(0, 0), (416, 416));
        for (w, h) in [
            (640, 480),
            (1920, 1080),
            (1640, 1232),
            (2304, 1296),
            (800, 600),
        ] {
            let (iw, ih) = auto_size(w, h);
            assert!(iw % 32 == 0 && ih % 32 == 0);
            // The whole frame fits, the letterbox scale set by the width, with less than one
            // stride of padding.
            let needed = iw as f64 * h as f64 / w as f64;
            assert!(
                ih as f64 >= needed && (ih as f64) < needed + 32.0,
                "{w}x{h}"
            );
        }
    }

    #[test]
    fn resolve_says_why() {
        let (size, why) = InputSize::Auto.resolve((640, 480));
        assert_eq!(size, Some((416, 320)));
        assert!(why.is_some_and(|w| w.contains("640x480")));
        let (size, why) = InputSize::Auto.resolve((0, 480));
        assert_eq!(size, Some((416, 320)));
        assert!(why.is_some_and(|w| w.contains("4:3")));
        assert_eq!(InputSize::List(vec![]).resolve((640, 480)), (None, None));
        assert_eq!(
            InputSize::List(vec![320, 256]).resolve((640, 480)),
            (Some((320, 256)), None)
        );
    }

    #[derive(Deserialize, Serialize)]
    struct M {
        input_size: InputSize,
    }

    #[test]
    fn reads_and_writes_every_form() {
        for (text, want) in [
            ("input_size = \"auto\"", InputSize::Auto),
            ("input_size = []", InputSize::List(vec![])),
            ("input_size = [416, 320]", InputSize::List(vec![416, 320])),
        ] {
            let m: M = toml::from_str(text).expect(text);
            assert_eq!(m.input_size, want);
            let back = toml::to_string(&m).expect("serializes");
            let again: M = toml::from_str(&back).expect("reads back");
            assert_eq!(again.input_size, want);
        }
        for bad in [
            "input_size = \"big\"",
            "input_size = 416",
            "input_size = [416, -3]",
        ] {
            assert!(toml::from_str::<M>(bad).is_err(), "{bad}");
        }
    }
}
