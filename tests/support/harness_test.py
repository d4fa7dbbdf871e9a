# SPDX-License-Identifier: Apache-2.0
"""harness.run_suite repeats each failure's message after the figures, so the
end of a long output (what CI shows of it) still says why a run failed."""

import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def sample_case():
    """A suite with a pass, a failure, a subtest failure and an error (made
    here, so that this file's own runner does not collect it)."""
    class Sample(unittest.TestCase):
        def test_a_passes(self):
            harness.figure("sample figure")

        def test_b_fails(self):
            self.assertEqual(1, 2, "the sample's first message\nand its second line")

        def test_c_subtest_fails(self):
            with self.subTest("the sub"):
                self.assertTrue(False, "a subtest's message")

        def test_d_errors(self):
            raise RuntimeError("an error, not an assertion")
    return Sample


class RunSuiteTest(unittest.TestCase):
    def run_sample(self, only=None):
        harness.FIGURES.clear()
        out = io.StringIO()
        env = {"HARNESS_SAMPLE_ONLY": only} if only else {}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            with contextlib.redirect_stderr(out):
                rc = harness.run_suite(sample_case(), only_env="HARNESS_SAMPLE_ONLY")
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return rc, out.getvalue()

    def test_failures_come_after_the_figures(self):
        rc, out = self.run_sample()
        self.assertEqual(rc, 1)
        tail = out[out.index("\nFigures:\n"):]
        self.assertIn("sample figure", tail)
        self.assertIn("FAILED: __main__.sample_case.<locals>.Sample.test_b_fails\n", tail)
        self.assertIn("the sample's first message\n  and its second line", tail)
        self.assertRegex(tail, r"at File \".*harness_test\.py\", line \d+, in test_b_fails")
        self.assertIn("FAILED: __main__.sample_case.<locals>.Sample.test_c_subtest_fails [the sub]", tail)
        self.assertIn("a subtest's message", tail)
        self.assertIn("FAILED: __main__.sample_case.<locals>.Sample.test_d_errors", tail)
        self.assertIn("RuntimeError: an error, not an assertion", tail)
        self.assertLess(tail.index("FAILED: "), tail.index("wall time"))
        self.assertNotIn("test_a_passes", tail[tail.index("FAILED: "):])

    def test_a_passing_run_repeats_nothing(self):
        rc, out = self.run_sample(only="test_a_passes")
        self.assertEqual(rc, 0)
        self.assertNotIn("FAILED:", out)

    def test_a_long_message_is_cut(self):
        text = harness.failure_summary([(self, "Traceback:\n  File \"x.py\", line 1, in f\nAssertionError: "
                                         + "y" * 5000)], limit=100)
        self.assertIn("at File \"x.py\", line 1, in f", text)
        self.assertIn("AssertionError: " + "y" * 84 + " [...]", text)
        self.assertLess(len(text), 400)


if __name__ == "__main__":
    unittest.main(verbosity=2)
