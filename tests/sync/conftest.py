from ..sdk.conftest import sdk_env  # noqa: F401  (the SDK tests' environment fixture)
