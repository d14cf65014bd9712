//! Property tests: value parsing round trips and generator invariants.

use std::path::Path;

use proptest::prelude::*;
use qoslab_workload::JobGen;
use qoslab_workload::fio::parse_job_str;
use qoslab_workload::fio::values::{KbBase, TimeUnit, parse_size, parse_time};

proptest! {
    #[test]
    fn sizes_round_trip(n in 0u64..(1 << 40), unit in 0usize..6, upper in any::<bool>(), b in any::<bool>()) {
        let (suffix, mult) = [("", 1u64), ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40), ("p", 1 << 50)][unit];
        let mut s = suffix.to_string();
        if upper { s = s.to_uppercase(); }
        if b && !s.is_empty() { s.push('B'); }
        let text = format!("{n}{s}");
        match n.checked_mul(mult) {
            Some(v) => prop_assert_eq!(parse_size(&text, KbBase::Binary), Ok(v)),
            None => prop_assert!(parse_size(&text, KbBase::Binary).is_err()),
        }
        // kb_base=1000 gives the SI value for the same text.
        if let Some(v) = n.checked_mul(1000u64.pow(unit as u32)) {
            prop_assert_eq!(parse_size(&text, KbBase::Decimal), Ok(v));
        }
    }

    #[test]
    fn times_round_trip(n in 0u64..1_000_000, unit in 0usize..6) {
        let (suffix, ns) = [("us", 1_000u64), ("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000), ("d", 86_400_000_000_000)][unit];
        let text = format!("{n}{suffix}");
        let parsed = parse_time(&text, TimeUnit::Us);
        // Past the clock's range (or u64's) a time is refused, never saturated.
        match n.checked_mul(ns).filter(|&v| v <= qoslab_engine::time::MAX_TIME_NS) {
            Some(v) => prop_assert_eq!(parsed, Ok(v)),
            None => prop_assert!(parsed.is_err()),
        }
        prop_assert_eq!(parse_time(&n.to_string(), TimeUnit::S), Ok(n * 1_000_000_000));
    }

    #[test]
    fn generated_ios_are_aligned_and_inside_the_region(
        pattern in prop::sample::select(vec!["read", "write", "randread", "randwrite", "rw", "randrw", "randtrim", "trimwrite", "randread:4", "write:HOLE"]),
        bs_shift in 9u32..17,
        blocks in 1u64..5000,
        offset_blocks in 0u64..100,
        dist in prop::sample::select(vec!["random", "zipf:1.1", "pareto:0.3", "normal:20", "zoned:50/50:50/50"]),
        norandommap in any::<bool>(),
        range in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let bs = 1u64 << bs_shift;
        // Sequential holes of one block keep offsets block-aligned.
        let pattern = pattern.replace("HOLE", &bs.to_string());
        let bs_opt = if range { format!("bsrange={}-{}", bs, bs * 4) } else { format!("bs={bs}") };
        let size = bs * 4 * blocks;
        let offset = bs * offset_blocks;
        let text = format!(
            "[j]\nrw={pattern}\n{bs_opt}\nsize={size}\noffset={offset}\nrandom_distribution={dist}\nnorandommap={}\nio_size={}\n",
            u8::from(norandommap), size * 3
        );
        let f = parse_job_str(&text, Path::new("p.fio"), |_| None).unwrap();
        let mut g = JobGen::new(&f.jobs[0], 0, seed).unwrap();
        let mut bytes = 0;
        let mut prev_not_before = 0;
        for _ in 0..2000 {
            let Some(io) = g.next_io() else { break };
            prop_assert_eq!(io.offset_bytes % bs, 0, "{:?}", io);
            prop_assert!(io.offset_bytes >= offset);
            prop_assert!(io.offset_bytes + io.len_bytes <= offset + size, "{:?} beyond {}", io, offset + size);
            prop_assert!(io.len_bytes >= bs && io.len_bytes <= bs * 4 && io.len_bytes % bs == 0);
            prop_assert!(io.not_before_ns >= prev_not_before);
            prev_not_before = io.not_before_ns;
            bytes += io.len_bytes;
        }
        prop_assert!(bytes <= size * 3 + bs * 4);
    }
}
