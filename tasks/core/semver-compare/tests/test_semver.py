import unittest

from semver import compare


class TestSemverCompare(unittest.TestCase):
    def test_lower_major_version(self):
        self.assertEqual(compare("1.0.0", "2.0.0"), -1)

    def test_higher_minor_beats_higher_patch(self):
        self.assertEqual(compare("2.1.0", "2.0.9"), 1)

    def test_parts_compare_numerically_not_as_text(self):
        self.assertEqual(compare("1.10.0", "1.9.0"), 1)

    def test_equal_versions(self):
        self.assertEqual(compare("3.4.5", "3.4.5"), 0)

    def test_prerelease_is_lower_than_release(self):
        self.assertEqual(compare("1.0.0-alpha", "1.0.0"), -1)

    def test_release_is_higher_than_prerelease(self):
        self.assertEqual(compare("1.0.0", "1.0.0-rc.1"), 1)

    def test_fewer_prerelease_identifiers_is_lower(self):
        self.assertEqual(compare("1.0.0-alpha", "1.0.0-alpha.1"), -1)

    def test_numeric_identifier_is_lower_than_alphanumeric(self):
        self.assertEqual(compare("1.0.0-alpha.1", "1.0.0-alpha.beta"), -1)

    def test_numeric_identifiers_compare_numerically(self):
        self.assertEqual(compare("1.0.0-beta.11", "1.0.0-beta.2"), 1)

    def test_alphanumeric_identifiers_compare_lexically(self):
        self.assertEqual(compare("1.0.0-rc.1", "1.0.0-beta.11"), 1)

    def test_build_metadata_is_ignored(self):
        self.assertEqual(compare("1.0.0+build.1", "1.0.0+build.2"), 0)
        self.assertEqual(compare("1.0.0-alpha+001", "1.0.0-alpha"), 0)

    def test_missing_patch_raises_value_error(self):
        with self.assertRaises(ValueError):
            compare("1.0", "1.0.0")

    def test_leading_zero_raises_value_error(self):
        with self.assertRaises(ValueError):
            compare("01.0.0", "1.0.0")

    def test_empty_prerelease_identifier_raises_value_error(self):
        with self.assertRaises(ValueError):
            compare("1.0.0-alpha..1", "1.0.0")

    def test_invalid_second_argument_raises_value_error(self):
        with self.assertRaises(ValueError):
            compare("1.0.0", "1.0.x")


if __name__ == "__main__":
    unittest.main()
