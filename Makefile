# cellsched plugins and CLI: build, install, Debian package (pyxis style).
#   make build                         cargo build --release of the three plugins (what the tests use)
#   make dist                          cargo build --profile dist of plugins + CLI, debug info split off,
#                                      man pages and completions generated (into $(STAGE))
#   make install [DESTDIR=..] [PLUGINDIR=..] [SYSCONFDIR=..] [BINDIR=..] [MANDIR=..]
#                                      plugins into PLUGINDIR, CLI into BINDIR, man pages into
#                                      MANDIR/man1, man5 and man8, bash/zsh/fish completions, debug files
#                                      under DEBUGDIR/.build-id, plugstack.conf.d snippet into SYSCONFDIR,
#                                      and SYSCONFDIR/cellsched.toml when none exists (install-config)
#   make install-config [SYSCONFDIR=..] etc/cellsched.toml as SYSCONFDIR/cellsched.toml, only when that
#                                      file does not exist (an existing one is never overwritten)
#   make uninstall                     removes what install put there
#   make deb                           cellsched_<ver>_<arch>.deb (+ -dbgsym) in $(DEBOUT), built against
#                                      the installed Slurm packages; see packaging/deb/build-deb.sh
#   make check-RELEASE                 build + check the plugins against that Slurm release's headers,
#                                      e.g. make check-24.11.5 (releases: scripts/slurm-releases)
#   make check-releases                check-RELEASE for every release CI checks
#   make build-RELEASE                 build and install that Slurm release itself (optional, ~7 min)
#   make live-RELEASE                  live check of the plugins on a cluster of that release (optional, not CI)
#   All four are scripts/slurm.sh check|build|live RELEASE.
#   make build-fe                      build Slurm 22.05.8 with --enable-front-end for the emulated
#                                      >=1,000-node cluster (`cellsched cluster up --nodes N`; optional)
# Installed files replace old ones by temp copy + rename: a running slurmctld
# keeps its mapped copy instead of crashing on a file rewritten under it.
SHELL         := /bin/bash
CARGO         ?= cargo
PLUGIN_CRATES ?= site_factor_cellsched job_submit_cellsched spank_cellsched
PLUGINDIR     ?= /usr/lib/x86_64-linux-gnu/slurm-wlm
SYSCONFDIR    ?= /etc/slurm
BINDIR        ?= /usr/bin
MANDIR        ?= /usr/share/man
BASHCOMPDIR   ?= /usr/share/bash-completion/completions
# Debian's zsh reads vendor completions here (upstream zsh: .../site-functions).
ZSHCOMPDIR    ?= /usr/share/zsh/vendor-completions
FISHCOMPDIR   ?= /usr/share/fish/vendor_completions.d
DEBUGDIR      ?= /usr/lib/debug
DESTDIR       ?=
TARGET_DIR    ?= $(or $(CARGO_TARGET_DIR),target)
STAGE         ?= $(TARGET_DIR)/stage
DEBOUT        ?= $(TARGET_DIR)/deb
SNIPPET       := etc/plugstack.conf.d/cellsched.conf
STOCK_PLUGINDIR := /usr/lib/x86_64-linux-gnu/slurm-wlm
# The supported Slurm releases, from the one table (scripts/slurm-releases).
SLURM_RELEASES    := $(shell scripts/slurm.sh releases)
SLURM_CI_RELEASES := $(shell scripts/slurm.sh releases --ci)

.PHONY: all build dist install install-staged install-config uninstall deb check-releases build-fe \
  $(addprefix check-,$(SLURM_RELEASES)) $(addprefix build-,$(SLURM_RELEASES)) $(addprefix live-,$(SLURM_RELEASES))
all: build

build:
	$(CARGO) build --release $(addprefix -p ,$(PLUGIN_CRATES))

dist:
	$(CARGO) build --profile dist -p cellsched $(addprefix -p ,$(PLUGIN_CRATES))
	packaging/stage.sh "$(TARGET_DIR)/dist" "$(STAGE)" $(PLUGIN_CRATES)

install: dist
	@$(MAKE) --no-print-directory install-staged
	@$(MAKE) --no-print-directory install-config

# install-config: the commented example configuration, never over an existing file.
install-config:
	@set -e; dst="$(DESTDIR)$(SYSCONFDIR)/cellsched.toml"; \
	  if [ -e "$$dst" ]; then echo "kept $$dst (it exists; etc/cellsched.toml lists every key and default)"; \
	  else install -d "$(DESTDIR)$(SYSCONFDIR)"; install -m 0644 etc/cellsched.toml "$$dst.tmp"; mv -f "$$dst.tmp" "$$dst"; \
	    echo "installed $$dst"; fi

