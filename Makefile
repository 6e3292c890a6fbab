# mysqlio: `make setup`, `make test`, `make demo`, `make bench`.
# Everything is installed by these targets; run them as root on Debian 12.

VENV      := .venv
PY        := $(VENV)/bin/python
BUILD     := build
BPF_OBJ   := tracer/bpf/mysqlio.bpf.o
FLOOR_OBJ := tracer/bpf/empty.bpf.o
VMLINUX_H := $(BUILD)/vmlinux.h
IOGEN     := tools/iogen
SYSCALL_LOOP := tools/syscall_loop
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
CLANG     ?= clang
BPFTOOL   ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
DEPS_STAMP := $(BUILD)/.deps-installed
VENV_STAMP := $(VENV)/.installed

.PHONY: setup deps abi bpf test lint format demo bench clean

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

tracer/bpf/%.bpf.o: probes/%.bpf.c probes/mysqlio.h probes/pagecache.bpf.h probes/connection.bpf.h $(VMLINUX_H)
	@command -v $(CLANG) >/dev/null || { echo "mysqlio: clang is missing; 'make setup' installs it (Debian package clang)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CLANG) -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) \
		-I$(BUILD) -Iprobes -c $< -o $@

$(IOGEN): tools/iogen.c tools/Makefile $(DEPS_STAMP)
	$(MAKE) -C tools iogen

$(SYSCALL_LOOP): tools/syscall_loop.c tools/Makefile
	$(MAKE) -C tools syscall_loop

test: setup
	$(VENV)/bin/ruff check tracer tests tools
	$(VENV)/bin/ruff format --check tracer tests tools
	$(VENV)/bin/pytest -v --durations=30 tests

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

clean:
	rm -rf $(BUILD) $(BPF_OBJ) $(FLOOR_OBJ) $(VENV)
	$(MAKE) -C tools clean
