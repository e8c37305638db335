"""__GADGET__'s unit tests: the function alone, without the host.

`gadget test .` runs them (with the SDK on the path), then the built
component's examples and tests.toml cases.
"""

import unittest

from gadget_sdk import testing

from app import __GADGET__


class __GADGET__Test(unittest.TestCase):
    def test_counts_words_and_its_examples_hold(self):
        call = testing.call(__GADGET__, {"text": "one two three"})
        self.assertEqual(call.result, "3 words")
        self.assertEqual(call.logs[0][0], "info")
        empty = testing.call(__GADGET__, {"text": "  "})
        self.assertEqual(empty.error_kind, "invalid-arguments")
        testing.assert_examples(__GADGET__)


if __name__ == "__main__":
    unittest.main()
