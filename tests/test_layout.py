"""The code's shape: every module's `__all__` names what it defines, and imports flow one way
(machine → engine → text → store → api → cli)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import smllm

SRC = Path(smllm.__file__).parent
#: what each folder may import from smllm (besides itself and the shared top-level modules:
#: `recordclass`, `errors`, `jsontext`)
ALLOWED = {
    "machine": set(),
    "engine": {"machine"},
    "text": {"machine", "engine"},
    "store": {"machine", "engine"},
    "api": {"machine", "engine", "text", "store"},
    "harness": {"machine", "engine", "text", "store", "api"},
    "mcp": {"machine", "engine", "text", "store", "api"},
    "cli": {"machine", "engine", "text", "store", "api", "harness", "mcp", "smi", "drive"},
    "smi": set(),
    # smllm run: the one room that imports both the library API and the model face
    "drive": {"machine", "engine", "text", "store", "api", "mcp", "smi"},
}


def _modules() -> list[str]:
    return [
        m.name
        for m in pkgutil.walk_packages([str(SRC)], "smllm.")
        if not m.name.endswith("__main__")
    ]


def test_every_all_names_a_defined_name() -> None:
    for name in _modules():
        module = importlib.import_module(name)
        for item in getattr(module, "__all__", []):
            assert hasattr(module, item), f"{name}.__all__ names {item}, which isn't there"


def test_imports_flow_one_way() -> None:
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).parts
        if len(parts) < 2 or parts[0] not in ALLOWED:
            continue
        folder = parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                target = node.module.split(".")[0]
                if target in ALLOWED and target != folder:
                    assert target in ALLOWED[folder], f"{path}: {folder} imports {target}"


def test_drive_is_imported_only_by_the_run_command() -> None:
    """The core install, the hooks and the MCP server never import smllm.drive: only
    `smllm run` (cli/run.py) does; and drive takes only the plain texts of the MCP room."""
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            target = node.module.split(".")
            if rel.parts[0] != "drive" and target[0] == "drive" and node.level >= 2:
                assert rel == Path("cli/run.py"), f"{rel} imports smllm.drive"
            if rel.parts[0] == "drive" and target[0] == "mcp" and node.level >= 2:
                assert node.module == "mcp.texts", f"{rel} imports smllm.{node.module}"


def test_smi_stands_alone() -> None:
    """smllm.smi imports nothing else of smllm, not even the shared top-level modules: it is
    the model face, usable on its own (issue 10)."""
    files = sorted((SRC / "smi").rglob("*.py"))
    assert files, "no smllm/smi package"
    for path in files:
        depth = len(path.relative_to(SRC / "smi").parts)  # 1: smi/x.py, 2: smi/backends/x.py
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= depth, f"{path}: imports from outside smllm.smi"
                assert node.level or not (node.module or "").startswith("smllm"), path
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("smllm"), f"{path}: imports {alias.name}"


#: machine/'s rooms, in the order they may import each other (machine/__init__.py says why)
MACHINE_ROOMS = [
    "findings",
    "regex",
    "summary",
    "model",
    "sources",
    "checks",
    "loader",
    "configs",
    "normal",
]


def test_machine_rooms_import_one_way() -> None:
    machine = SRC / "machine"
    rank = {room: i for i, room in enumerate(MACHINE_ROOMS)}
    for path in machine.rglob("*.py"):
        parts = path.relative_to(machine).parts
        room = parts[0] if len(parts) > 1 else parts[0][:-3]
        if room == "__init__":
            continue
        package = ["smllm", "machine", *parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            target = package[: len(package) - (node.level - 1)]
            target += node.module.split(".") if node.module else []
            if target[:2] != ["smllm", "machine"] or len(target) < 3 or target[2] == room:
                continue
            assert rank[target[2]] < rank[room], f"{path}: {room} imports {target[2]}"


#: smi/'s rooms, in the order they may import each other (smi/__init__.py says why); a name
#: that is several rooms of one rank may import each other
SMI_ROOMS = [
    ("tokens",),
    ("stream",),
    ("render", "convert", "template"),
    ("vocab",),
    ("compile",),
    ("parser",),
    ("budget", "caps"),
    ("constrain",),
    ("backends",),
    ("runtime",),
    ("assemble",),
]


def test_smi_rooms_import_one_way() -> None:
    smi = SRC / "smi"
    rank = {room: i for i, rooms in enumerate(SMI_ROOMS) for room in rooms}
    seen = set()
    for path in smi.rglob("*.py"):
        parts = path.relative_to(smi).parts
        room = parts[0] if len(parts) > 1 else parts[0][:-3]
        if room == "__init__":
            continue
        assert room in rank, f"{path}: {room} is in no room of SMI_ROOMS"
        seen.add(room)
        package = ["smllm", "smi", *parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            target = package[: len(package) - (node.level - 1)]
            target += node.module.split(".") if node.module else []
            if len(target) < 3 or target[2] == room:
                continue
            assert rank[target[2]] <= rank[room], f"{path}: {room} imports {target[2]}"
    assert seen >= {"tokens", "vocab", "parser", "runtime"}


def test_files_stay_small() -> None:
    tests = Path(__file__).resolve().parent
    for path in (*SRC.rglob("*.py"), *tests.glob("*.py")):
        lines = path.read_text().count("\n")
        assert lines <= 600, f"{path} has {lines} lines"


def test_no_test_module_imports_another() -> None:
    """Tests read as specs: what several test files (or the benchmarks) share lives in
    tests/helpers/, never in a test module another imports; and tests/ itself holds only
    conftest.py and test_*.py."""
    tests = Path(__file__).resolve().parent
    found: dict[str, set[str]] = {}
    for path in sorted((*tests.rglob("*.py"), *(tests.parent / "bench").rglob("*.py"))):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[-1].startswith("test_") or name.startswith("test_"):
                    where = str(path.relative_to(tests.parent))
                    found.setdefault(where, set()).add(name)
    assert found == {}
    stray = [
        p.name
        for p in tests.glob("*.py")
        if p.name != "conftest.py" and not p.name.startswith("test_")
    ]
    assert stray == []
