"""Small arithmetic helpers."""


def add(a, b):
    """Returns the sum of a and b."""
    return a + b
