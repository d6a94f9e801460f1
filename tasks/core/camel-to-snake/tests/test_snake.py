import unittest

from snake import camel_to_snake


class TestCamelToSnake(unittest.TestCase):
    def test_camel_case(self):
        self.assertEqual(camel_to_snake("camelCase"), "camel_case")

    def test_pascal_case_has_no_leading_underscore(self):
        self.assertEqual(camel_to_snake("PascalCase"), "pascal_case")

    def test_lowercase_word_is_unchanged(self):
        self.assertEqual(camel_to_snake("simple"), "simple")

    def test_already_snake_case_is_unchanged(self):
        self.assertEqual(camel_to_snake("already_snake"), "already_snake")

    def test_acronym_in_the_middle(self):
        self.assertEqual(camel_to_snake("getHTTPResponse"), "get_http_response")

    def test_acronym_at_the_start(self):
        self.assertEqual(camel_to_snake("HTTPServer"), "http_server")

    def test_acronym_at_the_end(self):
        self.assertEqual(camel_to_snake("userID"), "user_id")

    def test_uppercase_after_digit(self):
        self.assertEqual(camel_to_snake("version2Update"), "version2_update")

    def test_empty_string(self):
        self.assertEqual(camel_to_snake(""), "")

    def test_single_uppercase_letter(self):
        self.assertEqual(camel_to_snake("A"), "a")


if __name__ == "__main__":
    unittest.main()
