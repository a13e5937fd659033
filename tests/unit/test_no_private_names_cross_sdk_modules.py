"""No module of worker_sdk reaches into another's private names: each owner's state is its own (issue 27).

``WorkQueue`` (worker_sdk.queue) owns the queue's client, job, leaser and
streams; ``Leaser`` (worker_sdk.leaser) owns the leases a process holds.
Synchronous training, the torch adapter, the TF helpers and the snapshot
logic go through their public methods. So, over every module of worker_sdk:

- no import of an underscore name from a module of the package, nor of an
  underscore module, but ``worker_sdk.tf._require`` (its docstring: the one
  internal seam by name, kept out of the users' surface);
- no ``x._name`` (or ``getattr(x, "_name")``) on anything but ``self`` or
  ``cls``, but ``_replace`` (a named tuple's documented method, urllib's
  ``SplitResult``) and in worker_sdk.tf.internals (the one module that names
  the TensorFlow and interpreter internals the SDK relies on, each pinned by
  tests/tf/test_the_tensorflow_internals_we_use_exist.py);
- no class outside queue.py uses, on ``self``, a private name of
  ``WorkQueue`` that it does not define itself (a mixin of the queue reading
  its client, leaser or streams).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "worker_sdk"
OWNER = SDK / "queue.py"

# Private modules other modules may import, and why: see the module docstring.
PRIVATE_MODULES_ALLOWED = {"worker_sdk.tf._require"}
# Private attributes any module may use on other objects.
ATTRIBUTES_ALLOWED = {"_replace"}
# Modules that may use other objects' private attributes: the documented seam for internals.
MODULES_ALLOWED = {"worker_sdk.tf.internals"}

ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_module(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module an ``ImportFrom`` reads from."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def own_names(cls: ast.ClassDef) -> set[str]:
    """What a class defines itself: its methods and class attributes, and what its methods assign on ``self``."""
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name))
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _on_self(node):
            names.add(node.attr)
    return names


def _on_self(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")


def workqueue_private_names(source: str) -> set[str]:
    tree = ast.parse(source)
    (queue,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "WorkQueue"]
    return {name for name in own_names(queue) if private(name)}


def violations(source: str, module: str, is_package: bool, queue_private: set[str], owner: bool) -> list[str]:
    """Every reach into another module's private names in one module's source, as ``module:line: what``."""
    tree = ast.parse(source)
    found = []

    def say(node, what):
        found.append(f"{module}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = imported_module(module, is_package, node)
            if base.split(".")[0] != "worker_sdk":
                continue  # another package's: not ours to police
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if private(alias.name) and full not in PRIVATE_MODULES_ALLOWED:
                    say(node, f"imports the private name {alias.name} from {base}")
            if any(private(part) for part in base.split(".")) and base not in PRIVATE_MODULES_ALLOWED:
                say(node, f"imports from the private module {base}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "worker_sdk" and any(private(p) for p in parts):
                    if alias.name not in PRIVATE_MODULES_ALLOWED:
                        say(node, f"imports the private module {alias.name}")
        elif module in MODULES_ALLOWED:
            continue
        elif isinstance(node, ast.Attribute) and private(node.attr) and not _on_self(node):
            if node.attr not in ATTRIBUTES_ALLOWED:
                say(node, f"uses {ast.unparse(node)}, another object's private attribute")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ATTRIBUTE_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and private(node.args[1].value)
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))
            and node.args[1].value not in ATTRIBUTES_ALLOWED
        ):
            say(node, f"uses {ast.unparse(node)}, another object's private attribute")

    if not owner:
        for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
            defined = own_names(cls)
            for node in ast.walk(cls):
                if (
                    isinstance(node, ast.Attribute)
                    and _on_self(node)
                    and node.attr in queue_private
                    and node.attr not in defined
                ):
                    say(node, f"class {cls.name} uses {ast.unparse(node)}, WorkQueue's private state")
    return found


def sdk_modules():
    for path in sorted(SDK.rglob("*.py")):
        yield path, module_name(path), path.name == "__init__.py"


def test_no_module_of_the_sdk_reaches_into_another_modules_private_names():
    queue_private = workqueue_private_names(OWNER.read_text())
    assert {"_client", "_consumers", "_job"} <= queue_private  # the check knows what WorkQueue keeps
    found = []
    for path, module, is_package in sdk_modules():
        found += violations(path.read_text(), module, is_package, queue_private, owner=path == OWNER)
    assert not found, "private names used across modules of worker_sdk:\n" + "\n".join(found)


def test_the_allowed_private_module_exists_and_says_why():
    for name in PRIVATE_MODULES_ALLOWED | MODULES_ALLOWED:
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        assert path.exists(), f"{name} is allowed but does not exist: drop it from the allowlist"
    assert "internal seam" in (SDK / "tf" / "_require.py").read_text()


QUEUE_PRIVATE = {"_client", "_consumers", "_job", "_leaser", "_replace_job"}


@pytest.mark.parametrize(
    "source, module",
    [
        ("def plan(queue):\n    return queue._client.epoch_records(1, 0)\n", "worker_sdk.sync"),
        ("class L:\n    def f(self):\n        return Ledger(self.queue._client)\n", "worker_sdk.torch"),
        ("def f(queue):\n    return getattr(queue, '_consumers')\n", "worker_sdk.sync"),
        ("from .leaser import _leasers\n", "worker_sdk.sync"),
        ("from worker_sdk.stream import _NOTHING\n", "worker_sdk.torch"),
        ("from .._private import thing\n", "worker_sdk.tf.ops"),
        ("import worker_sdk._private\n", "worker_sdk.sync"),
        ("class Mixin:\n    def snapshot(self):\n        return self._client.snapshot(1)\n", "worker_sdk.resumable"),
        ("class Mixin:\n    def replace(self):\n        self._replace_job(1)\n", "worker_sdk.resumable"),
    ],
)
def test_the_check_finds_each_kind_of_reach(source, module):
    assert violations(source, module, False, QUEUE_PRIVATE, owner=False)


@pytest.mark.parametrize(
    "source, module",
    [
        ("from ._require import require\n", "worker_sdk.tf.ops"),
        ("from .tf._require import require\n", "worker_sdk.readers"),
        ("import torch.distributed as _dist\nfrom torch._C import x\n", "worker_sdk.torch"),
        ("def f(parts):\n    return parts._replace(query='')\n", "worker_sdk.formats"),
        (
            "class S:\n    def __init__(self):\n        self._leaser = 1\n    def f(self):\n        return self._leaser\n",
            "worker_sdk.stream",
        ),
        ("def f(queue):\n    return queue.epoch_records(0), queue.__class__\n", "worker_sdk.tf.distributed"),
    ],
)
def test_the_check_passes_what_is_allowed(source, module):
    assert not violations(source, module, False, QUEUE_PRIVATE, owner=False)
