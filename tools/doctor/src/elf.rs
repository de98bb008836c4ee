//! A minimal ELF64 reader: the value of a 4-byte exported data symbol
//! (`plugin_version`) of a shared object, read from the file without
//! loading it (plugins that name slurmctld symbols cannot be `dlopen`ed by
//! other programs).
use std::path::Path;
use thiserror::Error;

/// Why a symbol could not be read.
#[derive(Debug, Error, PartialEq)]
pub enum ElfError {
    /// The file could not be read.
    #[error("{path}: cannot read: {msg}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        msg: String,
    },
    /// Not a little-endian ELF64 file, or a truncated/corrupt one.
    #[error("{path}: {msg}")]
    Format {
        /// The file.
        path: String,
        /// What went wrong.
        msg: String,
    },
}

const SHT_NOBITS: u32 = 8;
const SHT_DYNSYM: u32 = 11;

struct Section {
    kind: u32,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// Reads exported symbol `name` of the ELF file at `path` as a
/// little-endian `u32`. `Ok(None)` when the file has no such dynamic symbol.
pub fn read_u32_symbol(path: &Path, name: &str) -> Result<Option<u32>, ElfError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| ElfError::Io { path: shown.clone(), msg: e.to_string() })?;
    u32_symbol_in(&bytes, name).map_err(|msg| ElfError::Format { path: shown, msg })
}

/// [`read_u32_symbol`] on the file's bytes; errors are messages.
pub fn u32_symbol_in(b: &[u8], name: &str) -> Result<Option<u32>, String> {
    if b.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("not an ELF file".into());
    }
    if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
        return Err("not a little-endian 64-bit ELF file".into());
    }
    let corrupt = || "truncated or corrupt ELF headers".to_string();
    let shoff = u64_at(b, 0x28).ok_or_else(corrupt)? as usize;
    let shentsize = u16_at(b, 0x3A).ok_or_else(corrupt)? as usize;
    let shnum = u16_at(b, 0x3C).ok_or_else(corrupt)? as usize;
    if shentsize < 64 || shnum == 0 {
        return Err("no section headers (stripped of them?)".into());
    }
    let mut sections = Vec::with_capacity(shnum);
    for i in 0..shnum {
        let o = shoff.checked_add(i.checked_mul(shentsize).ok_or_else(corrupt)?).ok_or_else(corrupt)?;
        sections.push(Section {
            kind: u32_at(b, o + 4).ok_or_else(corrupt)?,
            addr: u64_at(b, o + 16).ok_or_else(corrupt)?,
            offset: u64_at(b, o + 24).ok_or_else(corrupt)?,
            size: u64_at(b, o + 32).ok_or_else(corrupt)?,
            link: u32_at(b, o + 40).ok_or_else(corrupt)?,
        });
    }
    let Some(dynsym) = sections.iter().find(|s| s.kind == SHT_DYNSYM) else { return Ok(None) };
    let strtab = sections.get(dynsym.link as usize).ok_or_else(corrupt)?;
    let slice = |off: u64, len: u64| -> Result<&[u8], String> {
        let (s, l) = (usize::try_from(off).map_err(|_| corrupt())?, usize::try_from(len).map_err(|_| corrupt())?);
        b.get(s..s.checked_add(l).ok_or_else(corrupt)?).ok_or_else(corrupt)
    };
    let syms = slice(dynsym.offset, dynsym.size)?;
    let strs = slice(strtab.offset, strtab.size)?;
    for sym in syms.chunks_exact(24) {
        let name_off = u32_at(sym, 0).ok_or_else(corrupt)? as usize;
        let Some(rest) = strs.get(name_off..) else { continue };
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        if &rest[..end] != name.as_bytes() {
            continue;
        }
        let shndx = u16_at(sym, 6).ok_or_else(corrupt)? as usize;
        let value = u64_at(sym, 8).ok_or_else(corrupt)?;
        if shndx == 0 {
            continue; // an undefined reference, not the definition
        }
        let sec = sections.get(shndx).ok_or_else(|| format!("symbol {name} in missing section {shndx}"))?;
        if sec.kind == SHT_NOBITS {
            return Ok(Some(0));
        }
        let within = value.checked_sub(sec.addr).filter(|d| d + 4 <= sec.size).ok_or_else(|| format!("symbol {name} lies outside its section"))?;
        let data = slice(sec.offset + within, 4)?;
        return Ok(Some(u32::from_le_bytes(data.try_into().map_err(|_| corrupt())?)));
    }
    Ok(None)
}

/// Slurm's release number from its text: `22.05.8` → `0x160508`
/// (`SLURM_VERSION_NUMBER = (major << 16) | (minor << 8) | micro`).
pub fn release_number(text: &str) -> Option<u32> {
    let mut it = text.trim().split('.');
    let mut part = || it.next().and_then(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok().filter(|v| *v < 256)
    });
    let (major, minor, micro) = (part()?, part()?, part()?);
    Some((major << 16) | (minor << 8) | micro)
}

