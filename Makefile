# cellsched plugins: build and install (pyxis style).
#   make build                         cargo build --release of the plugin crates
#   make install [PLUGINDIR=..] [SYSCONFDIR=..] [DESTDIR=..]
#                                      .so files into PLUGINDIR, plugstack.conf.d snippet into SYSCONFDIR
#   make uninstall                     removes what install put there
#   make check-2411                    build + check the plugins against Slurm 24.11.5 headers
#   make build-2411                    build and install Slurm 24.11.5 itself (optional, ~7 min)
#   make live-2411                     live check of the plugins on a 24.11.5 cluster (optional, not CI)
# Installed files replace old ones by temp copy + rename: a running slurmctld
# keeps its mapped copy instead of crashing on a file rewritten under it.
CARGO         ?= cargo
PLUGIN_CRATES ?= site_factor_cellsched job_submit_cellsched spank_cellsched
PLUGINDIR     ?= /usr/lib/x86_64-linux-gnu/slurm-wlm
SYSCONFDIR    ?= /etc/slurm
DESTDIR       ?=
TARGET_DIR    ?= $(or $(CARGO_TARGET_DIR),target)
SNIPPET       := etc/plugstack.conf.d/cellsched.conf
STOCK_PLUGINDIR := /usr/lib/x86_64-linux-gnu/slurm-wlm

.PHONY: all build install uninstall check-2411 build-2411 live-2411
all: build

build:
	$(CARGO) build --release $(addprefix -p ,$(PLUGIN_CRATES))

install: build
	install -d "$(DESTDIR)$(PLUGINDIR)" "$(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d"
	@set -e; for c in $(PLUGIN_CRATES); do \
	  src="$(TARGET_DIR)/release/lib$$c.so"; dst="$(DESTDIR)$(PLUGINDIR)/$$c.so"; \
	  [ -f "$$src" ] || { echo "make install: $$src not built" >&2; exit 1; }; \
	  install -m 0755 "$$src" "$(DESTDIR)$(PLUGINDIR)/.$$c.so.tmp"; \
	  mv -f "$(DESTDIR)$(PLUGINDIR)/.$$c.so.tmp" "$$dst"; \
	  echo "installed $$dst"; \
	done
	@set -e; dst="$(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d/cellsched.conf"; \
	  sed 's|$(STOCK_PLUGINDIR)|$(PLUGINDIR)|' $(SNIPPET) > "$$dst.tmp"; chmod 0644 "$$dst.tmp"; mv -f "$$dst.tmp" "$$dst"; \
	  echo "installed $$dst (plugstack.conf needs: include $(SYSCONFDIR)/plugstack.conf.d/*.conf)"

uninstall:
	rm -f $(foreach c,$(PLUGIN_CRATES),"$(DESTDIR)$(PLUGINDIR)/$(c).so") "$(DESTDIR)$(SYSCONFDIR)/plugstack.conf.d/cellsched.conf"

check-2411:
	scripts/check-2411.sh $(PLUGIN_CRATES)

build-2411:
	scripts/build-2411.sh

live-2411:
	scripts/live-2411.sh
