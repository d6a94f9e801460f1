import unittest

from word_freq import top_words


class TestTopWords(unittest.TestCase):
    def test_most_frequent_words_first(self):
        self.assertEqual(top_words("the cat and the hat and the bat", 2),
                         [("the", 3), ("and", 2)])

    def test_words_are_case_insensitive_and_lowercased(self):
        self.assertEqual(top_words("The THE the Cat", 2), [("the", 3), ("cat", 1)])

    def test_punctuation_separates_words(self):
        self.assertEqual(top_words("stop! stop, go... stop?", 5), [("stop", 3), ("go", 1)])

    def test_ties_are_sorted_alphabetically(self):
        self.assertEqual(top_words("b a c", 2), [("a", 1), ("b", 1)])

    def test_tie_order_inside_a_longer_ranking(self):
        self.assertEqual(top_words("pear fig pear apple fig kiwi", 4),
                         [("fig", 2), ("pear", 2), ("apple", 1), ("kiwi", 1)])

    def test_k_larger_than_number_of_words(self):
        self.assertEqual(top_words("x y x", 10), [("x", 2), ("y", 1)])

    def test_k_zero_returns_empty_list(self):
        self.assertEqual(top_words("some words here", 0), [])

    def test_text_without_words_returns_empty_list(self):
        self.assertEqual(top_words("123 !!! ...", 3), [])

    def test_digits_and_apostrophes_split_words(self):
        self.assertEqual(top_words("a1b don't", 10),
                         [("a", 1), ("b", 1), ("don", 1), ("t", 1)])

    def test_negative_k_raises_value_error(self):
        with self.assertRaises(ValueError):
            top_words("a b c", -1)


if __name__ == "__main__":
    unittest.main()
