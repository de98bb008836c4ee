//! Slurm sentinel macros with the C types they have in practice.
//!
//! bindgen types every integer macro from its value alone, so `NO_VAL16`
//! (`0xfffe`, stored in `uint16_t` fields) comes out as `u32`. These are
//! written by hand and checked against the C compiler's values in tests.

/// `NO_VAL8`: "no value" for `uint8_t` fields.
pub const NO_VAL8: u8 = 0xfe;
/// `NO_VAL16`: "no value" for `uint16_t` fields.
pub const NO_VAL16: u16 = 0xfffe;
/// `NO_VAL`: "no value" for `uint32_t` fields.
pub const NO_VAL: u32 = 0xffff_fffe;
/// `NO_VAL64`: "no value" for `uint64_t` fields.
pub const NO_VAL64: u64 = 0xffff_ffff_ffff_fffe;
/// `INFINITE8`: unlimited for `uint8_t` fields.
pub const INFINITE8: u8 = 0xff;
/// `INFINITE16`: unlimited for `uint16_t` fields.
pub const INFINITE16: u16 = 0xffff;
/// `INFINITE`: unlimited for `uint32_t` fields (e.g. `time_limit`).
pub const INFINITE: u32 = 0xffff_ffff;
/// `INFINITE64`: unlimited for `uint64_t` fields.
pub const INFINITE64: u64 = 0xffff_ffff_ffff_ffff;
/// `NICE_OFFSET`: the neutral value of `nice` and `site_factor`.
pub const NICE_OFFSET: u32 = 0x8000_0000;
/// `JOB_STATE_BASE`: mask of the base state in `job_state`.
pub const JOB_STATE_BASE: u32 = 0x0000_00ff;
/// `JOB_STATE_FLAGS`: mask of the flag bits in `job_state`.
pub const JOB_STATE_FLAGS: u32 = 0xffff_ff00;
/// `SLURM_SUCCESS`.
pub const SLURM_SUCCESS: i32 = 0;
/// `SLURM_ERROR`.
pub const SLURM_ERROR: i32 = -1;
/// `ESPANK_SUCCESS`.
pub const ESPANK_SUCCESS: i32 = 0;

/// Values of the same macros as compiled by C (shim/cellsched_consts.c).
#[cfg(test)]
mod c_values {
    extern "C" {
        pub static cellsched_c_no_val8: u8;
        pub static cellsched_c_no_val16: u16;
        pub static cellsched_c_no_val: u32;
        pub static cellsched_c_no_val64: u64;
        pub static cellsched_c_infinite8: u8;
        pub static cellsched_c_infinite16: u16;
        pub static cellsched_c_infinite: u32;
        pub static cellsched_c_infinite64: u64;
        pub static cellsched_c_nice_offset: u32;
        pub static cellsched_c_version_number: u32;
        pub static cellsched_c_job_state_base: u32;
        pub static cellsched_c_job_state_flags: u32;
        pub static cellsched_c_slurm_error: i32;
        pub static cellsched_c_sizeof_job_desc: u32;
    }
}

#[cfg(test)]
mod tests {
    use super::c_values::*;
    use super::*;

    #[test]
    fn sentinels_match_c_headers() {
        unsafe {
            assert_eq!(NO_VAL8, cellsched_c_no_val8);
            assert_eq!(NO_VAL16, cellsched_c_no_val16);
            assert_eq!(NO_VAL, cellsched_c_no_val);
            assert_eq!(NO_VAL64, cellsched_c_no_val64);
            assert_eq!(INFINITE8, cellsched_c_infinite8);
            assert_eq!(INFINITE16, cellsched_c_infinite16);
            assert_eq!(INFINITE, cellsched_c_infinite);
            assert_eq!(INFINITE64, cellsched_c_infinite64);
            assert_eq!(NICE_OFFSET, cellsched_c_nice_offset);
            assert_eq!(JOB_STATE_BASE, cellsched_c_job_state_base);
            assert_eq!(JOB_STATE_FLAGS, cellsched_c_job_state_flags);
            assert_eq!(SLURM_ERROR, cellsched_c_slurm_error);
        }
    }

    #[test]
    fn sentinels_have_the_field_types() {
        // A u64 field compared against NO_VAL64 must not need a cast.
        let field: u64 = NO_VAL64;
        assert_eq!(field, u64::MAX - 1);
        let f16: u16 = NO_VAL16;
        assert_eq!(f16, u16::MAX - 1);
        assert_eq!(core::mem::size_of_val(&INFINITE64), 8);
        assert_eq!(core::mem::size_of_val(&NO_VAL16), 2);
    }

    #[test]
    fn version_matches_c_headers() {
        unsafe { assert_eq!(crate::SLURM_VERSION_NUMBER, cellsched_c_version_number) };
    }

    #[test]
    fn job_desc_layout_matches_c() {
        let rust = core::mem::size_of::<crate::job_desc_msg_t>();
        assert_eq!(rust as u32, unsafe { cellsched_c_sizeof_job_desc });
    }
}

#[cfg(test)]
mod bit_flag_tests {
    #[test]
    fn slurm_bit_flags_are_generated() {
        // slurm.h: #define NODE_STATE_DRAIN SLURM_BIT(9), JOB_REQUEUE SLURM_BIT(10)
        assert_eq!(crate::NODE_STATE_DRAIN, 1u64 << 9);
        assert_eq!(crate::JOB_REQUEUE, 1u64 << 10);
    }
}
