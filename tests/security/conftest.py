import logging

import pytest

# Every logger a request, a service or a command of ours writes through.
LOGGERS = ("", "shardline", "django", "django.request", "django.security", "django.server")


class Everything(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def captured_logs() -> list[logging.LogRecord]:
    """Every log record of every logger, DEBUG and up, with its extra fields, while the test runs."""
    handler = Everything()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    yield handler.records
    for logger, level in zip(loggers, levels):
        logger.removeHandler(handler)
        logger.setLevel(level)
