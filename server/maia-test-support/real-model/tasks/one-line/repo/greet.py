"""Greets people."""

GREETING = "Hello"


def greet(name):
    return f"{GREETING}, {name}!"


if __name__ == "__main__":
    print(greet("world"))
