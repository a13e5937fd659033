"""A clear error when a TensorFlow feature is used without TensorFlow installed."""


def require(feature: str):
    try:
        import tensorflow
    except ImportError as exc:
        raise ImportError(
            f"{feature} needs TensorFlow: pip install tensorflow (or tensorflow-cpu), "
            f"or install this package with its [tf] extra ({exc})"
        ) from exc
    return tensorflow