# install-staged: installs $(STAGE) as made by `make dist` (no build).
# replace SRC DST MODE: temp copy next to DST, then rename over it.
install-staged:
	@[ -x "$(STAGE)/bin/cellsched" ] || { echo "make install: $(STAGE) not staged (run make dist)" >&2; exit 1; }
	install -d "$(DESTDIR)$(PLUGINDIR)" "$(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d" "$(DESTDIR)$(BINDIR)" \
	  "$(DESTDIR)$(MANDIR)/man1" "$(DESTDIR)$(MANDIR)/man5" "$(DESTDIR)$(MANDIR)/man8" "$(DESTDIR)$(BASHCOMPDIR)" \
	  "$(DESTDIR)$(ZSHCOMPDIR)" "$(DESTDIR)$(FISHCOMPDIR)" "$(DESTDIR)$(DEBUGDIR)/.build-id"
	@set -e; replace() { install -m "$$3" "$$1" "$$(dirname "$$2")/.$$(basename "$$2").tmp"; \
	    mv -f "$$(dirname "$$2")/.$$(basename "$$2").tmp" "$$2"; echo "installed $$2"; }; \
	  for c in $(PLUGIN_CRATES); do replace "$(STAGE)/plugins/$$c.so" "$(DESTDIR)$(PLUGINDIR)/$$c.so" 0755; done; \
	  replace "$(STAGE)/bin/cellsched" "$(DESTDIR)$(BINDIR)/cellsched" 0755; \
	  for p in "$(STAGE)"/man/*.1; do replace "$$p" "$(DESTDIR)$(MANDIR)/man1/$$(basename "$$p")" 0644; done; \
	  for p in "$(STAGE)"/man/*.5; do replace "$$p" "$(DESTDIR)$(MANDIR)/man5/$$(basename "$$p")" 0644; done; \
	  for p in "$(STAGE)"/man/*.8; do replace "$$p" "$(DESTDIR)$(MANDIR)/man8/$$(basename "$$p")" 0644; done; \
	  replace "$(STAGE)/completions/cellsched.bash" "$(DESTDIR)$(BASHCOMPDIR)/cellsched" 0644; \
	  replace "$(STAGE)/completions/_cellsched" "$(DESTDIR)$(ZSHCOMPDIR)/_cellsched" 0644; \
	  replace "$(STAGE)/completions/cellsched.fish" "$(DESTDIR)$(FISHCOMPDIR)/cellsched.fish" 0644; \
	  for d in "$(STAGE)"/debug/.build-id/*/*.debug; do \
	    rel=$${d#"$(STAGE)/debug/"}; install -d "$(DESTDIR)$(DEBUGDIR)/$$(dirname "$$rel")"; \
	    replace "$$d" "$(DESTDIR)$(DEBUGDIR)/$$rel" 0644; done
	@set -e; dst="$(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d/cellsched.conf"; \
	  sed 's|$(STOCK_PLUGINDIR)|$(PLUGINDIR)|' $(SNIPPET) > "$$dst.tmp"; chmod 0644 "$$dst.tmp"; mv -f "$$dst.tmp" "$$dst"; \
	  echo "installed $$dst (plugstack.conf needs: include $(SYSCONFDIR)/plugstack.conf.d/*.conf)"

# Debug files are found through the installed binaries' build ids, so this
# runs before the binaries themselves are removed.
uninstall:
	@set -e; for f in $(foreach c,$(PLUGIN_CRATES),"$(DESTDIR)$(PLUGINDIR)/$(c).so") "$(DESTDIR)$(BINDIR)/cellsched"; do \
	  [ -f "$$f" ] || continue; \
	  id=$$(readelf -n "$$f" 2>/dev/null | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$$/\1/p'); \
	  [ -n "$$id" ] && rm -f "$(DESTDIR)$(DEBUGDIR)/.build-id/$${id:0:2}/$${id:2}.debug"; \
	  rmdir "$(DESTDIR)$(DEBUGDIR)/.build-id/$${id:0:2}" 2>/dev/null || true; done
	rm -f $(foreach c,$(PLUGIN_CRATES),"$(DESTDIR)$(PLUGINDIR)/$(c).so") "$(DESTDIR)$(BINDIR)/cellsched" \
	  "$(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d/cellsched.conf" \
	  "$(DESTDIR)$(MANDIR)"/man1/cellsched.1 "$(DESTDIR)$(MANDIR)"/man1/cellsched-*.1 \
	  "$(DESTDIR)$(MANDIR)/man8/spank_cellsched.8" "$(DESTDIR)$(MANDIR)/man5/cellsched.toml.5" "$(DESTDIR)$(BASHCOMPDIR)/cellsched" \
	  "$(DESTDIR)$(ZSHCOMPDIR)/_cellsched" "$(DESTDIR)$(FISHCOMPDIR)/cellsched.fish"

deb: dist
	packaging/deb/build-deb.sh "$(STAGE)" "$(DEBOUT)"

check-releases: $(addprefix check-,$(SLURM_CI_RELEASES))

$(addprefix check-,$(SLURM_RELEASES)): check-%:
	scripts/slurm.sh check $* $(PLUGIN_CRATES)

$(addprefix build-,$(SLURM_RELEASES)): build-%:
	scripts/slurm.sh build $*

$(addprefix live-,$(SLURM_RELEASES)): live-%:
	scripts/slurm.sh live $*

build-fe:
	scripts/slurm.sh build 22.05.8 front-end
