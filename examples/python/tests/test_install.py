"""The documented install: `pip install --no-build-isolation examples/python` into a virtual environment that sees
Debian's NumPy, reusing the tests' build tree (SLUICE_BUILD_DIR) so that nothing is compiled twice."""
import os
import pathlib
import subprocess
import sys

import pytest

PACKAGE_SOURCE = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def build_dir():
    path = os.environ.get("SLUICE_BUILD_DIR")
    if not path:
        pytest.skip("SLUICE_BUILD_DIR is not set: no build tree to install from")
    return path


def test_pip_installs_a_working_package_into_a_venv(build_dir, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "SLUICE_DATA_DIR")}
    environment["SLUICE_BUILD_DIR"] = build_dir
    before = subprocess.run([str(python), "-c", "import sluice; print(sluice.__file__)"], env=environment,
                            cwd=tmp_path, capture_output=True, text=True)
    assert before.returncode != 0, f"a sluice package is already installed outside the venv: {before.stdout}"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                    "--no-index", str(PACKAGE_SOURCE)], check=True, env=environment, cwd=tmp_path)
    check = (
        "import os, sluice\n"
        "root = os.path.dirname(sluice.__file__)\n"
        "assert root.startswith(os.environ['VIRTUAL_ENV']), root\n"
        "assert os.environ['SLUICE_DATA_DIR'] == os.path.join(root, 'data')\n"
        "assert os.path.isfile(os.path.join(root, '_sluice.pyi'))\n"
        "profile = sluice.Profile.bundled('llama2-32b', gpus=64)\n"
        "plan = sluice.plan_iteration(sluice.LengthDataset.bundled('man-pages').lengths[:40], ['4*tp16pp1'], profile)\n"
        "print(plan.strategy)\n"
    )
    environment["VIRTUAL_ENV"] = str(venv)
    result = subprocess.run([str(python), "-c", check], env=environment, cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4*tp16pp1"
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "sluice"], check=True, env=environment)
    gone = subprocess.run([str(python), "-c", "import sluice"], env=environment, cwd=tmp_path, capture_output=True)
    assert gone.returncode != 0
