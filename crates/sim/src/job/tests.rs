//! Unit tests of the job's buckets and samplers.

use super::*;

#[test]
fn depth_and_batch_buckets_match_fios_labels() {
    assert_eq!(depth_level_bucket(1), 0);
    assert_eq!(depth_level_bucket(32), 5);
    assert_eq!(depth_level_bucket(64), 6);
    assert_eq!(batch_bucket(1), 1);
    assert_eq!(batch_bucket(4), 1);
    assert_eq!(batch_bucket(5), 2);
    assert_eq!(batch_bucket(100), 6);
}

#[test]
fn idle_bandwidth_windows_skipped_at_once_leave_no_sample_as_when_walked() {
    // The slow path: fio's one sample per window a direction moved in, none in an idle one.
    // Its log: a line per sample at the window's end, in ms since the epoch (7 ns).
    fn walk(s: &mut Sampler, t: Ns, stats: &mut JobStats, log: &mut String) {
        while t >= s.start_ns + s.window_ns {
            for k in 0..4 {
                if s.active[k] && s.amount[k] > 0 {
                    let secs = s.window_ns as f64 / 1e9;
                    let op = &mut stats.ops[k];
                    let value = if s.bw {
                        (s.amount[k] as f64 / 1024.0 / secs).round() as u64
                    } else {
                        (s.amount[k] as f64 / secs).round() as u64
                    };
                    if s.bw {
                        op.bw_samples.record(value);
                    } else {
                        op.iops_samples.record(value);
                    }
                    let end_ms = (s.start_ns + s.window_ns - 7) / 1_000_000;
                    log.push_str(&format!("{end_ms}, {value}, {k}, 0, 0\n"));
                }
                s.amount[k] = 0;
            }
            s.start_ns += s.window_ns;
        }
    }
    for bw in [true, false] {
        let fresh = || {
            let mut s = Sampler::new(BW_WINDOW_NS, [true, true, false, false], bw);
            s.start_ns = 7;
            s
        };
        let (mut fast, mut slow) = (fresh(), fresh());
        let (mut fast_stats, mut slow_stats) = (JobStats::default(), JobStats::default());
        let mut fast_log = FioLog::new("x".into(), 500, false, false);
        let mut slow_log = String::new();
        let mut t = 7;
        for (i, gap) in [
            3u64,
            499_999_999,
            500_000_000,
            1,
            7_300_000_001,
            12,
            40_000_000_000,
        ]
        .into_iter()
        .enumerate()
        {
            t += gap;
            fast.close_until(t, &mut fast_stats, Some(&mut fast_log), 7);
            walk(&mut slow, t, &mut slow_stats, &mut slow_log);
            for s in [&mut fast, &mut slow] {
                s.amount[i % 2] += if bw { 4096 * (i as u64 + 1) } else { 1 };
            }
            assert_eq!(fast.start_ns, slow.start_ns);
        }
        for k in 0..4 {
            assert_eq!(fast_stats.ops[k].bw_samples, slow_stats.ops[k].bw_samples);
            assert_eq!(
                fast_stats.ops[k].iops_samples,
                slow_stats.ops[k].iops_samples
            );
        }
        let samples = if bw {
            &slow_stats.ops[0].bw_samples
        } else {
            &slow_stats.ops[0].iops_samples
        };
        // Read moved in three of the 96 windows closed, write in three; the idle ones
        // leave nothing.
        assert_eq!(samples.n, 3);
        assert_eq!(fast_log.text, slow_log);
    }
}
