"""Helpers the test modules share (inputs built from the shared fixtures, hand-made tables):
no test module imports another (tests/test_layout.py)."""
