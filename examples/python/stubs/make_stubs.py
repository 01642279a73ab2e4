"""Writes the module's type stubs (_sluice.pyi): the hand-written fragments (stubs/*.pyi, in name order) with each
field-table class's fields made from the built module, so that what an editor shows is what the tables say.

A class with __match_args__ is made from one table of fields: a report record (io::record, def_record_properties)
or an option class (options.cpp). Its stub gains a property per field, typed by the getter's signature, with the
field's docstring; an option class also gains its keyword-only constructor, typed and defaulted as the module's.
A fragment that spells one of those itself is an error: the table is their one home.

Usage: make_stubs.py FRAGMENTS_DIR OUTPUT, with the built sluice package importable."""
import ast
import inspect
import os
import pathlib
import re
import sys
import textwrap

from sluice import _sluice

WIDTH = 120
NUMPY_ALIASES = {"numpy.float64": "FloatArray", "numpy.int64": "IntArray"}


def split_top_level(text):
    """Comma-separated items of a signature, commas inside brackets, parentheses and quotes kept."""
    items, depth, quote, current = [], 0, None, ""
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(current.strip())
            current = ""
            continue
        current += char
    if current.strip():
        items.append(current.strip())
    return items


def stub_type(pybind_type, parameter=False):
    """A type as pybind11 writes it in a signature, spelled as the stubs spell it (00_header.pyi's aliases)."""
    text = pybind_type.replace("sluice._sluice.", "")

    def numpy_array(match):
        return NUMPY_ALIASES.get(match.group(1), f"npt.NDArray[{match.group(1).replace('numpy.', 'np.')}]")

    text = re.sub(r"numpy\.ndarray\[([\w.]+)\]", numpy_array, text)
    text = re.sub(r"\bList\[", "Sequence[" if parameter else "list[", text)
    text = re.sub(r"\bDict\[", "dict[", text)
    text = re.sub(r"\bTuple\[", "tuple[", text)
    return text


def return_type(owner, name, function):
    first = (function.__doc__ or "").splitlines()[0]
    spelled = first[first.rfind(") -> ") + len(") -> "):].strip()
    if "::" in spelled:
        sys.exit(f"make_stubs: {owner}.{name} returns {spelled}, a C++ type bound after the class: bind it first")
    return stub_type(spelled)


def docstring_lines(text, indent):
    """A docstring as the fragments write one: on the def's next line, wrapped to the stubs' width."""
    pad = " " * indent
    text = " ".join(text.split())
    if len(pad) + len(text) + 6 <= WIDTH:
        return [f'{pad}"""{text}"""']
    lines = textwrap.wrap(text, WIDTH - indent - 3, break_on_hyphens=False)
    lines[0] = '"""' + lines[0]
    lines[-1] += '"""'
    return [pad + line for line in lines]


def constructor_parameters(cls):
    """(name, type, default) of an option class's keyword-only constructor; None when it has none."""
    first = (cls.__init__.__doc__ or "").splitlines()[0]
    inside = first[first.find("(") + 1:first.rfind(") ->")]
    items = split_top_level(inside)
    if "*" not in items or items[items.index("*") + 1:] == []:
        return None
    parameters = []
    for item in items[items.index("*") + 1:]:
        name, _, rest = item.partition(":")
        annotation, _, default = rest.partition(" = ")
        parameters.append((name.strip(), stub_type(annotation.strip(), parameter=True), default.strip()))
    if [name for name, _, _ in parameters] != list(cls.__match_args__):
        return None
    return parameters


def stub_default(text):
    """A default as a literal where it is one, else `...` (an object an editor cannot spell)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return "..."
    return '"' + value + '"' if isinstance(value, str) else repr(value)


def constructor_lines(parameters):
    spelled = [f"{name}: {annotation} = {stub_default(default)}" for name, annotation, default in parameters]
    one_line = "    def __init__(self, *, " + ", ".join(spelled) + ") -> None: ..."
    if len(one_line) <= WIDTH:
        return [one_line]
    return ["    def __init__(", "        self,", "        *,"] + [f"        {item}," for item in spelled] + \
        ["    ) -> None: ..."]


def field_lines(cls):
    """The stub lines a field-table class's fields make: its constructor (option classes) and properties."""
    parameters = constructor_parameters(cls)
    lines = constructor_lines(parameters) if parameters else []
    types = {name: annotation.replace("Sequence[", "list[") for name, annotation, _ in parameters or []}
    for name in cls.__match_args__:
        field = inspect.getattr_static(cls, name)
        annotation = types.get(name) or return_type(cls.__name__, name, field.fget)
        doc = field.__doc__
        head = f"    def {name}(self) -> {annotation}:"
        lines += ["    @property"] + ([head + " ..."] if not doc else [head] + docstring_lines(doc, 8))
    return lines


def main(fragments_dir, output):
    fragments = sorted(pathlib.Path(fragments_dir).glob("*.pyi"))
    text = "# Generated from examples/python/stubs/*.pyi and the module's field tables: edit those.\n"
    for fragment in fragments:
        text += "\n" + fragment.read_text()
    lines = text.split("\n")
    insertions = []
    for node in ast.parse(text).body:
        cls = getattr(_sluice, node.name, None) if isinstance(node, ast.ClassDef) else None
        if cls is None or "__match_args__" not in vars(cls):
            continue
        generated = set(cls.__match_args__) | ({"__init__"} if constructor_parameters(cls) else set())
        spelled = [item.name for item in node.body if isinstance(item, ast.FunctionDef) and item.name in generated]
        if spelled:
            sys.exit(f"make_stubs: {node.name}.{spelled[0]} is made from the class's field table; "
                     "remove it from its fragment")
        has_docstring = ast.get_docstring(node) is not None
        after = node.body[0].end_lineno if has_docstring else node.lineno
        insertions.append((after, field_lines(cls)))
    for after, added in sorted(insertions, reverse=True):
        lines[after:after] = added
    temporary = pathlib.Path(output + ".tmp")
    temporary.write_text("\n".join(lines))
    os.replace(temporary, output)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_stubs.py FRAGMENTS_DIR OUTPUT")
    main(sys.argv[1], sys.argv[2])
