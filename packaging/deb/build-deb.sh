#!/usr/bin/env bash
# Builds cellsched_<version>_<arch>.deb and cellsched-dbgsym_<version>_<arch>.deb
# with dpkg-deb (no network) from a staged `make dist` tree.
#
# The package is built against the installed Slurm: it Depends on the exact
# slurm-wlm-basic-plugins version installed here, and its preinst refuses to
# install (before anything is unpacked) when that package, or the slurmctld
# on PATH, is of another release: Slurm refuses plugins built for another
# release, so installing them would only break slurmctld at its next start.
#
# Usage: packaging/deb/build-deb.sh STAGE OUT_DIR     (or: make deb)
# Env:   CELLSCHED_DEB_SLURM_VERSION  claim this slurm-wlm-basic-plugins version
#                                     instead of the installed one (used by
#                                     scripts/deb-check.sh to make a mismatched package)
#        CELLSCHED_DEB_NAME_SUFFIX    appended to the .deb file names
set -euo pipefail
die() { echo "build-deb.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: $0 STAGE OUT_DIR"
ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd)
STAGE=$(cd "$1" && pwd) || die "no stage dir $1 (run make dist)"
mkdir -p "$2"; OUT=$(cd "$2" && pwd)
for t in dpkg-deb dpkg-query dpkg; do command -v $t >/dev/null || die "$t not found"; done
[ -x "$STAGE/bin/cellsched" ] || die "$STAGE/bin/cellsched missing (run make dist)"

# --- what it was built against ----------------------------------------------
# The Slurm release the plugins were compiled for (build.rs puts it into the
# CLI's --version: "0.1.0 (git abc, Slurm 22.05.8)").
BUILT_REL=$("$STAGE/bin/cellsched" --version | sed -n 's/.*Slurm \([0-9][0-9.]*\)).*/\1/p')
[ -n "$BUILT_REL" ] || die "cannot read the Slurm release from '$("$STAGE/bin/cellsched" --version)'"
INSTALLED=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins 2>/dev/null) \
  || die "slurm-wlm-basic-plugins is not installed: the package is built against the installed Slurm"
