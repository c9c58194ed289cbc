//! Percentiles of a benchmark's samples, in milliseconds.

use std::time::{Duration, Instant};

pub(crate) struct Stats(Vec<f64>);

impl Stats {
    pub(crate) fn new(mut samples: Vec<f64>) -> Self {
        samples.sort_by(f64::total_cmp);
        Stats(samples)
    }
    pub(crate) fn pct(&self, p: f64) -> f64 {
        let i = ((self.0.len() as f64 - 1.0) * p / 100.0).round() as usize;
        self.0[i.min(self.0.len() - 1)]
    }
    pub(crate) fn min(&self) -> f64 {
        self.0[0]
    }
    pub(crate) fn max(&self) -> f64 {
        self.0[self.0.len() - 1]
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The shortest of `runs` runs of `f`, in ms.
pub(crate) fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..runs {
        let started = Instant::now();
        f();
        best = best.min(ms(started.elapsed()));
    }
    best
}
