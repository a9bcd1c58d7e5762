"""Testee programs that speak TESTEE.md (the C testee lives in testees/c/)."""
