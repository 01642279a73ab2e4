"""The type stubs editors read (_sluice.pyi) name every class, method, property and function the module has, with
the same parameters."""
import ast
import inspect
import pathlib
import re

import pytest

import sluice
from sluice import _sluice

STUB = pathlib.Path(_sluice.__file__).with_name("_sluice.pyi")
PROTOCOL_METHODS = {"__init__", "__call__", "__iter__", "__next__", "__len__", "__enter__", "__exit__", "__eq__"}


def stub_tree():
    tree = ast.parse(STUB.read_text())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members.setdefault(item.name, []).append(item)
            classes[node.name] = members
    return functions, classes


def stub_parameters(node):
    """Parameter names as pybind11 writes a signature: positional names, then '*' and the keyword-only ones."""
    names = [arg.arg for arg in node.args.posonlyargs + node.args.args if arg.arg not in ("self", "cls")]
    if node.args.kwonlyargs:
        names += ["*"] + [arg.arg for arg in node.args.kwonlyargs]
    return names


def bound_parameters(function):
    """Parameter names of a bound function from its pybind11 signature line; None when overloaded."""
    first = (function.__doc__ or "").splitlines()[0]
    inside = first[first.find("(") + 1:first.rfind(") ->")]
    if "*args" in inside:
        return None
    names, depth, current = [], 0, ""
    for char in inside + ",":
        depth += char in "[(" and 1 or 0
        depth -= char in "])" and 1 or 0
        if char == "," and depth == 0:
            name = re.split(r"[:=]", current.strip())[0].strip()
            if name and name not in ("self",):
                names.append(name)
            current = ""
        else:
            current += char
    return names


def public_names():
    return sorted(name for name in dir(_sluice) if not name.startswith("_"))


def test_every_name_of_the_module_is_in_the_stub():
    functions, classes = stub_tree()
    stubbed = set(functions) | set(classes) | {"InvalidInput", "Infeasible", "InvalidPlan"}
    assert [name for name in public_names() if name not in stubbed] == []
    assert [name for name in stubbed if not hasattr(_sluice, name)] == []


@pytest.mark.parametrize("name", [n for n in public_names() if isinstance(getattr(_sluice, n), type)
                                  and not issubclass(getattr(_sluice, n), Exception)])
def test_every_member_of_a_class_is_in_its_stub(name):
    _, classes = stub_tree()
    members = classes[name]
    cls = getattr(_sluice, name)
    for attribute, value in vars(cls).items():
        if attribute.startswith("_") and attribute not in PROTOCOL_METHODS:
            continue
        if attribute == "__init__" and "__init__(" not in (value.__doc__ or ""):
            continue  # no constructor from Python: made by the library only
        assert attribute in members, f"{name}.{attribute} has no stub"
        function = getattr(cls, attribute)
        if isinstance(value, property) or not callable(function) or attribute in ("__eq__", "__lt__"):
            continue
        expected = bound_parameters(function)
        if expected is not None and len(members[attribute]) == 1:
            assert stub_parameters(members[attribute][0]) == expected, f"{name}.{attribute}"
    for attribute in members:
        assert attribute in PROTOCOL_METHODS or attribute == "__hash__" or hasattr(cls, attribute), \
            f"stub {name}.{attribute} is not in the module"


@pytest.mark.parametrize("name", [n for n in public_names() if inspect.isbuiltin(getattr(_sluice, n))])
def test_module_functions_have_their_parameters(name):
    functions, _ = stub_tree()
    expected = bound_parameters(getattr(_sluice, name))
    if expected is not None:
        assert stub_parameters(functions[name]) == expected


def test_the_package_ships_the_stub_and_marker():
    assert STUB.is_file() and STUB.with_name("py.typed").is_file()
    assert sluice.__version__ == _sluice.__version__


def property_docs(node):
    def is_property(item):
        return any(isinstance(decorator, ast.Name) and decorator.id == "property" for decorator in item.decorator_list)
    return {item.name: ast.get_docstring(item) for item in node.body
            if isinstance(item, ast.FunctionDef) and is_property(item)}


def one_line(text):
    return " ".join((text or "").split())


def is_option_class(cls):
    """An option class takes its fields as keyword-only constructor arguments; a record is made by the library."""
    return "*," in (cls.__init__.__doc__ or "").split("\n")[0]


@pytest.mark.parametrize("name", [n for n in public_names() if hasattr(getattr(_sluice, n), "__match_args__")])
def test_a_field_table_class_stub_is_its_table(name):
    """A class made from one table of fields (an option class, or a record of the io tables): its stub lists the
    fields, in order, as properties with the module's docstrings, and an option class's as the constructor's
    keywords with the module's defaults."""
    tree = ast.parse(STUB.read_text())
    node = next(item for item in tree.body if isinstance(item, ast.ClassDef) and item.name == name)
    cls = getattr(_sluice, name)
    fields = list(cls.__match_args__)
    assert one_line(ast.get_docstring(node)) == one_line(cls.__doc__)
    docs = property_docs(node)
    assert [field for field in docs if field in fields] == fields
    assert {field: one_line(docs[field]) for field in fields} == {
        field: one_line(getattr(cls, field).__doc__) for field in fields}
    if not is_option_class(cls):
        return
    init = next(item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__")
    assert [arg.arg for arg in init.args.kwonlyargs] == fields
    defaults = cls()
    for arg, default in zip(init.args.kwonlyargs, init.args.kw_defaults):
        if not (isinstance(default, ast.Constant) and default.value is Ellipsis):
            assert ast.literal_eval(default) == getattr(defaults, arg.arg), f"{name}.{arg.arg}"


def test_a_record_matches_by_its_fields():
    """A record's __match_args__ are its table's fields, so `match` takes it apart positionally."""
    group = sluice.OwnerGroup(2, 4, [0, 1])
    match group:
        case sluice.OwnerGroup(begin, end, owners):
            assert (begin, end, list(owners)) == (2, 4, [0, 1])
        case _:
            pytest.fail("OwnerGroup did not match its fields")
    assert sluice.FitRun.__match_args__ == ("samples", "base", "max_error", "schemes", "profile", "out")


@pytest.mark.parametrize("name", [n for n in public_names() if isinstance(getattr(_sluice, n), type)
                                  and not issubclass(getattr(_sluice, n), Exception)])
def test_a_class_stub_carries_the_modules_docstrings(name):
    """What an editor shows for a class and its properties is what help() shows: one text, written in the bindings."""
    tree = ast.parse(STUB.read_text())
    node = next(item for item in tree.body if isinstance(item, ast.ClassDef) and item.name == name)
    cls = getattr(_sluice, name)
    assert one_line(ast.get_docstring(node)) == one_line(cls.__doc__)
    module_docs = {attribute: one_line(value.__doc__) for attribute, value in vars(cls).items()
                   if isinstance(value, property)}
    assert {attribute: one_line(doc) for attribute, doc in property_docs(node).items()} == {
        attribute: module_docs[attribute] for attribute in property_docs(node)}
