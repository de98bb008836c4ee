//! cellsched-core: the decision logic of cellsched, in pure Rust with no FFI.
//!
//! Used alike by the slurmctld plugins, the SPANK plugin, the simulator and
//! the CLI, so that what is tested here is what runs inside Slurm.
//!
//! - [`cell`]: the shared vocabulary — [`cell::Cell`], [`cell::Plan`],
//!   [`cell::Decision`] and their text forms (sbatch options, admin comments).
pub mod cell;
pub mod error;

pub use cell::{Cell, Decision, Plan};
pub use error::CoreError;
