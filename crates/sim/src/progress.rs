//! How far a run is, for a display outside the simulator.
//!
//! The simulator draws nothing: the run loop writes where it is into a [`Progress`] every
//! 65,536 events, and the caller reads it from another thread while the run goes (qoslab's one
//! progress display, `qoslab.progress`, polls it from Python). So `qoslab sim`'s bar is the
//! same bar, with the same `--quiet` and terminal rules, as every other command's.

use std::sync::{Arc, Mutex};

use qoslab_engine::Ns;

/// Where one run (one seed) is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunState {
    /// How far the run is, from 0 to 1; `None` when some job has no bound known in advance
    /// (a trace).
    pub fraction: Option<f64>,
    /// The simulated time reached.
    pub now_ns: Ns,
    /// I/Os issued so far.
    pub ios: u64,
    /// The run has ended.
    pub done: bool,
}

/// Where every run of a `qoslab sim` (one per seed of `--repeat`) is, written by the runs and
/// read by a display. A run that has not started yet has no entry.
#[derive(Debug, Default)]
pub struct Progress {
    runs: Mutex<Vec<RunState>>,
}

impl Progress {
    /// Run `run`'s state (runs are numbered from 0 in seed order).
    pub fn set(&self, run: usize, state: RunState) {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if runs.len() <= run {
            runs.resize(run + 1, RunState::default());
        }
        runs[run] = state;
    }

    /// Every run's state so far, in run order (runs not started yet: their default).
    pub fn runs(&self) -> Vec<RunState> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// One run's place in a [`Progress`]: what the run loop writes through.
#[derive(Clone, Debug)]
pub struct RunSlot {
    pub progress: Arc<Progress>,
    /// The run's number (its seed's, from 0).
    pub run: usize,
}

impl RunSlot {
    pub fn set(&self, state: RunState) {
        self.progress.set(self.run, state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_reports_out_of_order_leaves_the_earlier_ones_not_started() {
        let p = Progress::default();
        let later = RunState {
            fraction: Some(0.5),
            now_ns: 7,
            ios: 3,
            done: false,
        };
        p.set(2, later);
        assert_eq!(
            p.runs(),
            vec![RunState::default(), RunState::default(), later]
        );
    }
}
