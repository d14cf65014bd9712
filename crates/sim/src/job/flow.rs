//! fio's `flow` option: jobs of one flow share a count of I/Os and hold back by weight.

use super::*;

/// The totals of one flow (fio's `struct fio_flow`): I/Os counted (from 1) and the weights of
/// its running jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowCounts {
    pub counter: u64,
    pub total_weight: u64,
}

impl Default for FlowCounts {
    fn default() -> Self {
        FlowCounts {
            counter: 1,
            total_weight: 0,
        }
    }
}

impl JobRun {
    /// Whether the job is ahead of its share of its flow (fio's `flow_threshold_exceeded`:
    /// its I/Os over the flow's, against its weight over the flow's); None without a flow.
    pub(super) fn flow_blocked(&self) -> Option<bool> {
        let (flow, weight) = self.flow.as_ref()?;
        let f = flow.get();
        let counter_ratio = self.flow_counter as f64 / f.counter as f64;
        let weight_ratio = *weight as f64 / f.total_weight.max(1) as f64;
        Some(counter_ratio > weight_ratio)
    }
    /// Whether the job waits for its flow's other jobs.
    pub fn waits_for_flow(&self) -> bool {
        self.wait == Wait::Flow
    }
    /// The job joins its flow when it starts (fio's `flow_init_job`) and leaves it when it
    /// ends (`flow_exit_job`), taking its weight and its count with it.
    pub fn join_flow(&mut self) {
        if let Some((flow, weight)) = &self.flow {
            let mut f = flow.get();
            f.total_weight += weight;
            flow.set(f);
        }
    }
    pub fn leave_flow(&mut self) {
        if let Some((flow, weight)) = self.flow.take() {
            let mut f = flow.get();
            f.total_weight -= weight;
            f.counter -= self.flow_counter;
            flow.set(f);
        }
    }
}
