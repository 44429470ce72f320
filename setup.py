"""Builds the Python package `tagflow` with CMake: the C++ library and the
extension module tagflow._core, installed into the package beside its Python
files (python/tagflow/), with libtagflow.so next to the module.

    pip install .                                   # configures and builds in build-python/
    TAGFLOW_BUILD_DIR=build pip install .           # reuses a build tree made by scripts/build.sh
    TAGFLOW_CMAKE_ARGS="-DTAGFLOW_CUDA=OFF" pip install .

Debian's setuptools builds it without reaching PyPI:
``pip install --no-build-isolation .``.
"""

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version():
    text = (ROOT / "tagflow" / "version.h").read_text()
    parts = [re.search(r"#define TAGFLOW_VERSION_%s (\d+)" % p, text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


class CMakeBuild(build_ext):
    """Builds the module with CMake and installs its component into the package."""

    def build_extension(self, ext):
        reuse = "TAGFLOW_BUILD_DIR" in os.environ
        build_dir = Path(os.environ.get("TAGFLOW_BUILD_DIR", ROOT / "build-python")).resolve()
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DTAGFLOW_PYTHON=ON"]
        if not reuse:
            # A build of its own, for this interpreter. A reused build tree
            # keeps the Python it was configured with (checked below).
            configure += ["-DPython_EXECUTABLE=" + sys.executable, "-DCMAKE_BUILD_TYPE=Release",
                          "-DTAGFLOW_BUILD_TESTS=OFF", "-DTAGFLOW_README_EXAMPLES=OFF"]
        configure += os.environ.get("TAGFLOW_CMAKE_ARGS", "").split()
        subprocess.run(configure, check=True)
        jobs = str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "tagflow_python", "-j", jobs],
                       check=True)
        module = build_dir / "python" / "tagflow" / ("_core" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not module.exists():
            raise RuntimeError(
                "%s holds no tagflow._core for this Python (%s): configure it with "
                "-DPython_EXECUTABLE=%s, or build without TAGFLOW_BUILD_DIR"
                % (build_dir, module.name, sys.executable))
        subprocess.run(["cmake", "--install", str(build_dir), "--component", "python",
                        "--prefix", str(package_dir)], check=True)


setup(
    version=version(),
    packages=find_packages("python"),
    package_dir={"": "python"},
    ext_modules=[Extension("tagflow._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    # setuptools' own files, out of the way of the CMake tree `build/`.
    options={"build": {"build_base": "build-python/setuptools"}},
)
