import unittest

from fizzbuzz import fizzbuzz


class TestFizzBuzz(unittest.TestCase):
    def test_one_item(self):
        self.assertEqual(fizzbuzz(1), ["1"])

    def test_first_three_ends_with_fizz(self):
        self.assertEqual(fizzbuzz(3), ["1", "2", "Fizz"])

    def test_first_five_ends_with_buzz(self):
        self.assertEqual(fizzbuzz(5), ["1", "2", "Fizz", "4", "Buzz"])

    def test_fifteen_full_list(self):
        expected = ["1", "2", "Fizz", "4", "Buzz", "Fizz", "7", "8", "Fizz",
                    "Buzz", "11", "Fizz", "13", "14", "FizzBuzz"]
        self.assertEqual(fizzbuzz(15), expected)

    def test_zero_returns_empty_list(self):
        self.assertEqual(fizzbuzz(0), [])

    def test_negative_raises_value_error(self):
        with self.assertRaises(ValueError):
            fizzbuzz(-1)

    def test_hundred_items_ending_with_buzz(self):
        result = fizzbuzz(100)
        self.assertEqual(len(result), 100)
        self.assertEqual(result[-1], "Buzz")
        self.assertEqual(result[89], "FizzBuzz")

    def test_plain_numbers_are_strings(self):
        result = fizzbuzz(2)
        self.assertEqual(result, ["1", "2"])
        self.assertTrue(all(isinstance(item, str) for item in result))


if __name__ == "__main__":
    unittest.main()
