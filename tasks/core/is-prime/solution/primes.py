def is_prime(n: int) -> bool:
    """Return True if the integer n is a prime number, otherwise False.

    0, 1 and negative numbers are not prime.
    """
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    i = 3
    while i * i <= n:
        if n % i == 0:
            return False
        i += 2
    return True
