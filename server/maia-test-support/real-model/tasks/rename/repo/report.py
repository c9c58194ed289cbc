from shapes import area_rect, area_sq


def report():
    return f"square: {area_sq(3)}, rectangle: {area_rect(2, 5)}"


if __name__ == "__main__":
    print(report())
