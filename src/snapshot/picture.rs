//! One snapshot picture: the region around the object, its box drawn, scaled to the
//! configured height, JPEG. Pure: RGB in, bytes out.

use image::imageops::FilterType;
use image::RgbImage;

use crate::geom::BBox;

/// How the picture is made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    /// Crop around the object (else the whole frame).
    pub crop: bool,
    /// Draw the box.
    pub bounding_box: bool,
    /// Output height in pixels.
    pub height: u32,
    /// JPEG quality.
    pub quality: u8,
}

/// The crop around `b` in a `w`×`h` frame: a square 1.2× the box's longer side, at least
/// `min_side` where the frame allows, moved to lie inside the frame. `(x, y, side_w, side_h)`.
pub fn region(b: &BBox, w: u32, h: u32, min_side: u32) -> (u32, u32, u32, u32) {
    let bw = (b.x1 - b.x0).max(1.0);
    let bh = (b.y1 - b.y0).max(1.0);
    let side = (bw.max(bh) * 1.2).max(min_side as f32);
    let sw = (side.round() as u32).clamp(1, w.max(1));
    let sh = (side.round() as u32).clamp(1, h.max(1));
    let (cx, cy) = ((b.x0 + b.x1) / 2.0, (b.y0 + b.y1) / 2.0);
    let x = (cx - sw as f32 / 2.0).round().clamp(0.0, (w - sw) as f32) as u32;
    let y = (cy - sh as f32 / 2.0).round().clamp(0.0, (h - sh) as f32) as u32;
    (x, y, sw, sh)
}

/// Draws a rectangle `t` pixels thick (inside its edges), clipped to the image.
fn draw_box(img: &mut RgbImage, (x0, y0, x1, y1): (i64, i64, i64, i64), t: i64) {
    let (w, h) = (img.width() as i64, img.height() as i64);
    let colour = image::Rgb([255u8, 48, 48]);
    let mut put = |x: i64, y: i64| {
        if (0..w).contains(&x) && (0..h).contains(&y) {
            img.put_pixel(x as u32, y as u32, colour);
        }
    };
    for d in 0..t {
        for x in x0..=x1 {
            put(x, y0 + d);
            put(x, y1 - d);
        }
        for y in y0..=y1 {
            put(x0 + d, y);
            put(x1 - d, y);
        }
    }
}

/// The snapshot of the object at `b` in the `w`×`h` RGB frame `rgb`, as JPEG.
pub fn render(rgb: &[u8], w: u32, h: u32, b: &BBox, style: &Style) -> Result<Vec<u8>, String> {
    let frame = RgbImage::from_raw(w, h, rgb.to_vec())
        .ok_or_else(|| format!("{} bytes are not a {w}x{h} RGB frame", rgb.len()))?;
    let (x, y, cw, ch) = if style.crop {
        region(b, w, h, style.height)
    } else {
        (0, 0, w, h)
    };
    let cropped = image::imageops::crop_imm(&frame, x, y, cw, ch).to_image();
    let out_h = style.height.min(ch.max(1) * 4);
    let out_w = ((cw as f64 * out_h as f64 / ch.max(1) as f64).round() as u32).max(1);
    let mut pic = if (out_w, out_h) == (cw, ch) {
        cropped
    } else {
        image::imageops::resize(&cropped, out_w, out_h, FilterType::Triangle)
    };
    if style.bounding_box {
        let s = out_h as f32 / ch.max(1) as f32;
        let map = |v: f32, o: u32| ((v - o as f32) * s).round() as i64;
        let t = (out_h as i64 / 135).max(2);
        draw_box(
            &mut pic,
            (
                map(b.x0, x),
                map(b.y0, y),
                map(b.x1, x) - 1,
                map(b.y1, y) - 1,
            ),
            t,
        );
    }
    let (Ok(pw), Ok(ph)) = (u16::try_from(pic.width()), u16::try_from(pic.height())) else {
        return Err(format!(
            "a {}x{} picture is larger than JPEG allows",
            pic.width(),
            pic.height()
        ));
    };
    let mut out = Vec::with_capacity(32 * 1024);
    jpeg_encoder::Encoder::new(&mut out, style.quality.clamp(1, 100))
        .encode(pic.as_raw(), pw, ph, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| format!("JPEG encoding: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_is_a_square_around_the_box_inside_the_frame() {
        let b = BBox {
            x0: 100.0,
            y0: 100.0,
            x1: 150.0,
            y1: 250.0,
        };
        let (x, y, w, h) = region(&b, 640, 480, 100);
        assert_eq!((w, h), (180, 180));
        assert!(x <= 100 && x + w >= 150 && y <= 100 && y + h >= 250);
        // At the frame's corner it is moved inside, never cut.
        let b = BBox {
            x0: 600.0,
            y0: 440.0,
            x1: 640.0,
            y1: 480.0,
        };
        let (x, y, w, h) = region(&b, 640, 480, 270);
        assert_eq!((x + w, y + h, w, h), (640, 480, 270, 270));
        // A box taller than the frame: the frame's height.
        let b = BBox {
            x0: 0.0,
            y0: 0.0,
            x1: 640.0,
            y1: 480.0,
        };
        assert_eq!(region(&b, 640, 480, 270), (0, 0, 640, 480));
    }

    #[test]
    fn a_render_is_a_jpeg_of_the_configured_height_with_the_box_drawn() {
        let (w, h) = (320u32, 240u32);
        let rgb = vec![40u8; (w * h * 3) as usize];
        let b = BBox {
            x0: 100.0,
            y0: 60.0,
            x1: 140.0,
            y1: 180.0,
        };
        let style = Style {
            crop: true,
            bounding_box: true,
            height: 120,
            quality: 80,
        };
        let jpeg = render(&rgb, w, h, &b, &style).unwrap();
        let img = image::load_from_memory_with_format(&jpeg, image::ImageFormat::Jpeg)
            .unwrap()
            .to_rgb8();
        assert_eq!((img.width(), img.height()), (120, 120));
        // The crop is 144 px square around the box: the box's left edge is red.
        let (x0, y0) = (((100.0 - 48.0) * 120.0 / 144.0) as u32, 60);
        let p = img.get_pixel(x0 + 1, y0);
        assert!(p[0] > 180 && p[1] < 120, "box edge {p:?}");
        assert!(img.get_pixel(2, 2)[0] < 80, "background");
        let whole = Style {
            crop: false,
            ..style
        };
        let img = image::load_from_memory(&render(&rgb, w, h, &b, &whole).unwrap()).unwrap();
        assert_eq!((img.width(), img.height()), (160, 120));
        assert!(render(&rgb[1..], w, h, &b, &style).is_err());
    }
}
