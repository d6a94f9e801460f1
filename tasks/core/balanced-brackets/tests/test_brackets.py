import unittest

from brackets import is_balanced


class TestIsBalanced(unittest.TestCase):
    def test_empty_string_is_balanced(self):
        self.assertIs(is_balanced(""), True)

    def test_single_pair_is_balanced(self):
        self.assertIs(is_balanced("()"), True)

    def test_mixed_kinds_side_by_side(self):
        self.assertIs(is_balanced("([]{})"), True)

    def test_deeply_nested(self):
        self.assertIs(is_balanced("{[()()]}"), True)

    def test_other_characters_are_ignored(self):
        self.assertIs(is_balanced("a(b[c]d)e"), True)

    def test_interleaved_pairs_are_unbalanced(self):
        self.assertIs(is_balanced("([)]"), False)

    def test_only_opening_brackets(self):
        self.assertIs(is_balanced("((("), False)

    def test_one_bracket_left_open(self):
        self.assertIs(is_balanced("(()"), False)

    def test_closing_before_opening(self):
        self.assertIs(is_balanced(")("), False)

    def test_lone_closing_bracket(self):
        self.assertIs(is_balanced("]"), False)


if __name__ == "__main__":
    unittest.main()
