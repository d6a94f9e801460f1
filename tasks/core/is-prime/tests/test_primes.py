import unittest

from primes import is_prime


class TestIsPrime(unittest.TestCase):
    def test_zero_is_not_prime(self):
        self.assertIs(is_prime(0), False)

    def test_one_is_not_prime(self):
        self.assertIs(is_prime(1), False)

    def test_negative_number_is_not_prime(self):
        self.assertIs(is_prime(-7), False)

    def test_two_is_prime(self):
        self.assertIs(is_prime(2), True)

    def test_three_is_prime(self):
        self.assertIs(is_prime(3), True)

    def test_four_is_not_prime(self):
        self.assertIs(is_prime(4), False)

    def test_odd_composite_is_not_prime(self):
        self.assertIs(is_prime(91), False)

    def test_square_of_prime_is_not_prime(self):
        self.assertIs(is_prime(49), False)

    def test_larger_prime(self):
        self.assertIs(is_prime(7919), True)


if __name__ == "__main__":
    unittest.main()
