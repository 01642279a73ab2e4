"""The documentation's Python examples, run as written: README.md's "Python" section and docs/python.md's
```python blocks, each document's blocks in order in one namespace (later blocks use what earlier ones made),
in a fresh directory. A block whose first line is `# doc-test: skip (why)` is not run."""
import os
import pathlib
import re

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[3]


def python_blocks(path, section=None):
    text = path.read_text()
    if section is not None:
        start = text.index(section + "\n")
        following = re.search(r"^#{1,3} ", text[start + len(section):], flags=re.MULTILINE)
        text = text[start:start + len(section) + (following.start() if following else len(text))]
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("document, section", [("README.md", "### Python"), ("docs/python.md", None)])
def test_examples_run_as_written(document, section, tmp_path, capsys):
    blocks = python_blocks(SOURCE / document, section)
    assert blocks, f"{document} has no python example"
    namespace = {"__name__": "__doc_example__"}
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        for number, block in enumerate(blocks):
            if block.startswith("# doc-test: skip"):
                continue
            exec(compile(block, f"{document} python block {number + 1}", "exec"), namespace)
    finally:
        os.chdir(here)
    assert capsys.readouterr().out  # every document's examples print what they show
