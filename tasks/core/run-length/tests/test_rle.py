import unittest

from rle import decode, encode


class TestRunLength(unittest.TestCase):
    def test_encode_basic_runs(self):
        self.assertEqual(encode("aaabcc"), "3a1b2c")

    def test_encode_empty_string(self):
        self.assertEqual(encode(""), "")

    def test_encode_single_characters_get_count_one(self):
        self.assertEqual(encode("abc"), "1a1b1c")

    def test_encode_run_longer_than_nine(self):
        self.assertEqual(encode("x" * 12), "12x")

    def test_encode_is_case_sensitive(self):
        self.assertEqual(encode("aAa"), "1a1A1a")

    def test_encode_rejects_digits(self):
        with self.assertRaises(ValueError):
            encode("a1")

    def test_decode_basic_pairs(self):
        self.assertEqual(decode("3a1b2c"), "aaabcc")

    def test_decode_multi_digit_count(self):
        self.assertEqual(decode("12x3y"), "x" * 12 + "yyy")

    def test_decode_empty_string(self):
        self.assertEqual(decode(""), "")

    def test_decode_character_without_count_raises(self):
        with self.assertRaises(ValueError):
            decode("a3")

    def test_decode_trailing_count_raises(self):
        with self.assertRaises(ValueError):
            decode("3a2")

    def test_decode_zero_count_raises(self):
        with self.assertRaises(ValueError):
            decode("0a")

    def test_roundtrip_with_spaces_and_punctuation(self):
        text = "  hi  there!!"
        self.assertEqual(encode(text), "2 1h1i2 1t1h1e1r1e2!")
        self.assertEqual(decode(encode(text)), text)


if __name__ == "__main__":
    unittest.main()
