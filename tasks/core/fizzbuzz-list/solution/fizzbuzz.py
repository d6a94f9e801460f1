def fizzbuzz(n: int) -> list:
    """Return the FizzBuzz strings for the numbers 1..n (ValueError if n < 0)."""
    if n < 0:
        raise ValueError("n must not be negative")
    out = []
    for i in range(1, n + 1):
        if i % 15 == 0:
            out.append("FizzBuzz")
        elif i % 3 == 0:
            out.append("Fizz")
        elif i % 5 == 0:
            out.append("Buzz")
        else:
            out.append(str(i))
    return out
