"""The bottom layer of the suite: what every part shares; imports nothing else of the suite."""