SLURM_DEB=${CELLSCHED_DEB_SLURM_VERSION:-$INSTALLED}
upstream() { local v=${1#*:}; echo "${v%-*}"; }   # 22.05.8-4+deb12u3 -> 22.05.8
numeric() { awk -F. '{ printf "%d.%d.%d", $1, $2, $3 }' <<<"$1"; }   # 22.05.8 and 22.5.8 -> 22.5.8
if [ -z "${CELLSCHED_DEB_SLURM_VERSION:-}" ] && [ "$(numeric "$(upstream "$SLURM_DEB")")" != "$(numeric "$BUILT_REL")" ]; then
  die "plugins were built for Slurm $BUILT_REL but slurm-wlm-basic-plugins $SLURM_DEB is installed; rebuild against the installed release"
fi
CLAIMED_REL=$(upstream "$SLURM_DEB")

ARCH=$(dpkg --print-architecture)
CRATE_VER=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$ROOT_DIR/Cargo.toml")
[ -n "$CRATE_VER" ] || die "cannot read the version from Cargo.toml"
VERSION="$CRATE_VER-1+slurm$CLAIMED_REL"
SUFFIX=${CELLSCHED_DEB_NAME_SUFFIX:-}
PLUGINDIR=/usr/lib/x86_64-linux-gnu/slurm-wlm

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cellsched-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PKG=$WORK/cellsched DBG=$WORK/cellsched-dbgsym
mkdir -p "$PKG/DEBIAN" "$DBG/DEBIAN"

# --- files: the same layout `make install` uses ------------------------------
make -s -C "$ROOT_DIR" --no-print-directory install-staged STAGE="$STAGE" DESTDIR="$PKG" \
  PLUGINDIR=$PLUGINDIR SYSCONFDIR=/etc/slurm BINDIR=/usr/bin MANDIR=/usr/share/man \
  BASHCOMPDIR=/usr/share/bash-completion/completions ZSHCOMPDIR=/usr/share/zsh/vendor-completions \
  FISHCOMPDIR=/usr/share/fish/vendor_completions.d DEBUGDIR=/usr/lib/debug >/dev/null
# Debug files go to the -dbgsym package (Debian's layout for split debug info).
mkdir -p "$DBG/usr/lib"
mv "$PKG/usr/lib/debug" "$DBG/usr/lib/debug"
gzip -9n "$PKG"/usr/share/man/man1/*.1 "$PKG"/usr/share/man/man5/*.5 "$PKG"/usr/share/man/man8/*.8
# The example configuration; postinst copies it to /etc/slurm/cellsched.toml
# when that file does not exist (an admin's file is never touched).
install -D -m 0644 "$ROOT_DIR/etc/cellsched.toml" "$PKG/usr/share/cellsched/cellsched.toml"

DOC=$PKG/usr/share/doc/cellsched
mkdir -p "$DOC/examples" "$DBG/usr/share/doc"
install -m 0644 "$ROOT_DIR/README.md" "$DOC/README.md"
mkdir -p "$DOC/docs"
for f in "$ROOT_DIR"/docs/*.md; do install -m 0644 "$f" "$DOC/docs/$(basename "$f")"; done
for f in CHANGELOG.md; do install -m 0644 "$ROOT_DIR/$f" "$DOC/$f"; done
install -m 0644 "$ROOT_DIR/spank/README.md" "$DOC/README.spank.md"
for f in slurm.conf gres.conf plugstack.conf slurmdbd.conf cellsched.toml profile-gpus.sbatch; do
  install -m 0644 "$ROOT_DIR/etc/$f" "$DOC/examples/$f"
done
cp -r "$ROOT_DIR/etc/examples/." "$DOC/examples/"
cp -r "$ROOT_DIR/etc/profile" "$DOC/examples/profile"
find "$DOC" -type d -exec chmod 0755 {} +; find "$DOC" -type f ! -name '*.sh' -exec chmod 0644 {} +
cat > "$DOC/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: cellsched

Files: *
License: GPL-2.0-or-later
 On Debian systems, the full text of the GNU General Public License
 version 2 can be found in /usr/share/common-licenses/GPL-2.
EOF
ln -s cellsched "$DBG/usr/share/doc/cellsched-dbgsym"

# --- control files -------------------------------------------------------------
echo /etc/slurm/plugstack.conf.d/cellsched.conf > "$PKG/DEBIAN/conffiles"
sed -e "s|@SLURM_DEB@|$SLURM_DEB|g" -e "s|@SLURM_REL@|$CLAIMED_REL|g" \
  "$ROOT_DIR/packaging/deb/preinst.in" > "$PKG/DEBIAN/preinst"
chmod 0755 "$PKG/DEBIAN/preinst"
cat > "$PKG/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ ! -e /etc/slurm/cellsched.toml ]; then
  mkdir -p /etc/slurm
  cp /usr/share/cellsched/cellsched.toml /etc/slurm/.cellsched.toml.dpkg-new
  mv /etc/slurm/.cellsched.toml.dpkg-new /etc/slurm/cellsched.toml
fi
POSTINST
chmod 0755 "$PKG/DEBIAN/postinst"
cat > "$PKG/DEBIAN/control" <<EOF
Package: cellsched
Version: $VERSION
Architecture: $ARCH
Maintainer: cellsched developers <cellsched@localhost>
Section: admin
Priority: optional
Depends: slurm-wlm-basic-plugins (= $SLURM_DEB), libc6
Suggests: slurmctld, slurmd, slurm-client
Installed-Size: $(du -sk --exclude=DEBIAN "$PKG" | cut -f1)
Description: Cell-aware deep-learning scheduling for Slurm $CLAIMED_REL
 Slurm plugins (site_factor/cellsched, job_submit/cellsched and the
 spank_cellsched SPANK plugin) that schedule deep-learning jobs on clusters
 with mixed GPU types, plus the cellsched command-line tool (estimates,
 reports, simulator). Built for Slurm $CLAIMED_REL only; the plugin line for
 plugstack.conf is in /etc/slurm/plugstack.conf.d/cellsched.conf.
EOF
cat > "$DBG/DEBIAN/control" <<EOF
Package: cellsched-dbgsym
Version: $VERSION
Architecture: $ARCH
Maintainer: cellsched developers <cellsched@localhost>
Section: debug
Priority: optional
Depends: cellsched (= $VERSION)
Auto-Built-Package: debug-symbols
Installed-Size: $(du -sk --exclude=DEBIAN "$DBG" | cut -f1)
Description: debug symbols for cellsched
 Split-off debug info (line tables) of the cellsched CLI and plugins, found by
 gdb through the binaries' build ids under /usr/lib/debug/.build-id.
EOF

DEB=$OUT/cellsched_${VERSION}_${ARCH}$SUFFIX.deb
DBGDEB=$OUT/cellsched-dbgsym_${VERSION}_${ARCH}$SUFFIX.deb
dpkg-deb --root-owner-group --build "$PKG" "$DEB" >/dev/null
dpkg-deb --root-owner-group --build "$DBG" "$DBGDEB" >/dev/null
echo "$DEB"
echo "$DBGDEB"
