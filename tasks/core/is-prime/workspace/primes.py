def is_prime(n: int) -> bool:
    """Return True if the integer n is a prime number, otherwise False.

    0, 1 and negative numbers are not prime.
    """
    raise NotImplementedError
