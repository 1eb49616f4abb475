"""The report: one self-contained HTML page and reports/claims.json."""
