"""embedlab's type stub (__init__.pyi) against the module (issue 64, item b): every public
function, class, method and property in both, with the same parameters (names, kinds,
which have defaults), so an argument added to the module without the stub fails here."""

import ast
import inspect
from pathlib import Path

import pytest

import embedlab

STUB = Path(embedlab.__file__).with_name("__init__.pyi")


def stub_tree():
    if not STUB.exists():
        pytest.fail(f"{STUB} is absent: python/CMakeLists.txt copies python/embedlab/__init__.pyi there")
    return ast.parse(STUB.read_text())


def parameters(args: ast.arguments, method):
    """[(name, kind, has default)] of a def; a method's first parameter (self) left out."""
    positional = args.posonlyargs + args.args
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    out = [(a.arg, "positional", d) for a, d in zip(positional, defaults)]
    if method:
        out = out[1:]
    if args.vararg:
        out.append((args.vararg.arg, "*args", False))
    out += [(a.arg, "keyword", d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append((args.kwarg.arg, "**kwargs", False))
    return out


def runtime_parameters(function, method):
    """The same from the module: pybind11's signature line (its docstring's first), or
    inspect's for a Python function (sweep)."""
    if inspect.isfunction(function):
        source = f"def f{inspect.signature(function)}: pass"
    else:
        line = function.__doc__.splitlines()[0]
        assert not function.__doc__.startswith(f"{function.__name__}(*args, **kwargs)\nOverloaded"), \
            f"{function.__name__} is overloaded: write each overload in the stub and compare them here"
        source = f"def {line}: pass"
    return parameters(ast.parse(source).body[0].args, method)


def is_property(node):
    return any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)


def stub_members():
    """{name: node} of the stub's top level, and {class: {member: node}}."""
    top, classes = {}, {}
    for node in stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            top[node.name] = node
        elif isinstance(node, ast.ClassDef):
            top[node.name] = node
            classes[node.name] = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top[node.target.id] = node
    return top, classes


def public_names():
    return set(embedlab.__all__)


def test_the_stub_names_every_public_name_and_no_other():
    top, _ = stub_members()
    assert public_names() - set(top) == set(), "in embedlab.__all__, not in the stub"
    # Type aliases (PathLike = ...) are plain assignments: not in top.
    assert set(top) - public_names() == set(), "in the stub, not in embedlab.__all__"


@pytest.mark.parametrize("name", sorted(n for n in embedlab.__all__ if inspect.isroutine(getattr(embedlab, n))))
def test_function_parameters_match(name):
    top, _ = stub_members()
    assert parameters(top[name].args, False) == runtime_parameters(getattr(embedlab, name), False)


def class_members(cls):
    """{name: property or routine} of a bound class, dunders left out."""
    return {n: v for n, v in vars(cls).items() if not n.startswith("__")}


@pytest.mark.parametrize("cls", ["Model", "Run", "Chain"])
def test_class_members_match(cls):
    _, classes = stub_members()
    # Dunders (__enter__, __exit__) are in the stub for type checkers; not compared here.
    stub = {n: v for n, v in classes[cls].items() if not n.startswith("__")}
    runtime = class_members(getattr(embedlab, cls))
    assert set(stub) == set(runtime)
    for name, value in runtime.items():
        if isinstance(value, property):
            assert is_property(stub[name]), f"{cls}.{name} is a property"
        else:
            assert not is_property(stub[name]), f"{cls}.{name} is a method"
            assert parameters(stub[name].args, True) == runtime_parameters(value, True), f"{cls}.{name}"


def test_exceptions_are_classes_in_the_stub():
    _, classes = stub_members()
    for name in ("InputError", "Cancelled"):
        assert name in classes and issubclass(getattr(embedlab, name), Exception)
