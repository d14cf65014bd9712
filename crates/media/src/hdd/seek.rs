//! The seek-time curve: a square-root rise for short seeks (the arm accelerates and
//! decelerates) blending into a linear one for long seeks (it coasts), in the three-parameter
//! form of Lee and Katz ("An analytic performance model of disk arrays", SIGMETRICS 1993):
//!
//!   seek(d) = t_tt + a sqrt(d - 1) + b (d - 1)   for d >= 1 cylinders,   seek(0) = 0,
//!
//! fitted so that seek(1) is the datasheet's track-to-track time, seek(max) its full stroke,
//! and the average is the datasheet's average as datasheets define it: over every seek length
//! n from 1 to max, weighted by the number of cylinder pairs that far apart, (max + 1 - n)
//! (e.g. the Hitachi Travelstar 7K320 OEM specification, section 4.4.2.1).

use qoslab_engine::{ConfigError, Ns};

#[derive(Clone, Debug, PartialEq)]
pub struct SeekCurve {
    track_to_track_ns: f64,
    a: f64,
    b: f64,
    max_distance: u32,
}

impl SeekCurve {
    /// Fits the curve to the three datasheet figures over `max_distance` cylinders.
    pub fn fit(
        max_distance: u32,
        track_to_track_ns: Ns,
        average_ns: Ns,
        full_stroke_ns: Ns,
    ) -> Result<Self, ConfigError> {
        let (tt, avg, full) = (
            track_to_track_ns as f64,
            average_ns as f64,
            full_stroke_ns as f64,
        );
        if !(tt <= avg && avg <= full) {
            return Err(ConfigError::new(format!(
                "field 'media.average_seek_ns': expected track_to_track_ns <= average_seek_ns <= full_stroke_ns, got {track_to_track_ns} / {average_ns} / {full_stroke_ns} ns"
            )));
        }
        if max_distance <= 1 {
            return Ok(SeekCurve {
                track_to_track_ns: tt,
                a: 0.0,
                b: 0.0,
                max_distance,
            });
        }
        let d = f64::from(max_distance);
        // Weighted means of sqrt(n - 1) and n - 1 with weights (max + 1 - n).
        let (mut ws, mut w1, mut w) = (0.0, 0.0, 0.0);
        for n in 1..=max_distance {
            let weight = d + 1.0 - f64::from(n);
            let x = f64::from(n - 1);
            ws += weight * x.sqrt();
            w1 += weight * x;
            w += weight;
        }
        let (es, e1) = (ws / w, w1 / w);
        let (fs, f1) = ((d - 1.0).sqrt(), d - 1.0);
        // a fs + b f1 = full - tt;  a es + b e1 = avg - tt.
        let det = fs * e1 - f1 * es;
        let a = ((full - tt) * e1 - f1 * (avg - tt)) / det;
        let b = (fs * (avg - tt) - es * (full - tt)) / det;
        // The curve must never fall: its slope is lowest at the longest seek.
        if a < 0.0 || a / (2.0 * fs) + b < 0.0 {
            return Err(ConfigError::new(format!(
                "field 'media.average_seek_ns': no rising seek curve through track-to-track {track_to_track_ns} ns, average {average_ns} ns and full stroke {full_stroke_ns} ns"
            )));
        }
        Ok(SeekCurve {
            track_to_track_ns: tt,
            a,
            b,
            max_distance,
        })
    }

    /// Time to move `distance` cylinders.
    #[inline]
    pub fn time_ns(&self, distance: u32) -> Ns {
        if distance == 0 {
            return 0;
        }
        let x = f64::from(distance.min(self.max_distance) - 1);
        (self.track_to_track_ns + self.a * x.sqrt() + self.b * x).round() as Ns
    }

    /// The datasheet average this curve has (the weighted mean over all seek lengths).
    pub fn datasheet_average_ns(&self) -> f64 {
        let d = f64::from(self.max_distance);
        let (mut num, mut den) = (0.0, 0.0);
        for n in 1..=self.max_distance {
            let weight = d + 1.0 - f64::from(n);
            num += weight * self.time_ns(n) as f64;
            den += weight;
        }
        num / den
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_goes_through_the_three_datasheet_figures() {
        // Hitachi Travelstar 7K320: 1.0 ms, 12 ms, 20 ms (read).
        let c = SeekCurve::fit(100_000, 1_000_000, 12_000_000, 20_000_000).unwrap();
        assert_eq!(c.time_ns(0), 0);
        assert_eq!(c.time_ns(1), 1_000_000);
        assert_eq!(c.time_ns(100_000), 20_000_000);
        assert!((c.datasheet_average_ns() - 12e6).abs() < 2e3);
        // Short seeks rise fast, long ones slowly.
        assert!(c.time_ns(100) - c.time_ns(1) > c.time_ns(100_000) - c.time_ns(99_000));
        for d in 1..1000 {
            assert!(c.time_ns(d * 100) <= c.time_ns(d * 100 + 100));
        }
    }

    #[test]
    fn impossible_figures_are_refused() {
        assert!(SeekCurve::fit(100_000, 1_000_000, 19_900_000, 20_000_000).is_err());
        assert!(SeekCurve::fit(100_000, 5_000_000, 2_000_000, 20_000_000).is_err());
    }
}
