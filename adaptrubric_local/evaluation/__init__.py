"""Evaluation: metrics, test-time scaling, reports, and the harness that ties them to files."""
