"""Every test checks something: a static look at the suite's own source.

A test passes by asserting, so one that asserts nothing passes whatever the code does, and so does
an ``assert`` that cannot fail (``assert x or True``, ``assert len(x) >= 0``, ``assert f(1) ==
f(1)``). This walks the AST of every module under ``tests/`` and lists

* each ``test_*`` function that contains no ``assert``, no ``pytest.raises``/``warns``/``fail``,
  no call to a helper named ``assert_*``/``check_*``/``expect_*``/``wait_*`` (``wait_until`` fails
  at its deadline), and no call to a helper of its own module, or of a ``tests.*`` module it imports
  from, that does one of these (followed through helpers calling helpers);
* each ``assert`` anywhere under ``tests/`` whose condition is always true.

A strict ``xfail`` that names the exception (``raises=``) counts as checking: it fails unless that
exception is raised. The few tests that legitimately check nothing themselves are in ALLOWED, each
with its reason.
"""
from __future__ import annotations

import ast
import os
import sys
from functools import lru_cache

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit

TESTS = os.path.join(ROOT, "tests")

CHECKING_CALLS = {"raises", "warns", "fail", "deprecated_call"}
CHECKING_PREFIXES = ("assert_", "check_", "expect_", "wait_", "_assert", "_check", "_expect", "_wait")

# "path relative to tests/::test name" -> why it needs no check of its own. Keep this short.
ALLOWED: dict[str, str] = {
    # (empty: every test in the suite asserts something; add an entry only with its reason)
}


def _modules() -> list[str]:
    paths = []
    for folder, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        paths += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return sorted(paths)


@lru_cache(maxsize=None)
def _parse(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


@lru_cache(maxsize=None)
def _functions(path: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions defined anywhere in the module (helpers, nested helpers, methods), by name."""
    return {n.name: n for n in ast.walk(_parse(path)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


@lru_cache(maxsize=None)
def _imported_helpers(path: str) -> dict[str, str]:
    """Names imported ``from tests.x import name`` -> the file of ``tests.x``."""
    found = {}
    for node in _parse(path).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
            path = os.path.join(ROOT, *node.module.split(".")) + ".py"
            if os.path.exists(path):
                for alias in node.names:
                    found[alias.asname or alias.name] = path
    return found


def _checks(path: str, name: str, seen: frozenset = frozenset()) -> bool:
    """Whether function ``name`` of module ``path`` asserts, directly or through its helpers."""
    if (path, name) in seen:
        return False
    functions, imported = _functions(path), _imported_helpers(path)
    function = functions.get(name)
    if function is None:
        return False
    seen = seen | {(path, name)}
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Raise):
            return True  # e.g. a helper's AssertionError naming what never happened
        if isinstance(node, ast.Call):
            called = _called_name(node)
            if called in CHECKING_CALLS or called.startswith(CHECKING_PREFIXES):
                return True
            if called in functions and _checks(path, called, seen):
                return True
            if called in imported and _checks(imported[called], called, seen):
                return True
    return False


def _strict_xfail_with_raises(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and _called_name(decorator) == "xfail":
            keywords = {k.arg: k.value for k in decorator.keywords}
            strict = keywords.get("strict")
            if "raises" in keywords and isinstance(strict, ast.Constant) and strict.value is True:
                return True
    return False


def _test_functions(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node


def _literal(node: ast.expr) -> bool:
    """A value written out in full: constants and containers of constants only."""
    return all(isinstance(n, (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Load, ast.UnaryOp,
                              ast.USub, ast.UAdd)) for n in ast.walk(node))


def _always_true(test: ast.expr) -> str | None:
    """Why an assert's condition cannot be false, or None."""
    if isinstance(test, ast.Constant):
        return "a constant" if test.value else None  # ``assert False, why`` is a deliberate failure
    if isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and (
            test.keys if isinstance(test, ast.Dict) else test.elts):
        return "a non-empty literal (an assert of a tuple is always true)"
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        if any(isinstance(v, ast.Constant) and v.value for v in test.values):
            return "'or' with a true constant"
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if ast.dump(left) == ast.dump(right) and isinstance(op, (ast.Eq, ast.Is, ast.GtE, ast.LtE)):
            return "a value compared with itself"
        if _literal(left) and _literal(right):
            return "literals compared with each other (nothing under test)"
        if (isinstance(left, ast.Call) and _called_name(left) == "len" and isinstance(op, ast.GtE)
                and isinstance(right, ast.Constant) and right.value == 0):
            return "len(...) >= 0"
    if (isinstance(test, ast.Call) and _called_name(test) == "isinstance" and len(test.args) == 2
            and isinstance(test.args[1], ast.Name) and test.args[1].id == "object"):
        return "isinstance(..., object)"
    return None


def weak_tests() -> list[str]:
    found = []
    for path in _modules():
        if not os.path.basename(path).startswith("test_"):
            continue
        tree = _parse(path)
        for function in _test_functions(tree):
            key = f"{os.path.relpath(path, TESTS)}::{function.name}"
            if key in ALLOWED or _strict_xfail_with_raises(function):
                continue
            if not _checks(path, function.name):
                found.append(f"{key} (line {function.lineno}) checks nothing")
    return found


def always_true_asserts() -> list[str]:
    found = []
    for path in _modules():
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Assert) and (why := _always_true(node.test)):
                found.append(f"{os.path.relpath(path, TESTS)}:{node.lineno} assert {ast.unparse(node.test)}: {why}")
    return found


def test_every_test_checks_something():
    assert weak_tests() == []


def test_no_assert_is_always_true():
    assert always_true_asserts() == []


def test_the_allow_list_names_existing_tests():
    existing = {f"{os.path.relpath(path, TESTS)}::{f.name}" for path in _modules()
                if os.path.basename(path).startswith("test_") for f in _test_functions(_parse(path))}
    assert sorted(set(ALLOWED) - existing) == []


WEAK_EXAMPLE = '''
import pytest
from tests.conftest import wait_until

def helper_that_checks(x):
    assert x == 1

def helper_that_does_not(x):
    return x

def test_no_check():
    helper_that_does_not(1)

def test_through_a_helper():
    helper_that_checks(1)

def test_raises():
    with pytest.raises(ValueError):
        int("x")

def test_waits():
    wait_until(lambda: True)

@pytest.mark.xfail(strict=True, raises=ValueError, reason="known")
def test_known_failure():
    int("x")

def test_always_true():
    assert 1 or True
    assert len([]) >= 0
    assert f(1) == f(1)
    assert isinstance(3, object)
    assert {"a": 1} == {"a": -1}
    assert (1 == 2, "a message in the wrong place")
    assert False, "deliberate"
'''


def test_the_heuristic_on_examples(tmp_path, monkeypatch):
    """The checks themselves: what they must find and what they must let through."""
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "test_example.py").write_text(WEAK_EXAMPLE)
    monkeypatch.setattr(sys.modules[__name__], "TESTS", str(folder))
    assert weak_tests() == ["test_example.py::test_no_check (line 11) checks nothing"]
    assert [line.rsplit(": ", 1)[1] for line in always_true_asserts()] == [
        "'or' with a true constant", "len(...) >= 0", "a value compared with itself", "isinstance(..., object)",
        "literals compared with each other (nothing under test)",
        "a non-empty literal (an assert of a tuple is always true)"]
