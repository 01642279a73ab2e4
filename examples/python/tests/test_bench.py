"""bench/python_overhead.py runs (its figures are measured in docs/python.md, never asserted by a test)."""
import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "bench" / "python_overhead.py"


def test_overhead_script_reports():
    output = subprocess.run([sys.executable, str(SCRIPT), "--repeats", "1", "--min-seconds", "0.01",
                             "--overlap-iterations", "0"], check=True, capture_output=True, text=True).stdout
    report = json.loads(output)["plan_iteration_64_gpus"]
    assert report["sequences"] > 0 and report["python_s"] > 0
