import unittest

from roman import roman_to_int


class TestRomanToInt(unittest.TestCase):
    def test_repeated_symbols_are_added(self):
        self.assertEqual(roman_to_int("III"), 3)

    def test_subtractive_four(self):
        self.assertEqual(roman_to_int("IV"), 4)

    def test_subtractive_nine(self):
        self.assertEqual(roman_to_int("IX"), 9)

    def test_subtractive_forty(self):
        self.assertEqual(roman_to_int("XL"), 40)

    def test_additive_mixed_symbols(self):
        self.assertEqual(roman_to_int("LVIII"), 58)

    def test_several_subtractive_pairs(self):
        self.assertEqual(roman_to_int("MCMXCIV"), 1994)

    def test_largest_standard_numeral(self):
        self.assertEqual(roman_to_int("MMMCMXCIX"), 3999)

    def test_empty_string_raises_value_error(self):
        with self.assertRaises(ValueError):
            roman_to_int("")

    def test_invalid_characters_raise_value_error(self):
        with self.assertRaises(ValueError):
            roman_to_int("ABC")

    def test_lowercase_raises_value_error(self):
        with self.assertRaises(ValueError):
            roman_to_int("iv")


if __name__ == "__main__":
    unittest.main()
