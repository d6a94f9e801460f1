import unittest

from intervals import merge_intervals


class TestMergeIntervals(unittest.TestCase):
    def test_empty_list(self):
        self.assertEqual(merge_intervals([]), [])

    def test_single_interval(self):
        self.assertEqual(merge_intervals([(1, 5)]), [(1, 5)])

    def test_unsorted_disjoint_intervals_are_sorted(self):
        self.assertEqual(merge_intervals([(7, 9), (1, 2), (4, 5)]),
                         [(1, 2), (4, 5), (7, 9)])

    def test_overlapping_intervals_are_merged(self):
        self.assertEqual(merge_intervals([(8, 10), (1, 3), (2, 6), (15, 18)]),
                         [(1, 6), (8, 10), (15, 18)])

    def test_touching_intervals_are_merged(self):
        self.assertEqual(merge_intervals([(1, 3), (3, 5)]), [(1, 5)])

    def test_neighbouring_but_not_touching_intervals_stay_separate(self):
        self.assertEqual(merge_intervals([(3, 4), (1, 2)]), [(1, 2), (3, 4)])

    def test_contained_interval_disappears(self):
        self.assertEqual(merge_intervals([(1, 10), (2, 3)]), [(1, 10)])

    def test_chain_of_overlaps_merges_into_one(self):
        self.assertEqual(merge_intervals([(5, 8), (1, 4), (3, 6)]), [(1, 8)])

    def test_zero_length_interval(self):
        self.assertEqual(merge_intervals([(5, 5), (1, 2)]), [(1, 2), (5, 5)])

    def test_list_items_are_returned_as_tuples(self):
        result = merge_intervals([[1, 2], [2, 4]])
        self.assertEqual(result, [(1, 4)])
        self.assertIsInstance(result[0], tuple)

    def test_input_is_not_modified(self):
        data = [[5, 6], [1, 3], [2, 4]]
        merge_intervals(data)
        self.assertEqual(data, [[5, 6], [1, 3], [2, 4]])

    def test_start_greater_than_end_raises_value_error(self):
        with self.assertRaises(ValueError):
            merge_intervals([(1, 2), (5, 1)])

    def test_wrong_number_of_elements_raises_value_error(self):
        with self.assertRaises(ValueError):
            merge_intervals([(1, 2, 3)])


if __name__ == "__main__":
    unittest.main()
