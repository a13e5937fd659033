"""A clear error when a TensorFlow feature is used without TensorFlow installed.

The package's one internal seam by name: every module that needs TensorFlow
(worker_sdk.tf's, ``worker_sdk.staged``, ``readers.dataset``) imports
``require`` from here, and the underscore keeps it out of the SDK's surface
for users. It is the only private module that other modules may import
(tests/unit/test_no_private_names_cross_sdk_modules.py).
"""


def require(feature: str):
    try:
        import tensorflow
    except ImportError as exc:
        raise ImportError(
            f"{feature} needs TensorFlow: pip install tensorflow (or tensorflow-cpu), "
            f"or install this package with its [tf] extra ({exc})"
        ) from exc
    return tensorflow
