//! Seek time for distance `d ≥ 1` cylinders is `a + b·√d + c·d`, fitted so that the one-cylinder
//! seek equals the track-to-track figure, the full-stroke seek equals the full-stroke figure, and
//! the mean over uniformly random start and end cylinders equals the average figure (which is how
//! drive specifications define it).

use super::super::ms_to_ns;

/// Seek time in ns as a function of cylinder distance.
#[derive(Clone, Copy, Debug)]
pub struct SeekCurve {
    a: f64,
    b: f64,
    c: f64,
}

impl SeekCurve {
    /// Fits `a + b·√d + c·d` to (track-to-track, average, full-stroke) over `cylinders`.
    pub fn fit(t2t_ms: f64, avg_ms: f64, full_ms: f64, cylinders: u64) -> SeekCurve {
        assert!(cylinders >= 2 && t2t_ms > 0.0 && t2t_ms <= avg_ms && avg_ms <= full_ms);
        let n = cylinders as f64;
        let full_d = n - 1.0;
        // Mean of √d and d over uniformly random pairs of cylinders (continuous approximation).
        let mean_sqrt = 8.0 / 15.0 * n.sqrt();
        let mean_d = n / 3.0;
        // Rows: [1, √d, d] · [a, b, c] = t.
        let m = [
            [1.0, 1.0, 1.0],
            [1.0, mean_sqrt, mean_d],
            [1.0, full_d.sqrt(), full_d],
        ];
        let t = [ms_to_ns(t2t_ms), ms_to_ns(avg_ms), ms_to_ns(full_ms)];
        let det = |m: &[[f64; 3]; 3]| {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
                - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        };
        let d = det(&m);
        let column = |k: usize| {
            let mut mk = m;
            for (row, value) in mk.iter_mut().zip(t) {
                row[k] = value;
            }
            det(&mk) / d
        };
        SeekCurve {
            a: column(0),
            b: column(1),
            c: column(2),
        }
    }

    pub fn seek_ns(&self, distance: u64) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let d = distance as f64;
        (self.a + self.b * d.sqrt() + self.c * d).max(0.0)
    }
}
