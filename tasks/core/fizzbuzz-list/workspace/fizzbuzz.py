def fizzbuzz(n: int) -> list:
    """Return the FizzBuzz strings for the numbers 1..n (ValueError if n < 0)."""
    raise NotImplementedError
