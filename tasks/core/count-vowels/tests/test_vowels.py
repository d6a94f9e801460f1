import unittest

from vowels import count_vowels


class TestCountVowels(unittest.TestCase):
    def test_simple_word(self):
        self.assertEqual(count_vowels("hello"), 2)

    def test_empty_string_has_no_vowels(self):
        self.assertEqual(count_vowels(""), 0)

    def test_uppercase_vowels_are_counted(self):
        self.assertEqual(count_vowels("AEIOU"), 5)

    def test_mixed_case_sentence(self):
        self.assertEqual(count_vowels("Programming Language"), 7)

    def test_y_is_not_a_vowel(self):
        self.assertEqual(count_vowels("rhythm"), 0)

    def test_digits_and_punctuation_are_ignored(self):
        self.assertEqual(count_vowels("123 !?"), 0)

    def test_repeated_vowels_are_each_counted(self):
        self.assertEqual(count_vowels("banana"), 3)

    def test_accented_letters_are_not_counted(self):
        self.assertEqual(count_vowels("caf\u00e9"), 1)


if __name__ == "__main__":
    unittest.main()
