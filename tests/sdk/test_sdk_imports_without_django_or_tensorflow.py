"""worker_sdk must import and lease on a training node that has neither Django nor TensorFlow."""

import textwrap

from .conftest import run_python

SCRIPT = textwrap.dedent(
    """
    import sys

    class Refuse:
        # Makes `import tensorflow` / `import django` fail as if not installed.
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "django", "torch"):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Refuse())
    import worker_sdk
    from worker_sdk import WorkQueue

    queue = WorkQueue(["/a", "/b", "/c"], shuffle=False)
    print(",".join(queue.items()))
    print(sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "django", "torch")))
    try:
        worker_sdk.staged
    except ImportError as exc:
        print("staged:", exc)
    """
)


def test_items_work_with_tensorflow_and_django_missing(sdk_env, tmp_path):
    script = tmp_path / "no_tf.py"
    script.write_text(SCRIPT)
    result = run_python([str(script)], sdk_env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "/a,/b,/c"
    assert lines[1] == "[]"
    assert lines[2].startswith("staged: worker_sdk.staged needs TensorFlow: pip install")
