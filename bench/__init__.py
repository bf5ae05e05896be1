"""Benchmarks, run by `manage.py bench`: each prints what it measured and the ratio it is judged by."""
