"""save() on every kind of destination, as Python's own file I/O and any Unix tool treat them: a file replaced whole
(its permission bits kept), a symbolic link written through, a FIFO and a character device written directly,
standard output for '-', a directory refused (InvalidInput), a failed write an OSError."""
import os
import stat
import subprocess
import sys
import threading

import pytest

import sluice

PROFILE = sluice.Profile.bundled("llama2-7b", gpus=8)
TEXT = PROFILE.to_json() + "\n"


def test_a_file_is_replaced_and_keeps_its_mode(tmp_path):
    target = tmp_path / "p.json"
    target.write_text("old")
    target.chmod(0o600)
    PROFILE.save(target)
    assert target.read_text() == TEXT
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["p.json"]


def test_a_symbolic_link_is_written_through(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "target.json").write_text("old")
    (tmp_path / "link.json").symlink_to("sub/target.json")
    PROFILE.save(tmp_path / "link.json")
    assert (tmp_path / "link.json").is_symlink()
    assert (tmp_path / "sub" / "target.json").read_text() == TEXT


def test_a_fifo_is_written_directly_to_a_reader_thread(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    PROFILE.save(fifo)  # blocks until the reader opens the FIFO: save must not hold the GIL meanwhile
    reader.join(timeout=60)
    assert received == [TEXT]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_character_devices_are_written_directly(tmp_path):
    try:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(tmp_path / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError as error:
        pytest.skip(f"cannot make device nodes here ({error}; needs root)")
    PROFILE.save(tmp_path / "null")
    with pytest.raises(OSError, match="full: write error"):
        PROFILE.save(tmp_path / "full")
    assert all(stat.S_ISCHR(os.lstat(tmp_path / name).st_mode) for name in ("null", "full"))


def test_dash_is_standard_output():
    script = "import sluice; sluice.Profile.bundled('llama2-7b', gpus=8).save('-')"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.stdout == TEXT


def test_a_directory_or_a_loop_of_links_is_invalid_input(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(sluice.InvalidInput, match="is a directory"):
        PROFILE.save(tmp_path / "dir")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(sluice.InvalidInput, match="too many levels of symbolic links"):
        PROFILE.save(tmp_path / "a")
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "dir"]
