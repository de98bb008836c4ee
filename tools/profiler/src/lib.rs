//! NVML GPU profiler feeding the cellsched profile database
