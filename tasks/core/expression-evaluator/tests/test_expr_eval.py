import unittest

from expr_eval import evaluate


class TestEvaluate(unittest.TestCase):
    def test_simple_addition(self):
        self.assertEqual(evaluate("1+2"), 3)

    def test_multiplication_before_addition(self):
        self.assertEqual(evaluate("2+3*4"), 14)

    def test_parentheses_override_precedence(self):
        self.assertEqual(evaluate("(2+3)*4"), 20)

    def test_subtraction_is_left_associative(self):
        self.assertEqual(evaluate("10-4-3"), 3)

    def test_division_is_left_associative(self):
        self.assertEqual(evaluate("100/10/5"), 2)

    def test_whitespace_is_ignored_and_division_floors(self):
        self.assertEqual(evaluate(" 7 / 2 "), 3)

    def test_negative_division_rounds_toward_negative_infinity(self):
        self.assertEqual(evaluate("-7/2"), -4)

    def test_unary_minus_before_parenthesis(self):
        self.assertEqual(evaluate("-(2+3)"), -5)

    def test_unary_minus_after_operator(self):
        self.assertEqual(evaluate("2*-3"), -6)

    def test_division_by_zero_raises_zero_division_error(self):
        with self.assertRaises(ZeroDivisionError):
            evaluate("1/0")

    def test_empty_expression_raises_value_error(self):
        with self.assertRaises(ValueError):
            evaluate("")

    def test_unclosed_parenthesis_raises_value_error(self):
        with self.assertRaises(ValueError):
            evaluate("(1+2")

    def test_missing_operand_raises_value_error(self):
        with self.assertRaises(ValueError):
            evaluate("1+")

    def test_unknown_character_raises_value_error(self):
        with self.assertRaises(ValueError):
            evaluate("2 $ 3")


if __name__ == "__main__":
    unittest.main()
