"""mysqlio: per-file I/O accounting for MySQL / MariaDB (eBPF, SystemTap)."""

import shutil
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent


class BuildWithProbes(build_py):
    """Compile probes/*.bpf.c (clang -target bpf, CO-RE) before packaging."""

    def run(self) -> None:
        subprocess.run(["make", "-C", str(HERE), "bpf"], check=True)
        super().run()
        # the SystemTap scripts ship inside the package (mysqlio.stap_compile.script_dir looks there first)
        shutil.copytree(HERE / "stap", Path(self.build_lib) / "mysqlio" / "stap", dirs_exist_ok=True)


setup(
    name="mysqlio",
    version="0.1.0",
    description="Which files a running MySQL / MariaDB server writes, reads and syncs, second by second",
    long_description=(HERE / "README.md").read_text() if (HERE / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    license="GPL-2.0-or-later",
    python_requires=">=3.10",
    packages=["mysqlio", *(f"mysqlio.{name}" for name in find_packages("tracer"))],
    package_dir={"mysqlio": "tracer"},
    package_data={"mysqlio": ["bpf/*.bpf.o"]},
    install_requires=[
        "psutil>=5.9",
        "rich>=13",
        "numpy>=1.24",
        "pyarrow>=14",
        "matplotlib>=3.7",
        "prometheus_client>=0.16",
        "PyMySQL>=1.0",
    ],
    # virtme-ng: vng boots other kernels for the kernel matrix (tools/guest.py)
    extras_require={"dev": ["pytest>=7", "ruff>=0.5", "hypothesis>=6", "virtme-ng>=1.30"]},
    entry_points={"console_scripts": ["mysqlio = mysqlio.cli:main"]},
    cmdclass={"build_py": BuildWithProbes},
)
