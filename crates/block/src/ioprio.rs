//! I/O priorities as the block layer sees them (include/uapi/linux/ioprio.h, block/ioprio.c).

use qoslab_engine::{IoPrio, IoPrioClass};

/// Levels within a class (IOPRIO_NR_LEVELS, formerly IOPRIO_BE_NR).
pub const IOPRIO_NR_LEVELS: u8 = 8;

/// The priority the kernel gives a bio at submission (`bio_set_ioprio`): a task that set none
/// gets the class and level of its CPU niceness (`__get_task_ioprio`: best effort, level
/// (nice + 20) / 5, so 4 for the nice 0 of a fio job).
pub fn effective(prio: IoPrio) -> IoPrio {
    if prio.class == IoPrioClass::None {
        IoPrio {
            class: IoPrioClass::BestEffort,
            level: 4,
        }
    } else {
        prio
    }
}

/// Index of a class in RT, BE, IDLE order (the order schedulers serve them in); a request
/// with no class counts as best effort (mq-deadline's `ioprio_class_to_prio`).
pub fn class_index(prio: IoPrio) -> usize {
    match prio.class {
        IoPrioClass::RealTime => 0,
        IoPrioClass::None | IoPrioClass::BestEffort => 1,
        IoPrioClass::Idle => 2,
    }
}

/// Short name of a priority for reports (`be1`, `rt0`, `idle`, `none`).
pub fn name(prio: IoPrio) -> String {
    match prio.class {
        IoPrioClass::None => "none".into(),
        IoPrioClass::RealTime => format!("rt{}", prio.level),
        IoPrioClass::BestEffort => format!("be{}", prio.level),
        IoPrioClass::Idle => "idle".into(),
    }
}
