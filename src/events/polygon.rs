//! Polygons of the frame (masks and zones), in fractions of the frame's width and height, so
//! one configuration fits every resolution a camera is set to.

/// A closed polygon; its points are `[x, y]` fractions of the frame (0..1, origin top left).
#[derive(Clone, Debug, PartialEq)]
pub struct Polygon {
    points: Vec<(f32, f32)>,
}

impl Polygon {
    /// The polygon of `points` (`[x, y]` pairs in 0..=1), or what is wrong with it: fewer than
    /// three points, a point outside the frame or not finite, no area, or edges that cross.
    pub fn new(points: &[[f32; 2]]) -> Result<Polygon, String> {
        if points.len() < 3 {
            return Err(format!(
                "a polygon needs at least 3 points ([x, y] fractions of the frame), found {}",
                points.len()
            ));
        }
        if points.len() > 64 {
            return Err(format!(
                "a polygon may have at most 64 points, found {}",
                points.len()
            ));
        }
        if let Some((i, p)) = points
            .iter()
            .enumerate()
            .find(|(_, p)| !p.iter().all(|v| v.is_finite() && (0.0..=1.0).contains(v)))
        {
            return Err(format!(
                "point {i} [{}, {}] is outside the frame: coordinates are fractions of the frame's width and height, 0.0 to 1.0",
                p[0], p[1]
            ));
        }
        let poly = Polygon {
            points: points.iter().map(|p| (p[0], p[1])).collect(),
        };
        if let Some((a, b)) = poly.crossing_edges() {
            return Err(format!(
                "the polygon crosses itself (edge {a}→{} crosses edge {b}→{}): list the points in order around it",
                (a + 1) % poly.points.len(),
                (b + 1) % poly.points.len()
            ));
        }
        if poly.area() < 1e-6 {
            return Err("the polygon has no area (its points lie on a line)".into());
        }
        Ok(poly)
    }

    /// Area in squared frame fractions (shoelace formula).
    fn area(&self) -> f32 {
        let n = self.points.len();
        let twice: f32 = (0..n)
            .map(|i| {
                let (a, b) = (self.points[i], self.points[(i + 1) % n]);
                a.0 * b.1 - b.0 * a.1
            })
            .sum();
        twice.abs() / 2.0
    }

    /// The first pair of non-adjacent edges that intersect, by their first points' indices.
    fn crossing_edges(&self) -> Option<(usize, usize)> {
        let n = self.points.len();
        let edge = |i: usize| (self.points[i], self.points[(i + 1) % n]);
        for i in 0..n {
            for j in i + 1..n {
                let adjacent = j == i + 1 || (i == 0 && j == n - 1);
                if !adjacent && segments_intersect(edge(i), edge(j)) {
                    return Some((i, j));
                }
            }
        }
        None
    }

    /// Whether the point (frame fractions) lies inside (even–odd rule; points on an edge may
    /// fall either way).
    pub fn contains(&self, x: f32, y: f32) -> bool {
        let n = self.points.len();
        let mut inside = false;
        let mut j = n - 1;
        for i in 0..n {
            let (pi, pj) = (self.points[i], self.points[j]);
            if (pi.1 > y) != (pj.1 > y) && x < (pj.0 - pi.0) * (y - pi.1) / (pj.1 - pi.1) + pi.0 {
                inside = !inside;
            }
            j = i;
        }
        inside
    }
}

/// Sign of the turn a → b → c: positive counter-clockwise, negative clockwise, 0 collinear.
fn orientation(a: (f32, f32), b: (f32, f32), c: (f32, f32)) -> f32 {
    (b.0 - a.0) * (c.1 - a.1) - (b.1 - a.1) * (c.0 - a.0)
}

/// Whether two closed segments share a point.
fn segments_intersect(s: ((f32, f32), (f32, f32)), t: ((f32, f32), (f32, f32))) -> bool {
    let on = |a: (f32, f32), b: (f32, f32), p: (f32, f32)| {
        p.0 >= a.0.min(b.0) && p.0 <= a.0.max(b.0) && p.1 >= a.1.min(b.1) && p.1 <= a.1.max(b.1)
    };
    let (d1, d2) = (orientation(t.0, t.1, s.0), orientation(t.0, t.1, s.1));
    let (d3, d4) = (orientation(s.0, s.1, t.0), orientation(s.0, s.1, t.1));
    if ((d1 > 0.0 && d2 < 0.0) || (d1 < 0.0 && d2 > 0.0))
        && ((d3 > 0.0 && d4 < 0.0) || (d3 < 0.0 && d4 > 0.0))
    {
        return true;
    }
    (d1 == 0.0 && on(t.0, t.1, s.0))
        || (d2 == 0.0 && on(t.0, t.1, s.1))
        || (d3 == 0.0 && on(s.0, s.1, t.0))
        || (d4 == 0.0 && on(s.0, s.1, t.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_square_contains_its_middle_and_not_the_outside() {
        let sq = Polygon::new(&[[0.2, 0.2], [0.6, 0.2], [0.6, 0.6], [0.2, 0.6]])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(sq.contains(0.4, 0.4));
        assert!(!sq.contains(0.1, 0.4));
        assert!(!sq.contains(0.4, 0.7));
        let tri =
            Polygon::new(&[[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]).unwrap_or_else(|e| panic!("{e}"));
        assert!(tri.contains(0.9, 0.9));
        assert!(!tri.contains(0.1, 0.1));
    }

    #[test]
    fn bad_polygons_are_refused_with_the_reason() {
        let msg = |pts: &[[f32; 2]]| Polygon::new(pts).err().unwrap_or_default();
        assert!(msg(&[[0.0, 0.0], [1.0, 1.0]]).contains("at least 3 points"));
        assert!(msg(&[[0.0, 0.0], [1.5, 0.0], [0.5, 0.5]]).contains("outside the frame"));
        assert!(msg(&[[0.0, 0.0], [f32::NAN, 0.0], [0.5, 0.5]]).contains("outside the frame"));
        assert!(msg(&[[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]).contains("no area"));
        // A bow tie: edges 0→1 and 2→3 cross.
        let bow = msg(&[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]);
        assert!(bow.contains("crosses itself"), "{bow}");
        assert!(Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]).is_ok());
    }
}
