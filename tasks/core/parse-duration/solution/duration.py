import math
import re
from fractions import Fraction

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
ORDER = "dhms"
PAIR = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)([A-Za-z]+)\s*")


def parse_duration(text: str) -> int:
    """Parse a duration such as "1h 30m" or "1.5h" into whole seconds (rounded down).

    Units d, h, m, s (case-insensitive), each at most once, in that order.
    Raises ValueError for invalid input.
    """
    if not text or not text.strip():
        raise ValueError("empty duration")
    total = Fraction(0)
    last = -1
    pos = 0
    while pos < len(text):
        match = PAIR.match(text, pos)
        if match is None:
            raise ValueError(f"invalid duration: {text!r}")
        number, unit = match.group(1), match.group(2).lower()
        if unit not in UNITS:
            raise ValueError(f"unknown unit: {unit!r}")
        index = ORDER.index(unit)
        if index <= last:
            raise ValueError(f"unit {unit!r} repeated or out of order")
        last = index
        total += Fraction(number) * UNITS[unit]
        pos = match.end()
    return math.floor(total)
