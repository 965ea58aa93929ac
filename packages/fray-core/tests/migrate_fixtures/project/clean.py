"""No Ray here: a local name called ray is not the library."""

ray = "sunshine"


def shout() -> str:
    return ray.upper()
