from ..sdk.conftest import csv_files, run_python, sdk_env  # noqa: F401  (fixtures of the SDK tests)
