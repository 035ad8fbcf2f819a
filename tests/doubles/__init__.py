"""Protocol doubles: servers on 127.0.0.1 that speak a documented wire protocol for the tests.

``tests/`` is on ``sys.path`` (pytest's ``pythonpath``), so suites import ``doubles.<name>``.
"""
