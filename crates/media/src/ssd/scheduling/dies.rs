//! Dies as servers: every die takes its next command as soon as it is idle (ONFI multi-LUN
//! operation), a channel serves commands before data-outs of the same class, any operations of
//! the same kind on a die's planes may share a multi-plane command, and reads suspend erases.
//! `nand.chip_exclusive` narrows this to chips that start all their dies together.

use super::{FlashScheduling, Rules, SchedulingOps};

qoslab_engine::plugin! {
    pub static OPS: SchedulingOps = "dies", "each die is a server (ONFI multi-LUN operation)";
    build |_| Box::new(Dies)
}

pub struct Dies;

impl FlashScheduling for Dies {
    fn rules(&self) -> Rules {
        Rules {
            chip_serial: false,
            data_out_first: false,
            multiplane_same_page: false,
            suspension: true,
            dirty_pages_per_plane: 0,
            keep_destaged: true,
        }
    }
}
