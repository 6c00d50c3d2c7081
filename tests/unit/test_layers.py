"""The layering rules of STYLE.md, enforced by the import-linter contracts in pyproject.toml.

The layer map (docs/architecture.md): ``streams`` and ``connect`` over ``spark_source`` over
``spark_sink`` over ``broker``, which outside itself is only its public client. import-linter
refuses a root package that does not exist, so ``streams`` and ``connect`` are declared as optional
layers and :func:`lint` adds each to the root packages once its directory exists.
"""
from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter brings tomli
    import tomli as tomllib

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINT = os.path.join(os.path.dirname(sys.executable), "lint-imports")
# Top-level packages planned but not written yet (DESIGN.md §7a, §10).
FUTURE = ("streams", "connect")
# What other packages may import of the broker: its public client (and broker.embedded, for demos).
PUBLIC_BROKER_MODULES = {"broker.client", "broker.errors", "broker.records", "broker.embedded"}


def test_import_contracts_hold():
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


# ------------------------------------------------------------------------------ helpers
def settings() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]


def contract(name_start: str) -> dict:
    found = [c for c in settings()["contracts"] if c["name"].startswith(name_start)]
    assert len(found) == 1, f"one contract named '{name_start}...' expected, found {len(found)}"
    return found[0]


def top_level_packages(directory: str) -> set[str]:
    return {name for name in os.listdir(directory)
            if os.path.isfile(os.path.join(directory, name, "__init__.py")) and name != "tests"}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def lint(tmp_path, extra_path: str | None = None) -> subprocess.CompletedProcess:
    """lint-imports with pyproject's contracts, the root packages extended by every one of
    :data:`FUTURE` that exists (in the repository, or in ``extra_path``, whose packages come first:
    it is the working directory, and ``broker`` is found through the installed package)."""
    cfg = settings()
    present = top_level_packages(ROOT) | (top_level_packages(extra_path) if extra_path else set())
    roots = list(cfg["root_packages"]) + [p for p in FUTURE if p in present and p not in cfg["root_packages"]]
    lines = ["[tool.importlinter]", f"root_packages = {_toml(roots)}"]
    lines += [f"{k} = {_toml(v)}" for k, v in cfg.items() if k not in ("root_packages", "contracts")]
    for c in cfg["contracts"]:
        lines += ["", "[[tool.importlinter.contracts]]"] + [f"{k} = {_toml(v)}" for k, v in c.items()]
    path = tmp_path / "importlinter.toml"
    path.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [extra_path, ROOT, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([LINT, "--no-cache", "--config", str(path)], cwd=extra_path or ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def write_package(root, name: str, source: str) -> None:
    os.makedirs(root / name)
    (root / name / "__init__.py").write_text(source)


# ------------------------------------------------------------------------------ the map covers everything
def test_contracts_hold_for_every_top_level_package_that_exists(tmp_path):
    result = lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_top_level_package_is_in_the_layer_map():
    roots = set(settings()["root_packages"])
    assert {"broker", "spark_source", "spark_sink"} <= roots
    unchecked = top_level_packages(ROOT) - roots - set(FUTURE)
    assert not unchecked, f"add {sorted(unchecked)} to root_packages and to the layer map in pyproject.toml"
    layered = {m.strip("() ") for layer in contract("the repository's layers")["layers"]
               for m in layer.replace("|", ":").split(":")}
    assert roots | set(FUTURE) <= layered


def test_every_module_of_the_broker_is_public_or_protected():
    """A new module directly under ``broker`` is kept from other packages unless declared public."""
    import broker
    protected = set(contract("outside broker, only the public client")["protected_modules"])
    children = {f"broker.{m.name}" for m in pkgutil.iter_modules(broker.__path__)}
    assert not children - protected - PUBLIC_BROKER_MODULES, "declare each as public or protected"
    assert "broker.client.*" in protected and not PUBLIC_BROKER_MODULES & protected


# ------------------------------------------------------------------------------ the contracts bite
def test_streams_and_connect_are_held_to_the_map_as_soon_as_they_exist(tmp_path):
    extra = tmp_path / "future"
    write_package(extra, "streams", "from broker.server import service\nimport spark_source\n")
    write_package(extra, "connect", "import streams\n")
    result = lint(tmp_path, str(extra))
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "2 broken" in out, out
    assert "streams -> broker.server" in out                 # outside broker, only the public client
    assert "connect -> streams" in out                       # Streams and Connect are independent layers


def test_well_behaved_streams_and_connect_keep_every_contract(tmp_path):
    extra = tmp_path / "future"
    write_package(extra, "streams", "import spark_source\nimport spark_sink\n"
                                    "from broker.client import exactly_once, Producer\nimport broker.errors\n")
    write_package(extra, "connect", "import spark_sink\nfrom broker.client import AdminClient\n")
    result = lint(tmp_path, str(extra))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_sink_and_the_source_depend_one_way_and_only_on_the_public_client(tmp_path):
    """The rules the Spark packages once broke, each caught (on a copy of them)."""
    extra = tmp_path / "future"
    write_package(extra, "streams", "from spark_sink import writer\n")
    bad = {"spark_sink": "import spark_source\n", "spark_source": "from broker.client import coordinator\n"}
    for package, line in bad.items():
        path = os.path.join(ROOT, package, "__init__.py")
        with open(path) as f:
            source = f.read()
        copy = extra / package  # with its subpackages: contracts name modules inside them
        shutil.copytree(os.path.join(ROOT, package), copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (copy / "__init__.py").write_text(source + line)
    result = lint(tmp_path, str(extra))
    out = result.stdout
    assert result.returncode == 1 and "2 broken" in out, out + result.stderr
    assert "spark_sink -> spark_source" in out and "spark_source -> broker.client.coordinator" in out
