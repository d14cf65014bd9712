//! MQSim's transaction scheduling (`TSU_Priority_OutOfOrder` over `NVM_PHY_ONFI_NVDDR2`), read
//! from its source (CMU-SAFARI/MQSim, commit 7ec40e3):
//!
//! - A chip is the server. The scheduler hands a chip a command only while the chip's status
//!   is idle, and one call (`issue_command_to_chip`) dispatches the transactions of one die; the
//!   chip stays busy until that die's array work and every data-out of it are done.
//! - When a channel transfer ends, reads waiting to move data out go first (mapping, then
//!   user, then GC reads); only then does the channel go idle and the scheduler poll its
//!   chips for a new command.
//! - A multi-plane command joins transactions of one die only when they address the same page
//!   number in their blocks.
//! - No suspension: the scheduler's switch on a busy chip's status falls through to refusing
//!   the command, so a read never suspends an erase.
//! - The data cache (`Data_Cache_Manager_Flash_Advanced`) writes cold data back to flash at
//!   once and admits a write only while the data in flight to flash stays under its
//!   back-pressure buffer, one page of sectors per plane; a random write is always cold.
//! - In its WRITE_CACHE mode the data cache frees a page's slot once the page's flash write
//!   completes (`handle_transaction_serviced_signal_from_PHY`), and never caches reads: a read
//!   hits the cache only while the page it asks for waits to be written.

use super::{FlashScheduling, Rules, SchedulingOps};

qoslab_engine::plugin! {
    pub static OPS: SchedulingOps = "mqsim", "MQSim's transaction scheduler: whole chips as servers, data-outs first, same-page multi-plane, no suspension, write-back under back-pressure";
    /// `[media.scheduling.mqsim]`.
    tunables struct MqsimSettings in TUNABLES {
        dirty_pages_per_plane: u32 = count(2, "pages the write cache holds dirty, per plane of the array: more writes wait for flash (MQSim's back-pressure buffer of one page of sectors per plane: two 4 KiB writes on 8 KiB pages)").range(1.0, 1e6),
    }
    build |_, c| Box::new(Mqsim { dirty_pages_per_plane: c.dirty_pages_per_plane })
}

pub struct Mqsim {
    dirty_pages_per_plane: u32,
}

impl FlashScheduling for Mqsim {
    fn rules(&self) -> Rules {
        Rules {
            chip_serial: true,
            data_out_first: true,
            multiplane_same_page: true,
            suspension: false,
            dirty_pages_per_plane: self.dirty_pages_per_plane,
            keep_destaged: false,
        }
    }
}
