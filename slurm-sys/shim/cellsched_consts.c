/*
 * cellsched_consts.c - the values of Slurm's sentinel macros as the C
 * compiler sees them, so slurm-sys tests can check the hand-typed Rust
 * constants against the headers. References no Slurm symbol.
 */
#include "config.h"
#include <stdint.h>
#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"

const uint8_t cellsched_c_no_val8 = NO_VAL8;
const uint16_t cellsched_c_no_val16 = NO_VAL16;
const uint32_t cellsched_c_no_val = NO_VAL;
const uint64_t cellsched_c_no_val64 = NO_VAL64;
const uint8_t cellsched_c_infinite8 = INFINITE8;
const uint16_t cellsched_c_infinite16 = INFINITE16;
const uint32_t cellsched_c_infinite = INFINITE;
const uint64_t cellsched_c_infinite64 = INFINITE64;
const uint32_t cellsched_c_nice_offset = NICE_OFFSET;
const uint32_t cellsched_c_version_number = SLURM_VERSION_NUMBER;
const uint32_t cellsched_c_job_state_base = JOB_STATE_BASE;
const uint32_t cellsched_c_job_state_flags = JOB_STATE_FLAGS;
const int32_t cellsched_c_slurm_error = SLURM_ERROR;
const uint32_t cellsched_c_sizeof_job_desc = sizeof(job_desc_msg_t);
