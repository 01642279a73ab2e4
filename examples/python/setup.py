"""Builds the extension module with the project's CMake (the C++ library is header-only; the module is one target)
and lays the package out as the build tree does: sluice/ with _sluice*.so, its stub, the pure-Python files and the
bundled data. SLUICE_BUILD_DIR names a build tree to reuse (configured with SLUICE_BUILD_PYTHON on for this
interpreter), else a fresh one is made under build/; CMAKE_ARGS adds configure options."""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

PACKAGE_SOURCE = pathlib.Path(__file__).resolve().parent
PROJECT = PACKAGE_SOURCE.parents[1]


def project_version():
    match = re.search(r"project\(sluice VERSION ([0-9.]+)", (PROJECT / "CMakeLists.txt").read_text())
    return match.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, extension):
        build_dir = pathlib.Path(os.environ.get("SLUICE_BUILD_DIR") or PACKAGE_SOURCE / "build" / "cmake").resolve()
        if not (build_dir / "CMakeCache.txt").exists():
            subprocess.run(["cmake", "-S", str(PROJECT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                            "-DSLUICE_BUILD_PYTHON=ON", "-DSLUICE_BUILD_TESTS=OFF", "-DSLUICE_BUILD_BENCH=OFF",
                            "-DSLUICE_BUILD_EXECUTOR=OFF", "-DSLUICE_BUILD_EXAMPLES=OFF",
                            f"-DPython_EXECUTABLE={sys.executable}",
                            *shlex.split(os.environ.get("CMAKE_ARGS", ""))], check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "sluice_python"], check=True)
        built = build_dir / "python" / "sluice"
        module = next(built.glob("_sluice*.so"), None)
        if module is None:
            sys.exit(f"sluice: {build_dir} built no extension module (is SLUICE_BUILD_PYTHON on?)")
        package = pathlib.Path(self.get_ext_fullpath(extension.name)).parent
        package.mkdir(parents=True, exist_ok=True)
        shutil.copy2(module, self.get_ext_fullpath(extension.name))
        shutil.copy2(built / "_sluice.pyi", package / "_sluice.pyi")
        shutil.copytree(PROJECT / "data", package / "data", dirs_exist_ok=True)


setup(
    version=project_version(),
    ext_modules=[Extension("sluice._sluice", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    package_data={"sluice": ["py.typed"]},
)
