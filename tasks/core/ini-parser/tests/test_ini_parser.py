import unittest

from ini_parser import parse_ini


class TestParseIni(unittest.TestCase):
    def test_single_section(self):
        self.assertEqual(parse_ini("[main]\nname=demo\n"), {"main": {"name": "demo"}})

    def test_multiple_sections(self):
        text = "[a]\nx=1\n[b]\ny=2\nz=3"
        self.assertEqual(parse_ini(text), {"a": {"x": "1"}, "b": {"y": "2", "z": "3"}})

    def test_whitespace_is_stripped(self):
        text = "  [ server ]  \n   host   =   example.com   \n"
        self.assertEqual(parse_ini(text), {"server": {"host": "example.com"}})

    def test_comments_and_blank_lines_are_ignored(self):
        text = "; top comment\n\n[s]\n  # another comment\n\nk = v\n   \n"
        self.assertEqual(parse_ini(text), {"s": {"k": "v"}})

    def test_value_may_contain_equals_sign(self):
        self.assertEqual(parse_ini("[s]\nurl = a=b=c"), {"s": {"url": "a=b=c"}})

    def test_empty_value_is_allowed(self):
        self.assertEqual(parse_ini("[s]\nkey ="), {"s": {"key": ""}})

    def test_keys_are_lowercased_but_sections_keep_case(self):
        self.assertEqual(parse_ini("[MySection]\nPort = 8080"), {"MySection": {"port": "8080"}})

    def test_later_duplicate_key_wins(self):
        self.assertEqual(parse_ini("[s]\nk = 1\nK = 2"), {"s": {"k": "2"}})

    def test_empty_section_is_present(self):
        self.assertEqual(parse_ini("[a]\n[b]\nx = 1"), {"a": {}, "b": {"x": "1"}})

    def test_key_before_any_section_raises(self):
        with self.assertRaises(ValueError):
            parse_ini("x = 1\n[s]\n")

    def test_line_without_equals_raises(self):
        with self.assertRaises(ValueError):
            parse_ini("[s]\njust some text\n")

    def test_empty_key_raises(self):
        with self.assertRaises(ValueError):
            parse_ini("[s]\n = value\n")

    def test_duplicate_section_raises(self):
        with self.assertRaises(ValueError):
            parse_ini("[s]\na = 1\n[s]\nb = 2\n")

    def test_error_message_contains_line_number(self):
        with self.assertRaisesRegex(ValueError, r"line 3\b"):
            parse_ini("[s]\na = 1\noops\n")


if __name__ == "__main__":
    unittest.main()
