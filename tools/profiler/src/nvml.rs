//! NVML access: the GPU inventory and utilization samples.
//!
//! nvml-wrapper loads `libnvidia-ml.so.1` with dlopen when [`open`] is
//! called, so this crate builds and runs on machines without the NVIDIA
//! driver; there [`open`] returns [`ProfilerError::NvmlUnavailable`].
use crate::error::ProfilerError;
use crate::sampler::{GpuSample, Sampler};
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde::Serialize;

/// NVLink links probed per GPU (NVML_NVLINK_MAX_LINKS is 18 on current GPUs).
const MAX_NVLINKS: u32 = 18;

/// One GPU as NVML describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuInfo {
    /// NVML device index.
    pub index: u32,
    /// Marketing name, e.g. `NVIDIA A100-SXM4-80GB`.
    pub name: String,
    /// Canonical cellsched GPU type (`a100`), when the name is recognised.
    pub gpu_type: Option<String>,
    /// Device UUID.
    pub uuid: Option<String>,
    /// Total memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Maximum SM clock, MHz.
    pub max_sm_clock_mhz: Option<u32>,
    /// Maximum memory clock, MHz.
    pub max_mem_clock_mhz: Option<u32>,
    /// Power management limit, watts.
    pub power_limit_w: Option<f64>,
    /// Active NVLink links; `None` when NVML does not expose NVLink.
    pub nvlink_active_links: Option<u32>,
}

/// The node's GPUs and driver versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inventory {
    /// NVIDIA driver version, e.g. `550.54.15`.
    pub driver_version: String,
    /// CUDA version the driver supports, e.g. `12.4`.
    pub cuda_version: Option<String>,
    /// The GPUs, by index.
    pub gpus: Vec<GpuInfo>,
}

/// Maps an NVML init failure to [`ProfilerError::NvmlUnavailable`].
pub fn init_error(e: NvmlError) -> ProfilerError {
    let msg = match &e {
        NvmlError::LibloadingError(l) => format!("cannot load libnvidia-ml.so.1 ({l})"),
        NvmlError::DriverNotLoaded => "the NVIDIA driver is not loaded".into(),
        NvmlError::LibraryNotFound => "libnvidia-ml.so.1 not found".into(),
        NvmlError::NoPermission => "no permission to access the NVIDIA driver".into(),
        other => other.to_string(),
    };
    ProfilerError::NvmlUnavailable(msg)
}

fn query<T>(what: &str, r: Result<T, NvmlError>) -> Result<T, ProfilerError> {
    r.map_err(|e| ProfilerError::Nvml {
        what: what.into(),
        msg: e.to_string(),
    })
}

/// Loads and initialises NVML.
pub fn open() -> Result<Nvml, ProfilerError> {
    Nvml::init().map_err(init_error)
}

/// The inventory of the node's GPUs. Per-GPU facts a device does not
/// support (e.g. power limit on some boards) are `None`, not errors.
pub fn inventory(nvml: &Nvml) -> Result<Inventory, ProfilerError> {
    let driver_version = query("driver version", nvml.sys_driver_version())?;
    let cuda_version = nvml.sys_cuda_driver_version().ok().map(|v| {
        format!(
            "{}.{}",
            nvml_wrapper::cuda_driver_version_major(v),
            nvml_wrapper::cuda_driver_version_minor(v)
        )
    });
    let n = query("device count", nvml.device_count())?;
    let mut gpus = Vec::with_capacity(n as usize);
    for index in 0..n {
        let d = query(&format!("device {index}"), nvml.device_by_index(index))?;
        let name = query(&format!("device {index} name"), d.name())?;
        let nvlink_active_links = {
            let mut active = 0;
            let mut exposed = false;
            for link in 0..MAX_NVLINKS {
                match d.link_wrapper_for(link).is_active() {
                    Ok(a) => {
                        exposed = true;
                        active += u32::from(a);
                    }
                    Err(_) => continue,
                }
            }
            exposed.then_some(active)
        };
        gpus.push(GpuInfo {
            index,
            gpu_type: cellsched_core::gpu::canonical_gpu_type(&name),
            name,
            uuid: d.uuid().ok(),
            memory_bytes: d.memory_info().ok().map(|m| m.total),
            max_sm_clock_mhz: d.max_clock_info(Clock::SM).ok(),
            max_mem_clock_mhz: d.max_clock_info(Clock::Memory).ok(),
            power_limit_w: d.power_management_limit().ok().map(|mw| mw as f64 / 1000.0),
            nvlink_active_links,
        });
    }
    Ok(Inventory {
        driver_version,
        cuda_version,
        gpus,
    })
}

/// Samples the first `gpus` GPUs (all when `None`) through NVML.
pub struct NvmlSampler {
    nvml: Nvml,
    gpus: u32,
}

impl NvmlSampler {
    /// A sampler over `gpus` GPUs (capped at the device count).
    pub fn new(nvml: Nvml, gpus: Option<u32>) -> Result<Self, ProfilerError> {
        let n = query("device count", nvml.device_count())?;
        Ok(NvmlSampler {
            nvml,
            gpus: gpus.map_or(n, |g| g.min(n)),
        })
    }
}

impl Sampler for NvmlSampler {
    fn sample(&mut self) -> Vec<GpuSample> {
        (0..self.gpus)
            .filter_map(|i| {
                let d = self.nvml.device_by_index(i).ok()?;
                let util = d.utilization_rates().ok();
                Some(GpuSample {
                    index: i,
                    t_s: 0.0,
                    util_pct: util.map(|u| u.gpu as f64),
                    mem_used_bytes: d.memory_info().ok().map(|m| m.used),
                    power_w: d.power_usage().ok().map(|mw| mw as f64 / 1000.0),
                    sm_clock_mhz: d.clock_info(Clock::SM).ok().map(f64::from),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_failure_is_a_clear_unavailable_error() {
        // On a machine with no driver this is the real path; with one, check
        // the mapping with a library path that cannot exist.
        let e = match Nvml::builder()
            .lib_path(std::ffi::OsStr::new("/nonexistent/libnvidia-ml.so.1"))
            .init()
        {
            Ok(_) => panic!("NVML loaded from a nonexistent path"),
            Err(e) => init_error(e),
        };
        assert_eq!(e.exit_code(), 3);
        let msg = e.to_string();
        assert!(
            msg.starts_with("NVML unavailable") && msg.contains("--no-nvml") && !msg.contains('\n'),
            "{msg}"
        );
    }

    #[test]
    fn open_without_driver_errors_not_panics() {
        match open() {
            Ok(nvml) => {
                // A real GPU machine: the inventory must work.
                let inv = inventory(&nvml).unwrap();
                assert!(!inv.driver_version.is_empty());
            }
            Err(e) => assert_eq!(e.exit_code(), 3, "{e}"),
        }
    }
}
