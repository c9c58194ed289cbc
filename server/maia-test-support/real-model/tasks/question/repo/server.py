"""A tiny job server."""

import os

DEFAULT_PORT = 8080
RETRY_LIMIT = 7


def port():
    return int(os.environ.get("JOB_PORT", DEFAULT_PORT))


def should_retry(attempt):
    return attempt < RETRY_LIMIT
