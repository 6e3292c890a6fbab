#!/bin/sh
# Installs the Debian packages mysqlio builds, tests and demos with.
# Idempotent and quick when everything is already there.
set -eu
# systemtap + Debian's kernel headers: the SystemTap backend's scripts are compiled
# (stap -p4) against them in the tests; this machine's own kernel has no headers package.
# strace and bpftrace are what the benchmarks compare mysqlio with; so is percona-toolkit's
# pt-ioprofile (strace of every syscall of a pid, files named by lsof, which it does not depend on).
# debootstrap builds the Debian 11 / 13 roots of tests/test_foreign_servers.py (tools/server_roots.py).
# qemu-system-x86, kmod (depmod) and busybox-static: virtme-ng (in .venv) boots Debian's
# stock kernels under emulation for the kernel matrix (tools/kernels.py, tools/guest.py);
# e2fsprogs makes the matrix's scratch ext4 inside the guest (tools/matrix_guest.py).
# zstd: Debian 13's and newer amd64 kernel images are zstd-compressed (tools/arch_btf.py reads their BTF).
# prometheus: its promtool checks and unit-tests the shipped rules (contrib/prometheus).
# crun: an OCI runtime, runs tests/test_containers.py's two MariaDB "pods" from bundles.
# podman and docker.io: tests/test_docker_podman.py runs MariaDB under each (no systemd here:
# the test starts dockerd itself; podman has no daemon).
# udev is deliberately not in the list: in such a guest its coldplug loads every driver and
# triples the boot time; tools/guest.py does not need it.
PACKAGES="clang llvm libbpf-dev libbpf1 bpftool libelf-dev zlib1g-dev make gcc
libaio-dev liburing-dev mariadb-server mariadb-client sysbench
python3 python3-venv strace percona-toolkit lsof tmux bpftrace util-linux
systemtap linux-headers-$(dpkg --print-architecture)
qemu-system-x86 kmod busybox-static zstd
debootstrap prometheus crun podman docker.io"

missing=""
for pkg in $PACKAGES; do
	status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
	case "$status" in
	*"install ok installed"*) ;;
	*) missing="$missing $pkg" ;;
	esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "mysqlio: missing Debian packages:$missing (run 'make setup' as root)" >&2
	exit 1
fi
echo "mysqlio: installing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# mariadb-server's maintainer scripts try to start a service; no init system
# is needed for the throwaway servers the tests and demo run themselves.
apt-get install -y -q --no-install-recommends $missing
