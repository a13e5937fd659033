"""A clear error when a TensorFlow feature is used without TensorFlow installed."""

import importlib.util


def require(feature: str):
    if importlib.util.find_spec("tensorflow") is None:
        raise ImportError(
            f"{feature} needs TensorFlow: pip install tensorflow (or tensorflow-cpu), "
            f"or install this package with its [tf] extra"
        )
    import tensorflow

    return tensorflow
