from tests.sdk.conftest import sdk_env  # noqa: F401  (real worker processes against the live server)
