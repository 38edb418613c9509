"""The student answers, the judge checks: cascade scoring (scorer.py), its summary and agreement
estimate (report.py), the escalation band's fit (band.py) and settings (config.py)."""
