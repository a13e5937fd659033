"""No module of the project (server, dashboard, worker_sdk) imports, even inside a function, a module that imports it back.

Imports under ``if TYPE_CHECKING:`` (annotations only) do not count. A
package counts as its ``__init__``; importing a submodule does not count as
importing its package's ``__init__``, which Python runs first anyway.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "dashboard", "worker_sdk")


def modules():
    found = {}
    for path in (path for package in PACKAGES for path in (ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            found[".".join(parts[:-1])] = (path, True)
        else:
            found[".".join(parts)] = (path, False)
    return found


def imported(name, path, is_package, known):
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    targets = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            # "from package import module" imports the module; "from module import name", the module.
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for candidate in candidates:
            # The nearest enclosing module we know: "worker_sdk.tf.ops.take" is worker_sdk.tf.ops.
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def test_no_module_imports_a_module_that_imports_it_back():
    known = modules()
    graph = {name: imported(name, path, is_package, known) for name, (path, is_package) in known.items()}
    # The graph sees imports at the top and inside functions.
    assert "worker_sdk.tf" in graph["worker_sdk.queue"]
    assert "server.services.units" in graph["server.services.jobs"]
    assert "server.tasks" in graph["server.services.jobs"]

    cycles = []
    state = {}  # name -> "open" while on the path, "done" after

    def visit(name, path):
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []
