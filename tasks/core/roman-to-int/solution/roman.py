VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def roman_to_int(s: str) -> int:
    """Convert an uppercase Roman numeral such as "MCMXCIV" to an integer.

    Raises ValueError for the empty string or any character other than IVXLCDM.
    """
    if not s:
        raise ValueError("empty numeral")
    for ch in s:
        if ch not in VALUES:
            raise ValueError(f"invalid Roman numeral character: {ch!r}")
    total = 0
    for i, ch in enumerate(s):
        value = VALUES[ch]
        if i + 1 < len(s) and VALUES[s[i + 1]] > value:
            total -= value
        else:
            total += value
    return total
