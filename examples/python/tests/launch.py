"""Starting the package's Python programs from tests: with the built package first on the path, and as torchrun
starts its workers."""
import os
import pathlib
import socket
import subprocess
import sys

import sluice


def built_package_env():
    """The environment with the sluice package under test first on the path, absolute, for any working directory."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pathlib.Path(sluice.__file__).parents[1]),
                                                      env.get("PYTHONPATH")]))
    return env


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_like_torchrun(world, arguments, cwd):
    """`world` processes of `python3 ARGUMENTS` with the environment torchrun gives its workers (RANK, WORLD_SIZE,
    LOCAL_RANK, MASTER_ADDR/PORT on 127.0.0.1). Debian's torchrun 1.13 itself fails under Python 3.11 before it
    starts a worker (Std.from_str returns None), so the test starts them as it would."""
    port = free_port()
    processes = []
    for rank in range(world):
        env = built_package_env()
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        processes.append(subprocess.Popen([sys.executable, *arguments], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    outputs = [process.communicate(timeout=300) for process in processes]
    return [process.returncode for process in processes], outputs
