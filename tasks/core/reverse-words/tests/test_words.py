import unittest

from words import reverse_words


class TestReverseWords(unittest.TestCase):
    def test_two_words_are_swapped(self):
        self.assertEqual(reverse_words("hello world"), "world hello")

    def test_single_word_is_unchanged(self):
        self.assertEqual(reverse_words("python"), "python")

    def test_several_words(self):
        self.assertEqual(reverse_words("a b c d"), "d c b a")

    def test_extra_spaces_are_collapsed(self):
        self.assertEqual(reverse_words("  the   quick  fox "), "fox quick the")

    def test_empty_string_returns_empty_string(self):
        self.assertEqual(reverse_words(""), "")

    def test_whitespace_only_returns_empty_string(self):
        self.assertEqual(reverse_words("   "), "")

    def test_punctuation_stays_with_its_word(self):
        self.assertEqual(reverse_words("Hello, world!"), "world! Hello,")

    def test_tabs_and_newlines_separate_words(self):
        self.assertEqual(reverse_words("one\ttwo\nthree"), "three two one")


if __name__ == "__main__":
    unittest.main()
