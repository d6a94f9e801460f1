def roman_to_int(s: str) -> int:
    """Convert an uppercase Roman numeral such as "MCMXCIV" to an integer.

    Raises ValueError for the empty string or any character other than IVXLCDM.
    """
    raise NotImplementedError
