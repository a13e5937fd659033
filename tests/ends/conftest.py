from ..sdk.conftest import sdk_env  # noqa: F401  (the SDK tests' fixture: a live server and a fresh run)
