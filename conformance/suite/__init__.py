"""The conformance tests, the cases they run and the verdicts they give."""
