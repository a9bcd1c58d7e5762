"""The pytest plugin: --impl options, known-failure lists, the results file, the summary."""