/// `0x160508` → `22.05.8`.
pub fn release_text(n: u32) -> String {
    format!("{}.{:02}.{}", n >> 16, (n >> 8) & 0xff, n & 0xff)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ELF64 shared object with a `.dynsym` defining `symbols`
    /// (name, 4-byte value) in a `.rodata` section, plus an undefined
    /// reference to `plugin_version` before them when `undef_first`.
    pub(crate) fn tiny_elf(symbols: &[(&str, u32)], undef_first: bool) -> Vec<u8> {
        let mut dynstr = vec![0u8];
        let mut rodata = Vec::new();
        let mut syms = vec![0u8; 24]; // null symbol
        let rodata_addr = 0x1000u64;
        let push_sym = |syms: &mut Vec<u8>, name_off: u32, shndx: u16, value: u64| {
            syms.extend_from_slice(&name_off.to_le_bytes());
            syms.extend_from_slice(&[0x11, 0]);
            syms.extend_from_slice(&shndx.to_le_bytes());
            syms.extend_from_slice(&value.to_le_bytes());
            syms.extend_from_slice(&4u64.to_le_bytes());
        };
        if undef_first {
            let off = dynstr.len() as u32;
            dynstr.extend_from_slice(b"plugin_version\0");
            push_sym(&mut syms, off, 0, 0);
        }
        for (name, v) in symbols {
            let off = dynstr.len() as u32;
            dynstr.extend_from_slice(name.as_bytes());
            dynstr.push(0);
            push_sym(&mut syms, off, 3, rodata_addr + rodata.len() as u64);
            rodata.extend_from_slice(&v.to_le_bytes());
        }
        // Layout: header (64) | dynsym | dynstr | rodata | section headers (4 x 64).
        let mut out = vec![0u8; 64];
        let dynsym_off = out.len() as u64;
        out.extend_from_slice(&syms);
        let dynstr_off = out.len() as u64;
        out.extend_from_slice(&dynstr);
        let rodata_off = out.len() as u64;
        out.extend_from_slice(&rodata);
        let shoff = out.len() as u64;
        let sh = |out: &mut Vec<u8>, kind: u32, addr: u64, off: u64, size: u64, link: u32| {
            let mut h = vec![0u8; 64];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[16..24].copy_from_slice(&addr.to_le_bytes());
            h[24..32].copy_from_slice(&off.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            out.extend_from_slice(&h);
        };
        sh(&mut out, 0, 0, 0, 0, 0);
        sh(&mut out, SHT_DYNSYM, 0, dynsym_off, syms.len() as u64, 2);
        sh(&mut out, 3, 0, dynstr_off, dynstr.len() as u64, 0);
        sh(&mut out, 1, rodata_addr, rodata_off, rodata.len() as u64, 0);
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = 2;
        out[5] = 1;
        out[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        out[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        out[0x3C..0x3E].copy_from_slice(&4u16.to_le_bytes());
        out
    }

    #[test]
    fn reads_the_defined_symbol() {
        let elf = tiny_elf(&[("plugin_name", 7), ("plugin_version", 0x160508)], true);
        assert_eq!(u32_symbol_in(&elf, "plugin_version"), Ok(Some(0x160508)));
        assert_eq!(u32_symbol_in(&elf, "plugin_name"), Ok(Some(7)));
        assert_eq!(u32_symbol_in(&elf, "absent"), Ok(None));
        // Only an undefined reference: not found.
        assert_eq!(u32_symbol_in(&tiny_elf(&[], true), "plugin_version"), Ok(None));
    }

    #[test]
    fn refuses_other_files() {
        assert!(u32_symbol_in(b"#!/bin/sh\n", "x").unwrap_err().contains("not an ELF"));
        let mut elf = tiny_elf(&[("plugin_version", 1)], false);
        elf[4] = 1;
        assert!(u32_symbol_in(&elf, "x").unwrap_err().contains("64-bit"));
        let elf = tiny_elf(&[("plugin_version", 1)], false);
        let cut = &elf[..elf.len() - 100];
        assert!(u32_symbol_in(cut, "plugin_version").is_err());
        let e = read_u32_symbol(Path::new("/nonexistent/x.so"), "plugin_version").unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.so"), "{e}");
    }

    #[test]
    fn reads_a_real_shared_object() {
        // Any system shared library: it defines no plugin_version, but its
        // headers must parse.
        for p in ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"] {
            if Path::new(p).exists() {
                assert_eq!(read_u32_symbol(Path::new(p), "plugin_version"), Ok(None));
                return;
            }
        }
    }

    #[test]
    fn release_numbers() {
        assert_eq!(release_number("22.05.8"), Some(0x160508));
        assert_eq!(release_number("24.11.5\n"), Some(0x180B05));
        assert_eq!(release_number("23.02.0-0rc1"), Some(0x170200));
        assert_eq!(release_number("22.05"), None);
        assert_eq!(release_number("x.y.z"), None);
        assert_eq!(release_text(0x160508), "22.05.8");
    }
}
