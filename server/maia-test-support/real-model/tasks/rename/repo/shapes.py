"""Areas of shapes."""


def area_sq(side):
    """The area of a square."""
    return side * side


def area_rect(width, height):
    """The area of a rectangle."""
    return width * height
