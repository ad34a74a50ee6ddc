"""Packages the pacedb extension built by the repository's CMake build.

The module links the PaceDB client library (C++17, RocksDB, ...), which only
the top-level CMake build knows how to build, so this does not compile
anything itself: it runs `cmake --build <build dir> --target pacedb_python`
(configuring the build dir first if needed) and packages
<build dir>/python/pacedb. Build dir: $PACEDB_BUILD_DIR, default ../build.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.path.abspath(os.environ.get("PACEDB_BUILD_DIR", os.path.join(REPO, "build")))


def built_extension():
    pattern = os.path.join(BUILD, "python", "pacedb", "_pacedb*.so")
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
        subprocess.check_call(["cmake", "-S", REPO, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release",
                               f"-DPACE_PYTHON={sys.executable}"])
    subprocess.check_call(["cmake", "--build", BUILD, "--target", "pacedb_python",
                           f"-j{os.cpu_count() or 2}"])
    found = glob.glob(pattern)
    if not found:
        sys.exit(f"setup.py: no {pattern} after the build (is pybind11-dev installed? see "
                 "the cmake output)")
    return found[0]


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "pacedb")
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(built_extension(), dest)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: the package holds a compiled module


setup(
    name="pacedb",
    version="0.1.0",
    description="PaceDB client for Python: a parameter server built like an embedded database",
    packages=["pacedb"],
    python_requires=">=3.8",
    install_requires=[],  # numpy: the system's (python3-numpy), which the module was built with
    cmdclass={"build_py": BuildWithCMake},
    distclass=BinaryDistribution,
    zip_safe=False,
)
