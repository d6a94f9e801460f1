import unittest

from duration import parse_duration


class TestParseDuration(unittest.TestCase):
    def test_seconds_only(self):
        self.assertEqual(parse_duration("45s"), 45)

    def test_minutes_only(self):
        self.assertEqual(parse_duration("2m"), 120)

    def test_days_only(self):
        self.assertEqual(parse_duration("1d"), 86400)

    def test_hours_and_minutes(self):
        self.assertEqual(parse_duration("1h30m"), 5400)

    def test_spaces_between_pairs(self):
        self.assertEqual(parse_duration("1h 30m 15s"), 5415)

    def test_uppercase_unit(self):
        self.assertEqual(parse_duration("1H"), 3600)

    def test_fractional_hours(self):
        self.assertEqual(parse_duration("1.5h"), 5400)

    def test_fractional_seconds_round_down(self):
        self.assertEqual(parse_duration("2.75s"), 2)

    def test_empty_string_raises(self):
        with self.assertRaises(ValueError):
            parse_duration("")

    def test_number_without_unit_raises(self):
        with self.assertRaises(ValueError):
            parse_duration("10")

    def test_unknown_unit_raises(self):
        with self.assertRaises(ValueError):
            parse_duration("10x")

    def test_wrong_order_raises(self):
        with self.assertRaises(ValueError):
            parse_duration("30m1h")

    def test_repeated_unit_raises(self):
        with self.assertRaises(ValueError):
            parse_duration("1h1h")


if __name__ == "__main__":
    unittest.main()
